/*-------------------------------------------------------------------------
 *
 * jobdef.c
 *	  The documents a submit writes: the job's source, its definition and
 *	  its canonical request (remora._submit), in jsonb.
 *
 * Written with pushJsonbValue, so a string is escaped by jsonb itself and
 * must be valid in the database encoding.  The documents of a running
 * attempt (the spec a claim hands out, checkpoints, members, descriptors,
 * errors) are the runner's codec (src/runner/decode.c, encode.c), the same
 * for both hosts.
 *
 * Memory: palloc'd in the caller's context.
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

#include "pg/jobdef.h"

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
	if (o->has_max_bytes_per_second)
		put_int(b, "max_bytes_per_second", o->max_bytes_per_second);
	if (o->notify_url)
		put_string(b, "notify_url", o->notify_url);
	if (o->storage_class)
		put_string(b, "storage_class", o->storage_class);
	if (o->reuse_latest)
		put_string(b, "reuse_from", "latest");
	else if (o->reuse_from > 0)
		put_int(b, "reuse_from", o->reuse_from);
	if (o->dry_run)
		put_bool(b, "dry_run", true);
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
