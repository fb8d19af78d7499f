/*-------------------------------------------------------------------------
 *
 * reuse.c
 *	  A replacement attempt's reuse of the parts the lost attempt's
 *	  checkpoint validated.
 *
 * Those parts are in the lost attempt's multipart upload, at its own key
 * for the member.  The parts of an upload cannot be copied from until it
 * is completed, so this attempt completes it, then copies the validated
 * parts' byte range by range into its own upload, each copy's ETag
 * checked against the part's (a store may ignore the copy's
 * x-amz-copy-source-if-match).  Only then does the source go on from the
 * end of those parts.
 *
 * The lost upload is completed with every part it holds, not only the
 * validated ones: the lost attempt may have uploaded parts past its last
 * checkpoint (a worker goes on until its fence), and stores differ on a
 * completion that names a subset.  AWS drops the rest; RGW refuses it
 * ("total parts mismatch") and the replacement would restart from zero;
 * Swift completes it and leaves the rest as segments that survive
 * DeleteObject and that no listing of uploads shows.  Completing with
 * all of them (ListParts, their ETags as listed, the validated ones
 * checked against the checkpoint) is right on every store; the bytes past
 * the checkpoint are simply not copied.  Aborting the upload instead would
 * throw the validated parts away with it: an upload's parts can only be
 * read once it is completed.  The object is deleted with the rest of the
 * lost attempt's staging once the job has ended, not as soon as the copies
 * are done: until this attempt's own checkpoint is recorded, a second
 * replacement is offered the lost one's, and needs the object.
 *
 *	  LIST		the lost upload's parts (ListParts, page by page)
 *	    |	parts 1..k there with the checkpoint's ETags: COMPLETE with all
 *	    |	a validated part missing or not the same: start from zero
 *	    |	refused (NoSuchUpload, a store without ListParts): COMPLETE with
 *	    |	parts 1..k, as a store that knows no ListParts must allow
 *	  COMPLETE	the lost attempt's upload
 *	    |	200 with an ETag: the object holds those parts first
 *	    |	a part refused (a zombie uploaded one after LIST): LIST again,
 *	    |	LIST_TRIES in all
 *	    |	anything else: HEAD (a zombie may have completed it itself, with
 *	    |	more parts; or it is gone)
 *	  HEAD		an object at least as long as the parts: copy from it;
 *	    |		none: start from zero, and say why
 *	  COPY		once this attempt's own upload exists (parts.c): part i from
 *				the bytes of part i of that object, COPIES_IN_FLIGHT at
 *				once; a copy refused (412, 404) or whose ETag is not the
 *				part's: start from zero in a new upload
 *
 * Completing the lost attempt's upload is the one write under another
 * attempt's staging prefix: of the bytes that attempt wrote, at the key it
 * chose.  The staging cleanup deletes the object with the rest of that
 * prefix once the job has ended.  A zombie of the lost attempt that goes
 * on uploading parts gets NoSuchUpload on AWS, RGW and s3rver; Swift
 * accepts them with 200 into the completed upload, as segments no
 * manifest names.  On either, nothing it does reaches a published result:
 * this attempt's parts are server-side copies (bytes, not references),
 * each proved by its ETag to be the validated part; the zombie's own
 * completion and commit are fenced.  One that completed the upload first
 * left an object whose first parts are still the validated ones, or the
 * copies' ETags tell they are not.  The replacement pays for the reuse
 * with one server-side copy of the reused bytes; the happy path pays
 * nothing.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/transfer/transfer.h"

static void start_head(Transfer *task);
static bool start_copy(Transfer *task, int partno, CopyStep step);

/* Nothing to reuse after all: the source from the first byte. */
static void
reuse_nothing(Transfer *task, const char *why)
{
	remora_req_cancel_owner(&task->base.engine->loop, task);
	task->copies = 0;
	remora_xfer_reuse_free(task);
	remora_xfer_abort_upload(task); /* copies may be in it: a new one */
	remora_xfer_restart(task, why);
	task->reuse_ready = true;
}

/* The store did not answer: the attempt fails, the checkpoint holds. */
static void
store_unavailable(Transfer *task, Request *req, CURLcode rc, const char *what)
{
	RemoraTaskError err;

	if (!remora_s3_failed(req, rc, &err, what))
		remora_fail(&task->status, REMORA_ERR_S3, true, req->status,
					"%s: the store's answer could not be read", what);
	else
		remora_fail_with(&task->status, &err);
	remora_xfer_settle(task);
}

static bool
unavailable(const Request *req, CURLcode rc)
{
	return rc != CURLE_OK || req->status >= 500 || req->status == 429;
}

/* The object to copy from is known: make this attempt's own upload. */
static void
object_known(Transfer *task, const char *etag)
{
	snprintf(task->reuse_etag, sizeof(task->reuse_etag), "%s", etag);
	task->copy_next = 1;
	task->guards = calloc(task->nparts, sizeof(CopyGuard));
	task->nguards = task->nparts;
	if (task->guards == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
		return;
	}
	remora_xfer_create_upload(task);
}

/* Free the copies' guards. */
void
remora_xfer_reuse_free(Transfer *task)
{
	for (int i = 0; task->guards != NULL && i < task->nguards; i++)
		remora_copy_guard_reset(&task->guards[i]);
	free(task->guards);
	task->guards = NULL;
	task->nguards = 0;
}

static void start_list(Transfer *task, int marker);

/*
 * A completion refused as a bad request: a part it names is not the
 * upload's, or (RGW) the upload holds one it does not name, as when a
 * zombie uploaded a part after the list.  Stores word it differently
 * (InvalidPart, InvalidRequest with "total parts mismatch").
 */
static bool
part_refused(const RemoraTaskError *err)
{
	return err->http_status == 400;
}

static void
complete_done(Request *req, CURLcode rc)
{
	Transfer       *task = req->owner;
	RemoraTaskError err;
	char           *etag = NULL;

	memset(&err, 0, sizeof(err));
	etag = remora_mpu_completed(req, rc, &err,
								"completing the checkpoint's upload");
	if (etag != NULL && etag[0] != '\0')
		object_known(task, etag);
	else if (etag == NULL && req->index > 0 && part_refused(&err) &&
			 task->list_tries < LIST_TRIES)
		start_list(task, 0);
	else
		start_head(task); /* completed by someone else, or gone */
	free(etag);
	remora_xfer_settle(task);
}

/*
 * COMPLETE the lost upload: with the parts LIST found (all) or, when
 * listed is false, with the checkpoint's.  The request's index tells
 * complete_done which.
 */
static void
start_complete(Transfer *task, bool listed)
{
	const char **etags = listed ? NULL : remora_xfer_part_etags(task);
	MpuCall      c;
	bool         ok;

	ok = (listed || etags != NULL) &&
		 remora_mpu_complete(&task->lost, etags, task->nparts, &c);
	free(etags);
	if (!ok)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"could not build the part list");
		return;
	}
	remora_xfer_start_s3(task, &c.call, complete_done, K_REUSE, listed);
}

/*
 * Every part LIST found is recorded in task->lost: are the validated ones
 * among them, with the ETags the checkpoint recorded?
 */
static bool
holds_validated(const Transfer *task)
{
	const Multipart *lost = &task->lost;

	if (lost->nparts < task->nparts)
		return false;
	for (int i = 0; i < task->nparts; i++)
		if (lost->etags[i] == NULL ||
			!remora_etag_equal(lost->etags[i], task->parts[i].etag))
			return false;
	return true;
}

/* Record a page of LIST's parts; false: out of memory. */
static bool
record_listed(Transfer *task, const RemoraS3Parts *page)
{
	for (int i = 0; i < page->nparts; i++)
		if (!remora_mpu_record(&task->lost, page->parts[i].number,
							   page->parts[i].etag))
			return false;
	return true;
}

static void
list_done(Request *req, CURLcode rc)
{
	Transfer       *task = req->owner;
	RemoraTaskError err;
	RemoraS3Parts   page;

	if (unavailable(req, rc))
	{
		store_unavailable(task, req, rc, "listing the checkpoint's upload");
		return;
	}
	if (!remora_mpu_listed(req, rc, &page, &err,
						   "listing the checkpoint's upload"))
		start_complete(task, false); /* NoSuchUpload, or no ListParts */
	else if (!record_listed(task, &page))
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
	else if (page.truncated && page.next_marker > req->index)
		start_list(task, page.next_marker);
	else if (page.truncated)
		start_complete(task, false); /* a page that does not go on */
	else if (!holds_validated(task))
		reuse_nothing(task, "the checkpoint's upload no longer holds the "
							"parts it validated (its list of parts differs)");
	else
		start_complete(task, true);
	remora_s3xml_parts_free(&page);
	remora_xfer_settle(task);
}

/* LIST a page of the lost upload's parts, from after part marker. */
static void
start_list(Transfer *task, int marker)
{
	MpuCall c;

	if (marker == 0)
	{
		/* a new list: forget what an earlier one found */
		for (int i = 0; i < task->lost.nparts; i++)
			free(task->lost.etags[i]);
		free(task->lost.etags);
		task->lost.etags = NULL;
		task->lost.nparts = 0;
		task->list_tries++;
	}
	remora_mpu_list_parts(&task->lost, marker, &c);
	remora_xfer_start_s3(task, &c.call, list_done, K_REUSE, marker);
}

static void
head_done(Request *req, CURLcode rc)
{
	Transfer *task = req->owner;
	int64_t   need = 0;

	if (unavailable(req, rc))
	{
		store_unavailable(task, req, rc, "looking up the checkpoint's upload");
		return;
	}
	for (int i = 0; i < task->nparts; i++)
		need += task->parts[i].size;
	if (req->status != 200 || req->hdr.etag[0] == '\0' ||
		req->hdr.content_length < need)
		reuse_nothing(task, "the parts of the checkpoint are no longer in the "
							"store (its upload is gone)");
	else
		object_known(task, req->hdr.etag);
	remora_xfer_settle(task);
}

static void
start_head(Transfer *task)
{
	MpuCall c;

	remora_mpu_head(&task->lost, &c);
	remora_xfer_start_s3(task, &c.call, head_done, K_HEAD, 0);
}

/*
 * Begin: list the lost attempt's upload, whose validated parts
 * remora_xfer_adopt_resume loaded from the checkpoint.
 */
void
remora_xfer_reuse_start(Transfer *task)
{
	task->phase = P_REUSE;
	start_list(task, 0);
}

/*
 * The answer to a copy as it stands (COPY_ANSWER): *etag the part's ETag,
 * malloc'd (NULL: none, a 200 with an error); false when the attempt has
 * failed or starts from zero.
 */
static bool
copy_answer(Transfer *task, Request *req, CURLcode rc, char **etag)
{
	RemoraTaskError err;

	if (unavailable(req, rc))
	{
		store_unavailable(task, req, rc, "copying a part of the checkpoint");
		return false;
	}
	*etag =
		remora_mpu_copied(req, rc, &err, "copying a part of the checkpoint");
	if (*etag == NULL && (req->status < 200 || req->status >= 300))
	{
		char why[200];

		/* 412: the object changed; 404: it is gone */
		snprintf(why, sizeof(why),
				 "part %d of the checkpoint could not be copied (HTTP %ld)",
				 req->index, req->status);
		reuse_nothing(task, why);
		return false;
	}
	return true;
}

/*
 * The answer to a request of part req->index's copy: the copy, or the
 * HEADs and copy without condition its guard asks for where the store
 * refused the condition (Swift, on every object a multipart upload made).
 */
static void
copy_done(Request *req, CURLcode rc)
{
	Transfer  *task = req->owner;
	Part      *part = &task->parts[req->index - 1];
	CopyGuard *g = &task->guards[req->index - 1];
	char      *etag = NULL;
	CopyStep   step;

	task->copies--;
	step =
		remora_copy_guard(g, req, rc, "CopyPartResult", task->reuse_etag, -1);
	if (step == COPY_HEAD || step == COPY_BARE)
	{
		task->copies++;
		if (!start_copy(task, req->index, step))
			task->copies--;
		return;
	}
	if (step == COPY_FAILED)
	{
		store_unavailable(task, req, rc, "looking up the checkpoint's object");
		return;
	}
	if (step == COPY_CHANGED)
	{
		reuse_nothing(task, "a part of the checkpoint could not be copied "
							"(the object is no longer the one completed)");
		return;
	}
	if (step == COPY_VERIFIED)
		etag = remora_xstrdup(g->etag);
	else if (!copy_answer(task, req, rc, &etag))
		return;
	if (!remora_mpu_copy_is(etag, part->etag))
	{
		char why[200];

		snprintf(why, sizeof(why),
				 "part %d copied from the checkpoint's upload is not the part "
				 "it validated (its ETag differs)",
				 req->index);
		free(etag);
		reuse_nothing(task, why);
		return;
	}
	free(etag);
	part->done = true;
	if (++task->copied == task->nparts)
	{
		/* the parts are this attempt's now: checkpoints record its upload */
		task->validated = task->nparts;
		task->cp_dirty = true;
		task->reuse_ready = true;
		remora_xfer_reuse_free(task);
	}
}

/*
 * One request of a part's copy: the copy of part partno from its bytes in
 * the completed object, while that object is the one completed (its ETag;
 * COPY_BARE: without that condition), or (COPY_HEAD) that object's HEAD.
 */
static bool
start_copy(Transfer *task, int partno, CopyStep step)
{
	int64_t first = 0;
	MpuCall c;
	bool    ok;

	if (step == COPY_HEAD)
	{
		remora_copy_guard_head(task->bucket, task->reuse_key, &c);
		return remora_xfer_start_s3(task, &c.call, copy_done, K_COPY, partno);
	}
	for (int i = 0; i < partno - 1; i++)
		first += task->parts[i].size;
	if (!remora_mpu_copy(&task->mpu, partno, task->bucket, task->reuse_key,
						 step == COPY_BARE ? NULL : task->reuse_etag, first,
						 first + task->parts[partno - 1].size - 1, &c))
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
		return false;
	}
	ok = remora_xfer_start_s3(task, &c.call, copy_done, K_COPY, partno);
	remora_mpu_call_free(&c);
	return ok;
}

/* Copy the parts into this attempt's upload, once it and the object exist. */
void
remora_xfer_reuse_pump(Transfer *task)
{
	if (task->reuse_ready || task->mpu.upload_id == NULL ||
		task->reuse_etag[0] == '\0' || task->copy_next > task->nparts ||
		task->copies >= COPIES_IN_FLIGHT)
		return;
	while (task->status.state == REMORA_TASK_RUNNING &&
		   task->copies < COPIES_IN_FLIGHT && task->copy_next <= task->nparts)
	{
		task->copies++;
		if (!start_copy(task, task->copy_next++, COPY_ANSWER))
			task->copies--;
	}
}
