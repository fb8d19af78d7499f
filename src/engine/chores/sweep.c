/*-------------------------------------------------------------------------
 *
 * sweep.c
 *	  A job of kind "sweep": list every object under a prefix of the target
 *	  bucket, a page at a time, ask the host which of each page to delete,
 *	  and delete those.
 *
 *	  LIST objects (a page) --> lookup: which are doomed? (the host)
 *	     ^                         |
 *	     |                         v
 *	     +---- more pages ---- DELETE each doomed one (DELETES_IN_FLIGHT)
 *
 * The engine decides nothing here: what an orphan is (an object of an
 * attempt its host's database does not know) is the host's answer.  A
 * lookup handed back unanswered deletes nothing and fails the sweep;
 * so does a delete the store refuses (one already gone is as good as
 * deleted).  One page is held at a time, whatever the prefix holds.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine_int.h"
#include "engine/s3/s3xml.h"

#define DELETES_IN_FLIGHT 8

typedef struct Sweep
{
	RemoraTask         base; /* kind: sweep_kind */
	RemoraJobStatus    status;
	void              *host_arg;
	char              *bucket;
	char              *prefix;
	RemoraS3Listing    page; /* the page being judged or deleted */
	RemoraSweepObject *objects;
	int                nobjects;
	bool              *doomed;     /* the host's answer, for objects[] */
	RemoraLookup      *lookup;     /* queued, not yet answered */
	int                del_next;   /* the next of objects[] to consider */
	int                deleting;   /* DELETEs in flight */
	char              *list_token; /* where the next page starts */
	bool               list_more;
	RemoraTaskResult   result; /* nothing but success to report */
} Sweep;

static void sweep_list(Sweep *task);
static void sweep_next(Sweep *task);

static void
fail_oom(Sweep *task)
{
	remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0, "out of memory");
	remora_req_cancel_owner(&task->base.engine->loop, task);
}

static bool
start_s3(Sweep *task, const S3Call *call, RequestDone done)
{
	char errbuf[256];

	if (remora_s3_start(&task->base.engine->loop, &task->base.engine->target,
						task, call, done, errbuf, sizeof(errbuf)) != NULL)
		return true;
	remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0, "%s", errbuf);
	remora_req_cancel_owner(&task->base.engine->loop, task);
	return false;
}

/* The page is done with: free it and its answer. */
static void
page_free(Sweep *task)
{
	remora_s3xml_listing_free(&task->page);
	free(task->objects);
	free(task->doomed);
	task->objects = NULL;
	task->doomed = NULL;
	task->nobjects = task->del_next = 0;
}

static void
sweep_delete_done(Request *req, CURLcode rc)
{
	Sweep          *task = req->owner;
	RemoraTaskError err;

	task->deleting--;
	/* already gone (NoSuchKey) is as good as deleted */
	if (req->status != 404 &&
		remora_s3_failed(req, rc, &err, "deleting an orphaned object"))
	{
		remora_fail_with(&task->status, &err);
		remora_req_cancel_owner(&task->base.engine->loop, task);
		return;
	}
	sweep_next(task);
}

/* Delete the page's doomed objects; then the next page, or the end. */
static void
sweep_next(Sweep *task)
{
	while (task->status.state == REMORA_TASK_RUNNING &&
		   task->deleting < DELETES_IN_FLIGHT &&
		   task->del_next < task->nobjects)
	{
		int    i = task->del_next++;
		S3Call call = {"DELETE",
					   task->bucket,
					   task->objects[i].key,
					   NULL,
					   0,
					   NULL,
					   0,
					   NULL,
					   0,
					   NULL,
					   false,
					   NULL,
					   false};

		if (!task->doomed[i])
			continue;
		task->deleting++;
		if (!start_s3(task, &call, sweep_delete_done))
			return;
	}
	if (task->status.state == REMORA_TASK_RUNNING && task->deleting == 0 &&
		task->del_next == task->nobjects && task->lookup == NULL)
	{
		page_free(task);
		if (task->list_more)
			sweep_list(task);
		else
			task->status.state = REMORA_TASK_SUCCEEDED;
	}
}

static void
page_answered(RemoraTask *t, RemoraLookup *lookup, bool ok)
{
	Sweep *task = (Sweep *) t;

	task->lookup = NULL;
	if (!ok)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"the host could not judge a page of %s/%s", task->bucket,
					task->prefix);
		return;
	}
	memcpy(task->doomed, lookup->doomed, task->nobjects * sizeof(bool));
	sweep_next(task);
}

static void
sweep_list_done(Request *req, CURLcode rc)
{
	Sweep          *task = req->owner;
	RemoraTaskError err;
	size_t          plen = strlen(task->prefix);

	if (remora_s3_failed(req, rc, &err, "listing the staging area"))
	{
		remora_fail_with(&task->status, &err);
		return;
	}
	if (!remora_s3xml_listing(req->body, req->body_len, &task->page))
	{
		remora_fail(&task->status, REMORA_ERR_S3, true, req->status,
					"listing the staging area: the store answered no listing");
		return;
	}
	free(task->list_token);
	task->list_token = task->page.truncated && task->page.next_token
						   ? strdup(task->page.next_token)
						   : NULL;
	task->list_more = task->list_token != NULL;
	if (task->page.truncated && task->list_token == NULL)
	{
		/* a truncated listing without a way on: do not loop, fail */
		remora_fail(&task->status, REMORA_ERR_S3, true, req->status,
					"listing the staging area: a truncated listing had no "
					"continuation token");
		return;
	}
	task->objects = calloc(task->page.nobjects + 1, sizeof(RemoraSweepObject));
	task->doomed = calloc(task->page.nobjects + 1, sizeof(bool));
	if (task->objects == NULL || task->doomed == NULL)
	{
		fail_oom(task);
		return;
	}
	for (int i = 0; i < task->page.nobjects; i++)
	{
		const RemoraS3Object *o = &task->page.objects[i];

		/* the listing is by prefix; trust nothing outside it */
		if (strncmp(o->key, task->prefix, plen) != 0)
			continue;
		task->objects[task->nobjects++] = (RemoraSweepObject){
			o->key, o->size, o->last_modified ? o->last_modified : ""};
	}
	if (task->nobjects == 0)
	{
		sweep_next(task);
		return;
	}
	task->lookup = remora_lookup_queue_sweep(task->base.engine, &task->base,
											 task->host_arg, task->objects,
											 task->nobjects, page_answered);
	if (task->lookup == NULL)
		fail_oom(task);
}

static void
sweep_list(Sweep *task)
{
	RemoraKV q[3];
	int      nq = 0;
	S3Call   call;

	q[nq++] = (RemoraKV){"list-type", "2"};
	q[nq++] = (RemoraKV){"prefix", task->prefix};
	if (task->list_token)
		q[nq++] = (RemoraKV){"continuation-token", task->list_token};
	call = (S3Call){"GET", task->bucket, NULL,  q,    nq,   NULL, 0, NULL,
					0,     NULL,         false, NULL, false};
	start_s3(task, &call, sweep_list_done);
}

/* ------------------------------------------------------------ the kind */

static RemoraTaskState
sweep_state(const RemoraTask *t)
{
	return ((const Sweep *) t)->status.state;
}

static const RemoraTaskResult *
sweep_result(const RemoraTask *t)
{
	const Sweep *task = (const Sweep *) t;

	return task->status.state == REMORA_TASK_SUCCEEDED ? &task->result : NULL;
}

static const RemoraTaskError *
sweep_error(const RemoraTask *t)
{
	const Sweep *task = (const Sweep *) t;

	return task->status.state == REMORA_TASK_FAILED ? &task->status.error
													: NULL;
}

static void
sweep_abort(RemoraTask *t, bool delete_staging)
{
	Sweep *task = (Sweep *) t;

	(void) delete_staging;
	remora_req_cancel_owner(&task->base.engine->loop, task);
	if (task->status.state == REMORA_TASK_RUNNING)
		task->status.state = REMORA_TASK_ABORTED;
}

static void
sweep_free(RemoraTask *t)
{
	Sweep *task = (Sweep *) t;

	remora_req_cancel_owner(&task->base.engine->loop, task);
	page_free(task);
	free(task->bucket);
	free(task->prefix);
	free(task->list_token);
}

/* (it moves no bytes: no progress, restart or checkpoint) */
static const RemoraTaskKind sweep_kind = {.name = "sweep",
										  .state = sweep_state,
										  .result = sweep_result,
										  .error = sweep_error,
										  .abort = sweep_abort,
										  .free = sweep_free};

/*
 * List every object under prefix of bucket (prefix ends in '/', or is ""
 * for the whole bucket), a page at a time, each page a lookup of kind
 * REMORA_LOOKUP_SWEEP_PAGE; delete the objects the host dooms.  Succeeds
 * when every page was judged and its doomed objects are gone.
 */
RemoraTask *
remora_sweep_start(RemoraEngine *engine, const char *bucket, const char *prefix,
				   void *host_arg, char *errbuf, size_t errlen)
{
	Sweep *task;

	if (prefix[0] != '\0' && prefix[strlen(prefix) - 1] != '/')
	{
		snprintf(errbuf, errlen, "a sweep needs a prefix ending in '/'");
		return NULL;
	}
	task = calloc(1, sizeof(Sweep));
	if (task == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	remora_task_register(engine, &task->base, &sweep_kind);
	task->status.state = REMORA_TASK_RUNNING;
	task->host_arg = host_arg;
	task->bucket = strdup(bucket);
	task->prefix = strdup(prefix);
	if (task->bucket == NULL || task->prefix == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		remora_task_free(&task->base);
		return NULL;
	}
	sweep_list(task);
	return &task->base;
}
