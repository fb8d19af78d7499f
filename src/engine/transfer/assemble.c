/*-------------------------------------------------------------------------
 *
 * assemble.c
 *	  A member transfer's end: the member object, and the manifest of a job
 *	  of one member.
 *
 *	  SINGLE	an object that fits in one buffer is PUT as the member,
 *				signed with its SHA-256 (the member's own)
 *	  COMPLETE	otherwise: complete the attempt's multipart upload of the
 *				member with its parts (parts.c uploaded them), and check
 *				the object's ETag against them
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

#include "engine/transfer/manifest.h"
#include "engine/common/source_uri.h"
#include "engine/transfer/transfer.h"

static void start_manifest(Transfer *task);

/* Start a request of the task to the target store; false: failed. */
bool
remora_xfer_start_s3(Transfer *task, const S3Call *call, RequestDone done,
					 int kind, int index)
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
	remora_xfer_member_written(task);
}

/* The completed object's ETag must be what its parts make. */
static void
assembled(Transfer *task, const char *etag)
{
	const char    **etags = remora_xfer_part_etags(task);
	bool            fits;
	RemoraTaskError err;

	if (etags == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
		return;
	}
	fits = remora_mpu_fits(etag, etags, task->nparts, &err,
						   "completing the multipart upload");
	free(etags);
	if (!fits)
	{
		remora_fail_with(&task->status, &err);
		return;
	}
	snprintf(task->result.member_etag, sizeof(task->result.member_etag), "%s",
			 etag);
	task->upload_done = true;
	remora_xfer_member_written(task);
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

	etag =
		remora_mpu_completed(req, rc, &err, "completing the multipart upload");
	if (etag == NULL)
		remora_fail_with(&task->status, &err);
	else if (etag[0] == '\0')
	{
		/* RGW answers an empty <ETag>: HEAD tells */
		MpuCall c;

		remora_mpu_head(&task->mpu, &c);
		remora_xfer_start_s3(task, &c.call, assembled_head_done, K_HEAD, 0);
	}
	else
		assembled(task, etag);
	free(etag);
}

/* Complete the attempt's upload with every part, in order. */
static void
start_complete(Transfer *task)
{
	const char **etags = remora_xfer_part_etags(task);
	MpuCall      c;
	bool         ok;

	ok = etags != NULL &&
		 remora_mpu_complete(&task->mpu, etags, task->nparts, &c);
	free(etags);
	if (!ok)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"could not build the part list");
		return;
	}
	remora_xfer_start_s3(task, &c.call, complete_done, K_COMPLETE, 0);
}

/*
 * The source is all in, and every part acknowledged: make the member
 * object.  One buffer: PUT it.  Parts: complete the upload.
 */
void
remora_xfer_start_assembly(Transfer *task)
{
	free(task->manifest);
	task->manifest = NULL;
	task->result.member_size = task->total;
	snprintf(task->result.member_sha256, sizeof(task->result.member_sha256),
			 "%s", task->sha_hex);

	if (task->phase == P_SINGLE)
	{
		Buffer *b = task->fill;
		S3Call  call = {"PUT",
						task->bucket,
						task->result.member_key,
						NULL,
						0,
						NULL,
						0,
						b->data,
						b->len,
						task->sha_hex,
						false,
						task->storage_class,
						false};

		/* the body is the whole object: its SHA-256 is the member's */
		remora_xfer_start_s3(task, &call, single_done, K_SINGLE, 0);
		return;
	}
	task->phase = P_COMPLETE;
	start_complete(task);
}

/*
 * The member object is in the store.  A task that is the whole job writes
 * its manifest next; a member of a larger job is done.
 */
void
remora_xfer_member_written(Transfer *task)
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
		 remora_manifest_member(
			 &member, task->file_name, r->member_key[0] ? r->member_key : NULL,
			 r->member_size, r->member_sha256, r->member_etag, src.data,
			 r->reused_from_job > 0, r->reused_from_job);
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
	call = (S3Call){"PUT",
					task->bucket,
					r->manifest_key,
					NULL,
					0,
					NULL,
					0,
					task->manifest,
					task->manifest_len,
					NULL,
					false,
					task->storage_class,
					false};
	remora_xfer_start_s3(task, &call, manifest_done, K_MANIFEST, 0);
}
