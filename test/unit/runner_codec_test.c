/*
 * runner_codec_test.c: the runner's codec (src/runner/decode.c and
 * encode.c): claimed specs of every kind decoded into the engine's structs,
 * refusals that name the key, resumes (good, malformed: a restart from
 * zero with the reason), members of earlier attempts that do not fit, and
 * every document written read back as strict JSON, by key.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/json.h"
#include "unit.h"
#include "runner/codec.h"

#define STAGING "\"staging_prefix\":\"remora/7/a/\""

static int
refused_with(const char *spec, const char *want)
{
	RemoraWork job;
	char       err[512];
	int        ok = !remora_codec_decode_spec(spec, &job, err, sizeof(err)) &&
			 strstr(err, want) != NULL;

	if (!ok)
		printf("#   error: %s\n", err);
	return ok;
}

static void
test_specs(void)
{
	RemoraWork job;
	char       err[512];

	CHECK(
		remora_codec_decode_spec(
			"{\"source\":{\"kind\":\"http\",\"uri\":\"https://h/a.bin?sig=x\","
			"\"file_name\":\"a.bin\"},\"bucket\":\"b\",\"prefix\":\"remora\","
			"\"options\":{\"expected_sha256\":\"ab\"},\"owner\":10,"
			"\"attempt_no\":2," STAGING "}",
			&job, err, sizeof(err)),
		"an http spec decodes");
	CHECK_STR(job.u.object.source_url, "https://h/a.bin?sig=x",
			  "http: the whole URL");
	CHECK_STR(job.u.object.staging_prefix, "remora/7/a/",
			  "http: the staging prefix");
	CHECK_STR(job.u.object.expected_sha256, "ab",
			  "http: options.expected_sha256");
	CHECK(job.kind == REMORA_WORK_OBJECT && job.attempt_no == 2,
		  "http: a single object, attempt 2");
	remora_codec_work_free(&job);

	CHECK(remora_codec_decode_spec(
			  "{\"source\":{\"kind\":\"http\",\"uri\":\"https://h/a\"},"
			  "\"bucket\":\"b\",\"options\":{\"connections\":8}," STAGING "}",
			  &job, err, sizeof(err)) &&
			  job.connections == 8,
		  "http: options.connections");
	remora_codec_work_free(&job);
	CHECK(refused_with(
			  "{\"source\":{\"kind\":\"http\",\"uri\":\"https://h/a\"},"
			  "\"bucket\":\"b\",\"options\":{\"connections\":65}," STAGING "}",
			  "options.connections"),
		  "http: options.connections above 64 is refused, naming the key");
	CHECK(remora_codec_decode_spec(
			  "{\"source\":{\"kind\":\"http\",\"uri\":\"https://h/a\"},"
			  "\"bucket\":\"b\",\"options\":{\"dry_run\":true}," STAGING "}",
			  &job, err, sizeof(err)) &&
			  job.dry_run,
		  "http: options.dry_run");
	remora_codec_work_free(&job);
	CHECK(refused_with(
			  "{\"source\":{\"kind\":\"http\",\"uri\":\"https://h/a\"},"
			  "\"bucket\":\"b\",\"options\":{\"dry_run\":\"yes\"}," STAGING "}",
			  "options.dry_run"),
		  "http: options.dry_run that is not a boolean is refused, naming it");

	CHECK(remora_codec_decode_spec(
			  "{\"source\":{\"kind\":\"s3_prefix\",\"uri\":\"s3://src/p/\","
			  "\"bucket\":\"src\",\"key\":\"p/\"},\"bucket\":\"b\","
			  "\"options\":{\"include\":[\"*.bin\"],\"exclude\":[],"
			  "\"endpoint\":\"other\"},\"owner\":\"10\"," STAGING "}",
			  &job, err, sizeof(err)),
		  "an s3 prefix spec decodes (owner as a string)");
	CHECK(job.kind == REMORA_WORK_SET && job.u.set.kind == REMORA_SET_S3 &&
			  !job.u.set.single && job.u.set.ninclude == 1 &&
			  job.u.set.nexclude == 0 &&
			  strcmp(job.u.set.include[0], "*.bin") == 0,
		  "s3 prefix: a set with its include and exclude");
	CHECK_STR(job.endpoint, "other", "s3 prefix: options.endpoint");
	remora_codec_work_free(&job);

	CHECK(remora_codec_decode_spec(
			  "{\"source\":{\"kind\":\"hf\",\"uri\":\"hf://acme/tiny\","
			  "\"repo_type\":\"model\",\"repo\":\"acme/tiny\",\"revision\":"
			  "\"main\"},\"bucket\":\"b\",\"options\":{}," STAGING "}",
			  &job, err, sizeof(err)),
		  "an hf spec decodes");
	CHECK(job.kind == REMORA_WORK_SET && job.u.set.kind == REMORA_SET_HF &&
			  strcmp(job.u.set.repo, "acme/tiny") == 0 &&
			  strcmp(job.u.set.revision, "main") == 0,
		  "hf: the repository and revision");
	remora_codec_work_free(&job);

	CHECK(remora_codec_decode_spec(
			  "{\"source\":{\"kind\":\"export\"},\"bucket\":\"b\",\"prefix\":"
			  "\"stable\",\"options\":{},\"export\":{\"mode\":\"dispatch\","
			  "\"if_exists\":\"skip_identical\",\"output_digest\":\"d\","
			  "\"members_total\":20000,\"bytes_total\":123456789}," STAGING "}",
			  &job, err, sizeof(err)),
		  "an export spec decodes");
	CHECK(job.kind == REMORA_WORK_EXPORT &&
			  job.u.export.if_exists == REMORA_IF_EXISTS_SKIP_IDENTICAL &&
			  !job.u.export.verify && job.u.export.members_total == 20000 &&
			  job.u.export.bytes_total == 123456789 &&
			  strcmp(job.u.export.output_digest, "d") == 0 &&
			  strcmp(job.u.export.prefix, "stable") == 0,
		  "export: if_exists, the output digest, the member count and bytes "
		  "(the members come a page at a time)");
	remora_codec_work_free(&job);

	CHECK(refused_with("[1]", "\"(root)\" is not an object"),
		  "a spec that is not an object is refused");
	CHECK(refused_with("{\"source\":{\"kind\":\"ftp\"},\"bucket\":\"b\","
					   "\"options\":{}," STAGING "}",
					   "\"source.kind\" names no kind of source"),
		  "an unknown kind is refused, naming the key");
	CHECK(refused_with("{\"source\":{\"kind\":\"http\",\"uri\":7},\"bucket\":"
					   "\"b\",\"options\":{}," STAGING "}",
					   "\"source.uri\" is not a string"),
		  "a wrong type is refused, naming the key");
	CHECK(refused_with("{\"source\":{\"kind\":\"http\",\"uri\":\"https://h/"
					   "\"},\"options\":{}," STAGING "}",
					   "\"bucket\" is missing"),
		  "a missing bucket is refused");
	CHECK(refused_with("{\"source\":{\"kind\":\"s3_prefix\"},\"bucket\":\"b\","
					   "\"options\":{\"include\":[1]}," STAGING "}",
					   "\"options.include\" is not an array of strings"),
		  "an include that is not strings is refused");
	CHECK(refused_with(
			  "{\"source\":{\"kind\":\"http\",\"uri\":\"u\"},"
			  "\"bucket\":\"b\",\"options\":{},\"attempt_no\":0," STAGING "}",
			  "\"attempt_no\" is not a positive whole number"),
		  "attempt_no 0 is refused");
	CHECK(refused_with("{\"source\":{\"kind\":\"export\"},\"bucket\":\"b\","
					   "\"prefix\":\"p\",\"options\":{},\"export\":{\"mode\":"
					   "\"dispatch\",\"if_exists\":\"maybe\",\"output_digest\":"
					   "\"d\",\"members_total\":0,\"bytes_total\":0}," STAGING
					   "}",
					   "\"export.if_exists\" names no choice"),
		  "an export's unknown if_exists is refused");
	CHECK(refused_with("{\"source\":{\"kind\":\"export\"},\"bucket\":\"b\","
					   "\"prefix\":\"p\",\"options\":{},\"export\":{\"mode\":"
					   "\"dispatch\",\"if_exists\":\"fail\",\"output_digest\":"
					   "\"d\",\"bytes_total\":0}," STAGING "}",
					   "\"export.members_total\" is not a count"),
		  "an export without its member count is refused");
	CHECK(refused_with("{\"source\":{\"kind\":\"export\"},\"bucket\":\"b\","
					   "\"prefix\":\"p\",\"options\":{},\"export\":{\"mode\":"
					   "\"dispatch\",\"if_exists\":\"fail\",\"output_digest\":"
					   "\"d\",\"members_total\":2,\"bytes_total\":-1}," STAGING
					   "}",
					   "\"export.bytes_total\" is not a size"),
		  "or with negative bytes");
	CHECK(refused_with("{\"source\":", "invalid job specification"),
		  "text that is not JSON is refused");
}

static void
test_resume(void)
{
	const char   *why;
	RemoraResume *r;

	r = remora_codec_decode_resume(
		"{\"bytes_done\":10,\"state\":{\"etag\":\"\\\"e\\\"\","
		"\"last_modified\":null,\"size\":20,\"sha256_state\":\"00ff\","
		"\"upload_key\":\"s/data/f\",\"upload_id\":\"u1\","
		"\"parts\":[{\"size\":5,\"etag\":\"a\"},"
		"{\"size\":5,\"etag\":\"b\"}]}}",
		&why);
	CHECK(r != NULL && why == NULL && r->nparts == 2 && r->size == 20 &&
			  strcmp(r->etag, "\"e\"") == 0 && r->last_modified == NULL &&
			  strcmp(r->upload_key, "s/data/f") == 0 &&
			  strcmp(r->upload_id, "u1") == 0 &&
			  strcmp(r->parts[1].etag, "b") == 0,
		  "a resume decodes with its upload and parts");
	remora_resume_free(r);

	r = remora_codec_decode_resume(
		"{\"state\":{\"size\":10,\"sha256_state\":\"00\",\"segments\":"
		"[{\"key\":\"s/1\",\"size\":5,\"etag\":\"a\"}]}}",
		&why);
	CHECK(r != NULL && why == NULL && r->upload_key == NULL && r->nparts == 0,
		  "an earlier version's segments: a resume without an upload (the "
		  "engine restarts and says why)");
	remora_resume_free(r);

	r = remora_codec_decode_resume("{\"bytes_done\":0}", &why);
	CHECK(r == NULL && why == NULL, "a checkpoint without state: no resume");
	r = remora_codec_decode_resume(
		"{\"state\":{\"size\":1,\"sha256_state\":\"00\",\"upload_key\":"
		"\"k\",\"upload_id\":\"u\",\"parts\":[{\"etag\":\"e\"}]}}",
		&why);
	CHECK(r == NULL && why && strstr(why, "malformed"),
		  "a part without size: start from zero, malformed");
	r = remora_codec_decode_resume(
		"{\"state\":{\"size\":1,\"sha256_state\":\"00\",\"upload_key\":"
		"\"k\",\"upload_id\":\"u\"}}",
		&why);
	CHECK(r == NULL && why && strstr(why, "malformed"),
		  "an upload without parts: start from zero, malformed");
	r = remora_codec_decode_resume("{\"state\":[]}", &why);
	CHECK(r == NULL && why && strstr(why, "malformed"),
		  "a state that is not an object: malformed");
	{
		char text[600];
		char etag[300];

		memset(etag, 'x', sizeof(etag) - 1);
		etag[sizeof(etag) - 1] = '\0';
		snprintf(text, sizeof(text),
				 "{\"state\":{\"size\":1,\"sha256_state\":\"00\","
				 "\"upload_key\":\"k\",\"upload_id\":\"u\","
				 "\"parts\":[{\"size\":1,\"etag\":\"%s\"}]}}",
				 etag);
		r = remora_codec_decode_resume(text, &why);
		CHECK(r == NULL && why && strstr(why, "too long"),
			  "a part ETag too long for the engine: restart, said why");
	}
}

static void
test_prior(void)
{
	RemoraPrior p;
	char        key[1300];

	memset(&p, 0, sizeof(p));
	CHECK(remora_codec_prior(&p, "k", "e", "s", 5,
							 "{\"etag\":\"se\",\"oid\":\"o\"}") &&
			  p.found && strcmp(p.source_etag, "se") == 0 &&
			  strcmp(p.source_oid, "o") == 0 && p.size == 5,
		  "a member of an earlier attempt, with its source validators");
	CHECK(remora_codec_prior(&p, "k", "e", "s", 5,
							 "{\"etag\":\"W/\\\"w\\\"\",\"last_modified\":"
							 "\"Mon, 07 Dec 2026 09:00:00 GMT\"}") &&
			  strcmp(p.source_last_modified, "Mon, 07 Dec 2026 09:00:00 GMT") ==
				  0 &&
			  strcmp(p.source_etag, "W/\"w\"") == 0,
		  "an http member's validators: its ETag and Last-Modified");
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	CHECK(!remora_codec_prior(&p, key, "e", "s", 5, NULL) && !p.found,
		  "a key too long for the engine is not found, never cut");
}

/* text is strict JSON whose key k has the string value want */
static int
has(const char *text, const char *k, const char *want)
{
	char        err[128];
	RemoraJson *j =
		text ? remora_json_parse(text, strlen(text), err, sizeof(err)) : NULL;
	const char *v = j ? remora_json_string(j, k) : NULL;
	int         ok = v && strcmp(v, want) == 0;

	remora_json_free(j);
	return ok;
}

static void
test_writing(void)
{
	RemoraSetMember      m = {"dir/\"q\".bin",    "k/a", "\"etag\"", "ab", 3,
							  "{\"etag\":\"x\"}", true,  42};
	RemoraTaskResult     r;
	RemoraTaskError      e;
	RemoraDocs           docs = {0};
	RemoraPart           part = {5, "\"e1\""};
	RemoraTaskCheckpoint cp;
	char                *t;

	t = remora_codec_member("b", &m);
	CHECK(has(t, "path", "dir/\"q\".bin") && has(t, "etag", "\"etag\""),
		  "a member: quotes escaped, read back as written");
	CHECK(strstr(t, "\"reused_from_job\":42") != NULL,
		  "a member copied from an earlier job names it");
	{
		/* a dry run's plan: no key, sha256 or etag at all */
		RemoraSetMember plan = {"p.bin", NULL, NULL, "", 7, "{}", false, 0};
		char           *pt = remora_codec_member("b", &plan);

		CHECK(pt && strstr(pt, "\"key\"") == NULL &&
				  strstr(pt, "\"sha256\"") == NULL &&
				  strstr(pt, "\"etag\"") == NULL && strstr(pt, "\"size\":7"),
			  "a dry run's member names no key, SHA-256 or ETag");
		free(pt);
	}
	CHECK(remora_docs_add(&docs, t), "kept until recorded");
	memset(&r, 0, sizeof(r));
	strcpy(r.manifest_key, "remora/7/a/manifest.jsonl");
	strcpy(r.manifest_sha256, "00");
	strcpy(r.members_sha256, "11");
	r.members = 1;
	t = remora_codec_set_descriptor(&r, &docs);
	CHECK(has(t, "key", "remora/7/a/manifest.jsonl") &&
			  strstr(t, "\"entries\":[{\"path\"") != NULL,
		  "a set's descriptor carries the unrecorded members");
	free(t);
	t = remora_codec_checkpoint(NULL, true, NULL, &docs);
	CHECK(strstr(t, "\"members\":[{") != NULL, "members alone, offered again");
	free(t);
	remora_docs_clear(&docs);

	memset(&cp, 0, sizeof(cp));
	cp.bytes_done = 5;
	cp.bytes_total = 10;
	cp.etag = "\"src\"";
	cp.sha256_state = "00";
	cp.upload_key = "s/data/f";
	cp.upload_id = "u1";
	cp.parts = &part;
	cp.nparts = 1;
	t = remora_codec_checkpoint(&cp, false, "the source changed", NULL);
	CHECK(has(t, "restart_reason", "the source changed") &&
			  strstr(t, "\"last_modified\":null") != NULL &&
			  strstr(t, "\"upload_key\":\"s/data/f\",\"upload_id\":\"u1\"") &&
			  strstr(t, "\"parts\":[{\"size\":5,\"etag\":") != NULL,
		  "an object's checkpoint: its upload, parts, validators, restart "
		  "reason");
	free(t);

	memset(&e, 0, sizeof(e));
	e.class = "http";
	strcpy(e.message, "line\nbreak");
	e.http_status = 503;
	e.retry_after = -1;
	t = remora_codec_task_error(&e);
	CHECK(has(t, "message", "line\nbreak") &&
			  strstr(t, "\"http_status\":503") != NULL &&
			  strstr(t, "retry_after") == NULL,
		  "an error: control characters escaped, absent fields left out");
	free(t);
	{
		const char *paths[2] = {"a", "b\\c"};

		t = remora_codec_string_array(paths, 2);
		CHECK_STR(t, "[\"a\",\"b\\\\c\"]", "the paths of a lookup");
		free(t);
	}
}

int
main(void)
{
	test_specs();
	test_resume();
	test_prior();
	test_writing();
	return unit_done();
}
