/*-------------------------------------------------------------------------
 *
 * assemble.c
 *	  A member transfer's end: the member object, and the manifest of a job
 *	  of one member.
 *
 *	  SINGLE	an object that fits in one buffer is PUT as the member
 *	  ASSEMBLE	otherwise: create a multipart upload of the member, copy
 *				each segment into it (UploadPartCopy guarded by the
 *				segment's ETag), complete it, delete this attempt's own
 *				segments
 *	  MANIFEST	PUT the manifest (manifest.c writes it); the task has
 *				succeeded
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

#include "engine/manifest.h"
#include "engine/s3xml.h"
#include "engine/source_uri.h"
#include "engine/transfer.h"

static void start_copies(Transfer *task);
static void start_manifest(Transfer *task);
static void member_written(Transfer *task);

/*
 * Members live under <staging>data/, apart from the attempt's control
 * objects (<staging>manifest.jsonl, <staging>segments/): no member name can
 * collide with them.
 */
static char *
member_key(Transfer *task)
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
start_s3(Transfer *task, const S3Call *call, RequestDone done, int kind,
		 int index)
{
	char     err[256];
	Request *req = remora_target_request(task->base.engine, task, call, done,
										 err, sizeof(err));

	if (req == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0, "%s", err);
		return false;
	}
	req->kind = kind;
	req->index = index;
	if (!remora_req_start(req))
	{
		remora_req_cancel(req);
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"could not start a request");
		return false;
	}
	return true;
}

static void
single_done(Request *req, CURLcode rc)
{
	Transfer       *task = req->owner;
	RemoraTaskError err;

	if (!remora_s3_put_etag(req, rc, task->result.member_etag,
							sizeof(task->result.member_etag), &err,
							"uploading the object"))
	{
		remora_fail_with(&task->status, &err);
		return;
	}
	member_written(task);
}

/* This attempt's own segments are no longer needed once the object is. */
static void
delete_own_segments(Transfer *task)
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
			Request *d = remora_target_request(task->base.engine, NULL, &del,
											   NULL, e, sizeof(e));

			if (d && !remora_req_start(d))
				remora_req_cancel(d);
		}
}

static void
assembled(Transfer *task, const char *etag)
{
	if (!remora_etag_fits_parts(etag, (const char *const *) task->part_etags,
								task->nsegs))
	{
		remora_fail(
			&task->status, REMORA_ERR_S3, true, 0,
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
	Transfer       *task = req->owner;
	RemoraTaskError err;
	char            etag[REMORA_ETAG_MAX];

	if (remora_s3_head_etag(req, rc, task->total, etag, sizeof(etag), &err,
							"completing the multipart upload"))
		assembled(task, etag);
	else
		remora_fail_with(&task->status, &err);
}

static void
complete_done(Request *req, CURLcode rc)
{
	Transfer       *task = req->owner;
	RemoraTaskError err;
	char           *etag;

	if (remora_s3_failed(req, rc, &err, "completing the multipart upload"))
	{
		remora_fail_with(&task->status, &err);
		return;
	}
	etag = remora_s3_answer_etag(req, "CompleteMultipartUploadResult", &err,
								 "completing the multipart upload");
	if (etag == NULL)
		remora_fail_with(&task->status, &err);
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
start_complete(Transfer *task)
{
	size_t len;
	char  *body = remora_s3xml_complete_body(
		 (const char *const *) task->part_etags, task->nsegs, &len);
	RemoraKV q[1] = {{"uploadId", task->upload_id}};
	S3Call   call;

	if (body == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
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
	Transfer       *task = req->owner;
	Segment        *seg = &task->segs[req->index - 1];
	RemoraTaskError err;
	char           *etag;

	task->copies--;
	if (remora_s3_failed(req, rc, &err, "copying a segment into the object"))
	{
		remora_fail_with(&task->status, &err);
		remora_xfer_settle(task);
		return;
	}
	etag = remora_s3_answer_etag(req, "CopyPartResult", &err,
								 "copying a segment into the object");
	if (etag == NULL)
	{
		remora_fail_with(&task->status, &err);
		remora_xfer_settle(task);
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
		remora_fail(
			&task->status, REMORA_ERR_S3, true, req->status,
			"copying segment %d into the object: the part's ETag '%s' is "
			"not the segment's %s",
			req->index, etag, seg->etag);
		free(etag);
		remora_xfer_settle(task);
		return;
	}
	task->part_etags[req->index - 1] = etag;
	task->copied++;
	if (task->copied == task->nsegs)
		start_complete(task);
	else
		start_copies(task);
	remora_xfer_settle(task);
}

static void
start_copies(Transfer *task)
{
	while (task->status.state == REMORA_TASK_RUNNING &&
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
			remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
						"out of memory");
			return;
		}
		n = strlen(task->bucket) + strlen(enc) + 3;
		source = malloc(n);
		if (source == NULL)
		{
			free(enc);
			remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
						"out of memory");
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
	Transfer       *task = req->owner;
	RemoraTaskError err;

	if (remora_s3_failed(req, rc, &err, "starting the multipart upload"))
	{
		remora_fail_with(&task->status, &err);
		return;
	}
	task->upload_id =
		remora_s3xml_text(req->body, req->body_len, "UploadId", NULL);
	task->part_etags = calloc(task->nsegs, sizeof(char *));
	if (task->upload_id == NULL || task->upload_id[0] == '\0' ||
		task->part_etags == NULL)
	{
		remora_fail(
			&task->status, REMORA_ERR_S3, true, req->status,
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
void
remora_xfer_start_assembly(Transfer *task)
{
	S3Call call;

	free(task->manifest);
	task->manifest = NULL;
	if (task->result.member_key[0] == '\0')
	{
		char *k = member_key(task);

		if (k == NULL)
		{
			remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
						"out of memory");
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

/*
 * The member object is in the store.  A task that is the whole job writes
 * its manifest next; a member of a larger job is done.
 */
static void
member_written(Transfer *task)
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
	task->status.state = REMORA_TASK_SUCCEEDED;
}

static void
manifest_done(Request *req, CURLcode rc)
{
	Transfer       *task = req->owner;
	RemoraTaskError err;

	if (!remora_s3_put_etag(req, rc, task->result.manifest_etag,
							sizeof(task->result.manifest_etag), &err,
							"writing the manifest"))
	{
		remora_fail_with(&task->status, &err);
		return;
	}
	task->phase = P_DONE;
	task->status.state = REMORA_TASK_SUCCEEDED;
}

/*
 * The manifest of a job of one member (see manifest.c).  The source is
 * recorded without its query string, which may hold a signature.
 */
static void
start_manifest(Transfer *task)
{
	RemoraTaskResult *r = &task->result;
	RemoraBuf         src = {0};
	RemoraBuf         member = {0};
	RemoraBuf         m = {0};
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
		char members_sha[65];

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
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
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

/*
 * An incomplete multipart upload would keep its parts, invisible to a
 * listing: ask the store to drop it (best effort: stores without
 * AbortMultipartUpload refuse).
 */
void
remora_xfer_abort_upload(Transfer *task)
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
	req = remora_target_request(task->base.engine, NULL, &call, NULL, err,
								sizeof(err));
	if (req && !remora_req_start(req))
		remora_req_cancel(req);
	task->upload_done = true;
}
