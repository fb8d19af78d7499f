/*
 * Unit tests of an export (src/engine/export*.c): members copied, found or
 * refused by if_exists and may_overwrite, verified, copied in parts above
 * the copy cutoff, and taken from the host a page at a time; against the
 * minimal S3 store of engine_fixtures.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/export/export_int.h"
#include "engine_fixtures.h"
#include "unit.h"

/*
 * The host of an export in these tests: it answers the pages the export
 * asks for from members (sorted by path, as strcmp orders them), as
 * remora.export_members would: up to max after the path asked; refuse:
 * hands them back not ok; short_by: fewer than asked by that many.
 */
typedef struct ExportHost
{
	const RemoraExportMember *members;
	int                       n;
	bool                      refuse;
	int                       short_by;
	int                       pages;      /* lookups answered */
	int                       wrong;      /* lookups not as asked */
	int                       max_asked;  /* the largest page asked for */
	int                       max_window; /* most members the export held */
} ExportHost;

static void
answer_pages(RemoraEngine *engine, ExportHost *h)
{
	RemoraLookup *l;
	char          err[256];

	while ((l = remora_engine_lookup_next(engine)) != NULL)
	{
		int  i = 0, added = 0;
		bool ok = !h->refuse;

		if (l->kind != REMORA_LOOKUP_EXPORT_PAGE || l->host_arg != h ||
			l->max < 1 || l->max > REMORA_EXPORT_PAGE)
			h->wrong++;
		if (l->max > h->max_asked)
			h->max_asked = l->max;
		while (l->after && i < h->n &&
			   strcmp(h->members[i].path, l->after) <= 0)
			i++;
		for (; ok && i < h->n && added < l->max - h->short_by; i++, added++)
			ok = remora_lookup_add_member(l, &h->members[i], err, sizeof(err));
		h->pages++;
		remora_engine_lookup_done(engine, l, ok);
	}
}

/* Run an export to its end; its refs by checkpoint into *nrefs. */
static RemoraTaskState
run_export_host(RemoraEngine *engine, RemoraExportSpec *spec, ExportHost *h,
				int *nrefs, char *outcome, size_t outlen)
{
	char                 err[256];
	RemoraTask          *task;
	RemoraTaskCheckpoint cp;
	RemoraTaskState      st;
	int64_t              bytes = 0;

	for (int i = 0; i < h->n; i++)
		bytes += h->members[i].size;
	spec->members_total = h->n;
	spec->bytes_total = bytes;
	spec->host_arg = h;
	task = remora_export_start(engine, spec, err, sizeof(err));
	*nrefs = 0;
	outcome[0] = '\0';
	if (task == NULL)
		return REMORA_TASK_ABORTED;
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 remora_now_ms() < end &&
		 remora_task_state(task) == REMORA_TASK_RUNNING;)
	{
		turn(engine);
		answer_pages(engine, h);
		if (remora_task_checkpoint(task, &cp))
			*nrefs += cp.nrefs;
	}
	if (remora_task_checkpoint(task, &cp))
		*nrefs += cp.nrefs;
	st = remora_task_state(task);
	h->max_window = ((Export *) task)->held_max;
	if (st == REMORA_TASK_FAILED)
		snprintf(outcome, outlen, "%s: %s", remora_task_error(task)->class,
				 remora_task_error(task)->message);
	remora_task_free(task);
	return st;
}

static RemoraTaskState
run_export(RemoraEngine *engine, RemoraExportSpec *spec,
		   const RemoraExportMember *members, int n, int *nrefs, char *outcome,
		   size_t outlen)
{
	ExportHost h;

	memset(&h, 0, sizeof(h));
	h.members = members;
	h.n = n;
	return run_export_host(engine, spec, &h, nrefs, outcome, outlen);
}

/*
 * An export copies a missing member, finds a present one, refuses a
 * present one with other content under if_exists = fail, and a verify
 * reports what is not there.
 */
static void
test_export(FakeS3 *s3)
{
	RemoraEngine      *engine;
	char               endpoint[64];
	char               why[700];
	int                nrefs;
	int                copies0 = s3->copies;
	RemoraExportMember m[2] = {{"new.bin", "bkt", "stage/1/a/data/new.bin",
								OBJ_ETAG, OBJ_SHA, 5, NULL, false},
							   {"present.bin", "bkt",
								"stage/1/a/data/present.bin", OBJ_ETAG, OBJ_SHA,
								5, NULL, false}};
	RemoraExportSpec spec = {"bkt",   "out", REMORA_IF_EXISTS_FAIL, false, 0, 0,
							 OBJ_SHA, NULL};
	const RemoraExportMember *ms = m;
	int                       nm = 2;

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	engine = engine_for(endpoint, true);
	CHECK(engine != NULL, "an engine for the export starts");
	if (engine == NULL)
		return;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == 2 && s3->copies == copies0 + 1,
		  "an export copies the missing member and finds the present one: %s",
		  why);

	m[1].etag = "\"00000000000000000000000000000000\"";
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "exists:", 7) == 0,
		  "if_exists = fail refuses a key with other content: %s", why);

	/*
	 * overwrite and skip_identical write over other content only where the
	 * host says the export's owner may (an administrator, or the key's
	 * publisher); otherwise they are refused like fail, and nothing is sent
	 */
	ms = &m[1];
	nm = 1;
	copies0 = s3->copies;
	spec.if_exists = REMORA_IF_EXISTS_OVERWRITE;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "exists:", 7) == 0 &&
			  strstr(why, "\"out/present.bin\"") != NULL &&
			  strstr(why, "(if_exists is overwrite)") != NULL &&
			  s3->copies == copies0,
		  "overwrite without may_overwrite refuses other content, copying "
		  "nothing: %s",
		  why);
	spec.if_exists = REMORA_IF_EXISTS_SKIP_IDENTICAL;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "exists:", 7) == 0 && s3->copies == copies0,
		  "and so does skip_identical: %s", why);
	m[1].may_overwrite = true;
	run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why));
	CHECK(s3->copies == copies0 + 1,
		  "with may_overwrite, skip_identical sends the copy over it");
	spec.if_exists = REMORA_IF_EXISTS_FAIL;
	ms = m;
	nm = 2;

	m[1].etag = OBJ_ETAG;
	spec.verify = true;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strstr(why, "verify_mismatch: 1 of 2") == why &&
			  strstr(why, "out/new.bin (missing)") != NULL && nrefs == 1,
		  "a verify names the member that is not there: %s", why);

	/* an ETag that cannot tell (a multipart member's copy): read and hash */
	ms = &m[1];
	nm = 1;
	m[1].etag = "\"0123456789abcdef0123456789abcdef-2\"";
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == 1,
		  "a verify hashes a key whose ETag cannot tell, and finds it: %s",
		  why);
	m[1].sha256 = OBJ_SHA_OTHER;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strstr(why, "out/present.bin (other content)") != NULL,
		  "and names it when its SHA-256 differs: %s", why);

	/* a copy sent and never answered */
	m[1].sha256 = OBJ_SHA;
	m[1].may_overwrite = true;
	spec.verify = false;
	spec.prefix = "amb";
	spec.if_exists = REMORA_IF_EXISTS_OVERWRITE;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "outcome_unknown: amb/present.bin:", 33) == 0,
		  "a copy without an answer is outcome_unknown: %s", why);
	remora_engine_free(engine);
}

/*
 * A member above the engine's export_copy_cutoff: a multipart upload of
 * UploadPartCopy ranges of part_size, completed; a part refused: the
 * upload is aborted and the failure is conclusive; a completion without an
 * answer: outcome_unknown, and the upload is aborted too.
 */
static void
test_export_multipart(FakeS3 *s3)
{
	RemoraEngineConfig cfg;
	RemoraEngine      *engine;
	char               endpoint[64], err[256], why[700];
	int                nrefs;
	int64_t            mib = 1024 * 1024;
	RemoraExportMember m = {"big.bin", "bkt",   "stage/1/a/data/big.bin",
							OBJ_ETAG,  OBJ_SHA, 12 * mib,
							NULL,      true};
	RemoraExportSpec   spec = {
		  "bkt", "mpu", REMORA_IF_EXISTS_OVERWRITE, false, 0, 0, OBJ_SHA, NULL};

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	engine_config(&cfg, endpoint, true);
	cfg.export_copy_cutoff = 5 * mib;
	engine = remora_engine_new(&cfg, err, sizeof(err));
	CHECK(engine != NULL, "an engine with a 5 MiB copy cutoff starts");
	if (engine == NULL)
		return;
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == 1 && s3->uploads == 1 && s3->parts == 3 &&
			  s3->completes == 1 && s3->aborts == 0,
		  "a 12 MiB member: one upload, three part copies, completed (%s; "
		  "%d %d %d %d)",
		  why, s3->uploads, s3->parts, s3->completes, s3->aborts);
	CHECK_STR(s3->ranges,
			  "bytes=0-5242879;bytes=5242880-10485759;"
			  "bytes=10485760-12582911;",
			  "the parts' source ranges cover the member exactly");

	spec.prefix = "mpufail";
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "outcome_unknown", 15) != 0 && nrefs == 0 &&
			  s3->completes == 1 && s3->aborts == 1,
		  "a part refused: a conclusive failure, the upload aborted (%s)", why);

	spec.prefix = "mpuamb";
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "outcome_unknown: mpuamb/big.bin:", 32) == 0 &&
			  s3->completes == 2 && s3->aborts == 2,
		  "a completion without an answer: outcome_unknown, and aborted (%s)",
		  why);

	/* if_exists = fail: a HEAD (404) first, then the multipart copy */
	spec.prefix = "mpuhead";
	spec.if_exists = REMORA_IF_EXISTS_FAIL;
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == 1 && s3->uploads == 4 && s3->completes == 3,
		  "after a HEAD that finds nothing, the same multipart copy (%s; %d "
		  "%d)",
		  why, s3->uploads, s3->completes);
	spec.if_exists = REMORA_IF_EXISTS_OVERWRITE;

	/* below the cutoff: one CopyObject, as before */
	m.size = 5 * mib;
	spec.prefix = "small";
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  s3->uploads == 4,
		  "a member at the cutoff is one CopyObject (%s)", why);
	remora_engine_free(engine);
}

/*
 * A store that refuses x-amz-copy-source-if-match on every object a
 * multipart upload made (Swift): after the 412, a HEAD shows the member as
 * recorded, the copy goes again without the condition, a HEAD after it
 * still shows the member; a member whose HEAD shows another ETag fails.
 */
static void
test_export_condition_refused(FakeS3 *s3)
{
	RemoraEngineConfig cfg;
	RemoraEngine      *engine;
	char               endpoint[64], err[256], why[700];
	int                nrefs, parts = s3->parts;
	int64_t            mib = 1024 * 1024;
	RemoraExportMember m = {
		"small.bin", "bkt", "slo/small.bin", SLO_ETAG, OBJ_SHA, 5, NULL, true};
	RemoraExportSpec spec = {
		"bkt", "out", REMORA_IF_EXISTS_OVERWRITE, false, 0, 0, OBJ_SHA, NULL};

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	engine_config(&cfg, endpoint, true);
	cfg.export_copy_cutoff = 5 * mib;
	engine = remora_engine_new(&cfg, err, sizeof(err));
	if (engine == NULL)
		return;
	s3->heads = s3->refused = s3->copies = 0;
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == 1 && s3->refused == 1 && s3->heads == 2 &&
			  s3->copies == 1,
		  "CopyObject refused for its condition: HEAD, copy, HEAD: copied "
		  "(%s; %d refused, %d HEADs, %d copies)",
		  why, s3->refused, s3->heads, s3->copies);

	m.key = "slo/big.bin";
	m.size = 12 * mib;
	spec.prefix = "mpuslo";
	s3->heads = s3->refused = 0;
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == 1 && s3->refused == 3 && s3->heads == 6 &&
			  s3->parts - parts == 3,
		  "each part copy the same way (%s; %d refused, %d HEADs, %d parts)",
		  why, s3->refused, s3->heads, s3->parts - parts);

	m.key = "slo/changed.bin";
	m.size = 5;
	spec.prefix = "out";
	s3->heads = s3->refused = s3->copies = 0;
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strstr(why, "no longer has the ETag") != NULL && nrefs == 0 &&
			  s3->heads == 1 && s3->copies == 0,
		  "a member whose HEAD shows another ETag: not copied (%s)", why);
	remora_engine_free(engine);
}

/*
 * An export of 2,500 members gets them from its host a page at a time (at
 * most REMORA_EXPORT_PAGE asked for, never more than two pages held); a
 * page the host cannot answer, one short, or a member the engine refuses
 * fails it, retryably; no new member starts while EXPORT_REFS_MAX answers
 * wait for a checkpoint; an export of no members asks nothing.
 */
static void
test_export_pages(FakeS3 *s3)
{
	enum
	{
		N = 2500
	};
	RemoraEngine       *engine;
	char                endpoint[64], why[700], err[256];
	int                 nrefs, copies0 = s3->copies;
	static char         paths[N][24];
	RemoraExportMember *m = calloc(N, sizeof(RemoraExportMember));
	RemoraExportSpec    spec = {
		   "bkt", "many", REMORA_IF_EXISTS_OVERWRITE, false, 0, 0, OBJ_SHA, NULL};
	ExportHost           h;
	RemoraTask          *task;
	Export              *x;
	RemoraTaskCheckpoint cp;

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	engine = engine_for(endpoint, true);
	CHECK(engine != NULL && m != NULL, "an engine for a paged export starts");
	if (engine == NULL || m == NULL)
	{
		free(m);
		remora_engine_free(engine);
		return;
	}
	for (int i = 0; i < N; i++)
	{
		snprintf(paths[i], sizeof(paths[i]), "d/%05d.bin", i);
		m[i] = (RemoraExportMember){paths[i], "bkt", paths[i], OBJ_ETAG,
									OBJ_SHA,  5,     NULL,     false};
	}

	memset(&h, 0, sizeof(h));
	h.members = m;
	h.n = N;
	CHECK(run_export_host(engine, &spec, &h, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == N && s3->copies == copies0 + N,
		  "2,500 members exported, every one copied and answered (%s; %d "
		  "refs, %d copies)",
		  why, nrefs, s3->copies - copies0);
	CHECK(h.pages == 3 && h.wrong == 0 && h.max_asked == REMORA_EXPORT_PAGE,
		  "in three pages of at most %d (%d pages, %d not as asked)",
		  REMORA_EXPORT_PAGE, h.pages, h.wrong);
	CHECK(h.max_window > 0 && h.max_window <= 2 * REMORA_EXPORT_PAGE,
		  "never more than two pages of members held (at most %d)",
		  h.max_window);

	memset(&h, 0, sizeof(h));
	h.members = m;
	h.n = N;
	h.refuse = true;
	CHECK(run_export_host(engine, &spec, &h, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strstr(why, "internal: the export's members after 0 of 2500") ==
				  why &&
			  nrefs == 0,
		  "a page the host cannot answer fails the export: %s", why);

	memset(&h, 0, sizeof(h));
	h.members = m;
	h.n = N;
	h.short_by = 1;
	CHECK(run_export_host(engine, &spec, &h, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strstr(why, "handed out 999 of the 1000 members") != NULL,
		  "so does a page with fewer members than asked: %s", why);

	m[3].sha256 = "not-a-digest";
	memset(&h, 0, sizeof(h));
	h.members = m;
	h.n = N;
	CHECK(run_export_host(engine, &spec, &h, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  nrefs == 0,
		  "and a member the engine refuses: %s", why);
	m[3].sha256 = OBJ_SHA;

	/* no checkpoint: the answers waiting stop new members at the bound */
	memset(&h, 0, sizeof(h));
	h.members = m;
	h.n = N;
	spec.members_total = N;
	spec.bytes_total = 5 * N;
	spec.host_arg = &h;
	task = remora_export_start(engine, &spec, err, sizeof(err));
	x = (Export *) task;
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 task && remora_now_ms() < end &&
		 !(x->nrefs >= EXPORT_REFS_MAX && x->running == 0);)
	{
		turn(engine);
		answer_pages(engine, &h);
	}
	for (int i = 0; task && i < 10; i++)
		turn(engine);
	CHECK(task && x->nrefs >= EXPORT_REFS_MAX &&
			  x->nrefs < EXPORT_REFS_MAX + REMORA_EXPORT_CONCURRENCY &&
			  x->running == 0 && remora_task_state(task) == REMORA_TASK_RUNNING,
		  "without checkpoints it stops at %d answers and those in flight "
		  "(%d)",
		  EXPORT_REFS_MAX, task ? x->nrefs : -1);
	nrefs = 0;
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 task && remora_now_ms() < end &&
		 remora_task_state(task) == REMORA_TASK_RUNNING;)
	{
		if (remora_task_checkpoint(task, &cp))
			nrefs += cp.nrefs;
		turn(engine);
		answer_pages(engine, &h);
	}
	if (task && remora_task_checkpoint(task, &cp))
		nrefs += cp.nrefs;
	CHECK(task && remora_task_state(task) == REMORA_TASK_SUCCEEDED &&
			  nrefs == N,
		  "and a checkpoint lets it go on to the end (%d answers)", nrefs);
	remora_task_free(task);

	memset(&h, 0, sizeof(h));
	CHECK(run_export_host(engine, &spec, &h, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  h.pages == 0 && nrefs == 0,
		  "an export of no members succeeds and asks for no page (%s)", why);
	free(m);
	remora_engine_free(engine);
}

int
main(void)
{
	static void (*const tests[])(FakeS3 *) = {
		test_export, test_export_multipart, test_export_condition_refused,
		test_export_pages};

	if (!fake_s3_run(tests, sizeof(tests) / sizeof(tests[0])))
		CHECK(false, "the test store starts");
	return unit_done();
}
