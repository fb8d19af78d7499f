/*-------------------------------------------------------------------------
 *
 * cleanup.c
 *	  A job of kind "cleanup": delete every object under a staging prefix
 *	  of the target bucket, then abort every multipart upload under it.
 *
 *	  LIST objects (a page) --> DELETE each (DELETES_IN_FLIGHT at once)
 *	     ^----- more pages -----+
 *	  LIST uploads (a page) --> abort each --> more pages --> succeeded
 *
 * It succeeds when nothing is left; a store without ListMultipartUploads
 * has no uploads to list.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine_int.h"
#include "engine/s3/s3xml.h"

#define DELETES_IN_FLIGHT 8

typedef struct Cleanup
{
	RemoraTask       base; /* kind: cleanup_kind */
	RemoraJobStatus  status;
	char            *bucket;
	char            *staging; /* the prefix */
	char           **del_keys;
	char           **del_uploads; /* upload ids, in the uploads phase */
	int              ndel;
	int              del_next;
	int              deleting;
	char            *list_token;
	bool             list_more;
	bool             uploads_phase;
	char            *key_marker;
	char            *upload_marker;
	RemoraTaskResult result; /* nothing but success to report */
} Cleanup;

static void cleanup_list(Cleanup *task);
static void cleanup_uploads_list(Cleanup *task);
static void cleanup_next(Cleanup *task);

/* After a failure: stop what is still running. */
static void
settle(Cleanup *task)
{
	if (task->status.state == REMORA_TASK_FAILED)
		remora_req_cancel_owner(&task->base.engine->loop, task);
}

static bool
start_s3(Cleanup *task, const S3Call *call, RequestDone done)
{
	char errbuf[256];

	if (remora_s3_start(&task->base.engine->loop, &task->base.engine->target,
						task, call, done, errbuf, sizeof(errbuf)) != NULL)
		return true;
	remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0, "%s", errbuf);
	return false;
}

static void
free_del_keys(Cleanup *task)
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

static void
cleanup_delete_done(Request *req, CURLcode rc)
{
	Cleanup        *task = req->owner;
	RemoraTaskError err;

	task->deleting--;
	/* already gone (NoSuchKey, NoSuchUpload) is as good as deleted */
	if (req->status != 404 &&
		remora_s3_failed(req, rc, &err,
						 task->uploads_phase ? "aborting a staging upload"
											 : "deleting a staging object"))
	{
		remora_fail_with(&task->status, &err);
		settle(task);
		return;
	}
	cleanup_next(task);
}

static void
cleanup_next(Cleanup *task)
{
	while (task->status.state == REMORA_TASK_RUNNING &&
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
					   NULL,
					   false,
					   NULL,
					   false};

		task->deleting++;
		if (!start_s3(task, &call, cleanup_delete_done))
			task->deleting--;
	}
	if (task->status.state == REMORA_TASK_RUNNING && task->deleting == 0 &&
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
			task->status.state = REMORA_TASK_SUCCEEDED;
		}
	}
}

static void
cleanup_list_done(Request *req, CURLcode rc)
{
	Cleanup        *task = req->owner;
	RemoraTaskError err;
	RemoraS3Listing l;

	if (remora_s3_failed(req, rc, &err, "listing staging objects"))
	{
		remora_fail_with(&task->status, &err);
		return;
	}
	if (!remora_s3xml_listing(req->body, req->body_len, &l))
	{
		remora_fail(&task->status, REMORA_ERR_S3, true, req->status,
					"listing staging objects: the store answered no listing");
		return;
	}
	task->del_keys = calloc(l.nobjects + 1, sizeof(char *));
	if (task->del_keys == NULL)
	{
		remora_s3xml_listing_free(&l);
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
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
		remora_fail(
			&task->status, REMORA_ERR_S3, true, req->status,
			"listing staging objects: a truncated listing had no continuation "
			"token");
		return;
	}
	remora_s3xml_listing_free(&l);
	cleanup_next(task);
}

static void
cleanup_list(Cleanup *task)
{
	RemoraKV q[3];
	int      nq = 0;
	S3Call   call;

	q[nq++] = (RemoraKV){"list-type", "2"};
	q[nq++] = (RemoraKV){"prefix", task->staging};
	if (task->list_token)
		q[nq++] = (RemoraKV){"continuation-token", task->list_token};
	call = (S3Call){"GET", task->bucket, NULL,  q,    nq,   NULL, 0, NULL,
					0,     NULL,         false, NULL, false};
	start_s3(task, &call, cleanup_list_done);
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
	Cleanup        *task = req->owner;
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
		remora_fail_with(&task->status, &err);
		return;
	}
	if (!remora_s3xml_uploads(req->body, req->body_len, &u) ||
		(u.truncated && u.next_key_marker == NULL))
	{
		remora_s3xml_uploads_free(&u);
		remora_fail(
			&task->status, REMORA_ERR_S3, true, req->status,
			"listing staging uploads: the store's answer was not understood");
		return;
	}
	task->del_keys = calloc(u.nuploads + 1, sizeof(char *));
	task->del_uploads = calloc(u.nuploads + 1, sizeof(char *));
	if (task->del_keys == NULL || task->del_uploads == NULL)
	{
		remora_s3xml_uploads_free(&u);
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
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
cleanup_uploads_list(Cleanup *task)
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
	call = (S3Call){"GET", task->bucket, NULL,  q,    nq,   NULL, 0, NULL,
					0,     NULL,         false, NULL, false};
	start_s3(task, &call, cleanup_uploads_done);
}

/* ------------------------------------------------------------ the kind */

static RemoraTaskState
cleanup_state(const RemoraTask *t)
{
	return ((const Cleanup *) t)->status.state;
}

static const RemoraTaskResult *
cleanup_result(const RemoraTask *t)
{
	const Cleanup *task = (const Cleanup *) t;

	return task->status.state == REMORA_TASK_SUCCEEDED ? &task->result : NULL;
}

static const RemoraTaskError *
cleanup_error(const RemoraTask *t)
{
	const Cleanup *task = (const Cleanup *) t;

	return task->status.state == REMORA_TASK_FAILED ? &task->status.error
													: NULL;
}

static void
cleanup_abort(RemoraTask *t, bool delete_staging)
{
	Cleanup *task = (Cleanup *) t;

	(void) delete_staging;
	remora_req_cancel_owner(&task->base.engine->loop, task);
	if (task->status.state == REMORA_TASK_RUNNING)
		task->status.state = REMORA_TASK_ABORTED;
}

static void
cleanup_free(RemoraTask *t)
{
	Cleanup *task = (Cleanup *) t;

	remora_req_cancel_owner(&task->base.engine->loop, task);
	free_del_keys(task);
	free(task->bucket);
	free(task->staging);
	free(task->list_token);
	free(task->key_marker);
	free(task->upload_marker);
}

/* (it moves no bytes: no progress, restart or checkpoint) */
static const RemoraTaskKind cleanup_kind = {.name = "cleanup",
											.state = cleanup_state,
											.result = cleanup_result,
											.error = cleanup_error,
											.abort = cleanup_abort,
											.free = cleanup_free};

/*
 * Delete every object under prefix (which must be a staging prefix or a
 * part of one, ending in '/'), then abort every multipart upload under it.
 * Succeeds when nothing is left.
 */
RemoraTask *
remora_cleanup_start(RemoraEngine *engine, const char *bucket,
					 const char *prefix, char *errbuf, size_t errlen)
{
	Cleanup *task;

	if (prefix[0] == '\0' || prefix[strlen(prefix) - 1] != '/')
	{
		snprintf(errbuf, errlen, "a cleanup needs a prefix ending in '/'");
		return NULL;
	}
	task = calloc(1, sizeof(Cleanup));
	if (task == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	remora_task_register(engine, &task->base, &cleanup_kind);
	task->status.state = REMORA_TASK_RUNNING;
	task->bucket = strdup(bucket);
	task->staging = strdup(prefix);
	if (task->bucket == NULL || task->staging == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		remora_task_free(&task->base);
		return NULL;
	}
	cleanup_list(task);
	return &task->base;
}
