/*-------------------------------------------------------------------------
 *
 * task.c
 *	  One attempt's transfer of an http(s) source into the target store.
 *
 * Phases, each driven by the completion of the requests of the one before:
 *
 *	  VERIFY	HEAD the segments a replacement wants to reuse
 *	  SOURCE	GET the source (from the resume offset, with If-Range);
 *				bytes fill segment buffers; full buffers are PUT as segment
 *				objects while the next one fills (the source is paused when
 *				every buffer is busy)
 *	  SINGLE	an object that fits in one buffer is PUT as the member
 *	  ASSEMBLE	otherwise: create a multipart upload of the member, copy
 *				each segment into it (UploadPartCopy guarded by the
 *				segment's ETag), complete it
 *	  MANIFEST	PUT the manifest; the task has succeeded
 *
 * Validated progress is the longest run of segments, from the first, that
 * the store has acknowledged; with it go the source validators and the
 * SHA-256 state after those segments.  That is what checkpoints record and
 * what a replacement may reuse, after checking the segments still exist
 * with the same ETag and size, and the source still has the same
 * validators (the server answers If-Range with 206, not 200).
 *
 * The task writes only keys under its own staging prefix.  Segments reused
 * from an earlier attempt are read (copied from), never written or deleted.
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "engine/engine_int.h"
#include "engine/manifest.h"
#include "engine/s3xml.h"
#include "engine/source_uri.h"

#define COPIES_IN_FLIGHT 4

typedef enum Phase
{
	P_VERIFY,
	P_SOURCE,
	P_SINGLE,
	P_ASSEMBLE,
	P_MANIFEST,
	P_DONE
} Phase;

typedef struct Buffer
{
	char       *data;
	size_t      len;
	bool        sealed; /* full: waiting for its upload to start */
	bool        busy;   /* being uploaded */
	int         segno;  /* segment number once sealed */
	EVP_MD_CTX *md5;
} Buffer;

typedef struct Segment
{
	char   *key;
	int64_t size;
	char    etag[256];
	char   *sha_after; /* SHA-256 state after this segment */
	bool    done;      /* acknowledged by the store */
	bool    reused;    /* an earlier attempt's */
} Segment;

struct RemoraTask
{
	RemoraEngine   *engine;
	RemoraTask     *next_task;
	RemoraTaskState state;
	Phase           phase;
	RemoraSet      *set; /* a set's handle: everything goes to the set */

	/* the spec, copied */
	char   *url;      /* current URL: changes with redirects */
	char   *orig_url; /* as submitted: what the manifest records */
	char   *file_name;
	char   *bucket;
	char   *staging;
	char   *expected_sha256;
	char   *attempt_id;
	int64_t job_id;
	int64_t fencing_token;
	int     redirects;

	/* as a member of a larger job (see RemoraTaskSpec) */
	char   *member_key_spec;
	char   *segment_prefix;
	bool    no_manifest;
	bool    trusted_source;
	char   *auth_header;
	char   *auth_host;
	char   *if_match;
	int64_t expected_size; /* -1: unknown */

	/* the source */
	Request *src;
	bool     src_checked; /* status and validators looked at */
	bool     src_discard; /* body of a redirect or error */
	bool     src_ended;
	bool     rerequest; /* ask the source again, from the start */
	bool     paused;
	int64_t  skip;     /* bytes to drop (the resume overlap byte) */
	int64_t  offset;   /* where this attempt's GET starts */
	int64_t  received; /* bytes of the object hashed so far */
	int64_t  total;    /* object size, -1 if unknown */
	char     etag[256];
	char     last_modified[64];

	/* resume */
	bool restarted;
	char restart_reason[256];
	int  verify_next;

	/* segments and buffers */
	Segment      *segs;
	int           nsegs;
	int           segs_cap;
	int           validated; /* segments 1..validated are acknowledged */
	bool          cp_dirty;
	Buffer        bufs[REMORA_SEGMENTS_IN_FLIGHT + 1];
	Buffer       *fill;
	int           uploads; /* segment PUTs in flight */
	RemoraSha256 *sha;
	char          sha_hex[65];

	/* assembly */
	char  *upload_id;
	bool   upload_done; /* CompleteMultipartUpload succeeded */
	int    copy_next;
	int    copies; /* in flight */
	int    copied;
	char **part_etags;

	/* the body of the request in flight (part list, manifest) */
	char  *manifest;
	size_t manifest_len;

	/* cleanup: delete everything under staging, then abort its uploads */
	bool   cleanup;
	char **del_keys;
	char **del_uploads; /* upload ids, in the uploads phase */
	int    ndel;
	int    del_next;
	int    deleting;
	char  *list_token;
	bool   list_more;
	bool   uploads_phase;
	char  *key_marker;
	char  *upload_marker;

	RemoraSegment   *cp_segments; /* the last checkpoint's view */
	RemoraTaskResult result;
	RemoraTaskError  error;
};

enum
{
	K_SOURCE = 1,
	K_HEAD,
	K_SEGMENT,
	K_SINGLE,
	K_INIT,
	K_COPY,
	K_COMPLETE,
	K_MANIFEST,
	K_DELETE
};

static void start_source(RemoraTask *task);
static void start_assembly(RemoraTask *task);
static void start_manifest(RemoraTask *task);
static void start_verify(RemoraTask *task);
static void member_written(RemoraTask *task);
static void abort_upload(RemoraTask *task);

/* ---------------------------------------------------------------- errors */

static void fail(RemoraTask *task, const char *class, bool retryable,
				 long http_status, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void
fail(RemoraTask *task, const char *class, bool retryable, long http_status,
	 const char *fmt, ...)
{
	va_list ap;

	if (task->state != REMORA_TASK_RUNNING)
		return;
	va_start(ap, fmt);
	remora_error_vset(&task->error, class, retryable, http_status, fmt, ap);
	va_end(ap);
	task->state = REMORA_TASK_FAILED;
}

static void
fail_with(RemoraTask *task, const RemoraTaskError *err)
{
	if (task->state != REMORA_TASK_RUNNING)
		return;
	task->error = *err;
	remora_utf8_scrub(task->error.message);
	remora_utf8_scrub(task->error.s3_code);
	task->state = REMORA_TASK_FAILED;
}

/* Stop every request of the task (on failure or abort). */
static void
cancel_requests(RemoraTask *task)
{
	Request *req = task->engine->requests;

	while (req)
	{
		Request *next = req->next;

		if (req->owner == task)
			remora_req_cancel(req);
		req = next;
	}
	task->src = NULL;
	task->uploads = 0;
	task->copies = 0;
}

/* After any completion: if the task failed, stop what is still running. */
static void
settle(RemoraTask *task)
{
	if (task->state == REMORA_TASK_FAILED)
		cancel_requests(task);
}

/* ------------------------------------------------------------- segments */

static Segment *
segment_at(RemoraTask *task, int segno)
{
	if (segno > task->segs_cap)
	{
		int      cap = task->segs_cap ? task->segs_cap * 2 : 64;
		Segment *grown;

		while (cap < segno)
			cap *= 2;
		grown = realloc(task->segs, cap * sizeof(Segment));
		if (grown == NULL)
			return NULL;
		memset(grown + task->segs_cap, 0,
			   (cap - task->segs_cap) * sizeof(Segment));
		task->segs = grown;
		task->segs_cap = cap;
	}
	if (segno > task->nsegs)
		task->nsegs = segno;
	return &task->segs[segno - 1];
}

static void
drop_segments(RemoraTask *task)
{
	for (int i = 0; i < task->nsegs; i++)
	{
		free(task->segs[i].key);
		free(task->segs[i].sha_after);
	}
	if (task->segs)
		memset(task->segs, 0, task->segs_cap * sizeof(Segment));
	task->nsegs = 0;
	task->validated = 0;
}

/* Forget the resume: this attempt starts from the first byte. */
static void
restart_from_zero(RemoraTask *task, const char *why)
{
	task->restarted = true;
	snprintf(task->restart_reason, sizeof(task->restart_reason), "%s", why);
	drop_segments(task);
	remora_sha256_reset(task->sha);
	task->offset = 0;
	task->received = 0;
	task->skip = 0;
	task->cp_dirty = true;
}

static Buffer *
free_buffer(RemoraTask *task)
{
	for (int i = 0; i <= REMORA_SEGMENTS_IN_FLIGHT; i++)
		if (!task->bufs[i].busy && !task->bufs[i].sealed &&
			&task->bufs[i] != task->fill)
			return &task->bufs[i];
	return NULL;
}

static void
segment_done(Request *req, CURLcode rc)
{
	RemoraTask     *task = req->owner;
	Buffer         *buf = req->data;
	Segment        *seg = &task->segs[req->index - 1];
	RemoraTaskError err;

	task->uploads--;
	buf->busy = false;
	buf->len = 0;
	if (remora_s3_failed(req, rc, &err, "uploading a segment"))
	{
		fail_with(task, &err);
		settle(task);
		return;
	}
	remora_etag_canon(req->etag, seg->etag, sizeof(seg->etag));
	if (seg->etag[0] == '\0')
	{
		fail(task, REMORA_ERR_S3, true, req->status,
			 "uploading a segment: the store answered no ETag");
		settle(task);
		return;
	}
	seg->done = true;
	while (task->validated < task->nsegs && task->segs[task->validated].done)
	{
		task->validated++;
		task->cp_dirty = true;
	}

	if (task->paused && task->src)
	{
		task->paused = false;
		curl_easy_pause(task->src->easy, CURLPAUSE_CONT);
	}
	if (task->src_ended && task->uploads == 0 &&
		task->state == REMORA_TASK_RUNNING)
		start_assembly(task);
	settle(task);
}

/*
 * A full (or the last) buffer becomes the next segment: record it, with
 * the hash state after it.  Its upload starts in pump(), because this may
 * run inside a curl callback, where no transfer may be started.
 */
static bool
seal_segment(RemoraTask *task, Buffer *buf)
{
	int      segno = task->nsegs + 1;
	Segment *seg;
	char     sha_state[128];
	size_t   klen =
		strlen(task->segment_prefix ? task->segment_prefix : task->staging) +
		32;

	if (segno > REMORA_MAX_SEGMENTS || (seg = segment_at(task, segno)) == NULL)
	{
		fail(task, REMORA_ERR_SIZE, false, 0,
			 "the object needs more than %d segments; raise remora.part_size",
			 REMORA_MAX_SEGMENTS);
		return false;
	}
	seg->key = malloc(klen);
	if (seg->key == NULL)
	{
		fail(task, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return false;
	}
	if (task->segment_prefix)
		snprintf(seg->key, klen, "%s%06d", task->segment_prefix, segno);
	else
		snprintf(seg->key, klen, "%ssegments/%06d", task->staging, segno);
	seg->size = (int64_t) buf->len;
	if (remora_sha256_save(task->sha, sha_state, sizeof(sha_state)))
		seg->sha_after = strdup(sha_state);
	buf->segno = segno;
	buf->sealed = true;
	return true;
}

/* PUT a sealed buffer as its segment object. */
static void
upload_segment(RemoraTask *task, Buffer *buf)
{
	Segment      *seg = &task->segs[buf->segno - 1];
	unsigned char md5[16];
	char          md5b64[25];
	S3Call        call;
	RemoraKV      hdr[1];
	Request      *req;
	char          err[256];

	EVP_DigestFinal_ex(buf->md5, md5, NULL);
	remora_md5_base64(md5, md5b64);
	hdr[0] = (RemoraKV){"content-md5", md5b64};
	call = (S3Call){"PUT", task->bucket, seg->key, NULL, 0,    hdr,
					1,     buf->data,    buf->len, true, false};
	req = remora_s3_request(task->engine, task, &call, segment_done, err,
							sizeof(err));
	if (req == NULL)
	{
		fail(task, REMORA_ERR_INTERNAL, true, 0, "%s", err);
		return;
	}
	req->kind = K_SEGMENT;
	req->index = buf->segno;
	req->data = buf;
	buf->sealed = false;
	buf->busy = true;
	task->uploads++;
	if (!remora_req_start(req))
	{
		task->uploads--;
		buf->busy = false;
		remora_req_cancel(req);
		fail(task, REMORA_ERR_INTERNAL, true, 0, "could not start an upload");
	}
}

/* Start what the last callbacks could not: uploads of sealed buffers. */
static void
pump(RemoraTask *task)
{
	for (int i = 0; i <= REMORA_SEGMENTS_IN_FLIGHT; i++)
		if (task->bufs[i].sealed && task->state == REMORA_TASK_RUNNING)
			upload_segment(task, &task->bufs[i]);
	settle(task);
}

/* Take bytes into the filling buffer, hashing them on the way. */
static void
take(RemoraTask *task, const char *p, size_t n)
{
	Buffer *b = task->fill;

	memcpy(b->data + b->len, p, n);
	b->len += n;
	remora_sha256_update(task->sha, p, n);
	EVP_DigestUpdate(b->md5, p, n);
	task->received += (int64_t) n;
}

static void
begin_buffer(RemoraTask *task, Buffer *b)
{
	b->len = 0;
	EVP_DigestInit_ex(b->md5, EVP_md5(), NULL);
	task->fill = b;
}

/* ---------------------------------------------------------------- source */

/* Content-Range: bytes START-END/TOTAL */
static bool
parse_content_range(const char *v, int64_t *start, int64_t *end, int64_t *total)
{
	long long s, e, t;

	if (sscanf(v, "bytes %lld-%lld/%lld", &s, &e, &t) == 3 && s >= 0 &&
		e >= s && t > e)
	{
		*start = s;
		*end = e;
		*total = t;
		return true;
	}
	return false;
}

static bool
strong_etag(const char *etag)
{
	return etag[0] == '"';
}

/*
 * Does a 206 answer to a resume request continue the object the checkpoint
 * was taken from?  Not relying on the server to honour If-Range: the
 * validators, the total size and the range itself must all match.
 */
static bool
continues_checkpoint(RemoraTask *task, Request *req)
{
	int64_t start, end, total;

	if (!parse_content_range(req->content_range, &start, &end, &total))
		return false;
	if (start != task->offset - 1 || end != total - 1 || total != task->total)
		return false;
	if (strong_etag(task->etag))
		return strcmp(req->etag, task->etag) == 0;
	return task->last_modified[0] != '\0' &&
		   strcmp(req->last_modified, task->last_modified) == 0;
}

/*
 * First body bytes of a source response: decide what the response is.
 * Returns false when the body is not the object's (discard it).
 */
static bool
check_source_response(RemoraTask *task, Request *req)
{
	long status = 0;

	curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
	task->src_checked = true;
	if (status >= 300 || status < 200)
		return false;
	if (task->offset > 0 && status == 206)
	{
		if (!continues_checkpoint(task, req))
		{
			/* stop this answer; source_done asks again from the start */
			restart_from_zero(task, "the source changed since the checkpoint "
									"(its validators, size or range differ)");
			task->rerequest = true;
			return false;
		}
	}
	else if (status == 206)
	{
		/* a range we did not ask for */
		fail(task, REMORA_ERR_SOURCE, true, status,
			 "the source answered a plain request with a partial response");
		return false;
	}
	else
	{
		/* 200: the whole object */
		if (task->offset > 0)
			restart_from_zero(task, "the source changed since the checkpoint "
									"(or no longer serves ranges)");
		task->total = req->content_length;
	}
	snprintf(task->etag, sizeof(task->etag), "%s", req->etag);
	snprintf(task->last_modified, sizeof(task->last_modified), "%s",
			 req->last_modified);
	return true;
}

static size_t
source_data(Request *req, char *ptr, size_t len)
{
	RemoraTask *task = req->owner;
	size_t      used = 0;

	if (!task->src_checked)
		task->src_discard = !check_source_response(task, req);
	if (task->state != REMORA_TASK_RUNNING || task->rerequest)
		return 0; /* stops the transfer */
	if (task->src_discard)
		return len; /* the body of a redirect or an error */

	/*
	 * Would this chunk overflow the buffer with no other to go on in?  Wait.
	 * (A buffer that is exactly full is sealed only when more bytes come,
	 * so that an object of exactly one part size is one PUT.)
	 */
	if (task->fill->len + len - (size_t) task->skip > task->engine->part_size &&
		free_buffer(task) == NULL)
	{
		task->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	if (task->skip > 0)
	{
		used = (size_t) task->skip < len ? (size_t) task->skip : len;
		task->skip -= (int64_t) used;
	}
	while (used < len)
	{
		size_t room;
		size_t n;

		if (task->fill->len == task->engine->part_size)
		{
			Buffer *full = task->fill;
			Buffer *next = free_buffer(task);

			if (next == NULL || !seal_segment(task, full))
				return 0;
			begin_buffer(task, next);
		}
		room = task->engine->part_size - task->fill->len;
		n = len - used < room ? len - used : room;
		take(task, ptr + used, n);
		used += n;
	}
	if (task->total >= 0 && task->received > task->total)
	{
		fail(task, REMORA_ERR_SIZE, false, 0,
			 "the source sent more bytes than it announced");
		return 0;
	}
	return len;
}

static void
source_failed_http(RemoraTask *task, Request *req)
{
	char msg[400];
	bool retryable =
		req->status >= 500 || req->status == 429 || req->status == 408;

	snprintf(msg, sizeof(msg), "the source answered HTTP %ld", req->status);
	memset(&task->error, 0, sizeof(task->error));
	fail(task, REMORA_ERR_HTTP, retryable, req->status, "%s", msg);
	task->error.retry_after = req->retry_after;
}

/* Does a URL carry user information (credentials) before its host? */
static bool
has_userinfo(const char *url)
{
	CURLU *u = curl_url();
	char  *user = NULL;
	bool   found;

	if (u == NULL || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
	{
		curl_url_cleanup(u);
		return true; /* unparseable: refuse it as well */
	}
	found = curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK;
	curl_free(user);
	curl_url_cleanup(u);
	return found;
}

static void
source_done(Request *req, CURLcode rc)
{
	RemoraTask *task = req->owner;
	char       *location = NULL;

	task->src = NULL;
	if (task->state != REMORA_TASK_RUNNING)
	{
		settle(task);
		return;
	}
	if (task->rerequest ||
		(task->offset > 0 && req->status == 416 && rc == CURLE_OK))
	{
		/* the checkpoint does not fit the source any more: from the start */
		if (!task->restarted)
			restart_from_zero(
				task, "the source no longer has the checkpoint's range");
		task->rerequest = false;
		task->src_checked = false;
		task->src_discard = false;
		start_source(task);
		settle(task);
		return;
	}
	/* a denied address matters only if no allowed one was reached */
	if (req->policy_denied && rc != CURLE_OK)
	{
		fail(task, REMORA_ERR_POLICY, false, 0,
			 "the outbound-source policy refused the connection: %s",
			 req->policy_why);
		settle(task);
		return;
	}
	if (rc != CURLE_OK)
	{
		memset(&task->error, 0, sizeof(task->error));
		fail(task, REMORA_ERR_NETWORK, true, 0, "reading the source: %s",
			 curl_easy_strerror(rc));
		task->error.curl_code = rc;
		settle(task);
		return;
	}
	if (req->status >= 300 && req->status < 400)
	{
		curl_easy_getinfo(req->easy, CURLINFO_REDIRECT_URL, &location);
		if (location == NULL || (strncmp(location, "http://", 7) != 0 &&
								 strncmp(location, "https://", 8) != 0))
			fail(task, REMORA_ERR_SOURCE, false, req->status,
				 "the source redirected to a location that is not http(s)");
		else if (has_userinfo(location))
			fail(task, REMORA_ERR_SOURCE, false, req->status,
				 "the source redirected to a location with credentials");
		else if (++task->redirects > REMORA_MAX_REDIRECTS)
			fail(task, REMORA_ERR_SOURCE, false, req->status,
				 "the source redirected more than %d times",
				 REMORA_MAX_REDIRECTS);
		else
		{
			char *next = strdup(location);

			if (next == NULL)
				fail(task, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			else
			{
				free(task->url);
				task->url = next;
				/*
				 * Trust was for the administrator's endpoint; where it sends
				 * the request is judged like any source.
				 */
				task->trusted_source = false;
				task->src_checked = false;
				task->src_discard = false;
				start_source(task);
			}
		}
		settle(task);
		return;
	}
	if (req->status == 412 && task->if_match)
	{
		/* a source object replaced since it was listed: list it again */
		fail(task, REMORA_ERR_SOURCE, true, req->status,
			 "the source object changed since it was listed");
		settle(task);
		return;
	}
	if (req->status < 200 || req->status >= 300)
	{
		source_failed_http(task, req);
		settle(task);
		return;
	}
	if (!task->src_checked)
		check_source_response(task, req); /* an empty body */
	if (task->total >= 0 && task->received != task->total)
	{
		fail(task, REMORA_ERR_SIZE, false, 0,
			 "the source ended before the size it announced");
		settle(task);
		return;
	}
	task->total = task->received;
	task->src_ended = true;
	if (task->expected_size >= 0 && task->total != task->expected_size)
	{
		/* the listing said otherwise: list again in a new attempt */
		fail(task, REMORA_ERR_SIZE, true, 0,
			 "the source's size changed since it was listed");
		settle(task);
		return;
	}

	remora_sha256_final_hex(task->sha, task->sha_hex);
	if (task->expected_sha256 &&
		strcmp(task->expected_sha256, task->sha_hex) != 0)
	{
		fail(task, REMORA_ERR_CHECKSUM, false, 0,
			 "the SHA-256 of the source is %s, not the expected one",
			 task->sha_hex);
		settle(task);
		return;
	}

	if (task->nsegs == 0)
	{
		/* it fits in one buffer: the member is one PUT */
		task->phase = P_SINGLE;
		start_assembly(task);
	}
	else
	{
		if (task->fill->len > 0 && seal_segment(task, task->fill))
			upload_segment(task, task->fill);
		task->fill = NULL;
		pump(task); /* a buffer sealed in the last callback */
		if (task->uploads == 0 && task->state == REMORA_TASK_RUNNING)
			start_assembly(task);
	}
	settle(task);
}

/*
 * The origin of a URL, "scheme://host:port" (malloc'd), or NULL.  A
 * credential meant for one origin is never sent to another, such as a CDN
 * the first redirects to.
 */
char *
remora_url_origin(const char *url)
{
	CURLU *u = curl_url();
	char  *scheme = NULL, *host = NULL, *port = NULL;
	char  *out = NULL;

	if (u && url && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
	{
		size_t n = strlen(scheme) + strlen(host) + strlen(port) + 8;

		out = malloc(n);
		if (out)
		{
			snprintf(out, n, "%s://%s:%s", scheme, host, port);
			for (char *c = out; *c; c++)
				*c = (char) tolower((unsigned char) *c);
		}
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return out;
}

static bool
url_origin_is(const char *url, const char *origin)
{
	char *o = remora_url_origin(url);
	bool  same = o && origin && strcmp(o, origin) == 0;

	free(o);
	return same;
}

static void
start_source(RemoraTask *task)
{
	Request           *req = remora_req_new(task->engine, task, source_done);
	struct curl_slist *h = NULL;

	task->phase = P_SOURCE;
	if (req == NULL)
	{
		fail(task, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return;
	}
	if (task->trusted_source)
		curl_easy_setopt(req->easy, CURLOPT_PROXY, "");
	else
		remora_req_set_source_options(req);
	req->kind = K_SOURCE;
	req->on_data = source_data;
	curl_easy_setopt(req->easy, CURLOPT_URL, task->url);
	curl_easy_setopt(req->easy, CURLOPT_ACCEPT_ENCODING, NULL);
	if (task->offset > 0)
	{
		char line[400];

		/*
		 * Ask from one byte before the resume point, so that the range is
		 * never empty (the checkpoint may end at the last byte); that byte
		 * is dropped.
		 */
		snprintf(line, sizeof(line), "Range: bytes=%" PRId64 "-",
				 task->offset - 1);
		h = curl_slist_append(h, line);
		snprintf(line, sizeof(line), "If-Range: %s",
				 strong_etag(task->etag) ? task->etag : task->last_modified);
		h = curl_slist_append(h, line);
		task->skip = 1;
	}
	if (task->auth_header && url_origin_is(task->url, task->auth_host))
		h = curl_slist_append(h, task->auth_header);
	if (task->if_match && task->offset == 0)
	{
		char line[300];

		snprintf(line, sizeof(line), "If-Match: %s", task->if_match);
		h = curl_slist_append(h, line);
	}
	req->headers = h;
	task->src = req;
	if (!remora_req_start(req))
	{
		task->src = NULL;
		remora_req_cancel(req);
		fail(task, REMORA_ERR_INTERNAL, true, 0,
			 "could not start the download");
	}
}

/* ------------------------------------------------------------- verify */

static void
verify_done(Request *req, CURLcode rc)
{
	RemoraTask *task = req->owner;
	Segment    *seg = &task->segs[req->index - 1];

	RemoraTaskError err;

	if (rc != CURLE_OK || req->status >= 500 || req->status == 429)
	{
		/* the store did not answer: try again later, the checkpoint holds */
		remora_s3_failed(req, rc, &err, "checking a segment of the checkpoint");
		fail_with(task, &err);
		return;
	}
	if (req->status != 200 || !remora_etag_equal(req->etag, seg->etag) ||
		req->content_length != seg->size)
	{
		char why[160];

		snprintf(
			why, sizeof(why),
			"segment %d of the checkpoint is missing or changed in the store",
			req->index);
		restart_from_zero(task, why);
		start_source(task);
		return;
	}
	task->verify_next++;
	start_verify(task);
}

static void
start_verify(RemoraTask *task)
{
	S3Call   call;
	Request *req;
	char     err[256];
	Segment *seg;

	task->phase = P_VERIFY;
	if (task->verify_next > task->nsegs)
	{
		start_source(task);
		return;
	}
	seg = &task->segs[task->verify_next - 1];
	call = (S3Call){"HEAD", task->bucket, seg->key, NULL,  0,   NULL,
					0,      NULL,         0,        false, true};
	req = remora_s3_request(task->engine, task, &call, verify_done, err,
							sizeof(err));
	if (req == NULL || !remora_req_start(req))
	{
		if (req)
			remora_req_cancel(req);
		fail(task, REMORA_ERR_INTERNAL, true, 0, "could not check a segment");
		return;
	}
	req->kind = K_HEAD;
	req->index = task->verify_next;
}

/* ------------------------------------------------------------- assembly */

/*
 * Members live under <staging>data/, apart from the attempt's control
 * objects (<staging>manifest.jsonl, <staging>segments/): no member name can
 * collide with them.
 */
static char *
member_key(RemoraTask *task)
{
	size_t n;
	char  *k;

	if (task->member_key_spec)
		return strdup(task->member_key_spec);
	n = strlen(task->staging) + strlen(task->file_name) + 6;
	k = malloc(n);
	if (k)
		snprintf(k, n, "%sdata/%s", task->staging, task->file_name);
	return k;
}

static bool
start_s3(RemoraTask *task, const S3Call *call, RequestDone done, int kind,
		 int index)
{
	char     err[256];
	Request *req =
		remora_s3_request(task->engine, task, call, done, err, sizeof(err));

	if (req == NULL)
	{
		fail(task, REMORA_ERR_INTERNAL, true, 0, "%s", err);
		return false;
	}
	req->kind = kind;
	req->index = index;
	if (!remora_req_start(req))
	{
		remora_req_cancel(req);
		fail(task, REMORA_ERR_INTERNAL, true, 0, "could not start a request");
		return false;
	}
	return true;
}

static void
single_done(Request *req, CURLcode rc)
{
	RemoraTask     *task = req->owner;
	RemoraTaskError err;

	if (remora_s3_failed(req, rc, &err, "uploading the object"))
	{
		fail_with(task, &err);
		return;
	}
	remora_etag_canon(req->etag, task->result.member_etag,
					  sizeof(task->result.member_etag));
	if (task->result.member_etag[0] == '\0')
	{
		fail(task, REMORA_ERR_S3, true, req->status,
			 "uploading the object: the store answered no ETag");
		return;
	}
	member_written(task);
}

static void start_copies(RemoraTask *task);

/* This attempt's own segments are no longer needed once the object is. */
static void
delete_own_segments(RemoraTask *task)
{
	for (int i = 0; i < task->nsegs; i++)
		if (!task->segs[i].reused)
		{
			S3Call   del = {"DELETE",
							task->bucket,
							task->segs[i].key,
							NULL,
							0,
							NULL,
							0,
							NULL,
							0,
							false,
							false};
			char     e[256];
			Request *d =
				remora_s3_request(task->engine, NULL, &del, NULL, e, sizeof(e));

			if (d && !remora_req_start(d))
				remora_req_cancel(d);
		}
}

static void
assembled(RemoraTask *task, const char *etag)
{
	if (!remora_etag_fits_parts(etag, (const char *const *) task->part_etags,
								task->nsegs))
	{
		fail(task, REMORA_ERR_S3, true, 0,
			 "completing the multipart upload: the object's ETag %s is not "
			 "that of the parts copied",
			 etag);
		return;
	}
	snprintf(task->result.member_etag, sizeof(task->result.member_etag), "%s",
			 etag);
	task->upload_done = true;
	delete_own_segments(task);
	member_written(task);
}

/* The object as the store has it, when the completion named no ETag. */
static void
assembled_head_done(Request *req, CURLcode rc)
{
	RemoraTask     *task = req->owner;
	RemoraTaskError err;
	char            etag[REMORA_ETAG_MAX];

	if (remora_s3_head_etag(req, rc, task->total, etag, sizeof(etag), &err,
							"completing the multipart upload"))
		assembled(task, etag);
	else
		fail_with(task, &err);
}

static void
complete_done(Request *req, CURLcode rc)
{
	RemoraTask     *task = req->owner;
	RemoraTaskError err;
	char           *etag;

	if (remora_s3_failed(req, rc, &err, "completing the multipart upload"))
	{
		fail_with(task, &err);
		return;
	}
	etag = remora_s3_answer_etag(req, "CompleteMultipartUploadResult", &err,
								 "completing the multipart upload");
	if (etag == NULL)
		fail_with(task, &err);
	else if (etag[0] == '\0')
	{
		/* RGW answers an empty <ETag>: HEAD tells */
		S3Call call = {"HEAD",
					   task->bucket,
					   task->result.member_key,
					   NULL,
					   0,
					   NULL,
					   0,
					   NULL,
					   0,
					   false,
					   true};

		start_s3(task, &call, assembled_head_done, K_HEAD, 0);
	}
	else
		assembled(task, etag);
	free(etag);
}

static void
start_complete(RemoraTask *task)
{
	size_t len;
	char  *body = remora_s3xml_complete_body(
		 (const char *const *) task->part_etags, task->nsegs, &len);
	RemoraKV q[1] = {{"uploadId", task->upload_id}};
	S3Call   call;

	if (body == NULL)
	{
		fail(task, REMORA_ERR_INTERNAL, true, 0,
			 "could not build the part list");
		return;
	}
	free(task->manifest);
	task->manifest = body; /* kept alive while the request runs */
	task->manifest_len = len;
	call = (S3Call){
		"POST", task->bucket, task->result.member_key, q, 1, NULL, 0, body, len,
		false,  false};
	start_s3(task, &call, complete_done, K_COMPLETE, 0);
}

static void
copy_done(Request *req, CURLcode rc)
{
	RemoraTask     *task = req->owner;
	Segment        *seg = &task->segs[req->index - 1];
	RemoraTaskError err;
	char           *etag;

	task->copies--;
	if (remora_s3_failed(req, rc, &err, "copying a segment into the object"))
	{
		fail_with(task, &err);
		settle(task);
		return;
	}
	etag = remora_s3_answer_etag(req, "CopyPartResult", &err,
								 "copying a segment into the object");
	if (etag == NULL)
	{
		fail_with(task, &err);
		settle(task);
		return;
	}

	/*
	 * A part copied from a whole segment has the segment's MD5 for its
	 * ETag.  Checked, not assumed: a store may ignore the copy's
	 * x-amz-copy-source-if-match.
	 */
	if (etag[0] == '\0' ||
		(remora_etag_is_md5(seg->etag) && !remora_etag_equal(etag, seg->etag)))
	{
		fail(task, REMORA_ERR_S3, true, req->status,
			 "copying segment %d into the object: the part's ETag '%s' is "
			 "not the segment's %s",
			 req->index, etag, seg->etag);
		free(etag);
		settle(task);
		return;
	}
	task->part_etags[req->index - 1] = etag;
	task->copied++;
	if (task->copied == task->nsegs)
		start_complete(task);
	else
		start_copies(task);
	settle(task);
}

static void
start_copies(RemoraTask *task)
{
	while (task->state == REMORA_TASK_RUNNING &&
		   task->copies < COPIES_IN_FLIGHT && task->copy_next <= task->nsegs)
	{
		int      partno = task->copy_next++;
		Segment *seg = &task->segs[partno - 1];
		char    *enc = remora_uri_encode(seg->key, strlen(seg->key), true);
		char     partstr[16];
		char    *source;
		size_t   n;
		RemoraKV q[2];
		RemoraKV h[2];
		S3Call   call;

		if (enc == NULL)
		{
			fail(task, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		n = strlen(task->bucket) + strlen(enc) + 3;
		source = malloc(n);
		if (source == NULL)
		{
			free(enc);
			fail(task, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		snprintf(source, n, "/%s/%s", task->bucket, enc);
		snprintf(partstr, sizeof(partstr), "%d", partno);
		q[0] = (RemoraKV){"partNumber", partstr};
		q[1] = (RemoraKV){"uploadId", task->upload_id};
		h[0] = (RemoraKV){"x-amz-copy-source", source};
		h[1] = (RemoraKV){"x-amz-copy-source-if-match", seg->etag};
		call = (S3Call){
			"PUT", task->bucket, task->result.member_key, q, 2, h, 2, NULL, 0,
			false, false};
		task->copies++;
		if (!start_s3(task, &call, copy_done, K_COPY, partno))
			task->copies--;
		free(enc);
		free(source);
	}
}

static void
init_done(Request *req, CURLcode rc)
{
	RemoraTask     *task = req->owner;
	RemoraTaskError err;

	if (remora_s3_failed(req, rc, &err, "starting the multipart upload"))
	{
		fail_with(task, &err);
		return;
	}
	task->upload_id =
		remora_s3xml_text(req->body, req->body_len, "UploadId", NULL);
	task->part_etags = calloc(task->nsegs, sizeof(char *));
	if (task->upload_id == NULL || task->upload_id[0] == '\0' ||
		task->part_etags == NULL)
	{
		fail(task, REMORA_ERR_S3, true, req->status,
			 "starting the multipart upload: the store answered no UploadId");
		return;
	}
	task->copy_next = 1;
	start_copies(task);
}

/*
 * The source is all in: make the member object.  One buffer: PUT it.
 * Segments: multipart upload assembled by server-side copies.
 */
static void
start_assembly(RemoraTask *task)
{
	S3Call call;

	free(task->manifest);
	task->manifest = NULL;
	if (task->result.member_key[0] == '\0')
	{
		char *k = member_key(task);

		if (k == NULL)
		{
			fail(task, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		snprintf(task->result.member_key, sizeof(task->result.member_key), "%s",
				 k);
		free(k);
	}
	task->result.member_size = task->total;
	snprintf(task->result.member_sha256, sizeof(task->result.member_sha256),
			 "%s", task->sha_hex);

	if (task->phase == P_SINGLE)
	{
		Buffer       *b = task->fill;
		unsigned char md5[16];
		char          md5b64[25];
		RemoraKV      hdr[1];

		EVP_DigestFinal_ex(b->md5, md5, NULL);
		remora_md5_base64(md5, md5b64);
		hdr[0] = (RemoraKV){"content-md5", md5b64};
		call = (S3Call){"PUT",
						task->bucket,
						task->result.member_key,
						NULL,
						0,
						hdr,
						1,
						b->data,
						b->len,
						true,
						false};
		start_s3(task, &call, single_done, K_SINGLE, 0);
		return;
	}
	task->phase = P_ASSEMBLE;
	{
		RemoraKV q[1] = {{"uploads", ""}};

		call = (S3Call){"POST",
						task->bucket,
						task->result.member_key,
						q,
						1,
						NULL,
						0,
						NULL,
						0,
						false,
						false};
		start_s3(task, &call, init_done, K_INIT, 0);
	}
}

/* ------------------------------------------------------------- manifest */

/*
 * The member object is in the store.  A task that is the whole job writes
 * its manifest next; a member of a larger job is done.
 */
static void
member_written(RemoraTask *task)
{
	snprintf(task->result.source_etag, sizeof(task->result.source_etag), "%s",
			 task->etag);
	snprintf(task->result.source_last_modified,
			 sizeof(task->result.source_last_modified), "%s",
			 task->last_modified);
	if (!task->no_manifest)
	{
		start_manifest(task);
		return;
	}
	task->phase = P_DONE;
	task->state = REMORA_TASK_SUCCEEDED;
}

static void
manifest_done(Request *req, CURLcode rc)
{
	RemoraTask     *task = req->owner;
	RemoraTaskError err;

	if (remora_s3_failed(req, rc, &err, "writing the manifest"))
	{
		fail_with(task, &err);
		return;
	}
	remora_etag_canon(req->etag, task->result.manifest_etag,
					  sizeof(task->result.manifest_etag));
	if (task->result.manifest_etag[0] == '\0')
	{
		fail(task, REMORA_ERR_S3, true, req->status,
			 "writing the manifest: the store answered no ETag");
		return;
	}
	task->phase = P_DONE;
	task->state = REMORA_TASK_SUCCEEDED;
}

/*
 * The manifest of a job of one member (see manifest.c).  The source is
 * recorded without its query string, which may hold a signature.
 */
static void
start_manifest(RemoraTask *task)
{
	RemoraTaskResult *r = &task->result;
	RemoraBuf         src = {0};
	RemoraBuf         member = {0};
	RemoraBuf         m = {0};
	char              members_sha[65];
	char  *shown = strndup(task->orig_url, strcspn(task->orig_url, "?#"));
	bool   ok;
	S3Call call;

	task->phase = P_MANIFEST;
	snprintf(r->source_etag, sizeof(r->source_etag), "%s", task->etag);
	snprintf(r->source_last_modified, sizeof(r->source_last_modified), "%s",
			 task->last_modified);
	ok = shown != NULL &&
		 remora_manifest_source_http(&src, task->etag, task->last_modified) &&
		 remora_manifest_member(&member, task->file_name, r->member_key,
								r->member_size, r->member_sha256,
								r->member_etag, src.data, false);
	if (ok)
	{
		remora_sha256_hex(member.data, member.len, members_sha);
		remora_manifest_header(&m, task->job_id, task->attempt_id,
							   task->fencing_token, shown, task->bucket, NULL);
		remora_buf_append(&m, member.data, member.len);
		ok = remora_manifest_totals(&m, 1, r->member_size, members_sha);
	}
	free(shown);
	remora_buf_free(&src);
	remora_buf_free(&member);
	free(task->manifest);
	task->manifest = ok ? remora_buf_release(&m, &task->manifest_len) : NULL;
	remora_buf_free(&m);
	if (task->manifest == NULL)
	{
		fail(task, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return;
	}
	remora_sha256_hex(task->manifest, task->manifest_len, r->manifest_sha256);
	snprintf(r->manifest_key, sizeof(r->manifest_key), "%smanifest.jsonl",
			 task->staging);
	call =
		(S3Call){"PUT", task->bucket,   r->manifest_key,    NULL,  0,    NULL,
				 0,     task->manifest, task->manifest_len, false, false};
	start_s3(task, &call, manifest_done, K_MANIFEST, 0);
}

/* -------------------------------------------------------------- cleanup */

#define DELETES_IN_FLIGHT 8

static void cleanup_list(RemoraTask *task);

static void cleanup_uploads_list(RemoraTask *task);

static void
free_del_keys(RemoraTask *task)
{
	for (int i = 0; i < task->ndel; i++)
	{
		free(task->del_keys[i]);
		if (task->del_uploads)
			free(task->del_uploads[i]);
	}
	free(task->del_keys);
	free(task->del_uploads);
	task->del_keys = task->del_uploads = NULL;
	task->ndel = task->del_next = 0;
}

static void cleanup_next(RemoraTask *task);

static void
cleanup_delete_done(Request *req, CURLcode rc)
{
	RemoraTask     *task = req->owner;
	RemoraTaskError err;

	task->deleting--;
	/* already gone (NoSuchKey, NoSuchUpload) is as good as deleted */
	if (req->status != 404 &&
		remora_s3_failed(req, rc, &err,
						 task->uploads_phase ? "aborting a staging upload"
											 : "deleting a staging object"))
	{
		fail_with(task, &err);
		settle(task);
		return;
	}
	cleanup_next(task);
}

static void
cleanup_next(RemoraTask *task)
{
	while (task->state == REMORA_TASK_RUNNING &&
		   task->deleting < DELETES_IN_FLIGHT && task->del_next < task->ndel)
	{
		int      i = task->del_next++;
		RemoraKV q[1] = {
			{"uploadId", task->del_uploads ? task->del_uploads[i] : ""}};
		S3Call call = {"DELETE",
					   task->bucket,
					   task->del_keys[i],
					   q,
					   task->del_uploads ? 1 : 0,
					   NULL,
					   0,
					   NULL,
					   0,
					   false,
					   false};

		task->deleting++;
		if (!start_s3(task, &call, cleanup_delete_done, K_DELETE, 0))
			task->deleting--;
	}
	if (task->state == REMORA_TASK_RUNNING && task->deleting == 0 &&
		task->del_next == task->ndel)
	{
		free_del_keys(task);
		if (task->list_more && task->uploads_phase)
			cleanup_uploads_list(task);
		else if (task->list_more)
			cleanup_list(task);
		else if (!task->uploads_phase)
		{
			task->uploads_phase = true;
			cleanup_uploads_list(task);
		}
		else
		{
			task->phase = P_DONE;
			task->state = REMORA_TASK_SUCCEEDED;
		}
	}
}

static void
cleanup_list_done(Request *req, CURLcode rc)
{
	RemoraTask     *task = req->owner;
	RemoraTaskError err;
	RemoraS3Listing l;

	if (remora_s3_failed(req, rc, &err, "listing staging objects"))
	{
		fail_with(task, &err);
		return;
	}
	if (!remora_s3xml_listing(req->body, req->body_len, &l))
	{
		fail(task, REMORA_ERR_S3, true, req->status,
			 "listing staging objects: the store answered no listing");
		return;
	}
	task->del_keys = calloc(l.nobjects + 1, sizeof(char *));
	if (task->del_keys == NULL)
	{
		remora_s3xml_listing_free(&l);
		fail(task, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return;
	}
	for (int i = 0; i < l.nobjects; i++)
	{
		/* the listing is by prefix; trust nothing outside it */
		if (strncmp(l.objects[i].key, task->staging, strlen(task->staging)) ==
				0 &&
			(task->del_keys[task->ndel] = strdup(l.objects[i].key)) != NULL)
			task->ndel++;
	}
	free(task->list_token);
	task->list_token =
		l.truncated && l.next_token ? strdup(l.next_token) : NULL;
	task->list_more = task->list_token != NULL;
	if (l.truncated && task->list_token == NULL)
	{
		/* a truncated listing without a way on: do not loop, fail */
		remora_s3xml_listing_free(&l);
		fail(task, REMORA_ERR_S3, true, req->status,
			 "listing staging objects: a truncated listing had no continuation "
			 "token");
		return;
	}
	remora_s3xml_listing_free(&l);
	cleanup_next(task);
}

static void
cleanup_list(RemoraTask *task)
{
	RemoraKV q[3];
	int      nq = 0;
	S3Call   call;

	q[nq++] = (RemoraKV){"list-type", "2"};
	q[nq++] = (RemoraKV){"prefix", task->staging};
	if (task->list_token)
		q[nq++] = (RemoraKV){"continuation-token", task->list_token};
	call = (S3Call){"GET", task->bucket, NULL, q,     nq,   NULL,
					0,     NULL,         0,    false, false};
	start_s3(task, &call, cleanup_list_done, K_DELETE, 0);
}

/*
 * Multipart uploads under the staging prefix that were never completed
 * keep their parts, which no object listing shows: list them and abort
 * each.  A store without ListMultipartUploads (the test server answers
 * NotImplemented) has nothing to list.
 */
static void
cleanup_uploads_done(Request *req, CURLcode rc)
{
	RemoraTask     *task = req->owner;
	RemoraTaskError err;
	RemoraS3Uploads u;
	size_t          plen = strlen(task->staging);

	if (rc == CURLE_OK && (req->status == 501 || req->status == 405))
	{
		task->list_more = false;
		cleanup_next(task);
		return;
	}
	if (remora_s3_failed(req, rc, &err, "listing staging uploads"))
	{
		fail_with(task, &err);
		return;
	}
	if (!remora_s3xml_uploads(req->body, req->body_len, &u) ||
		(u.truncated && u.next_key_marker == NULL))
	{
		remora_s3xml_uploads_free(&u);
		fail(task, REMORA_ERR_S3, true, req->status,
			 "listing staging uploads: the store's answer was not understood");
		return;
	}
	task->del_keys = calloc(u.nuploads + 1, sizeof(char *));
	task->del_uploads = calloc(u.nuploads + 1, sizeof(char *));
	if (task->del_keys == NULL || task->del_uploads == NULL)
	{
		remora_s3xml_uploads_free(&u);
		fail(task, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return;
	}
	for (int i = 0; i < u.nuploads; i++)
	{
		/* the listing is by prefix; trust nothing outside it */
		if (strncmp(u.uploads[i].key, task->staging, plen) != 0)
			continue;
		task->del_keys[task->ndel] = u.uploads[i].key;
		task->del_uploads[task->ndel++] = u.uploads[i].upload_id;
		u.uploads[i].key = u.uploads[i].upload_id = NULL;
	}
	free(task->key_marker);
	free(task->upload_marker);
	task->key_marker = task->upload_marker = NULL;
	task->list_more = u.truncated;
	if (u.truncated)
	{
		task->key_marker = u.next_key_marker;
		task->upload_marker = u.next_upload_id_marker;
		u.next_key_marker = u.next_upload_id_marker = NULL;
	}
	remora_s3xml_uploads_free(&u);
	cleanup_next(task);
}

static void
cleanup_uploads_list(RemoraTask *task)
{
	RemoraKV q[4];
	int      nq = 0;
	S3Call   call;

	q[nq++] = (RemoraKV){"uploads", ""};
	q[nq++] = (RemoraKV){"prefix", task->staging};
	if (task->key_marker)
		q[nq++] = (RemoraKV){"key-marker", task->key_marker};
	if (task->upload_marker)
		q[nq++] = (RemoraKV){"upload-id-marker", task->upload_marker};
	call = (S3Call){"GET", task->bucket, NULL, q,     nq,   NULL,
					0,     NULL,         0,    false, false};
	start_s3(task, &call, cleanup_uploads_done, K_DELETE, 0);
}

/* ------------------------------------------------------------ lifecycle */

/* Take over the resume offered at claim (a copy of it). */
static void
adopt_resume(RemoraTask *task, const RemoraResume *r)
{
	int64_t offset = 0;

	if (r == NULL || r->nsegments == 0 || r->size < 0 ||
		(!strong_etag(r->etag ? r->etag : "") &&
		 (r->last_modified == NULL || r->last_modified[0] == '\0')))
	{
		if (r != NULL)
			restart_from_zero(task, "the checkpoint has no segments or no "
									"validators to check them by");
		return;
	}
	if (r->sha256_state == NULL ||
		!remora_sha256_restore(task->sha, r->sha256_state))
	{
		restart_from_zero(task,
						  "the checkpoint's hash state cannot be restored");
		return;
	}
	for (int i = 0; i < r->nsegments; i++)
	{
		Segment *seg = segment_at(task, i + 1);

		if (seg == NULL || r->segments[i].key == NULL)
		{
			restart_from_zero(task, "the checkpoint could not be loaded");
			return;
		}
		seg->key = remora_xstrdup(r->segments[i].key);
		if (seg->key == NULL)
		{
			restart_from_zero(task, "the checkpoint could not be loaded");
			return;
		}
		seg->size = r->segments[i].size;
		snprintf(seg->etag, sizeof(seg->etag), "%s", r->segments[i].etag);
		seg->done = true;
		seg->reused = true;
		offset += seg->size;
	}
	if (remora_sha256_bytes(task->sha) != offset)
	{
		restart_from_zero(
			task, "the checkpoint's hash state does not match its segments");
		return;
	}
	task->validated = task->nsegs;
	task->offset = offset;
	task->received = offset;
	task->total = r->size;
	snprintf(task->etag, sizeof(task->etag), "%s", r->etag ? r->etag : "");
	snprintf(task->last_modified, sizeof(task->last_modified), "%s",
			 r->last_modified ? r->last_modified : "");
}

RemoraTask *
remora_task_start(RemoraEngine *engine, const RemoraTaskSpec *spec,
				  char *errbuf, size_t errlen)
{
	RemoraTask *task = calloc(1, sizeof(RemoraTask));
	bool        ok;

	if (task == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	task->engine = engine;
	task->state = REMORA_TASK_RUNNING;
	task->url = remora_xstrdup(spec->source_url);
	task->orig_url = remora_xstrdup(spec->source_url);
	task->file_name = remora_xstrdup(spec->file_name);
	task->bucket = remora_xstrdup(spec->bucket);
	task->staging = remora_xstrdup(spec->staging_prefix);
	task->expected_sha256 = remora_xstrdup(spec->expected_sha256);
	task->attempt_id = remora_xstrdup(spec->attempt_id);
	task->member_key_spec = remora_xstrdup(spec->member_key);
	task->segment_prefix = remora_xstrdup(spec->segment_prefix);
	task->no_manifest = spec->no_manifest;
	task->trusted_source = spec->trusted_source;
	task->auth_header = remora_xstrdup(spec->auth_header);
	task->auth_host = remora_xstrdup(spec->auth_host);
	task->if_match = remora_xstrdup(spec->if_match);
	task->expected_size = spec->size_known ? spec->expected_size : -1;
	task->job_id = spec->job_id;
	task->fencing_token = spec->fencing_token;
	task->total = -1;
	task->sha = remora_sha256_new();
	ok = task->url && task->orig_url && task->file_name && task->bucket &&
		 task->staging && task->attempt_id && task->sha &&
		 (spec->expected_sha256 == NULL || task->expected_sha256);
	for (int i = 0; i <= REMORA_SEGMENTS_IN_FLIGHT; i++)
	{
		task->bufs[i].data = malloc(engine->part_size);
		task->bufs[i].md5 = EVP_MD_CTX_new();
		ok = ok && task->bufs[i].data && task->bufs[i].md5;
	}
	task->next_task = engine->tasks;
	engine->tasks = task;
	if (!ok)
	{
		snprintf(errbuf, errlen, "out of memory");
		remora_task_free(task);
		return NULL;
	}
	begin_buffer(task, &task->bufs[0]);
	if (spec->member_key == NULL &&
		strlen(task->staging) + strlen("data/") + strlen(task->file_name) >
			REMORA_MAX_S3_KEY_LEN)
	{
		/* never a truncated key: fail the task, as the source's fault */
		fail(task, REMORA_ERR_SOURCE, false, 0,
			 "the file name is too long: its key in the target store would "
			 "be longer than %d bytes",
			 REMORA_MAX_S3_KEY_LEN);
		return task;
	}

	adopt_resume(task, spec->resume);
	task->verify_next = 1;
	if (task->nsegs > 0)
		start_verify(task);
	else
		start_source(task);
	return task;
}

/* The handle of a set: a task that owns no request of its own. */
RemoraTask *
remora_task_shell(RemoraEngine *engine, RemoraSet *set)
{
	RemoraTask *task = calloc(1, sizeof(RemoraTask));

	if (task == NULL)
		return NULL;
	task->engine = engine;
	task->set = set;
	task->state = REMORA_TASK_RUNNING;
	task->next_task = engine->tasks;
	engine->tasks = task;
	return task;
}

RemoraTaskState
remora_task_state(const RemoraTask *task)
{
	if (task->set)
		return remora_set_state(task->set);
	return task->state;
}

void
remora_task_progress(const RemoraTask *task, int64_t *done, int64_t *total)
{
	if (task->set)
	{
		remora_set_progress(task->set, done, total);
		return;
	}
	*done = task->received;
	*total = task->total;
}

bool
remora_task_restarted(const RemoraTask *task, const char **why)
{
	*why = task->restart_reason;
	return task->restarted;
}

/*
 * New validated progress since the last call?  The pointers in *out stay
 * valid until the next call on this task.
 */
bool
remora_task_checkpoint(RemoraTask *task, RemoraTaskCheckpoint *out)
{
	RemoraSegment *segs;

	if (task->set)
		return remora_set_checkpoint(task->set, out);
	if (!task->cp_dirty)
		return false;
	task->cp_dirty = false;
	memset(out, 0, sizeof(*out));
	out->bytes_total = task->total;
	out->etag = task->etag;
	out->last_modified = task->last_modified;
	/* only a source that can be checked again can be resumed */
	if (task->validated == 0 || task->total < 0 ||
		(!strong_etag(task->etag) && task->last_modified[0] == '\0') ||
		task->segs[task->validated - 1].sha_after == NULL)
		return true;

	segs = realloc(task->cp_segments, task->validated * sizeof(RemoraSegment));
	if (segs == NULL)
		return false;
	task->cp_segments = segs;
	for (int i = 0; i < task->validated; i++)
	{
		segs[i].key = task->segs[i].key;
		segs[i].size = task->segs[i].size;
		memcpy(segs[i].etag, task->segs[i].etag, sizeof(segs[i].etag));
		out->bytes_done += task->segs[i].size;
	}
	out->segments = segs;
	out->nsegments = task->validated;
	out->sha256_state = task->segs[task->validated - 1].sha_after;
	return true;
}

const RemoraTaskResult *
remora_task_result(const RemoraTask *task)
{
	if (task->set)
		return remora_set_result(task->set);
	return task->state == REMORA_TASK_SUCCEEDED ? &task->result : NULL;
}

const RemoraTaskError *
remora_task_error(const RemoraTask *task)
{
	if (task->set)
		return remora_set_error(task->set);
	return task->state == REMORA_TASK_FAILED ? &task->error : NULL;
}

/*
 * Stop the task.  Its staging objects stay for the cleanup of attempts
 * that can no longer commit (they may also serve a replacement).
 */
void
remora_task_abort(RemoraTask *task, bool delete_staging)
{
	(void) delete_staging;
	if (task->set)
	{
		remora_set_abort(task->set);
		return;
	}
	cancel_requests(task);
	abort_upload(task);
	if (task->state == REMORA_TASK_RUNNING)
		task->state = REMORA_TASK_ABORTED;
}

void
remora_task_free(RemoraTask *task)
{
	RemoraTask **p;

	if (task == NULL)
		return;
	if (task->set)
		remora_set_free(task->set); /* frees its members' tasks first */
	cancel_requests(task);
	if (!task->cleanup)
		abort_upload(task);
	for (p = &task->engine->tasks; *p; p = &(*p)->next_task)
		if (*p == task)
		{
			*p = task->next_task;
			break;
		}
	if (task->part_etags)
		for (int i = 0; i < task->nsegs; i++)
			free(task->part_etags[i]);
	free(task->part_etags);
	drop_segments(task);
	free(task->segs);
	free(task->cp_segments);
	for (int i = 0; i <= REMORA_SEGMENTS_IN_FLIGHT; i++)
	{
		free(task->bufs[i].data);
		EVP_MD_CTX_free(task->bufs[i].md5);
	}
	remora_sha256_free(task->sha);
	free(task->url);
	free(task->orig_url);
	free(task->file_name);
	free(task->bucket);
	free(task->staging);
	free(task->expected_sha256);
	free(task->attempt_id);
	free(task->member_key_spec);
	free(task->segment_prefix);
	free(task->auth_header);
	free(task->auth_host);
	free(task->if_match);
	free(task->upload_id);
	free(task->manifest);
	free_del_keys(task);
	free(task->list_token);
	free(task->key_marker);
	free(task->upload_marker);
	free(task);
}

/*
 * Delete every object under prefix (which must be a staging prefix or a
 * part of one, ending in '/'), then abort every multipart upload under it.
 * Succeeds when nothing is left.
 */
RemoraTask *
remora_cleanup_start(RemoraEngine *engine, const char *bucket,
					 const char *prefix, char *errbuf, size_t errlen)
{
	RemoraTask *task = calloc(1, sizeof(RemoraTask));

	if (task == NULL || prefix[0] == '\0' || prefix[strlen(prefix) - 1] != '/')
	{
		snprintf(errbuf, errlen, "a cleanup needs a prefix ending in '/'");
		free(task);
		return NULL;
	}
	task->engine = engine;
	task->state = REMORA_TASK_RUNNING;
	task->cleanup = true;
	task->bucket = strdup(bucket);
	task->staging = strdup(prefix);
	task->next_task = engine->tasks;
	engine->tasks = task;
	if (task->bucket == NULL || task->staging == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		remora_task_free(task);
		return NULL;
	}
	cleanup_list(task);
	return task;
}

/*
 * An incomplete multipart upload would keep its parts, invisible to a
 * listing: ask the store to drop it (best effort: stores without
 * AbortMultipartUpload refuse).
 */
static void
abort_upload(RemoraTask *task)
{
	RemoraKV q[1];
	S3Call   call;
	char     err[256];
	Request *req;

	if (task->upload_id == NULL || task->upload_done)
		return;
	q[0] = (RemoraKV){"uploadId", task->upload_id};
	call = (S3Call){
		"DELETE", task->bucket, task->result.member_key, q, 1, NULL, 0, NULL, 0,
		false,    false};
	req = remora_s3_request(task->engine, NULL, &call, NULL, err, sizeof(err));
	if (req && !remora_req_start(req))
		remora_req_cancel(req);
	task->upload_done = true;
}

/* After curl's callbacks: start the uploads they made ready. */
void
remora_task_pump_all(RemoraEngine *engine)
{
	for (RemoraTask *t = engine->tasks; t; t = t->next_task)
		if (t->set)
			remora_set_pump(t->set);
		else if (t->state == REMORA_TASK_RUNNING && !t->cleanup)
			pump(t);
}

/* The engine is going away: its tasks' requests go with it. */
void
remora_task_unlink_all(RemoraEngine *engine)
{
	for (RemoraTask *t = engine->tasks; t; t = t->next_task)
		cancel_requests(t);
}

void
remora_resume_free(RemoraResume *resume)
{
	if (resume == NULL)
		return;
	for (int i = 0; i < resume->nsegments; i++)
		free(resume->segments[i].key);
	free(resume->segments);
	free(resume->etag);
	free(resume->last_modified);
	free(resume->sha256_state);
	free(resume);
}
