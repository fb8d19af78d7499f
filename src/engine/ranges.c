/*-------------------------------------------------------------------------
 *
 * ranges.c
 *	  Source requests of a member transfer, and a large object fetched as
 *	  ranged GETs in parallel.
 *
 * With connections > 1 the first GET asks for the first missing part
 * only (Range: bytes=<offset>-<offset + part size - 1>).  Its answer says
 * what the source does:
 *
 *	  200		no ranges: the whole object in this one GET, as with one
 *				connection
 *	  206, the	the object's size (Content-Range) and validators; the rest
 *	  part	comes as one ranged GET per part, up to `connections` at
 *				once, each checked against them (If-Match, or
 *				If-Unmodified-Since without a strong ETag, and the answer's
 *				Content-Range, ETag or Last-Modified compared here)
 *	  206, all	the object fits in that part: as with one connection
 *
 * The SHA-256 is over the object in order: a part whose GET ends before
 * those in front of it waits in its buffer, unhashed, and is hashed, sealed
 * and PUT once they are.  So checkpoints (the run of acknowledged parts
 * from the first) are exactly those of one GET, and a replacement resumes
 * the same way.  Ranges are asked for in order, so the part to hash
 * next always has a buffer: at most connections + REMORA_PARTS_IN_FLIGHT
 * buffers of the part size.  A range that does not match (another size,
 * range or validator; 412; 200) means the source changed under us: the
 * attempt fails, retryably, and the next one's resume check restarts from
 * zero and says why.  No mixed bytes are ever hashed into one member.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/source_uri.h"
#include "engine/transfer.h"

#define CHANGED "the source changed during the download"

/* A GET of the current source URL: trust, policy, credentials. */
Request *
remora_xfer_source_request(Transfer *task, RequestDone done)
{
	Request *req = remora_req_new(&task->base.engine->loop, task, done);

	if (req == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
		return NULL;
	}
	if (task->trusted_source)
	{
		/* an administrator's endpoint: direct, with its own CAs if any */
		curl_easy_setopt(req->easy, CURLOPT_PROXY, "");
		remora_req_set_ca_pem(req, task->ca_pem);
		req->trust = "remora.ca_file, or the endpoint's CA "
					 "(remora.set_source_endpoint_ca)";
	}
	else if (!remora_req_set_source_options(req, task->url))
	{
		/* a proxied source whose host resolves to a denied address */
		remora_fail(&task->status, REMORA_ERR_POLICY, false, 0,
					"the outbound-source policy refused the connection: %s",
					req->policy_why);
		remora_req_cancel(req);
		return NULL;
	}
	curl_easy_setopt(req->easy, CURLOPT_URL, task->url);
	curl_easy_setopt(req->easy, CURLOPT_BUFFERSIZE, XFER_RECV_BUFFER);
	req->rate = remora_task_rate(&task->base);
	/* the bytes as stored: ranges count those, not a compressed form */
	curl_easy_setopt(req->easy, CURLOPT_ACCEPT_ENCODING, NULL);
	/*
	 * Ranges on connections of their own: over HTTP/2 they would share one
	 * (one TCP window, one per-connection rate limit).
	 */
	if (task->connections > 1)
		curl_easy_setopt(req->easy, CURLOPT_HTTP_VERSION,
						 (long) CURL_HTTP_VERSION_1_1);
	if (task->auth_header && remora_url_origin_is(task->url, task->auth_host))
		req->headers = curl_slist_append(req->headers, task->auth_header);
	return req;
}

void
remora_xfer_source_http_failed(Transfer *task, Request *req)
{
	char msg[400];
	bool retryable =
		req->status >= 500 || req->status == 429 || req->status == 408;

	if (req->status == 407)
		snprintf(msg, sizeof(msg),
				 "the egress proxy refused the request (HTTP 407): check the "
				 "credentials in remora.http_proxy and remora.https_proxy");
	else if (req->proxied)
		snprintf(msg, sizeof(msg),
				 "the source answered HTTP %ld through the egress proxy (the "
				 "proxy itself may have answered)",
				 req->status);
	else
		snprintf(msg, sizeof(msg), "the source answered HTTP %ld", req->status);
	memset(&task->status.error, 0, sizeof(task->status.error));
	remora_fail(&task->status, REMORA_ERR_HTTP, retryable, req->status, "%s",
				msg);
	task->status.error.retry_after = req->hdr.retry_after;
}

/*
 * The last byte the first GET asks for: the end of the first missing
 * part when the rest may be fetched in parallel; -1: to the end.  An
 * object known to fit in one part is one GET, as with one connection.
 */
int64_t
remora_xfer_probe_end(const Transfer *task)
{
	int64_t part = (int64_t) task->part_size;

	if (task->connections <= 1 || task->no_ranges)
		return -1;
	if (task->expected_size >= 0 && task->expected_size - task->offset <= part)
		return -1;
	if (task->total >= 0 && task->total - task->offset <= part)
		return -1;
	return task->offset + part - 1;
}

/*
 * Is a 206 to the first GET the range asked for (and, on a resume, of the
 * object the checkpoint was taken from)?  Not relying on the server to
 * honour If-Range: the validators, the total size and the range itself
 * must all match.
 */
bool
remora_xfer_range_fits(Transfer *task, Request *req)
{
	int64_t start, end, total, want_end;

	if (!remora_http_content_range(req->hdr.content_range, &start, &end,
								   &total))
		return false;
	want_end = total - 1;
	if (task->probe_end >= 0 && task->probe_end < want_end)
		want_end = task->probe_end;
	if (start != (task->offset > 0 ? task->offset - 1 : 0) || end != want_end)
		return false;
	if (task->offset == 0)
		return true;
	if (total != task->total)
		return false;
	if (remora_etag_is_strong(task->etag))
		return strcmp(req->hdr.etag, task->etag) == 0;
	return task->last_modified[0] != '\0' &&
		   strcmp(req->hdr.last_modified, task->last_modified) == 0;
}

/*
 * The first GET's 206 fits (its validators are the task's now): fetch the
 * rest in ranges, or not.  Returns false when this answer's body is not
 * wanted (the task failed, or asks again without a range).
 */
bool
remora_xfer_ranges_begin(Transfer *task, Request *req)
{
	int64_t start, end, total;
	int64_t part = (int64_t) task->part_size;
	int64_t nseg;

	if (!remora_http_content_range(req->hdr.content_range, &start, &end,
								   &total))
		return false; /* remora_xfer_range_fits said it parses */
	task->total = total;
	if (task->probe_end < 0 || end == total - 1)
	{
		/* the rest is in this answer: one GET */
		task->probe_end = -1;
		return true;
	}
	if (!remora_etag_is_strong(task->etag) && task->last_modified[0] == '\0')
	{
		/* nothing to check each range against: all of it in one GET */
		task->no_ranges = true;
		task->rerequest = true;
		return false;
	}
	if (task->offset == 0 && task->nparts == 0 &&
		remora_part_size_fit(total, (int64_t) task->base.engine->part_size,
							 task->base.engine->max_parts) != part)
	{
		/* parts the store's limit holds: ask again for a part of that size */
		if (remora_xfer_fit_parts(task, total))
			task->rerequest = true;
		return false;
	}
	nseg = (total - task->offset + part - 1) / part;
	if (task->nparts + nseg > task->base.engine->max_parts)
	{
		remora_fail(&task->status, REMORA_ERR_SIZE, false, 0,
					"the object needs more than %d parts, the store's limit "
					"(remora.max_upload_parts)",
					task->base.engine->max_parts);
		return false;
	}
	task->ranged = true;
	remora_xfer_adapt_begin(task);
	task->range_base = task->offset;
	task->range_seg = task->nparts;
	task->range_next = task->nparts + 2; /* this GET brings the one before */
	task->range_last = task->nparts + (int) nseg;
	return true;
}

/* The bytes of part segno (of this attempt's GETs). */
static void
range_of(const Transfer *task, int segno, int64_t *first, int64_t *last)
{
	int64_t part = (int64_t) task->part_size;

	*first = task->range_base + (int64_t) (segno - task->range_seg - 1) * part;
	*last = *first + part < task->total ? *first + part - 1 : task->total - 1;
}

/*
 * Hash, seal and upload the parts that are next in order.  When the
 * last one is, the source has ended.
 */
static void
advance(Transfer *task)
{
	while (task->status.state == REMORA_TASK_RUNNING && task->fill == NULL &&
		   task->nparts < task->range_last)
	{
		Buffer *b = NULL;

		for (int i = 0; i < task->nbufs && b == NULL; i++)
			if (task->bufs[i].complete &&
				task->bufs[i].partno == task->nparts + 1)
				b = &task->bufs[i];
		if (b == NULL)
			return; /* its GET is still running */
		remora_sha256_update(task->sha, b->data, b->len);
		task->received += (int64_t) b->len;
		task->range_pending -= (int64_t) b->len;
		b->complete = false;
		if (!remora_xfer_seal_part(task, b))
			return;
		remora_xfer_upload_part(task, b);
	}
	if (task->status.state == REMORA_TASK_RUNNING && task->fill == NULL &&
		task->nparts == task->range_last && !task->src_ended)
		remora_xfer_source_ended(task);
}

/* The first GET of a ranged object ended: its part is the next one. */
void
remora_xfer_probe_done(Transfer *task)
{
	int64_t first, last;

	range_of(task, task->range_seg + 1, &first, &last);
	if (task->fill->len != (size_t) (last - first + 1))
	{
		remora_fail(&task->status, REMORA_ERR_NETWORK, true, 0,
					"the source's answer to a range ended early");
		return;
	}
	if (!remora_xfer_seal_part(task, task->fill))
		return;
	remora_xfer_upload_part(task, task->fill);
	task->fill = NULL;
	advance(task);
}

/* Status, range and validators of a range's answer; false: failed. */
static bool
range_answer_ok(Transfer *task, Request *req, Buffer *b)
{
	long    status = 0;
	int64_t first, last, start, end, total;

	b->checked = true;
	curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status >= 300)
	{
		b->discard = true; /* range_done says what the error is */
		return true;
	}
	range_of(task, b->partno, &first, &last);
	if (status != 206)
		remora_fail(&task->status, REMORA_ERR_SOURCE, true, status,
					CHANGED " (it answered a range with the whole object)");
	else if (!remora_http_content_range(req->hdr.content_range, &start, &end,
										&total) ||
			 start != first || end != last || total != task->total)
		remora_fail(&task->status, REMORA_ERR_SOURCE, true, status,
					CHANGED " (a range came back with another range or size)");
	else if (remora_etag_is_strong(task->etag)
				 ? strcmp(req->hdr.etag, task->etag) != 0
				 : strcmp(req->hdr.last_modified, task->last_modified) != 0)
		remora_fail(&task->status, REMORA_ERR_SOURCE, true, status,
					CHANGED " (its ETag or Last-Modified differ)");
	else
		return true;
	return false;
}

static size_t
range_data(Request *req, char *ptr, size_t len)
{
	Transfer *task = req->owner;
	Buffer   *b = req->data;

	if (task->status.state != REMORA_TASK_RUNNING)
		return 0;
	if (!b->checked && !range_answer_ok(task, req, b))
		return 0;
	if (b->discard)
		return len;
	if ((int64_t) (b->len + len) > b->want)
	{
		remora_fail(&task->status, REMORA_ERR_SOURCE, true, 206,
					CHANGED " (a range sent more bytes than it announced)");
		return 0;
	}
	memcpy(b->data + b->len, ptr, len);
	EVP_DigestUpdate(b->sha, ptr, len);
	b->len += len;
	task->range_pending += (int64_t) len;
	task->src_bytes += (int64_t) len;
	return len;
}

/*
 * A 503 or 429, or a connection the source reset: a sign of too many
 * connections, not of a broken source.
 */
static bool
range_throttled(const Request *req, CURLcode rc)
{
	if (rc == CURLE_OK)
		return req->status == 503 || req->status == 429;
	return rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
		   rc == CURLE_GOT_NOTHING || rc == CURLE_PARTIAL_FILE;
}

/* Keep b's part to be asked for again once the task has backed off. */
static bool
range_again(Transfer *task, Request *req, CURLcode rc, Buffer *b)
{
	char what[128];

	if (req->policy_denied || !range_throttled(req, rc))
		return false;
	if (rc == CURLE_OK)
		snprintf(what, sizeof(what),
				 "the source answered a range with HTTP %ld", req->status);
	else
		snprintf(what, sizeof(what), "the source reset a range's connection");
	if (!remora_xfer_throttled(task, what, req->hdr.retry_after))
		return false;
	task->range_pending -= (int64_t) b->len; /* its bytes come again */
	b->len = 0;
	b->again = true;
	return true;
}

static void
range_done(Request *req, CURLcode rc)
{
	Transfer *task = req->owner;
	Buffer   *b = req->data;

	task->ranges--;
	b->ranging = false;
	if (task->status.state != REMORA_TASK_RUNNING)
	{
		remora_xfer_settle(task);
		return;
	}
	if (range_again(task, req, rc, b))
	{
		remora_xfer_settle(task); /* ranges_pump asks for it again */
		return;
	}
	if (req->policy_denied && rc != CURLE_OK)
		remora_fail(&task->status, REMORA_ERR_POLICY, false, 0,
					"the outbound-source policy refused the connection: %s",
					req->policy_why);
	else if (rc != CURLE_OK)
	{
		RemoraTaskError err;

		remora_req_transport_error(req, rc, &err, "reading the source", NULL);
		remora_fail_with(&task->status, &err);
	}
	else if (req->status == 412)
		remora_fail(&task->status, REMORA_ERR_SOURCE, true, req->status,
					CHANGED " (a range's precondition failed)");
	else if (req->status >= 300 && req->status < 400)
		remora_fail(&task->status, REMORA_ERR_SOURCE, true, req->status,
					"the source redirected a range request");
	else if (req->status < 200 || req->status >= 300)
		remora_xfer_source_http_failed(task, req);
	else if (b->checked || range_answer_ok(task, req, b))
	{
		if ((int64_t) b->len != b->want)
			remora_fail(&task->status, REMORA_ERR_NETWORK, true, 0,
						"the source's answer to a range ended early");
		else
		{
			b->complete = true;
			advance(task);
		}
	}
	remora_xfer_settle(task);
}

/* A buffer no GET, upload or waiting part holds (allocated on use). */
static Buffer *
range_buffer(Transfer *task)
{
	for (int i = 0; i < task->nbufs; i++)
	{
		Buffer *b = &task->bufs[i];

		if (b->busy || b->sealed || b->ranging || b->complete || b->again ||
			b == task->fill)
			continue;
		if (b->data == NULL && (b->data = malloc(task->part_size)) == NULL)
		{
			remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
						"out of memory");
			return NULL;
		}
		return b;
	}
	return NULL;
}

static bool
start_range(Transfer *task, Buffer *b, int segno)
{
	int64_t  first, last;
	char     line[400];
	Request *req = remora_xfer_source_request(task, range_done);

	if (req == NULL)
		return false;
	range_of(task, segno, &first, &last);
	snprintf(line, sizeof(line), "Range: bytes=%" PRId64 "-%" PRId64, first,
			 last);
	req->headers = curl_slist_append(req->headers, line);
	/* the server refuses a changed object; the answer is checked too */
	if (remora_etag_is_strong(task->etag))
		snprintf(line, sizeof(line), "If-Match: %s", task->etag);
	else
		snprintf(line, sizeof(line), "If-Unmodified-Since: %s",
				 task->last_modified);
	req->headers = curl_slist_append(req->headers, line);
	req->kind = K_RANGE;
	req->on_data = range_data;
	req->index = segno;
	req->data = b;
	b->len = 0;
	EVP_DigestInit_ex(b->sha, EVP_sha256(), NULL);
	b->hashing = true;
	b->partno = segno;
	b->want = last - first + 1;
	b->checked = false;
	b->discard = false;
	if (!remora_req_start(req))
	{
		remora_req_cancel(req);
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"could not start a range of the download");
		return false;
	}
	b->ranging = true;
	if (segno == task->range_next)
		task->range_next++;
	task->ranges++;
	return true;
}

/* A throttled range waiting to be asked for again, the earliest first. */
static Buffer *
range_to_repeat(Transfer *task)
{
	Buffer *first = NULL;

	for (int i = 0; i < task->nbufs; i++)
		if (task->bufs[i].again &&
			(first == NULL || task->bufs[i].partno < first->partno))
			first = &task->bufs[i];
	return first;
}

/*
 * Start ranges while fewer than `connections` GETs (the first one
 * included) run: those throttled first, once the task has backed off,
 * then the next ones while a buffer is free.  Called after every run,
 * never inside a curl callback.
 */
void
remora_xfer_ranges_pump(Transfer *task)
{
	remora_xfer_adapt_tick(task);
	while (task->ranged && task->status.state == REMORA_TASK_RUNNING &&
		   remora_xfer_calm(task) &&
		   task->ranges + (task->src ? 1 : 0) < task->connections)
	{
		Buffer *b = range_to_repeat(task);
		int     segno = b ? b->partno : task->range_next;

		if (b != NULL)
			b->again = false;
		else if (task->range_next > task->range_last ||
				 (b = range_buffer(task)) == NULL)
			break;
		if (!start_range(task, b, segno))
			break;
	}
	remora_xfer_settle(task);
}
