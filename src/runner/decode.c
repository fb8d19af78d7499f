/*-------------------------------------------------------------------------
 *
 * decode.c
 *	  The runner reads the protocol's documents: the spec and the resume
 *	  a claim hands out, and the members of earlier attempts.
 *
 * On the JSON text of the jsonb (read with the engine's strict reader, by
 * key, every type checked): a spec a submit cannot have made is refused
 * naming the key (and its attempt fails with the reason); a value too long
 * for a fixed field of the engine is refused, never cut; a resume of the
 * wrong shape is no error but a restart from zero, with the reason said
 * (doc/protocol.md, "The recovery ledger").
 *
 * Memory: a work's strings point into its parsed document, freed with it
 * (remora_codec_work_free); a resume is the engine's (remora_resume_free),
 * allocated only after every check passed.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/util.h"
#include "runner/codec.h"

/* ---------------------------------------------------------- by key */

/* The value at key, or NULL if absent or JSON null. */
static const RemoraJson *
lookup(const RemoraJson *obj, const char *key)
{
	const RemoraJson *v;

	if (obj == NULL || obj->type != RJ_OBJECT)
		return NULL;
	v = remora_json_get(obj, key);
	return v && v->type != RJ_NULL ? v : NULL;
}

/* The object at key (NULL if absent); false if something else. */
static bool
get_object(const RemoraJson *obj, const char *key, const RemoraJson **out)
{
	*out = lookup(obj, key);
	return *out == NULL || (*out)->type == RJ_OBJECT;
}

/* The string at key (NULL if absent); false if something else. */
static bool
get_string(const RemoraJson *obj, const char *key, const char **out)
{
	const RemoraJson *v = lookup(obj, key);

	*out = v && v->type == RJ_STRING ? v->string : NULL;
	return v == NULL || v->type == RJ_STRING;
}

/* A whole decimal number, and nothing else. */
static bool
parse_int64(const char *s, int64_t *out)
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

/* The whole number at key; false if absent or anything else. */
static bool
get_int64(const RemoraJson *obj, const char *key, int64_t *out)
{
	const RemoraJson *v = lookup(obj, key);

	return v && v->type == RJ_NUMBER && parse_int64(v->string, out);
}

/* The boolean at key; false if absent or anything else. */
static bool
get_bool(const RemoraJson *obj, const char *key, bool *out)
{
	const RemoraJson *v = lookup(obj, key);

	if (v == NULL || v->type != RJ_BOOL)
		return false;
	*out = v->boolean;
	return true;
}

/* The array of strings at key (malloc'd, pointing into obj), or NULL. */
static bool
get_strings(const RemoraJson *obj, const char *key, const char ***out, int *n)
{
	const RemoraJson *v = lookup(obj, key);
	int               size = 0;

	*out = NULL;
	*n = 0;
	if (v == NULL)
		return true;
	if (v->type != RJ_ARRAY)
		return false;
	for (const RemoraJson *e = v->child; e; e = e->next)
		size++;
	*out = calloc(size + 1, sizeof(char *));
	if (*out == NULL)
		return false;
	for (const RemoraJson *e = v->child; e; e = e->next)
	{
		if (e->type != RJ_STRING)
			return false;
		(*out)[(*n)++] = e->string;
	}
	return true;
}

/* ---------------------------------------------------------------- spec */

typedef struct Reader
{
	char  *err;
	size_t errlen;
	bool   failed;
} Reader;

static void
bad(Reader *r, const char *key, const char *what)
{
	if (r->failed)
		return; /* the first reason is kept */
	remora_errbuf_set(r->err, r->errlen,
					  "invalid job specification: the key \"%s\" %s", key,
					  what);
	r->failed = true;
}

/* The spec's string at key (NULL if absent); a wrong type is refused. */
static const char *
spec_string(Reader *r, const RemoraJson *obj, const char *path, const char *key,
			bool required)
{
	const char *s;

	if (!get_string(obj, key, &s))
		bad(r, path, "is not a string");
	else if (s == NULL && required)
		bad(r, path, "is missing");
	return s;
}

/*
 * An export's spec: what to publish, with the exported result's member
 * count and bytes; its members come a page at a time
 * (remora_call_export_members).
 */
static void
decode_export(Reader *r, const RemoraJson *root, RemoraWork *out)
{
	RemoraExportSpec *x = &out->u.export;
	const RemoraJson *ex;
	const char       *mode, *if_exists;
	int64_t           n = 0;

	out->kind = REMORA_WORK_EXPORT;
	out->prefix = spec_string(r, root, "prefix", "prefix", true);
	if (!get_object(root, "export", &ex) || ex == NULL)
	{
		bad(r, "export", "is not an object");
		return;
	}
	mode = spec_string(r, ex, "export.mode", "mode", true);
	if_exists = spec_string(r, ex, "export.if_exists", "if_exists", true);
	if (r->failed)
		return;
	if (strcmp(mode, "dispatch") != 0 && strcmp(mode, "verify") != 0)
		bad(r, "export.mode", "is neither \"dispatch\" nor \"verify\"");
	if (strcmp(if_exists, "fail") == 0)
		x->if_exists = REMORA_IF_EXISTS_FAIL;
	else if (strcmp(if_exists, "overwrite") == 0)
		x->if_exists = REMORA_IF_EXISTS_OVERWRITE;
	else if (strcmp(if_exists, "skip_identical") == 0)
		x->if_exists = REMORA_IF_EXISTS_SKIP_IDENTICAL;
	else
		bad(r, "export.if_exists", "names no choice");
	x->verify = strcmp(mode, "verify") == 0;
	x->bucket = out->bucket;
	x->prefix = out->prefix;
	x->output_digest =
		spec_string(r, ex, "export.output_digest", "output_digest", true);
	if (!get_int64(ex, "members_total", &n) || n < 0)
		bad(r, "export.members_total", "is not a count");
	x->members_total = n;
	if (!get_int64(ex, "bytes_total", &n) || n < 0)
		bad(r, "export.bytes_total", "is not a size");
	x->bytes_total = n;
}

static void
decode_set(Reader *r, const RemoraJson *source, const RemoraJson *options,
		   const char *url, const char *staging, RemoraWork *out)
{
	RemoraSetSpec *s = &out->u.set;
	const char    *key;
	int            ninclude, nexclude;

	out->kind = REMORA_WORK_SET;
	if (!get_strings(options, "include", &out->include, &ninclude))
		bad(r, "options.include", "is not an array of strings");
	if (!get_strings(options, "exclude", &out->exclude, &nexclude))
		bad(r, "options.exclude", "is not an array of strings");
	s->kind =
		strcmp(out->source_kind, "hf") == 0 ? REMORA_SET_HF : REMORA_SET_S3;
	s->display = url;
	s->source_bucket = spec_string(r, source, "source.bucket", "bucket", false);
	key = spec_string(r, source, "source.key", "key", false);
	s->source_key = key ? key : "";
	s->single = strcmp(out->source_kind, "s3_object") == 0;
	s->file_name =
		spec_string(r, source, "source.file_name", "file_name", false);
	s->repo_type =
		spec_string(r, source, "source.repo_type", "repo_type", false);
	s->repo = spec_string(r, source, "source.repo", "repo", false);
	s->revision = spec_string(r, source, "source.revision", "revision", false);
	s->include = out->include;
	s->ninclude = ninclude;
	s->exclude = out->exclude;
	s->nexclude = nexclude;
	s->bucket = out->bucket;
	s->staging_prefix = staging;
}

/*
 * The spec remora.claim hands out, as the engine takes it.  False, with
 * the reason in err (naming the key), for a spec a submit cannot have
 * made; the job is then freed already.
 */
bool
remora_codec_decode_spec(const char *text, RemoraWork *out, char *err,
						 size_t errlen)
{
	Reader            r = {err, errlen, false};
	const RemoraJson *root, *source, *options, *v;
	const char       *url, *staging, *file_name;
	int64_t           owner = 0;
	char              jerr[128];

	memset(out, 0, sizeof(*out));
	out->doc = remora_json_parse(text, strlen(text), jerr, sizeof(jerr));
	root = out->doc;
	if (root == NULL)
	{
		remora_errbuf_set(err, errlen, "invalid job specification: %s", jerr);
		return false;
	}
	if (root->type != RJ_OBJECT)
		bad(&r, "(root)", "is not an object");
	if (!get_object(root, "source", &source) || source == NULL)
		bad(&r, "source", "is not an object");
	if (!get_object(root, "options", &options))
		bad(&r, "options", "is not an object");
	if (r.failed)
		goto refused;

	out->source_kind = spec_string(&r, source, "source.kind", "kind", true);
	url = spec_string(&r, source, "source.uri", "uri", false);
	file_name = spec_string(&r, source, "source.file_name", "file_name", false);
	out->file_name = file_name ? file_name : "";
	out->bucket = spec_string(&r, root, "bucket", "bucket", true);
	staging = spec_string(&r, root, "staging_prefix", "staging_prefix", true);
	out->endpoint =
		spec_string(&r, options, "options.endpoint", "endpoint", false);
	/* an oid: written as a number or a string */
	v = lookup(root, "owner");
	if (v && !((v->type == RJ_STRING || v->type == RJ_NUMBER) &&
			   parse_int64(v->string, &owner)))
		bad(&r, "owner", "is not a role's oid");
	if (owner < 0 || owner > UINT32_MAX)
		bad(&r, "owner", "is not a role's oid");
	out->owner = owner;
	if (lookup(root, "attempt_no") &&
		(!get_int64(root, "attempt_no", &out->attempt_no) ||
		 out->attempt_no < 1))
		bad(&r, "attempt_no", "is not a positive whole number");
	if (lookup(options, "connections") &&
		(!get_int64(options, "connections", &out->connections) ||
		 out->connections < 1 || out->connections > 64))
		bad(&r, "options.connections", "is not a whole number from 1 to 64");
	out->storage_class = spec_string(&r, options, "options.storage_class",
									 "storage_class", false);
	if (out->storage_class && !remora_storage_class_valid(out->storage_class))
		bad(&r, "options.storage_class", "is not a storage class S3 names");
	if (lookup(options, "reuse_from") &&
		(!get_int64(options, "reuse_from", &out->reuse_from) ||
		 out->reuse_from < 1))
		bad(&r, "options.reuse_from", "is not a job id");
	if (lookup(options, "dry_run") &&
		!get_bool(options, "dry_run", &out->dry_run))
		bad(&r, "options.dry_run", "is not true or false");
	if (r.failed)
		goto refused;

	if (strcmp(out->source_kind, "http") == 0)
	{
		out->kind = REMORA_WORK_OBJECT;
		if (url == NULL)
			bad(&r, "source.uri", "is missing");
		out->u.object.source_url = url;
		out->u.object.file_name = file_name;
		out->u.object.bucket = out->bucket;
		out->u.object.staging_prefix = staging;
		out->u.object.expected_sha256 = spec_string(
			&r, options, "options.expected_sha256", "expected_sha256", false);
	}
	else if (strcmp(out->source_kind, "export") == 0)
		decode_export(&r, root, out);
	else if (strcmp(out->source_kind, "s3_object") == 0 ||
			 strcmp(out->source_kind, "s3_prefix") == 0 ||
			 strcmp(out->source_kind, "hf") == 0)
		decode_set(&r, source, options, url, staging, out);
	else
		bad(&r, "source.kind", "names no kind of source");
	if (!r.failed)
		return true;
refused:
	remora_codec_work_free(out);
	return false;
}

void
remora_codec_work_free(RemoraWork *work)
{
	remora_json_free(work->doc);
	free(work->include);
	free(work->exclude);
	memset(work, 0, sizeof(*work));
}

/* -------------------------------------------------------------- resume */

/*
 * The resume offered at claim (the engine's, malloc'd), or NULL.  NULL
 * with *why set when it is not a checkpoint a worker writes: the attempt
 * then starts from zero and says why.
 */
RemoraResume *
remora_codec_decode_resume(const char *text, const char **why)
{
	RemoraJson       *doc;
	const RemoraJson *state, *parts = NULL;
	const char       *etag, *last_modified, *sha256_state;
	const char       *upload_key, *upload_id;
	int64_t           size;
	int               nparts = 0;
	RemoraResume     *r = NULL;
	char              jerr[128];

	*why = NULL;
	if (text == NULL)
		return NULL;
	doc = remora_json_parse(text, strlen(text), jerr, sizeof(jerr));
	if (doc == NULL || doc->type != RJ_OBJECT ||
		remora_json_get(doc, "state") == NULL)
	{
		if (doc == NULL)
			*why = "the checkpoint it was offered is malformed";
		remora_json_free(doc);
		return NULL;
	}
	*why = "the checkpoint it was offered is malformed";
	state = remora_json_get(doc, "state");
	if (state->type != RJ_OBJECT || !get_string(state, "etag", &etag) ||
		!get_string(state, "last_modified", &last_modified) ||
		!get_int64(state, "size", &size) || size < 0 ||
		!get_string(state, "sha256_state", &sha256_state) ||
		sha256_state == NULL || !get_string(state, "upload_key", &upload_key) ||
		!get_string(state, "upload_id", &upload_id))
		goto done;
	/* no upload: an earlier version's segment objects, not reused */
	if (upload_key != NULL && upload_id != NULL &&
		((parts = lookup(state, "parts")) == NULL || parts->type != RJ_ARRAY))
		goto done;
	for (const RemoraJson *e = parts ? parts->child : NULL; e; e = e->next)
	{
		const char *t;
		int64_t     sz;

		if (e->type != RJ_OBJECT || !get_string(e, "etag", &t) || t == NULL ||
			!get_int64(e, "size", &sz) || sz <= 0)
			goto done;
		if (strlen(t) >= sizeof(((RemoraPart *) 0)->etag))
		{
			*why = "a part ETag of the checkpoint it was offered is too long";
			goto done;
		}
		nparts++;
	}

	*why = "the checkpoint it was offered could not be loaded";
	r = calloc(1, sizeof(RemoraResume));
	if (r == NULL)
		goto done;
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
		r = NULL;
		goto done;
	}
	for (const RemoraJson *e = parts ? parts->child : NULL; e; e = e->next)
	{
		RemoraPart *p = &r->parts[r->nparts];

		(void) get_int64(e, "size", &p->size);
		/* checked above: it fits */
		snprintf(p->etag, sizeof(p->etag), "%s", remora_json_string(e, "etag"));
		r->nparts++;
	}
	*why = NULL;
done:
	remora_json_free(doc);
	return r;
}

/* -------------------------------------------------------------- prior */

static bool
copy_field(char *dst, size_t size, const char *s)
{
	size_t len = strlen(s ? s : "");

	if (len >= size)
		return false;
	memcpy(dst, s ? s : "", len + 1);
	return true;
}

/*
 * A member an earlier attempt recorded, as the engine's fixed fields hold
 * it; source_json is its recorded validators (or NULL).  False when a
 * value does not fit (the member is then transferred again).
 */
bool
remora_codec_prior(RemoraPrior *out, const char *key, const char *etag,
				   const char *sha256, int64_t size, const char *source_json)
{
	RemoraJson *src = NULL;
	const char *source_etag = NULL, *source_oid = NULL, *last_modified = NULL;
	bool        ok;

	if (source_json)
	{
		char jerr[64];

		src = remora_json_parse(source_json, strlen(source_json), jerr,
								sizeof(jerr));
	}
	(void) get_string(src, "etag", &source_etag);
	(void) get_string(src, "oid", &source_oid);
	(void) get_string(src, "last_modified", &last_modified);
	ok = copy_field(out->key, sizeof(out->key), key) &&
		 copy_field(out->etag, sizeof(out->etag), etag) &&
		 copy_field(out->sha256, sizeof(out->sha256), sha256) &&
		 copy_field(out->source_etag, sizeof(out->source_etag), source_etag) &&
		 copy_field(out->source_oid, sizeof(out->source_oid), source_oid) &&
		 copy_field(out->source_last_modified,
					sizeof(out->source_last_modified), last_modified);
	remora_json_free(src);
	out->size = size;
	out->found = ok;
	return ok;
}
