/*-------------------------------------------------------------------------
 *
 * export_parts.c
 *	  An export's copy of a member larger than the engine's
 *	  export_copy_cutoff (at most 5 GiB, the most CopyObject takes): a
 *	  multipart upload whose parts are server-side copies of ranges.
 *
 *	  CREATE (POST ?uploads) --> PART 1..n, one at a time: UploadPartCopy
 *	      of a range of remora.part_size (larger when the store's part
 *	      limit would not hold the member, partsize.h;
 *	      x-amz-copy-source-range) guarded by
 *	      x-amz-copy-source-if-match --> COMPLETE (POST ?uploadId)
 *	  2xx CompleteMultipartUploadResult --> "copied" (its ETag, or a HEAD's
 *	      where the store answers none, as RGW does)
 *	  CREATE or a PART fails, whatever the answer --> conclusive failure
 *	      (parts are invisible until COMPLETE), and ABORT
 *	  COMPLETE refused --> conclusive failure, ABORT; COMPLETE without a
 *	      conclusive answer --> outcome unknown, and ABORT (a no-op if it
 *	      had completed)
 *
 * RGW ignores x-amz-copy-source-if-match on UploadPartCopy (the table of
 * stores in doc/operator-guide.md), so there a member replaced during a
 * multipart copy is not noticed; a committed member is never rewritten by
 * Remora.  An upload open when the export is cancelled or its worker stops
 * is not aborted (its requests are cut and nothing is waited for): a
 * lifecycle rule on the target bucket (AbortIncompleteMultipartUpload)
 * drops it.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/export/export_int.h"
#include "engine/s3/partsize.h"

static void mpu_abort(Export *x, Member *mb);
static void mpu_part(Export *x, Member *mb);
static void mpu_part_request(Export *x, Member *mb, CopyStep step);

/*
 * Start what this answer allows: the export's pump, through its kind (the
 * pump in export.c calls down into this file, never the other way).
 */
static void
pump(Export *x)
{
	x->base.kind->pump(&x->base);
}

/* Start one request of a multipart copy; false: failed (noted). */
static bool
mpu_start(Export *x, Member *mb, const S3Call *call, RequestDone done)
{
	char errbuf[256] = "out of memory";

	mb->req = remora_s3_start(&x->base.engine->loop, &x->base.engine->target, x,
							  call, done, errbuf, sizeof(errbuf));
	if (mb->req == NULL)
	{
		remora_export_note_failuref(x, REMORA_ERR_INTERNAL, true, 0, "%s",
									errbuf);
		return false;
	}
	mb->req->data = mb;
	mb->state = M_MPU;
	x->running++;
	return true;
}

static void
mpu_abort_done(Request *req, CURLcode rc)
{
	Export *x = req->owner;
	Member *mb = req->data;

	(void) rc; /* best effort: a lifecycle rule drops what stays */
	mb->req = NULL;
	x->running--;
	mb->state = M_DONE;
	pump(x);
}

/* Drop the upload (its parts are invisible); the member is then done. */
static void
mpu_abort(Export *x, Member *mb)
{
	MpuCall c;

	remora_mpu_abort(&mb->mpu, &c);
	if (mb->mpu.upload_id == NULL || !mpu_start(x, mb, &c.call, mpu_abort_done))
		mb->state = M_DONE;
}

static void
mpu_head_done(Request *req, CURLcode rc)
{
	Export         *x = req->owner;
	Member         *mb = req->data;
	RemoraTaskError err;

	mb->req = NULL;
	x->running--;
	mb->state = M_DONE;
	if (remora_s3_failed(req, rc, &err, "looking at an exported key") ||
		req->hdr.content_length != mb->m.size)
	{
		/* completed, but what is there cannot be told now */
		if (req->status == 200)
			remora_error_set(&err, REMORA_ERR_S3, false, 0,
							 "the completed upload has %lld bytes, not %lld",
							 (long long) req->hdr.content_length,
							 (long long) mb->m.size);
		remora_export_note_ambiguous(x, mb, &err);
	}
	else
		remora_export_conclude(x, mb, req->hdr.etag, req->hdr.version_id,
							   "copied");
	pump(x);
}

static void
mpu_complete_done(Request *req, CURLcode rc)
{
	Export         *x = req->owner;
	Member         *mb = req->data;
	RemoraTaskError err;
	char           *etag;

	mb->req = NULL;
	x->running--;
	etag = remora_mpu_completed(req, rc, &err,
								"completing an export's multipart copy");
	if (etag == NULL &&
		(rc != CURLE_OK || req->status < 200 || req->status >= 300))
	{
		if ((rc != CURLE_OK && !remora_export_never_sent(rc)) ||
			req->status == 500)
			remora_export_note_ambiguous(x, mb,
										 &err); /* it may have completed */
		else
			remora_export_note_failure(x, &err);
		mpu_abort(x, mb);
		pump(x);
		return;
	}
	if (etag == NULL)
	{
		/* a 200 that carries an error: it may or may not have completed */
		remora_export_note_ambiguous(x, mb, &err);
		mpu_abort(x, mb);
	}
	else if (etag[0] == '\0')
	{
		/* RGW answers an empty ETag: the key's HEAD has it */
		MpuCall c;

		remora_mpu_head(&mb->mpu, &c);
		if (!mpu_start(x, mb, &c.call, mpu_head_done))
			mb->state = M_DONE;
	}
	else
	{
		mb->state = M_DONE;
		remora_export_conclude(x, mb, etag, req->hdr.version_id, "copied");
	}
	free(etag);
	pump(x);
}

static void
mpu_complete(Export *x, Member *mb)
{
	MpuCall c;

	if (!remora_mpu_complete(&mb->mpu, NULL, 0, &c))
	{
		remora_export_note_failuref(x, REMORA_ERR_INTERNAL, true, 0,
									"could not build the part list");
		mpu_abort(x, mb);
		return;
	}
	if (!mpu_start(x, mb, &c.call, mpu_complete_done))
		mpu_abort(x, mb);
}

/*
 * A step of a part copy's guard (multipart.h) that is not an ETag to
 * record: a HEAD or the copy without its condition started, or the
 * member judged changed or out of reach (conclusive: nothing is visible
 * at the key before COMPLETE).  False: go on with the part.
 */
static bool
part_guard_step(Export *x, Member *mb, Request *req, CURLcode rc, CopyStep step)
{
	RemoraTaskError err;

	if (step == COPY_HEAD || step == COPY_BARE)
	{
		mpu_part_request(x, mb, step);
		return true;
	}
	if (step == COPY_FAILED)
		remora_s3_failed(req, rc, &err, "looking up a committed member");
	else if (step == COPY_CHANGED)
		remora_error_set(&err, REMORA_ERR_S3, false, 412,
						 "the committed member \"%.300s\" no longer has the "
						 "ETag its result recorded",
						 mb->m.path);
	else
		return false;
	remora_export_note_failure(x, &err);
	mpu_abort(x, mb);
	return true;
}

static void
mpu_part_done(Request *req, CURLcode rc)
{
	Export         *x = req->owner;
	Member         *mb = req->data;
	RemoraTaskError err;
	char           *etag = NULL;
	CopyStep        step;

	mb->req = NULL;
	x->running--;
	step = remora_copy_guard(&mb->guard, req, rc, "CopyPartResult", mb->m.etag,
							 mb->m.size);
	if (part_guard_step(x, mb, req, rc, step))
	{
		pump(x);
		return;
	}
	memset(&err, 0, sizeof(err));
	if (step == COPY_VERIFIED)
		etag = remora_xstrdup(mb->guard.etag);
	else
		etag = remora_mpu_copied(req, rc, &err, "copying a part of an export");
	remora_copy_guard_reset(&mb->guard); /* the next part's, from the start */
	if (etag == NULL || etag[0] == '\0')
	{
		/* nothing is visible at the key before COMPLETE: conclusive */
		if (req->status == 412)
		{
			snprintf(err.message, sizeof(err.message),
					 "the committed member \"%.300s\" no longer has the ETag "
					 "its result recorded",
					 mb->m.path);
			err.retryable = false;
		}
		else if (etag != NULL || step == COPY_VERIFIED)
			remora_error_set(&err, REMORA_ERR_S3, true, req->status,
							 "copying part %d of \"%s\": no ETag in the "
							 "answer",
							 mb->part_next, mb->target);
		free(etag);
		remora_export_note_failure(x, &err);
		mpu_abort(x, mb);
		pump(x);
		return;
	}
	if (!remora_mpu_record(&mb->mpu, mb->part_next, etag))
	{
		free(etag);
		remora_export_note_failuref(x, REMORA_ERR_INTERNAL, true, 0,
									"out of memory");
		mpu_abort(x, mb);
		pump(x);
		return;
	}
	free(etag);
	if (x->stopping)
		mpu_abort(x, mb); /* another member failed: publish nothing more */
	else if (mb->part_next == mb->nparts)
		mpu_complete(x, mb);
	else
	{
		mb->part_next++;
		mpu_part(x, mb);
	}
	pump(x);
}

/*
 * A request of part mb->part_next's copy: UploadPartCopy of its range of
 * the member while the member has its recorded ETag (COPY_BARE: without
 * that condition), or (COPY_HEAD) the member's HEAD, as its guard asks.
 */
static void
mpu_part_request(Export *x, Member *mb, CopyStep step)
{
	int64_t first = (int64_t) (mb->part_next - 1) * mb->part_size;
	int64_t end = first + mb->part_size;
	int64_t last = (end < mb->m.size ? end : mb->m.size) - 1;
	MpuCall c;

	if (step == COPY_HEAD)
		remora_copy_guard_head(mb->m.bucket, mb->m.key, &c);
	else if (!remora_mpu_copy(&mb->mpu, mb->part_next, mb->m.bucket, mb->m.key,
							  step == COPY_BARE ? NULL : mb->m.etag, first,
							  last, &c))
	{
		remora_export_note_failuref(x, REMORA_ERR_INTERNAL, true, 0,
									"out of memory");
		mpu_abort(x, mb);
		return;
	}
	if (!mpu_start(x, mb, &c.call, mpu_part_done))
		mpu_abort(x, mb);
	remora_mpu_call_free(&c);
}

/* UploadPartCopy of part mb->part_next: a range of the member. */
static void
mpu_part(Export *x, Member *mb)
{
	mpu_part_request(x, mb, COPY_ANSWER);
}

static void
mpu_created(Request *req, CURLcode rc)
{
	Export         *x = req->owner;
	Member         *mb = req->data;
	RemoraTaskError err;

	mb->req = NULL;
	x->running--;
	if (!remora_mpu_created(&mb->mpu, req, rc, &err,
							"starting an export's multipart copy"))
	{
		/* an upload nobody learnt the id of is invisible, and unlisted */
		mb->state = M_DONE;
		remora_export_note_failure(x, &err);
		pump(x);
		return;
	}
	if (x->stopping)
		mpu_abort(x, mb);
	else
	{
		mb->part_next = 1;
		mpu_part(x, mb);
	}
	pump(x);
}

/*
 * A member above the cutoff: parts of remora.part_size, or larger so that
 * the store's part limit holds it (partsize.h).
 */
void
remora_export_start_multipart(Export *x, Member *mb)
{
	MpuCall c;

	mb->part_size =
		remora_part_size_fit(mb->m.size, (int64_t) x->base.engine->part_size,
							 x->base.engine->max_parts);
	if (mb->part_size < 0)
	{
		remora_export_note_failuref(
			x, REMORA_ERR_SIZE, false, 0,
			"member \"%.300s\" needs more than %d parts of at most 5 GiB; "
			"raise remora.max_upload_parts if the store takes more",
			mb->m.path, x->base.engine->max_parts);
		mb->state = M_DONE;
		return;
	}
	mb->nparts = (int) ((mb->m.size + mb->part_size - 1) / mb->part_size);
	remora_mpu_init(&mb->mpu, x->bucket, mb->target);
	remora_mpu_create(&mb->mpu, &c);
	if (!mpu_start(x, mb, &c.call, mpu_created))
		mb->state = M_DONE;
}
