/*-------------------------------------------------------------------------
 *
 * encode.c
 *	  The runner writes the protocol's documents: checkpoints, members,
 *	  references, manifest descriptors and the error of a failed attempt.
 *
 * Built with the engine's one JSON string writer
 * (remora_buf_json_string) into a growable buffer: nothing is cut to fit,
 * and an append that fails (out of memory) fails the whole document
 * (NULL).  The server parses each as jsonb, which checks it once more.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/util.h"
#include "runner/codec.h"

/* ---------------------------------------------------------- a builder */

typedef struct Doc
{
	RemoraBuf b;
	bool      first; /* no member written yet in the open object/array */
} Doc;

static void
sep(Doc *d)
{
	if (!d->first)
		remora_buf_putc(&d->b, ',');
	d->first = false;
}

static void
open_(Doc *d, char c)
{
	remora_buf_putc(&d->b, c);
	d->first = true;
}

static void
close_(Doc *d, char c)
{
	remora_buf_putc(&d->b, c);
	d->first = false;
}

static void
key(Doc *d, const char *k)
{
	sep(d);
	remora_buf_json_string(&d->b, k);
	remora_buf_putc(&d->b, ':');
}

/* a string member; NULL is JSON null */
static void
put_string(Doc *d, const char *k, const char *s)
{
	key(d, k);
	if (s == NULL)
		remora_buf_puts(&d->b, "null");
	else
		remora_buf_json_string(&d->b, s);
}

static void
put_int(Doc *d, const char *k, int64_t v)
{
	key(d, k);
	remora_buf_printf(&d->b, "%" PRId64, v);
}

static void
put_bool(Doc *d, const char *k, bool v)
{
	key(d, k);
	remora_buf_puts(&d->b, v ? "true" : "false");
}

/* a member whose value is a document already written (NULL: null) */
static void
put_raw(Doc *d, const char *k, const char *json)
{
	key(d, k);
	remora_buf_puts(&d->b, json ? json : "null");
}

static void
put_docs(Doc *d, const char *k, const RemoraDocs *docs)
{
	key(d, k);
	open_(d, '[');
	for (int i = 0; docs && i < docs->n; i++)
	{
		sep(d);
		remora_buf_puts(&d->b, docs->items[i]);
	}
	close_(d, ']');
}

static char *
finish(Doc *d)
{
	return remora_buf_release(&d->b, NULL);
}

/* ---------------------------------------------------------- documents */

bool
remora_docs_add(RemoraDocs *d, char *doc)
{
	char **items;

	if (doc == NULL)
		return false;
	if (d->n == d->cap)
	{
		items = remora_array_grow(d->items, d->n, &d->cap, sizeof(char *));
		if (items == NULL)
		{
			free(doc);
			return false;
		}
		d->items = items;
	}
	d->items[d->n++] = doc;
	return true;
}

void
remora_docs_clear(RemoraDocs *d)
{
	for (int i = 0; i < d->n; i++)
		free(d->items[i]);
	free(d->items);
	memset(d, 0, sizeof(*d));
}

/* The error of a failed attempt, as remora.fail records it. */
char *
remora_codec_error(const char *class, const char *message, long http_status,
				   int curl_code, const char *s3_code, long retry_after)
{
	Doc d = {{0}, true};

	open_(&d, '{');
	put_string(&d, "class", class);
	put_string(&d, "message", message);
	if (http_status)
		put_int(&d, "http_status", http_status);
	if (curl_code)
		put_int(&d, "curl_code", curl_code);
	if (s3_code && s3_code[0])
		put_string(&d, "s3_code", s3_code);
	if (retry_after >= 0)
		put_int(&d, "retry_after", retry_after);
	close_(&d, '}');
	return finish(&d);
}

char *
remora_codec_task_error(const RemoraTaskError *e)
{
	return remora_codec_error(e->class, e->message, e->http_status,
							  e->curl_code, e->s3_code, e->retry_after);
}

/* A completed member of a set, for remora.checkpoint and remora.commit. */
char *
remora_codec_member(const char *bucket, const RemoraSetMember *m)
{
	Doc d = {{0}, true};

	open_(&d, '{');
	put_string(&d, "path", m->path);
	put_string(&d, "bucket", bucket);
	put_int(&d, "size", m->size);
	if (m->key) /* else a dry run's plan: no object */
	{
		put_string(&d, "key", m->key);
		put_string(&d, "sha256", m->sha256);
		put_string(&d, "etag", m->etag);
	}
	put_raw(&d, "source", m->source_json); /* the engine's own JSON */
	put_bool(&d, "reused", m->reused);
	if (m->reused_from_job > 0)
		put_int(&d, "reused_from_job", m->reused_from_job);
	close_(&d, '}');
	return finish(&d);
}

/* An export's conclusive answer for one member. */
char *
remora_codec_ref(const RemoraExportRef *r)
{
	Doc d = {{0}, true};

	open_(&d, '{');
	put_string(&d, "path", r->path);
	put_string(&d, "key", r->key);
	put_string(&d, "etag", r->etag);
	put_string(&d, "version_id", r->version_id);
	put_int(&d, "size", r->size);
	put_string(&d, "outcome", r->outcome);
	close_(&d, '}');
	return finish(&d);
}

/*
 * A checkpoint.  For a set, its counts and the members not yet recorded;
 * for an object, the validated parts of its upload and, once, why it
 * restarted from zero.  With cp NULL, only the members.
 */
char *
remora_codec_checkpoint(const RemoraTaskCheckpoint *cp, bool is_set,
						const char *restart_reason, const RemoraDocs *members)
{
	Doc d = {{0}, true};

	open_(&d, '{');
	if (cp == NULL || is_set)
	{
		if (cp)
		{
			put_int(&d, "bytes_done", cp->bytes_done);
			if (cp->bytes_total >= 0)
				put_int(&d, "bytes_total", cp->bytes_total);
			key(&d, "state");
			open_(&d, '{');
			put_int(&d, "members_done", cp->members_done);
			if (cp->members_total >= 0)
				put_int(&d, "members_total", cp->members_total);
			close_(&d, '}');
		}
		put_docs(&d, "members", members);
		close_(&d, '}');
		return finish(&d);
	}
	put_int(&d, "bytes_done", cp->bytes_done);
	if (cp->bytes_total >= 0)
		put_int(&d, "bytes_total", cp->bytes_total);
	if (restart_reason)
		put_string(&d, "restart_reason", restart_reason);
	if (cp->nparts > 0)
	{
		key(&d, "state");
		open_(&d, '{');
		put_string(&d, "etag", cp->etag);
		put_string(&d, "last_modified", cp->last_modified);
		put_int(&d, "size", cp->bytes_total);
		put_string(&d, "sha256_state", cp->sha256_state);
		put_string(&d, "upload_key", cp->upload_key);
		put_string(&d, "upload_id", cp->upload_id);
		key(&d, "parts");
		open_(&d, '[');
		for (int s = 0; s < cp->nparts; s++)
		{
			sep(&d);
			open_(&d, '{');
			put_int(&d, "size", cp->parts[s].size);
			put_string(&d, "etag", cp->parts[s].etag);
			close_(&d, '}');
		}
		close_(&d, ']');
		close_(&d, '}');
	}
	close_(&d, '}');
	return finish(&d);
}

/* An export's checkpoint: progress and the answers not yet recorded. */
char *
remora_codec_export_checkpoint(const RemoraTaskCheckpoint *cp,
							   const RemoraDocs           *refs)
{
	Doc d = {{0}, true};

	open_(&d, '{');
	if (cp)
	{
		put_int(&d, "bytes_done", cp->bytes_done);
		if (cp->bytes_total >= 0)
			put_int(&d, "bytes_total", cp->bytes_total);
	}
	put_docs(&d, "references", refs);
	close_(&d, '}');
	return finish(&d);
}

static void
put_manifest(Doc *d, const RemoraTaskResult *r)
{
	put_string(d, "key", r->manifest_key);
	put_string(d, "etag", r->manifest_etag);
	put_string(d, "sha256", r->manifest_sha256);
}

/* The descriptor remora.commit takes for a single object. */
char *
remora_codec_object_descriptor(const RemoraTaskResult *r, const char *bucket,
							   const char *file_name)
{
	Doc d = {{0}, true};

	open_(&d, '{');
	put_manifest(&d, r);
	put_int(&d, "members", 1);
	put_int(&d, "bytes", r->member_size);
	key(&d, "entries");
	open_(&d, '[');
	sep(&d);
	open_(&d, '{');
	put_string(&d, "path", file_name);
	put_string(&d, "bucket", bucket);
	put_int(&d, "size", r->member_size);
	if (r->member_key[0]) /* else a dry run's plan: no object */
	{
		put_string(&d, "key", r->member_key);
		put_string(&d, "sha256", r->member_sha256);
		put_string(&d, "etag", r->member_etag);
	}
	key(&d, "source");
	open_(&d, '{');
	put_string(&d, "etag", r->source_etag);
	put_string(&d, "last_modified", r->source_last_modified);
	close_(&d, '}');
	if (r->reused_from_job > 0)
		put_int(&d, "reused_from_job", r->reused_from_job);
	close_(&d, '}');
	close_(&d, ']');
	close_(&d, '}');
	return finish(&d);
}

/* The descriptor of a set's manifest, with the members not yet recorded. */
char *
remora_codec_set_descriptor(const RemoraTaskResult *r,
							const RemoraDocs       *members)
{
	Doc d = {{0}, true};

	open_(&d, '{');
	put_manifest(&d, r);
	put_int(&d, "members", r->members);
	put_int(&d, "bytes", r->bytes);
	put_string(&d, "members_sha256", r->members_sha256);
	put_int(&d, "members_reused", r->members_reused);
	if (r->source_commit[0])
		put_string(&d, "source_commit", r->source_commit);
	put_docs(&d, "entries", members);
	close_(&d, '}');
	return finish(&d);
}

/* The descriptor of an export, with the answers not yet recorded. */
char *
remora_codec_export_descriptor(const RemoraTaskResult *r,
							   const RemoraDocs       *refs)
{
	Doc d = {{0}, true};

	open_(&d, '{');
	put_string(&d, "sha256", r->manifest_sha256);
	put_int(&d, "members", r->members);
	put_int(&d, "bytes", r->bytes);
	put_docs(&d, "references", refs);
	close_(&d, '}');
	return finish(&d);
}

/* A JSON array of strings (member paths for a lookup). */
char *
remora_codec_string_array(const char *const *s, int n)
{
	Doc d = {{0}, true};

	open_(&d, '[');
	for (int i = 0; i < n; i++)
	{
		sep(&d);
		remora_buf_json_string(&d.b, s[i]);
	}
	close_(&d, ']');
	return finish(&d);
}
