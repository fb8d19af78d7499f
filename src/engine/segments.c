/*-------------------------------------------------------------------------
 *
 * segments.c
 *	  A member transfer's segments: the buffers the source fills, their PUTs
 *	  as segment objects, an earlier attempt's segments adopted for a
 *	  resume (object.c verifies them), and the checkpoints of validated
 *	  progress.
 *
 * Validated progress is the longest run of segments, from the first, that
 * the store has acknowledged; with it go the source validators and the
 * SHA-256 state after those segments.  That is what checkpoints record and
 * what a replacement may reuse, after checking the segments still exist
 * with the same ETag and size, and the source still has the same
 * validators (the server answers If-Range with 206, not 200).  Memory is
 * bounded by REMORA_SEGMENTS_IN_FLIGHT + 1 buffers of the part size, or,
 * with ranged GETs in parallel, REMORA_SEGMENTS_IN_FLIGHT more than the
 * ranges in flight (ranges.c).
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

#include "engine/transfer.h"

static Segment *
segment_at(Transfer *task, int segno)
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

void
remora_xfer_drop_segments(Transfer *task)
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
void
remora_xfer_restart(Transfer *task, const char *why)
{
	task->restarted = true;
	snprintf(task->restart_reason, sizeof(task->restart_reason), "%s", why);
	remora_xfer_drop_segments(task);
	remora_sha256_reset(task->sha);
	task->offset = 0;
	task->received = 0;
	task->skip = 0;
	task->cp_dirty = true;
}

/* A buffer for the one GET to fill next (of the first few only). */
Buffer *
remora_xfer_free_buffer(Transfer *task)
{
	for (int i = 0; i <= REMORA_SEGMENTS_IN_FLIGHT; i++)
		if (!task->bufs[i].busy && !task->bufs[i].sealed &&
			!task->bufs[i].ranging && !task->bufs[i].complete &&
			&task->bufs[i] != task->fill)
			return &task->bufs[i];
	return NULL;
}

static void
segment_done(Request *req, CURLcode rc)
{
	Transfer       *task = req->owner;
	Buffer         *buf = req->data;
	Segment        *seg = &task->segs[req->index - 1];
	RemoraTaskError err;

	task->uploads--;
	buf->busy = false;
	buf->len = 0;
	if (!remora_s3_put_etag(req, rc, seg->etag, sizeof(seg->etag), &err,
							"uploading a segment"))
	{
		remora_fail_with(&task->status, &err);
		remora_xfer_settle(task);
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
		task->status.state == REMORA_TASK_RUNNING)
		remora_xfer_start_assembly(task);
	remora_xfer_settle(task);
}

/*
 * A full (or the last) buffer becomes the next segment: record it, with
 * the hash state after it.  Its upload starts in remora_xfer_pump(), because
 * this may run inside a curl callback, where no transfer may be started.
 */
bool
remora_xfer_seal_segment(Transfer *task, Buffer *buf)
{
	int      segno = task->nsegs + 1;
	Segment *seg;
	char     sha_state[128];
	size_t   klen =
		strlen(task->segment_prefix ? task->segment_prefix : task->staging) +
		32;

	if (segno > REMORA_MAX_SEGMENTS || (seg = segment_at(task, segno)) == NULL)
	{
		remora_fail(
			&task->status, REMORA_ERR_SIZE, false, 0,
			"the object needs more than %d segments; raise remora.part_size",
			REMORA_MAX_SEGMENTS);
		return false;
	}
	seg->key = malloc(klen);
	if (seg->key == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
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
void
remora_xfer_upload_segment(Transfer *task, Buffer *buf)
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
	req = remora_target_request(task->base.engine, task, &call, segment_done,
								err, sizeof(err));
	if (req == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0, "%s", err);
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
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"could not start an upload");
	}
}

/* Start what the last callbacks could not: uploads of sealed buffers. */
void
remora_xfer_pump(Transfer *task)
{
	for (int i = 0; i < task->nbufs; i++)
		if (task->bufs[i].sealed && task->status.state == REMORA_TASK_RUNNING)
			remora_xfer_upload_segment(task, &task->bufs[i]);
	remora_xfer_settle(task);
}

/* Take bytes into the filling buffer, hashing them on the way. */
void
remora_xfer_take(Transfer *task, const char *p, size_t n)
{
	Buffer *b = task->fill;

	memcpy(b->data + b->len, p, n);
	b->len += n;
	remora_sha256_update(task->sha, p, n);
	EVP_DigestUpdate(b->md5, p, n);
	task->received += (int64_t) n;
}

void
remora_xfer_begin_buffer(Transfer *task, Buffer *b)
{
	b->len = 0;
	EVP_DigestInit_ex(b->md5, EVP_md5(), NULL);
	task->fill = b;
}

/*
 * Every byte of the source is here and hashed: check the size and the
 * SHA-256, then write the member (one PUT, or the segments assembled once
 * their uploads are done).
 */
void
remora_xfer_source_ended(Transfer *task)
{
	if (task->total >= 0 && task->received != task->total)
	{
		remora_fail(&task->status, REMORA_ERR_SIZE, false, 0,
					"the source ended before the size it announced");
		return;
	}
	task->total = task->received;
	task->src_ended = true;
	if (task->expected_size >= 0 && task->total != task->expected_size)
	{
		/* the listing said otherwise: list again in a new attempt */
		remora_fail(&task->status, REMORA_ERR_SIZE, true, 0,
					"the source's size changed since it was listed");
		return;
	}

	remora_sha256_final_hex(task->sha, task->sha_hex);
	if (task->expected_sha256 &&
		strcmp(task->expected_sha256, task->sha_hex) != 0)
	{
		remora_fail(&task->status, REMORA_ERR_CHECKSUM, false, 0,
					"the SHA-256 of the source is %s, not the expected one",
					task->sha_hex);
		return;
	}

	if (task->nsegs == 0)
	{
		/* it fits in one buffer: the member is one PUT */
		task->phase = P_SINGLE;
		remora_xfer_start_assembly(task);
		return;
	}
	if (task->fill && task->fill->len > 0 &&
		remora_xfer_seal_segment(task, task->fill))
		remora_xfer_upload_segment(task, task->fill);
	task->fill = NULL;
	remora_xfer_pump(task); /* a buffer sealed in the last callback */
	if (task->uploads == 0 && task->status.state == REMORA_TASK_RUNNING)
		remora_xfer_start_assembly(task);
}

/* Take over the resume offered at claim (a copy of it). */
void
remora_xfer_adopt_resume(Transfer *task, const RemoraResume *r)
{
	int64_t offset = 0;

	if (r == NULL || r->nsegments == 0 || r->size < 0 ||
		(!remora_etag_is_strong(r->etag ? r->etag : "") &&
		 (r->last_modified == NULL || r->last_modified[0] == '\0')))
	{
		if (r != NULL)
			remora_xfer_restart(task, "the checkpoint has no segments or no "
									  "validators to check them by");
		return;
	}
	if (r->sha256_state == NULL ||
		!remora_sha256_restore(task->sha, r->sha256_state))
	{
		remora_xfer_restart(task,
							"the checkpoint's hash state cannot be restored");
		return;
	}
	for (int i = 0; i < r->nsegments; i++)
	{
		Segment *seg = segment_at(task, i + 1);

		if (seg == NULL || r->segments[i].key == NULL)
		{
			remora_xfer_restart(task, "the checkpoint could not be loaded");
			return;
		}
		seg->key = remora_xstrdup(r->segments[i].key);
		if (seg->key == NULL)
		{
			remora_xfer_restart(task, "the checkpoint could not be loaded");
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
		remora_xfer_restart(
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

/*
 * New validated progress since the last call?  The pointers in *out stay
 * valid until the next call on this task.
 */
bool
remora_xfer_checkpoint(Transfer *task, RemoraTaskCheckpoint *out)
{
	RemoraSegment *segs;

	if (!task->cp_dirty)
		return false;
	task->cp_dirty = false;
	memset(out, 0, sizeof(*out));
	out->bytes_total = task->total;
	out->etag = task->etag;
	out->last_modified = task->last_modified;
	/* only a source that can be checked again can be resumed */
	if (task->validated == 0 || task->total < 0 ||
		(!remora_etag_is_strong(task->etag) &&
		 task->last_modified[0] == '\0') ||
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
