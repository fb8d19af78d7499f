/*-------------------------------------------------------------------------
 *
 * export.c
 *	  A job of kind "export": publish a committed result's members at
 *	  stable keys <prefix>/<path> of a target bucket with server-side
 *	  copies, or verify that they are there.
 *
 *	  dispatch, per member (REMORA_EXPORT_CONCURRENCY at once):
 *	    HEAD target (unless overwrite without an earlier answer, by an
 *	        owner who may overwrite the key)
 *	      there, same size and ETag as the member or an earlier answer
 *	          --> "present" (conclusive)
 *	      there, other content: fail --> refused (class exists)
 *	                            overwrite, skip_identical --> COPY if the
 *	                                owner may overwrite the key, else
 *	                                refused (class exists)
 *	      404 --> COPY
 *	    COPY  PUT with x-amz-copy-source, x-amz-copy-source-if-match (and
 *	          RGW's x-amz-copy-if-match): the member's ETag
 *	      2xx CopyObjectResult, ETag checked --> "copied" (conclusive)
 *	      a refusal (4xx, 503, connect failure) --> conclusive failure
 *	      no conclusive answer (timeout or reset after sending, 500, a
 *	          2xx without a CopyObjectResult) --> outcome unknown
 *	    COPY of a member above the engine's export_copy_cutoff (CopyObject
 *	    takes at most 5 GiB): a multipart upload of part copies
 *	    (export_parts.c)
 *	  verify, per member: HEAD; same size and ETag --> "verified"; same
 *	  size, other ETag --> GET and SHA-256; anything else is a mismatch.
 *
 * After a conclusive failure nothing new starts.  A copy without a
 * conclusive answer stops nothing (the other keys are independent): every
 * other member still gets its answer, and the export then fails with
 * class outcome_unknown, which its host never retries.  The export ends
 * when what is in flight has answered.  Every conclusive answer is handed to
 *the host by remora_task_checkpoint (coalesced: all since the last call).
 * No key is deleted, ever: cancelling leaves what was written (an
 * aborted multipart upload was never a key).
 *
 * The members come from the host a page at a time, at most two pages
 * held (export_pages.c), so memory does not grow with the member count.
 * No new member starts while EXPORT_REFS_MAX answers wait for a
 * checkpoint.
 *
 * If-None-Match: * is not sent on a copy.  test/e2e/store.sh observes
 * both test stores ignore it on CopyObject: RGW 16.2.15 and
 * @20minutes/s3rver 5.0.0 answer 200 and overwrite an existing key (RGW
 * honours it on a plain PUT, with 412; s3rver ignores it there too).  So
 * if_exists = fail rests on the HEAD before the copy, and a writer racing
 * between the HEAD and the copy is overwritten.
 *
 * Whether an export may replace other content at a key is its host's word
 * per member (may_overwrite: the export's owner is an administrator or
 * published the key before).  Without it, overwrite and skip_identical
 * are refused like fail: another role's object, or one put there by
 * something other than an export, is never written over.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/export/export_int.h"
#include "engine/common/source_uri.h"

static void
refs_free(RemoraExportRef *refs, int n)
{
	for (int i = 0; i < n; i++)
	{
		free(refs[i].path);
		free(refs[i].key);
	}
	free(refs);
}

/* Verify: a member that is not exactly there. */
static void
mismatch(Export *x, Member *mb, const char *why)
{
	mb->state = M_DONE;
	x->finished++;
	if (x->mismatches++ < 10)
		remora_buf_printf(&x->mismatch_text, "%s%s (%s)",
						  x->mismatches > 1 ? ", " : "", mb->target, why);
}

/* Is what a HEAD found the member, by size and ETag? */
static bool
same_object(const Member *mb, const Request *req)
{
	return req->hdr.content_length == mb->m.size &&
		   (remora_etag_equal(req->hdr.etag, mb->m.etag) ||
			(mb->m.ref_etag &&
			 remora_etag_equal(req->hdr.etag, mb->m.ref_etag)));
}

static void start_copy(Export *x, Member *mb);
static void start_single_copy(Export *x, Member *mb);
static void start_guarded(Export *x, Member *mb, CopyStep step);
static void start_hash(Export *x, Member *mb);

static void
head_done(Request *req, CURLcode rc)
{
	Export         *x = req->owner;
	Member         *mb = req->data;
	RemoraTaskError err;

	mb->req = NULL;
	x->running--;
	if (rc == CURLE_OK && req->status == 404)
	{
		if (x->verify)
			mismatch(x, mb, "missing");
		else if (!x->stopping)
			start_copy(x, mb);
		remora_export_pump(x);
		return;
	}
	if (remora_s3_failed(req, rc, &err, "looking at an export's target"))
	{
		/* nothing was written: a conclusive failure */
		remora_export_note_failure(x, &err);
		remora_export_pump(x);
		return;
	}
	if (same_object(mb, req))
		remora_export_conclude(x, mb, req->hdr.etag, req->hdr.version_id,
							   x->verify ? "verified" : "present");
	else if (x->verify && req->hdr.content_length == mb->m.size)
	{
		/* the ETag cannot tell (a copy of a multipart object): hash it */
		snprintf(mb->head_etag, sizeof(mb->head_etag), "%s", req->hdr.etag);
		snprintf(mb->head_version, sizeof(mb->head_version), "%s",
				 req->hdr.version_id);
		start_hash(x, mb);
	}
	else if (x->verify)
		mismatch(x, mb, "other content");
	else if (x->if_exists == REMORA_IF_EXISTS_FAIL)
	{
		mb->state = M_DONE;
		remora_export_note_failuref(
			x, REMORA_ERR_EXISTS, false, 0,
			"the target key \"%s\" exists with other content "
			"(if_exists is fail)",
			mb->target);
	}
	else if (!mb->m.may_overwrite)
	{
		mb->state = M_DONE;
		remora_export_note_failuref(
			x, REMORA_ERR_EXISTS, false, 0,
			"the target key \"%s\" exists with other content that no "
			"export of the same owner published (if_exists is %s)",
			mb->target,
			x->if_exists == REMORA_IF_EXISTS_OVERWRITE ? "overwrite"
													   : "skip_identical");
	}
	else if (!x->stopping)
		start_copy(x, mb);
	remora_export_pump(x);
}

static void
start_head(Export *x, Member *mb)
{
	S3Call call = {"HEAD", x->bucket, mb->target, NULL, 0,    NULL, 0,
				   NULL,   0,         NULL,       true, NULL, false};
	char   errbuf[256];

	mb->req = remora_s3_start(&x->base.engine->loop, &x->base.engine->target, x,
							  &call, head_done, errbuf, sizeof(errbuf));
	if (mb->req == NULL)
	{
		remora_export_note_failuref(x, REMORA_ERR_INTERNAL, true, 0, "%s",
									errbuf);
		return;
	}
	mb->req->data = mb;
	mb->state = M_HEAD;
	x->running++;
}

/*
 * A copy's ETag (NULL: err says why) and version: the member's answer.
 * etag is freed.
 */
static void
copy_answered(Export *x, Member *mb, char *etag, const char *version,
			  RemoraTaskError *err)
{
	if (etag == NULL)
	{
		/* a 200 that carries an error: S3 says the copy may have failed */
		remora_export_note_ambiguous(x, mb, err);
		return;
	}
	/* a single-part member's copy has its content's MD5: the same ETag */
	if (remora_etag_is_md5(mb->m.etag) && !remora_etag_equal(etag, mb->m.etag))
		remora_export_note_failuref(
			x, REMORA_ERR_CHECKSUM, false, 0,
			"the copy at \"%s\" does not have the member's ETag", mb->target);
	else
		remora_export_conclude(x, mb, etag, version, "copied");
	free(etag);
}

/* The copy's own answer (COPY_ANSWER), read as ever. */
static void
copy_answer(Export *x, Member *mb, Request *req, CURLcode rc)
{
	RemoraTaskError err;

	if (rc != CURLE_OK && !remora_export_never_sent(rc))
	{
		/* sent, and no answer: the copy may or may not have happened */
		remora_s3_failed(req, rc, &err, "copying to an export's target");
		remora_export_note_ambiguous(x, mb, &err);
		return;
	}
	if (remora_s3_failed(req, rc, &err, "copying to an export's target"))
	{
		if (req->status == 500)
		{
			/* an internal error may come after the copy was made */
			remora_export_note_ambiguous(x, mb, &err);
			return;
		}
		if (req->status == 412)
		{
			snprintf(err.message, sizeof(err.message),
					 "the committed member \"%.300s\" no longer has the ETag "
					 "its result recorded",
					 mb->m.path);
			err.retryable = false;
		}
		remora_export_note_failure(x, &err);
		return;
	}
	copy_answered(x, mb,
				  remora_s3_answer_etag(req, "CopyObjectResult", &err,
										"copying to an export's target"),
				  req->hdr.version_id, &err);
}

/*
 * A step of the copy's guard (multipart.h) other than the copy's own
 * answer: the member's HEAD or the copy without its condition started,
 * or the copy judged.
 */
static void
guard_step(Export *x, Member *mb, Request *req, CURLcode rc, CopyStep step)
{
	RemoraTaskError err;
	bool            copied = mb->guard.etag != NULL;

	memset(&err, 0, sizeof(err));
	if (step == COPY_HEAD || step == COPY_BARE)
		start_guarded(x, mb, step);
	else if (step == COPY_VERIFIED)
	{
		remora_error_set(&err, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		copy_answered(x, mb, remora_xstrdup(mb->guard.etag),
					  mb->guard.version_id, &err);
	}
	else if (step == COPY_FAILED)
	{
		remora_s3_failed(req, rc, &err, "looking up a committed member");
		if (copied)
			remora_export_note_ambiguous(x, mb, &err); /* copied, unproved */
		else
			remora_export_note_failure(x, &err);
	}
	else
		remora_export_note_failuref(
			x, REMORA_ERR_S3, false, 412,
			copied ? "the committed member \"%.300s\" changed while it was "
					 "copied without a condition; its copy may not be it"
				   : "the committed member \"%.300s\" no longer has the "
					 "ETag its result recorded",
			mb->m.path);
}

static void
copy_done(Request *req, CURLcode rc)
{
	Export  *x = req->owner;
	Member  *mb = req->data;
	CopyStep step;

	mb->req = NULL;
	x->running--;
	mb->state = M_DONE;
	step = remora_copy_guard(&mb->guard, req, rc, "CopyObjectResult",
							 mb->m.etag, mb->m.size);
	if (step == COPY_ANSWER)
		copy_answer(x, mb, req, rc);
	else
		guard_step(x, mb, req, rc, step);
	remora_export_pump(x);
}

static void
start_copy(Export *x, Member *mb)
{
	/* an encrypted copy only in parts (remora_engine_copies_in_parts) */
	if (mb->m.size > x->base.engine->export_copy_cutoff ||
		remora_engine_copies_in_parts(x->base.engine))
		remora_export_start_multipart(x, mb);
	else
		start_single_copy(x, mb);
}

/* Start one request of a single copy; false: it could not (noted). */
static bool
copy_request(Export *x, Member *mb, const S3Call *call)
{
	char errbuf[256] = "out of memory";

	mb->req = call == NULL ? NULL
						   : remora_s3_start(&x->base.engine->loop,
											 &x->base.engine->target, x, call,
											 copy_done, errbuf, sizeof(errbuf));
	if (mb->req == NULL)
	{
		remora_export_note_failuref(x, REMORA_ERR_INTERNAL, true, 0, "%s",
									errbuf);
		return false;
	}
	mb->req->data = mb;
	mb->state = M_COPY;
	x->running++;
	return true;
}

/*
 * CopyObject of the member, while it has its recorded ETag (bare: without
 * that condition, after its guard checked the member by HEAD).
 */
static void
start_copy_object(Export *x, Member *mb, bool bare)
{
	char *src = remora_s3_copy_source(mb->m.bucket, mb->m.key);

	if (src)
	{
		RemoraKV h[3];
		S3Call   call;

		h[0] = (RemoraKV){"x-amz-copy-source", src};
		h[1] = (RemoraKV){"x-amz-copy-source-if-match", mb->m.etag};
		h[2] = (RemoraKV){"x-amz-copy-if-match", mb->m.etag}; /* RGW */
		call = (S3Call){"PUT", x->bucket,    mb->target, NULL, 0,
						h,     bare ? 1 : 3, NULL,       0,    NULL,
						false, NULL,         true};
		copy_request(x, mb, &call);
	}
	else
		copy_request(x, mb, NULL);
	free(src);
}

static void
start_single_copy(Export *x, Member *mb)
{
	start_copy_object(x, mb, false);
}

/* What the copy's guard asks for: the member's HEAD, or the bare copy. */
static void
start_guarded(Export *x, Member *mb, CopyStep step)
{
	MpuCall c;

	if (step == COPY_BARE)
	{
		start_copy_object(x, mb, true);
		return;
	}
	remora_copy_guard_head(mb->m.bucket, mb->m.key, &c);
	copy_request(x, mb, &c.call);
}

static size_t
hash_data(Request *req, char *ptr, size_t len)
{
	Member *mb = req->data;
	long    status = 0;

	/* (req->status is set when the exchange ends) */
	curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200)
		return len; /* an error body: judged in hash_done */
	remora_sha256_update(mb->hsha, ptr, len);
	mb->hbytes += (int64_t) len;
	return len;
}

static void
hash_done(Request *req, CURLcode rc)
{
	Export         *x = req->owner;
	Member         *mb = req->data;
	RemoraTaskError err;
	char            hex[65];

	mb->req = NULL;
	x->running--;
	if (remora_s3_failed(req, rc, &err, "reading an export's target"))
	{
		remora_export_note_failure(x, &err);
		remora_export_pump(x);
		return;
	}
	remora_sha256_final_hex(mb->hsha, hex);
	if (mb->hbytes == mb->m.size && strcmp(hex, mb->m.sha256) == 0)
		remora_export_conclude(x, mb, mb->head_etag, mb->head_version,
							   "verified");
	else
		mismatch(x, mb, "other content");
	remora_export_pump(x);
}

static void
start_hash(Export *x, Member *mb)
{
	S3Call call = {"GET", x->bucket, mb->target, NULL,  0,    NULL, 0,
				   NULL,  0,         NULL,       false, NULL, false};
	char   errbuf[256] = "out of memory";

	mb->hsha = remora_sha256_new();
	mb->hbytes = 0;
	mb->req = mb->hsha
				  ? remora_target_request(x->base.engine, x, &call, hash_done,
										  errbuf, sizeof(errbuf))
				  : NULL;
	if (mb->req == NULL)
	{
		remora_export_note_failuref(x, REMORA_ERR_INTERNAL, true, 0, "%s",
									errbuf);
		return;
	}
	mb->req->on_data = hash_data;
	mb->req->data = mb;
	if (!remora_req_start(mb->req))
	{
		remora_req_cancel(mb->req);
		mb->req = NULL;
		remora_export_note_failuref(
			x, REMORA_ERR_INTERNAL, true, 0,
			"could not start a read of an export's target");
		return;
	}
	mb->state = M_HASH;
	x->running++;
}

/* Start what the concurrency allows; end when everything has answered. */
void
remora_export_pump(Export *x)
{
	Member *mb;
	int     held = 0;

	while (x->status.state == REMORA_TASK_RUNNING && !x->stopping &&
		   x->running < REMORA_EXPORT_CONCURRENCY &&
		   x->nrefs < EXPORT_REFS_MAX &&
		   (mb = remora_export_next_member(x)) != NULL)
	{
		if (x->verify || mb->m.ref_etag || !mb->m.may_overwrite ||
			x->if_exists != REMORA_IF_EXISTS_OVERWRITE)
			start_head(x, mb);
		else
			start_copy(x, mb);
	}
	remora_export_pages_release(x);
	if (x->status.state == REMORA_TASK_RUNNING)
		remora_export_pages_ask(x);
	for (const Page *pg = x->oldest; pg; pg = pg->newer)
		held += pg->n;
	if (held > x->held_max)
		x->held_max = held;
	if (x->status.state != REMORA_TASK_RUNNING || x->running > 0)
		return;
	if (x->has_first)
	{
		/* ambiguity first; a page the host has not answered is dropped */
		remora_lookup_cancel_all(x->base.engine, &x->base);
		x->lookup = NULL;
		remora_fail_with(&x->status, &x->first);
	}
	else if (x->received < x->total || x->lookup)
		return; /* more members to come */
	else if (x->mismatches > 0)
		remora_fail(&x->status, REMORA_ERR_VERIFY, false, 0,
					"%lld of %lld members are not exactly at their keys: %s%s",
					(long long) x->mismatches, (long long) x->total,
					x->mismatch_text.data ? x->mismatch_text.data : "",
					x->mismatches > 10 ? ", ..." : "");
	else if (x->finished == x->total)
		x->status.state = REMORA_TASK_SUCCEEDED;
}

/* ------------------------------------------------------------ the kind */

static RemoraTaskState
export_state(const RemoraTask *t)
{
	return ((const Export *) t)->status.state;
}

static void
export_progress(const RemoraTask *t, int64_t *done, int64_t *total)
{
	const Export *x = (const Export *) t;

	*done = x->bytes_done;
	*total = x->bytes_total;
}

static bool
export_restarted(const RemoraTask *t, const char **why)
{
	(void) t;
	*why = "";
	return false;
}

static bool
export_checkpoint(RemoraTask *t, RemoraTaskCheckpoint *out)
{
	Export *x = (Export *) t;

	refs_free(x->handed, x->nhanded);
	x->handed = x->refs;
	x->nhanded = x->nrefs;
	x->refs = NULL;
	x->nrefs = 0;
	memset(out, 0, sizeof(*out));
	out->bytes_done = x->bytes_done;
	out->bytes_total = x->bytes_total;
	out->members_done = x->finished;
	out->members_total = x->total;
	out->refs = x->handed;
	out->nrefs = x->nhanded;
	if (x->nhanded >= EXPORT_REFS_MAX)
		remora_loop_wake_at(&x->base.engine->loop, remora_now_ms()); /* room */
	return x->nhanded > 0;
}

static const RemoraTaskResult *
export_result(const RemoraTask *t)
{
	const Export *x = (const Export *) t;

	return x->status.state == REMORA_TASK_SUCCEEDED ? &x->result : NULL;
}

static const RemoraTaskError *
export_error(const RemoraTask *t)
{
	const Export *x = (const Export *) t;

	return x->status.state == REMORA_TASK_FAILED ? &x->status.error : NULL;
}

/*
 * Stop: requests in flight are cancelled, which is itself a request sent
 * without an answer; the host settles a cancelled export as cancelled.
 */
static void
export_abort(RemoraTask *t, bool delete_staging)
{
	Export *x = (Export *) t;

	(void) delete_staging;
	remora_req_cancel_owner(&x->base.engine->loop, x);
	x->lookup = NULL; /* the engine withdrew it */
	x->running = 0;
	if (x->status.state == REMORA_TASK_RUNNING)
		x->status.state = REMORA_TASK_ABORTED;
}

static void
export_free(RemoraTask *t)
{
	Export *x = (Export *) t;

	remora_req_cancel_owner(&x->base.engine->loop, x);
	while (x->oldest)
	{
		Page *pg = x->oldest;

		x->oldest = pg->newer;
		remora_export_page_free(pg);
	}
	refs_free(x->refs, x->nrefs);
	refs_free(x->handed, x->nhanded);
	remora_buf_free(&x->mismatch_text);
	free(x->after);
	free(x->bucket);
	free(x->prefix);
}

static void
export_kind_pump(RemoraTask *t)
{
	remora_export_pump((Export *) t);
}

static const RemoraTaskKind export_kind = {
	"export",         export_kind_pump,  export_state,  export_progress,
	export_restarted, export_checkpoint, export_result, export_error,
	export_abort,     export_free};

RemoraTask *
remora_export_start(RemoraEngine *engine, const RemoraExportSpec *spec,
					char *errbuf, size_t errlen)
{
	Export *x;

	if (spec->members_total < 0 || spec->bytes_total < 0)
	{
		snprintf(errbuf, errlen, "the export's member count is not valid");
		return NULL;
	}
	x = calloc(1, sizeof(Export));
	if (x == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	remora_task_register(engine, &x->base, &export_kind);
	x->status.state = REMORA_TASK_RUNNING;
	x->bucket = strdup(spec->bucket);
	x->prefix = strdup(spec->prefix ? spec->prefix : "");
	x->if_exists = spec->if_exists;
	x->verify = spec->verify;
	x->host_arg = spec->host_arg;
	x->total = spec->members_total;
	x->bytes_total = spec->bytes_total;
	snprintf(x->output_digest, sizeof(x->output_digest), "%s",
			 spec->output_digest ? spec->output_digest : "");
	if (x->bucket == NULL || x->prefix == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		remora_task_free(&x->base);
		return NULL;
	}

	/* the result: what the host commits */
	snprintf(x->result.manifest_sha256, sizeof(x->result.manifest_sha256), "%s",
			 x->output_digest);
	x->result.members = x->total;
	x->result.bytes = x->bytes_total;

	remora_export_pump(x); /* asks for the first page */
	return &x->base;
}
