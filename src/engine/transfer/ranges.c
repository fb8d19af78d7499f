/*-------------------------------------------------------------------------
 *
 * ranges.c
 *	  Source requests of a member transfer, and a large object fetched as
 *	  ranged GETs in parallel.
 *
 * With connections > 1 the first GET asks for the first sub-range of the
 * first missing part only (Range: bytes=<offset>-<offset + sub-range - 1>;
 * subranges.h says how long).  Its answer says what the source does:
 *
 *	  200		no ranges: the whole object in this one GET, as with one
 *				connection
 *	  206, the	the object's size (Content-Range) and validators; the rest
 *	  sub-range	comes as one ranged GET per sub-range, up to `connections`
 *				at once, each checked against them (If-Match, or
 *				If-Unmodified-Since without a strong ETag, and the answer's
 *				Content-Range, ETag or Last-Modified compared here)
 *	  206, all	the object fits in that sub-range: as with one connection
 *
 * Sub-ranges are asked for in order, part by part; those of one part fill
 * its buffer at their offsets, the first GET's the first part's.  The
 * SHA-256 is over the object in order: a sub-range whose GET ends before
 * those in front of it waits in its part's buffer, unhashed, and is hashed
 * once they are; a part all hashed is sealed and PUT (the last one ends
 * the source: one PUT when it is the whole object).  So checkpoints (the
 * run of acknowledged parts from the first) are exactly those of one GET,
 * and a replacement resumes the same way: sub-ranges of a part not yet
 * uploaded are read again.  The part to hash next always has a buffer: at
 * most connections + REMORA_PARTS_IN_FLIGHT buffers of the part size, one
 * per part in flight.  A range that does not match (another size, range
 * or validator; 412; 200) means the source changed under us: the attempt
 * fails, retryably, and the next one's resume check restarts from zero
 * and says why.  No mixed bytes are ever hashed into one member.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/source_uri.h"
#include "engine/transfer/transfer.h"

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
					remora_engine_refused(task->base.engine, req));
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

/* The most ranged GETs the task may run at once. */
static int
max_connections(const Transfer *task)
{
	return task->adaptive ? task->adapt.max : task->connections;
}

/*
 * The last byte the first GET asks for: the end of the first sub-range
 * when the rest may be fetched in parallel; -1: to the end.  An object
 * known to fit in one part is one GET, as with one connection; one of
 * unknown size is probed with the shortest sub-range, so that the GET
 * that learns its size holds up no more than that.
 */
int64_t
remora_xfer_probe_end(const Transfer *task)
{
	int64_t part = (int64_t) task->part_size;
	int64_t size = task->total >= 0 ? task->total : task->expected_size;
	int64_t probe;

	if (task->connections <= 1 || task->no_ranges)
		return -1;
	if (size >= 0 && size - task->offset <= part)
		return -1;
	if (size >= 0)
		probe = remora_subrange_size(size - task->offset, max_connections(task),
									 part);
	else
		probe = part < REMORA_SUBRANGE_MIN ? part : REMORA_SUBRANGE_MIN;
	return task->offset + probe - 1;
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
	if (!remora_subs_init(&task->subs,
						  max_connections(task) *
							  REMORA_SUBRANGES_PER_CONNECTION,
						  remora_subrange_size(total - task->offset,
											   max_connections(task), part)))
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
		return false;
	}
	task->ranged = true;
	remora_xfer_adapt_begin(task);
	task->range_base = task->offset;
	task->range_seg = task->nparts;
	task->range_last = task->nparts + (int) nseg;
	/* this GET's buffer is the first part's: sub-ranges bring its rest */
	task->range_next = task->nparts + 1;
	task->range_buf = task->fill;
	task->fill->ranging = true;
	task->fill->partno = task->range_next;
	task->fill->want =
		(total - task->offset < part ? total - task->offset : part);
	task->fill->asked = task->probe_end - task->offset + 1;
	task->fill->hashed = 0;
	if (task->fill->asked == task->fill->want)
	{
		task->range_next++;
		task->range_buf = NULL;
	}
	return true;
}

/* The first byte of part partno (of this attempt's GETs). */
static int64_t
part_first(const Transfer *task, int partno)
{
	int64_t part = (int64_t) task->part_size;

	return task->range_base + (int64_t) (partno - task->range_seg - 1) * part;
}

/* The buffer of the part to hash next, if its sub-ranges have begun. */
static Buffer *
next_part_buffer(Transfer *task)
{
	for (int i = 0; i < task->nbufs; i++)
		if (task->bufs[i].ranging && task->bufs[i].partno == task->nparts + 1)
			return &task->bufs[i];
	return NULL;
}

/*
 * Hash the sub-ranges that are next in order; seal and upload each part
 * they complete.  The last part is the source's end.
 */
static void
advance(Transfer *task)
{
	while (task->status.state == REMORA_TASK_RUNNING && task->fill == NULL &&
		   task->nparts < task->range_last)
	{
		Buffer   *b = next_part_buffer(task);
		SubRange *s;

		if (b == NULL)
			return;
		while ((s = remora_subs_in_order(&task->subs, b->partno, b->hashed)))
		{
			remora_sha256_update(task->sha, b->data + s->off, s->want);
			if (b->hashing)
				EVP_DigestUpdate(b->sha, b->data + s->off, s->want);
			b->hashed += s->want;
			task->received += s->want;
			task->range_pending -= s->want;
			remora_subs_release(s);
		}
		if (b->hashed < b->want)
			return; /* a GET before the next sub-range is still running */
		b->ranging = false;
		b->len = (size_t) b->want;
		if (b->partno == task->range_last)
		{
			/* one PUT if it is the whole object, else the last part */
			task->fill = b;
			remora_xfer_source_ended(task);
			return;
		}
		if (!remora_xfer_seal_part(task, b))
			return;
		remora_xfer_upload_part(task, b);
	}
}

/*
 * The first GET of a ranged object ended: its bytes, the first sub-range,
 * were hashed as they came.
 */
void
remora_xfer_probe_done(Transfer *task)
{
	Buffer *b = task->fill;

	if ((int64_t) b->len != task->probe_end - task->range_base + 1)
	{
		remora_fail(&task->status, REMORA_ERR_NETWORK, true, 0,
					"the source's answer to a range ended early");
		return;
	}
	b->hashed = (int64_t) b->len;
	task->fill = NULL;
	advance(task);
}

/* Status, range and validators of a range's answer; false: failed. */
static bool
range_answer_ok(Transfer *task, Request *req, SubRange *s)
{
	long    status = 0;
	int64_t first, last, start, end, total;

	s->checked = true;
	curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status >= 300)
	{
		s->discard = true; /* range_done says what the error is */
		return true;
	}
	first = part_first(task, s->partno) + s->off;
	last = first + s->want - 1;
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
	SubRange *s = req->data;
	Buffer   *b = s->buf;

	if (task->status.state != REMORA_TASK_RUNNING)
		return 0;
	if (!s->checked && !range_answer_ok(task, req, s))
		return 0;
	if (s->discard)
		return len;
	if (s->len + (int64_t) len > s->want)
	{
		remora_fail(&task->status, REMORA_ERR_SOURCE, true, 206,
					CHANGED " (a range sent more bytes than it announced)");
		return 0;
	}
	memcpy(b->data + s->off + s->len, ptr, len);
	s->len += (int64_t) len;
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

/* Keep s to be asked for again once the task has backed off. */
static bool
range_again(Transfer *task, Request *req, CURLcode rc, SubRange *s)
{
	char what[128];

	if (remora_req_policy_refused(req, rc) || !range_throttled(req, rc))
		return false;
	if (rc == CURLE_OK)
		snprintf(what, sizeof(what),
				 "the source answered a range with HTTP %ld", req->status);
	else
		snprintf(what, sizeof(what), "the source reset a range's connection");
	if (!remora_xfer_throttled(task, what, req->hdr.retry_after))
		return false;
	task->range_pending -= s->len; /* its bytes come again */
	s->len = 0;
	s->state = SUB_AGAIN;
	return true;
}

static void
range_done(Request *req, CURLcode rc)
{
	Transfer *task = req->owner;
	SubRange *s = req->data;

	task->ranges--;
	if (task->status.state != REMORA_TASK_RUNNING)
	{
		remora_xfer_settle(task);
		return;
	}
	if (range_again(task, req, rc, s))
	{
		remora_xfer_settle(task); /* ranges_pump asks for it again */
		return;
	}
	if (remora_req_policy_refused(req, rc))
		remora_fail(&task->status, REMORA_ERR_POLICY, false, 0,
					"the outbound-source policy refused the connection: %s",
					remora_engine_refused(task->base.engine, req));
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
	else if (s->checked || range_answer_ok(task, req, s))
	{
		if (s->len != s->want)
			remora_fail(&task->status, REMORA_ERR_NETWORK, true, 0,
						"the source's answer to a range ended early");
		else
		{
			s->state = SUB_DONE;
			advance(task);
		}
	}
	remora_xfer_settle(task);
}

/*
 * A buffer no GET, upload or waiting part holds (allocated on use), while
 * fewer than the connection count and REMORA_PARTS_IN_FLIGHT are held: a
 * pinned count's own buffers.  An adaptive task has buffers for the most
 * connections it may reach; were they all free to GETs, a store slower
 * than the source would be sent as many part uploads at once, where a
 * pinned count waits for its uploads (a single s3rver was slower so).
 */
static Buffer *
range_buffer(Transfer *task)
{
	Buffer *b = NULL;
	int     held = 0;

	for (int i = 0; i < task->nbufs; i++)
	{
		Buffer *x = &task->bufs[i];

		if (x->busy || x->sealed || x->ranging || x == task->fill)
			held++;
		else if (b == NULL)
			b = x;
	}
	if (b == NULL || held >= task->connections + REMORA_PARTS_IN_FLIGHT)
		return NULL;
	if (b->data == NULL && (b->data = malloc(task->part_size)) == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
		return NULL;
	}
	return b;
}

/*
 * The next sub-range to ask for, in order: the rest of the part being
 * asked for, or the start of the next one in a buffer of its own.  NULL
 * when all are asked for, or no buffer or slot is free.
 */
static SubRange *
next_subrange(Transfer *task)
{
	Buffer   *b = task->range_buf;
	SubRange *s;
	int64_t   want;

	if (task->range_next > task->range_last ||
		remora_subs_count(&task->subs, SUB_FREE) == 0)
		return NULL;
	if (b == NULL)
	{
		int64_t first = part_first(task, task->range_next);
		int64_t part = (int64_t) task->part_size;

		if ((b = range_buffer(task)) == NULL)
			return NULL;
		b->ranging = true;
		b->partno = task->range_next;
		b->want = task->total - first < part ? task->total - first : part;
		b->asked = 0;
		b->hashed = 0;
		b->len = 0;
		EVP_DigestInit_ex(b->sha, EVP_sha256(), NULL);
		b->hashing = true;
		task->range_buf = b;
	}
	want = b->want - b->asked < task->subs.size ? b->want - b->asked
												: task->subs.size;
	s = remora_subs_add(&task->subs, b->partno, b->asked, want, b);
	b->asked += want;
	if (b->asked == b->want)
	{
		task->range_next++;
		task->range_buf = NULL;
	}
	return s;
}

/* Ask the source for sub-range s. */
static bool
start_range(Transfer *task, SubRange *s)
{
	int64_t  first = part_first(task, s->partno) + s->off;
	char     line[400];
	Request *req = remora_xfer_source_request(task, range_done);

	if (req == NULL)
		return false;
	snprintf(line, sizeof(line), "Range: bytes=%" PRId64 "-%" PRId64, first,
			 first + s->want - 1);
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
	req->index = s->partno;
	req->data = s;
	s->state = SUB_RUNNING;
	s->len = 0;
	s->checked = false;
	s->discard = false;
	if (!remora_req_start(req))
	{
		remora_req_cancel(req);
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"could not start a range of the download");
		return false;
	}
	task->ranges++;
	return true;
}

/*
 * Start ranges while fewer than `connections` GETs (the first one
 * included) run: those throttled first, once the task has backed off,
 * then the next sub-ranges while a buffer and a slot are free.  Called
 * after every run, never inside a curl callback.
 */
void
remora_xfer_ranges_pump(Transfer *task)
{
	remora_xfer_adapt_tick(task);
	while (task->ranged && task->status.state == REMORA_TASK_RUNNING &&
		   remora_xfer_calm(task) &&
		   task->ranges + (task->src ? 1 : 0) < task->connections)
	{
		SubRange *s = remora_subs_repeat(&task->subs);

		if (s == NULL && (s = next_subrange(task)) == NULL)
			break;
		if (!start_range(task, s))
			break;
	}
	remora_xfer_settle(task);
}
