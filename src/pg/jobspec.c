/*-------------------------------------------------------------------------
 *
 * jobspec.c
 *	  The one codec between the job protocol's jsonb and the engine's
 *	  structs.
 *
 * Every document of the protocol is read and written here, and nowhere
 * else:
 *
 *	  remora_submit   source, options --> job definition, canonical request
 *	  remora.claim    spec --> RemoraJobSpec (RemoraTaskSpec, RemoraSetSpec
 *	                  or RemoraExportSpec)
 *	                  resume --> RemoraResume
 *	  member lookup   a member row --> RemoraPrior
 *	  worker          RemoraTaskCheckpoint --> checkpoint
 *	                  RemoraSetMember --> member
 *	                  RemoraTaskResult --> manifest descriptor
 *	                  RemoraTaskError --> error
 *
 * Documents are read by key with PostgreSQL's jsonb API, with every type
 * checked, and written with pushJsonbValue, so a string is escaped by
 * jsonb itself and must be valid in the database encoding.  Nothing is cut
 * to fit: a value too long for the engine's fixed field is an ERROR
 * (22001) naming the field, and a spec that a submit cannot have made is
 * an ERROR (22023) naming the key.  The resume is the exception: a
 * checkpoint of the wrong shape is no error but a restart from zero, with
 * the reason said (invariant 7 of DESIGN.md).
 *
 * Memory: palloc'd in the caller's context, except the RemoraResume, which
 * the engine owns (malloc'd, freed by remora_resume_free) and which is
 * allocated only after every check passed, so an ERROR leaks none of it.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include <errno.h>
#include <stdlib.h>

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "pg/jobspec.h"

/* ------------------------------------------------------------- reading */

static void
bad_spec(const char *key, const char *what)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("invalid job specification"),
					errdetail("The key \"%s\" %s.", key, what),
					errhint("A job specification is written by "
							"remora_submit; this one was changed since.")));
}

/* Copy s into a fixed field of the engine, or ERROR: never a cut string. */
static void
copy_field(char *dst, size_t size, const char *s, const char *field)
{
	size_t len = strlen(s);

	if (len >= size)
		ereport(ERROR, (errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
						errmsg("value too long for %s", field),
						errdetail("The value has %zu bytes; at most %zu fit.",
								  len, size - 1)));
	memcpy(dst, s, len + 1);
}

/* A whole decimal number, and nothing else; false for NULL. */
static bool
parse_int64(const char *s, int64 *out)
{
	char     *end;
	long long v;

	if (s == NULL || *s == '\0')
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = v;
	return true;
}

/* The value of key in an object container; false if absent or JSON null. */
static bool
lookup(JsonbContainer *c, const char *key, JsonbValue *out)
{
	if (c == NULL || !JsonContainerIsObject(c) ||
		getKeyJsonValueFromContainer(c, key, strlen(key), out) == NULL)
		return false;
	return out->type != jbvNull;
}

/* The object at key; false if present but something else. */
static bool
get_object(JsonbContainer *c, const char *key, JsonbContainer **out)
{
	JsonbValue v;

	*out = NULL;
	if (!lookup(c, key, &v))
		return true;
	if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
		return false;
	*out = v.val.binary.data;
	return true;
}

/* The string at key (palloc'd), NULL if absent; false if not a string. */
static bool
get_string(JsonbContainer *c, const char *key, char **out)
{
	JsonbValue v;

	*out = NULL;
	if (!lookup(c, key, &v))
		return true;
	if (v.type != jbvString)
		return false;
	*out = pnstrdup(v.val.string.val, v.val.string.len);
	return true;
}

/* The whole number at key; false if absent or anything else. */
static bool
get_int64(JsonbContainer *c, const char *key, int64 *out)
{
	JsonbValue v;

	if (!lookup(c, key, &v) || v.type != jbvNumeric)
		return false;
	return parse_int64(DatumGetCString(DirectFunctionCall1(
						   numeric_out, NumericGetDatum(v.val.numeric))),
					   out);
}

/* The array of strings at key (palloc'd), NULL if absent. */
static bool
get_strings(JsonbContainer *c, const char *key, char ***out, int *n)
{
	JsonbValue      v;
	JsonbContainer *a;
	int             size;

	*out = NULL;
	*n = 0;
	if (!lookup(c, key, &v))
		return true;
	if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
		return false;
	a = v.val.binary.data;
	size = JsonContainerSize(a);
	*out = palloc0(sizeof(char *) * (size + 1));
	for (int i = 0; i < size; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(a, i);

		if (e == NULL || e->type != jbvString)
			return false;
		(*out)[(*n)++] = pnstrdup(e->val.string.val, e->val.string.len);
	}
	return true;
}

/* ERROR unless the spec's value at key is absent or a string. */
static char *
spec_string(JsonbContainer *c, const char *path, const char *key, bool required)
{
	char *s;

	if (!get_string(c, key, &s))
		bad_spec(path, "is not a string");
	if (s == NULL && required)
		bad_spec(path, "is missing");
	return s;
}

/*
 * An export's spec (source kind "export"): the target prefix and
 * spec.export, what to publish: the mode, if_exists, the output digest and
 * the exported result's member count and bytes (its members come a page
 * at a time, remora_protocol_export_members).  ERRORs (22023) naming the
 * key, like the rest.
 */
static void
decode_export(JsonbContainer *root, RemoraJobSpec *out)
{
	RemoraExportSpec *x = &out->export;
	JsonbContainer   *ex;
	const char       *mode;
	const char       *if_exists;
	int64             n = 0;

	out->is_export = true;
	out->prefix = spec_string(root, "prefix", "prefix", true);
	if (!get_object(root, "export", &ex) || ex == NULL)
		bad_spec("export", "is not an object");
	mode = spec_string(ex, "export.mode", "mode", true);
	if_exists = spec_string(ex, "export.if_exists", "if_exists", true);
	if (strcmp(mode, "dispatch") != 0 && strcmp(mode, "verify") != 0)
		bad_spec("export.mode", "is neither \"dispatch\" nor \"verify\"");
	if (strcmp(if_exists, "fail") == 0)
		x->if_exists = REMORA_IF_EXISTS_FAIL;
	else if (strcmp(if_exists, "overwrite") == 0)
		x->if_exists = REMORA_IF_EXISTS_OVERWRITE;
	else if (strcmp(if_exists, "skip_identical") == 0)
		x->if_exists = REMORA_IF_EXISTS_SKIP_IDENTICAL;
	else
		bad_spec("export.if_exists", "names no choice");
	x->verify = strcmp(mode, "verify") == 0;
	x->bucket = out->bucket;
	x->prefix = out->prefix;
	x->output_digest =
		spec_string(ex, "export.output_digest", "output_digest", true);
	if (!get_int64(ex, "members_total", &n) || n < 0)
		bad_spec("export.members_total", "is not a count");
	x->members_total = n;
	if (!get_int64(ex, "bytes_total", &n) || n < 0)
		bad_spec("export.bytes_total", "is not a size");
	x->bytes_total = n;
}

/*
 * The spec remora.claim hands out, as the engine takes it.  ERRORs (22023)
 * on a spec a submit cannot have made, naming the key.
 */
void
remora_jobspec_decode(Jsonb *spec, RemoraJobSpec *out)
{
	JsonbContainer *root = &spec->root;
	JsonbContainer *source;
	JsonbContainer *options;
	const char     *kind;
	const char     *url;
	const char     *file_name;
	const char     *staging;
	char          **include, **exclude;
	int             ninclude, nexclude;
	int64           owner = 0;
	int64           connections;
	JsonbValue      v;

	memset(out, 0, sizeof(*out));
	if (!JB_ROOT_IS_OBJECT(spec) || JB_ROOT_IS_SCALAR(spec))
		bad_spec("(root)", "is not an object");
	if (!get_object(root, "source", &source) || source == NULL)
		bad_spec("source", "is not an object");
	if (!get_object(root, "options", &options))
		bad_spec("options", "is not an object");

	kind = spec_string(source, "source.kind", "kind", true);
	url = spec_string(source, "source.uri", "uri", false);
	file_name = spec_string(source, "source.file_name", "file_name", false);
	out->file_name = file_name ? file_name : "";
	out->bucket = spec_string(root, "bucket", "bucket", true);
	staging = spec_string(root, "staging_prefix", "staging_prefix", true);
	out->endpoint = spec_string(options, "options.endpoint", "endpoint", false);
	/* an oid: jsonb_build_object writes it as a string */
	if (lookup(root, "owner", &v) &&
		!(v.type == jbvString
			  ? parse_int64(pnstrdup(v.val.string.val, v.val.string.len),
							&owner)
			  : get_int64(root, "owner", &owner)))
		bad_spec("owner", "is not a role's oid");
	if (owner < 0 || owner > PG_UINT32_MAX)
		bad_spec("owner", "is not a role's oid");
	if (lookup(root, "attempt_no", &v) &&
		(!get_int64(root, "attempt_no", &out->attempt_no) ||
		 out->attempt_no < 1))
		bad_spec("attempt_no", "is not a positive whole number");
	out->owner = (Oid) owner;
	out->kind = kind;
	connections = remora_object_connections;
	if (lookup(options, "connections", &v) &&
		(!get_int64(options, "connections", &connections) || connections < 1 ||
		 connections > 64))
		bad_spec("options.connections", "is not a whole number from 1 to 64");

	if (strcmp(kind, "http") == 0)
	{
		RemoraTaskSpec *t = &out->task;

		if (url == NULL)
			bad_spec("source.uri", "is missing");
		t->source_url = url;
		t->file_name = file_name;
		t->bucket = out->bucket;
		t->staging_prefix = staging;
		t->expected_sha256 = spec_string(options, "options.expected_sha256",
										 "expected_sha256", false);
		t->connections = (int) connections;
		return;
	}
	if (strcmp(kind, "export") == 0)
	{
		decode_export(root, out);
		return;
	}
	if (strcmp(kind, "s3_object") != 0 && strcmp(kind, "s3_prefix") != 0 &&
		strcmp(kind, "hf") != 0)
		bad_spec("source.kind", "names no kind of source");

	out->is_set = true;
	if (!get_strings(options, "include", &include, &ninclude))
		bad_spec("options.include", "is not an array of strings");
	if (!get_strings(options, "exclude", &exclude, &nexclude))
		bad_spec("options.exclude", "is not an array of strings");
	{
		RemoraSetSpec *s = &out->set;
		const char    *key;

		s->kind = strcmp(kind, "hf") == 0 ? REMORA_SET_HF : REMORA_SET_S3;
		s->display = url;
		s->source_bucket =
			spec_string(source, "source.bucket", "bucket", false);
		key = spec_string(source, "source.key", "key", false);
		s->source_key = key ? key : "";
		s->single = strcmp(kind, "s3_object") == 0;
		s->file_name = file_name;
		s->repo_type =
			spec_string(source, "source.repo_type", "repo_type", false);
		s->repo = spec_string(source, "source.repo", "repo", false);
		s->revision = spec_string(source, "source.revision", "revision", false);
		s->include = (const char *const *) include;
		s->ninclude = ninclude;
		s->exclude = (const char *const *) exclude;
		s->nexclude = nexclude;
		s->bucket = out->bucket;
		s->staging_prefix = staging;
		s->connections = (int) connections;
	}
}

/*
 * The resume offered at claim, as the engine wants it (malloc'd), or NULL.
 * NULL with *why set when the checkpoint's state is not one a worker
 * writes (a member missing, a wrong type, a value too long): the attempt
 * then starts from zero and says why.  Nothing is malloc'd before the last
 * check, so an ERROR leaks nothing.
 */
RemoraResume *
remora_jobspec_decode_resume(Jsonb *resume, const char **why)
{
	JsonbValue      v;
	JsonbContainer *state;
	JsonbContainer *parts = NULL;
	char           *etag, *last_modified, *sha256_state;
	char           *upload_key, *upload_id;
	int64           size;
	int             nparts = 0;
	char          **part_etag = NULL;
	int64          *part_size = NULL;
	RemoraResume   *r;

	*why = NULL;
	if (resume == NULL || !JB_ROOT_IS_OBJECT(resume) ||
		getKeyJsonValueFromContainer(&resume->root, "state", 5, &v) == NULL)
		return NULL;

	*why = "the checkpoint it was offered is malformed";
	if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
		return NULL;
	state = v.val.binary.data;
	if (!get_string(state, "etag", &etag) ||
		!get_string(state, "last_modified", &last_modified) ||
		!get_int64(state, "size", &size) || size < 0 ||
		!get_string(state, "sha256_state", &sha256_state) ||
		sha256_state == NULL || !get_string(state, "upload_key", &upload_key) ||
		!get_string(state, "upload_id", &upload_id))
		return NULL;
	/* no upload: an earlier version's segment objects, not reused */
	if (upload_key != NULL && upload_id != NULL)
	{
		if (!lookup(state, "parts", &v) || v.type != jbvBinary ||
			!JsonContainerIsArray(v.val.binary.data))
			return NULL;
		parts = v.val.binary.data;
		nparts = JsonContainerSize(parts);
		part_etag = palloc0(sizeof(char *) * (nparts + 1));
		part_size = palloc0(sizeof(int64) * (nparts + 1));
	}
	for (int i = 0; i < nparts; i++)
	{
		JsonbValue     *e = getIthJsonbValueFromContainer(parts, i);
		JsonbContainer *part;

		if (e == NULL || e->type != jbvBinary ||
			!JsonContainerIsObject(e->val.binary.data))
			return NULL;
		part = e->val.binary.data;
		if (!get_string(part, "etag", &part_etag[i]) || part_etag[i] == NULL ||
			!get_int64(part, "size", &part_size[i]) || part_size[i] <= 0)
			return NULL;
		if (strlen(part_etag[i]) >= sizeof(((RemoraPart *) 0)->etag))
		{
			*why = "a part ETag of the checkpoint it was offered is too long";
			return NULL;
		}
	}

	*why = "the checkpoint it was offered could not be loaded";
	r = calloc(1, sizeof(RemoraResume));
	if (r == NULL)
		return NULL;
	r->etag = etag ? strdup(etag) : NULL;
	r->last_modified = last_modified ? strdup(last_modified) : NULL;
	r->size = size;
	r->sha256_state = strdup(sha256_state);
	if (parts != NULL)
	{
		r->upload_key = strdup(upload_key);
		r->upload_id = strdup(upload_id);
		r->parts = calloc(nparts + 1, sizeof(RemoraPart));
	}
	if (r->sha256_state == NULL || (etag && r->etag == NULL) ||
		(last_modified && !r->last_modified) ||
		(parts != NULL &&
		 (!r->upload_key || !r->upload_id || r->parts == NULL)))
	{
		remora_resume_free(r);
		return NULL;
	}
	for (int i = 0; i < nparts; i++)
	{
		r->parts[i].size = part_size[i];
		/* checked above: it fits */
		strcpy(r->parts[i].etag, part_etag[i]);
		r->nparts++;
	}
	*why = NULL;
	return r;
}

/*
 * A member an earlier attempt recorded, as the engine's fixed fields hold
 * it.  source is the member's recorded validators (or NULL).  ERRORs (22001)
 * when a value does not fit.
 */
void
remora_jobspec_prior(RemoraPrior *out, const char *key, const char *etag,
					 const char *sha256, int64 size, Jsonb *source)
{
	JsonbContainer *src = source ? &source->root : NULL;
	char           *source_etag = NULL;
	char           *source_oid = NULL;

	(void) get_string(src, "etag", &source_etag);
	(void) get_string(src, "oid", &source_oid);
	copy_field(out->key, sizeof(out->key), key, "a member's key");
	copy_field(out->etag, sizeof(out->etag), etag, "a member's ETag");
	copy_field(out->sha256, sizeof(out->sha256), sha256, "a member's SHA-256");
	copy_field(out->source_etag, sizeof(out->source_etag),
			   source_etag ? source_etag : "", "a member's source ETag");
	copy_field(out->source_oid, sizeof(out->source_oid),
			   source_oid ? source_oid : "", "a member's source object id");
	out->size = size;
	out->found = true;
}

/* ------------------------------------------------------------- writing */

/*
 * A small builder over pushJsonbValue.  A string must be valid in the
 * database encoding (ERROR 22021 otherwise): jsonb stores it as it is.
 */
typedef JsonbParseState *Build;

/* A JSON null as a value or an element. */
static void
push_null(Build *b, JsonbIteratorToken tok)
{
	JsonbValue v;

	v.type = jbvNull;
	pushJsonbValue(b, tok, &v);
}

static void
push_string(Build *b, JsonbIteratorToken tok, const char *s)
{
	JsonbValue v;

	if (s == NULL)
	{
		push_null(b, tok);
		return;
	}
	v.type = jbvString;
	v.val.string.len = strlen(s);
	v.val.string.val = (char *) s;
	(void) pg_verifymbstr(s, v.val.string.len, false);
	pushJsonbValue(b, tok, &v);
}

static void
begin_object(Build *b)
{
	pushJsonbValue(b, WJB_BEGIN_OBJECT, NULL);
}

static JsonbValue *
end_object(Build *b)
{
	return pushJsonbValue(b, WJB_END_OBJECT, NULL);
}

static void
put_string(Build *b, const char *key, const char *s)
{
	push_string(b, WJB_KEY, key);
	push_string(b, WJB_VALUE, s);
}

static void
put_int(Build *b, const char *key, int64 i)
{
	JsonbValue v;

	push_string(b, WJB_KEY, key);
	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(i);
	pushJsonbValue(b, WJB_VALUE, &v);
}

static void
put_bool(Build *b, const char *key, bool x)
{
	JsonbValue v;

	push_string(b, WJB_KEY, key);
	v.type = jbvBool;
	v.val.boolean = x;
	pushJsonbValue(b, WJB_VALUE, &v);
}

/* A whole document as a value or an element (NULL: JSON null). */
static void
push_jsonb(Build *b, JsonbIteratorToken tok, Jsonb *j)
{
	JsonbValue v;

	if (j == NULL)
	{
		push_null(b, tok);
		return;
	}
	v.type = jbvBinary;
	v.val.binary.data = &j->root;
	v.val.binary.len = VARSIZE(j) - VARHDRSZ;
	pushJsonbValue(b, tok, &v);
}

static void
put_jsonb(Build *b, const char *key, Jsonb *j)
{
	push_string(b, WJB_KEY, key);
	push_jsonb(b, WJB_VALUE, j);
}

/* An array of documents (members), in list order. */
static void
put_list(Build *b, const char *key, List *docs)
{
	ListCell *lc;

	push_string(b, WJB_KEY, key);
	pushJsonbValue(b, WJB_BEGIN_ARRAY, NULL);
	foreach (lc, docs)
		push_jsonb(b, WJB_ELEM, (Jsonb *) lfirst(lc));
	pushJsonbValue(b, WJB_END_ARRAY, NULL);
}

static void
put_strings(Build *b, const char *key, char **s, int n)
{
	push_string(b, WJB_KEY, key);
	pushJsonbValue(b, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < n; i++)
		push_string(b, WJB_ELEM, s[i]);
	pushJsonbValue(b, WJB_END_ARRAY, NULL);
}

/* The source as the job definition records it (never its query string). */
Jsonb *
remora_jobspec_source(const RemoraSourceUri *u)
{
	/* the parts a source of its kind has; the others are left out */
	const char *const parts[][2] = {
		{"host", u->host},
		{"bucket", u->bucket},
		{"key", u->key},
		{"repo_type", u->repo_type},
		{"repo", u->repo},
		{"revision", u->revision},
		{"file_name", u->file_name},
	};
	Build b = NULL;

	begin_object(&b);
	put_string(&b, "kind", remora_source_kind_name(u->kind));
	put_string(&b, "uri", u->display);
	for (int i = 0; i < (int) lengthof(parts); i++)
		if (parts[i][1])
			put_string(&b, parts[i][0], parts[i][1]);
	return JsonbValueToJsonb(end_object(&b));
}

static void
put_options(Build *b, const RemoraJobOptions *o)
{
	push_string(b, WJB_KEY, "options");
	begin_object(b);
	if (o->has_max_attempts)
		put_int(b, "max_attempts", o->max_attempts);
	if (o->has_priority)
		put_int(b, "priority", o->priority);
	if (o->has_include)
		put_strings(b, "include", o->include, o->ninclude);
	if (o->has_exclude)
		put_strings(b, "exclude", o->exclude, o->nexclude);
	if (o->endpoint)
		put_string(b, "endpoint", o->endpoint);
	if (o->expected_sha256)
		put_string(b, "expected_sha256", o->expected_sha256);
	if (o->label)
		put_string(b, "label", o->label);
	if (o->has_connections)
		put_int(b, "connections", o->connections);
	(void) end_object(b);
}

/*
 * The job definition (with_url false: every default resolved by the
 * caller) or the canonical request (with_url true: what the caller asked
 * for, NULL (JSON null) for url, bucket and prefix when not asked for).
 */
static Jsonb *
job_document(Jsonb *source, bool with_url, const char *url, const char *bucket,
			 const char *prefix, const RemoraJobOptions *options)
{
	Build b = NULL;

	begin_object(&b);
	put_jsonb(&b, "source", source);
	if (with_url)
		put_string(&b, "url", url);
	put_string(&b, "bucket", bucket);
	put_string(&b, "prefix", prefix);
	put_options(&b, options);
	return JsonbValueToJsonb(end_object(&b));
}

Jsonb *
remora_jobspec_definition(Jsonb *source, const char *bucket, const char *prefix,
						  const RemoraJobOptions *options)
{
	return job_document(source, false, NULL, bucket, prefix, options);
}

Jsonb *
remora_jobspec_request(Jsonb *source, const char *url, const char *bucket,
					   const char *prefix, const RemoraJobOptions *options)
{
	return job_document(source, true, url, bucket, prefix, options);
}

/* The error of a failed attempt, as remora.fail records it. */
Jsonb *
remora_jobspec_error(const char *class, const char *message, long http_status,
					 int curl_code, const char *s3_code, long retry_after)
{
	Build b = NULL;

	begin_object(&b);
	put_string(&b, "class", class);
	put_string(&b, "message", message);
	if (http_status)
		put_int(&b, "http_status", http_status);
	if (curl_code)
		put_int(&b, "curl_code", curl_code);
	if (s3_code && s3_code[0])
		put_string(&b, "s3_code", s3_code);
	if (retry_after >= 0)
		put_int(&b, "retry_after", retry_after);
	return JsonbValueToJsonb(end_object(&b));
}

Jsonb *
remora_jobspec_task_error(const RemoraTaskError *e)
{
	return remora_jobspec_error(e->class, e->message, e->http_status,
								e->curl_code, e->s3_code, e->retry_after);
}

/* A completed member of a set, as remora.checkpoint and remora.commit take. */
Jsonb *
remora_jobspec_member(const char *bucket, const RemoraSetMember *m)
{
	Build  b = NULL;
	Jsonb *source = NULL;

	if (m->source_json)
		source = DatumGetJsonbP(
			DirectFunctionCall1(jsonb_in, CStringGetDatum(m->source_json)));
	begin_object(&b);
	put_string(&b, "path", m->path);
	put_string(&b, "bucket", bucket);
	put_string(&b, "key", m->key);
	put_int(&b, "size", m->size);
	put_string(&b, "sha256", m->sha256);
	put_string(&b, "etag", m->etag);
	put_jsonb(&b, "source", source);
	put_bool(&b, "reused", m->reused);
	return JsonbValueToJsonb(end_object(&b));
}

/*
 * A checkpoint.  For a set, its counts and the members not yet recorded
 * (members, a List of remora_jobspec_member documents); for an object, the
 * validated parts of its upload and, once, why it restarted from zero.  With cp
 * NULL, only the members (a retry of members whose checkpoint did not commit).
 */
Jsonb *
remora_jobspec_checkpoint(const RemoraTaskCheckpoint *cp, bool is_set,
						  const char *restart_reason, List *members)
{
	Build b = NULL;

	begin_object(&b);
	if (cp == NULL || is_set)
	{
		if (cp)
		{
			put_int(&b, "bytes_done", cp->bytes_done);
			if (cp->bytes_total >= 0)
				put_int(&b, "bytes_total", cp->bytes_total);
			push_string(&b, WJB_KEY, "state");
			begin_object(&b);
			put_int(&b, "members_done", cp->members_done);
			if (cp->members_total >= 0)
				put_int(&b, "members_total", cp->members_total);
			(void) end_object(&b);
		}
		put_list(&b, "members", members);
		return JsonbValueToJsonb(end_object(&b));
	}

	put_int(&b, "bytes_done", cp->bytes_done);
	if (cp->bytes_total >= 0)
		put_int(&b, "bytes_total", cp->bytes_total);
	if (restart_reason)
		put_string(&b, "restart_reason", restart_reason);
	if (cp->nparts > 0)
	{
		push_string(&b, WJB_KEY, "state");
		begin_object(&b);
		put_string(&b, "etag", cp->etag);
		put_string(&b, "last_modified", cp->last_modified);
		put_int(&b, "size", cp->bytes_total);
		put_string(&b, "sha256_state", cp->sha256_state);
		put_string(&b, "upload_key", cp->upload_key);
		put_string(&b, "upload_id", cp->upload_id);
		push_string(&b, WJB_KEY, "parts");
		pushJsonbValue(&b, WJB_BEGIN_ARRAY, NULL);
		for (int s = 0; s < cp->nparts; s++)
		{
			begin_object(&b);
			put_int(&b, "size", cp->parts[s].size);
			put_string(&b, "etag", cp->parts[s].etag);
			(void) end_object(&b);
		}
		pushJsonbValue(&b, WJB_END_ARRAY, NULL);
		(void) end_object(&b);
	}
	return JsonbValueToJsonb(end_object(&b));
}

/* What every descriptor has: the manifest object and its digest. */
static void
put_manifest(Build *b, const RemoraTaskResult *r)
{
	put_string(b, "key", r->manifest_key);
	put_string(b, "etag", r->manifest_etag);
	put_string(b, "sha256", r->manifest_sha256);
}

/* The descriptor remora.commit takes for a single object. */
Jsonb *
remora_jobspec_object_descriptor(const RemoraTaskResult *r, const char *bucket,
								 const char *file_name)
{
	Build b = NULL;

	begin_object(&b);
	put_manifest(&b, r);
	put_int(&b, "members", 1);
	put_int(&b, "bytes", r->member_size);
	push_string(&b, WJB_KEY, "entries");
	pushJsonbValue(&b, WJB_BEGIN_ARRAY, NULL);
	begin_object(&b);
	put_string(&b, "path", file_name);
	put_string(&b, "bucket", bucket);
	put_string(&b, "key", r->member_key);
	put_int(&b, "size", r->member_size);
	put_string(&b, "sha256", r->member_sha256);
	put_string(&b, "etag", r->member_etag);
	push_string(&b, WJB_KEY, "source");
	begin_object(&b);
	put_string(&b, "etag", r->source_etag);
	put_string(&b, "last_modified", r->source_last_modified);
	(void) end_object(&b);
	(void) end_object(&b);
	pushJsonbValue(&b, WJB_END_ARRAY, NULL);
	return JsonbValueToJsonb(end_object(&b));
}

/*
 * The descriptor of a set's manifest; its members not yet recorded by a
 * checkpoint (members, remora_jobspec_member documents) go with it as
 * "entries".
 */
Jsonb *
remora_jobspec_set_descriptor(const RemoraTaskResult *r, List *members)
{
	Build b = NULL;

	begin_object(&b);
	put_manifest(&b, r);
	put_int(&b, "members", r->members);
	put_int(&b, "bytes", r->bytes);
	put_string(&b, "members_sha256", r->members_sha256);
	put_int(&b, "members_reused", r->members_reused);
	if (r->source_commit[0])
		put_string(&b, "source_commit", r->source_commit);
	put_list(&b, "entries", members);
	return JsonbValueToJsonb(end_object(&b));
}

/* An export's conclusive answer for one member, for checkpoint and commit. */
Jsonb *
remora_jobspec_ref(const RemoraExportRef *r)
{
	Build b = NULL;

	begin_object(&b);
	put_string(&b, "path", r->path);
	put_string(&b, "key", r->key);
	put_string(&b, "etag", r->etag);
	put_string(&b, "version_id", r->version_id);
	put_int(&b, "size", r->size);
	put_string(&b, "outcome", r->outcome);
	return JsonbValueToJsonb(end_object(&b));
}

/*
 * An export's checkpoint: its progress and the answers not yet recorded
 * (refs, remora_jobspec_ref documents).  cp NULL: only the answers.
 */
Jsonb *
remora_jobspec_export_checkpoint(const RemoraTaskCheckpoint *cp, List *refs)
{
	Build b = NULL;

	begin_object(&b);
	if (cp)
	{
		put_int(&b, "bytes_done", cp->bytes_done);
		if (cp->bytes_total >= 0)
			put_int(&b, "bytes_total", cp->bytes_total);
	}
	put_list(&b, "references", refs);
	return JsonbValueToJsonb(end_object(&b));
}

/*
 * The descriptor remora.commit takes for an export: the output digest it
 * published, and the answers not yet recorded (refs).
 */
Jsonb *
remora_jobspec_export_descriptor(const RemoraTaskResult *r, List *refs)
{
	Build b = NULL;

	begin_object(&b);
	put_string(&b, "sha256", r->manifest_sha256);
	put_int(&b, "members", r->members);
	put_int(&b, "bytes", r->bytes);
	put_list(&b, "references", refs);
	return JsonbValueToJsonb(end_object(&b));
}
