/*-------------------------------------------------------------------------
 *
 * start.c
 *	  From a claim to a running attempt: the claim's spec read (the
 *	  codec), its source endpoint fetched, the task started in the engine,
 *	  the attempt added to the table (attempts.c); or the attempt failed at
 *	  once when any of that cannot be done (src/runner/README.md).
 *
 * Memory: malloc'd; the attempt belongs to the table once added.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/util.h"
#include "runner/attempt.h"
#include "runner/attempts.h"
#include "runner/codec.h"
#include "runner/state.h"

typedef RemoraAttempt Attempt;

static void
refuse(const RemoraClaimRow *row, const char *class, bool retryable,
	   const char *msg)
{
	char *doc = remora_codec_error(class, msg, 0, 0, NULL, -1);
	char *state = remora_call_fail(row->job_id, row->attempt_id, row->token,
								   doc, retryable);

	remora_rlog("job %" PRId64 " attempt %s refused: %s (the job is now %s)",
				row->job_id, row->attempt_id, msg, state ? state : "unknown");
	free(doc);
	free(state);
}

/*
 * Start the engine's task for a work: the one start function of every
 * kind.  NULL with err set when the engine refuses.
 */
static RemoraTask *
start_task(RemoraWork *w, const RemoraClaimRow *row, Attempt *a,
		   RemoraResume *resume, const RemoraEndpoint *ep, char *err,
		   size_t errlen)
{
	const RemoraRunnerConfig *cfg = &remora_runner.cfg;
	RemoraEngine             *engine = remora_runner.engine;
	RemoraPrior               unchanged;
	/*
	 * the job's own number, pinned; else from the setting's (one: a
	 * single GET), as many as pay
	 */
	int connections = w->connections > 0 ? (int) w->connections
					  : cfg->connections > 1
						  ? REMORA_CONNECTIONS_ADAPT(cfg->connections)
						  : 1;

	switch (w->kind)
	{
		case REMORA_WORK_EXPORT:
			w->u.export.host_arg = a;
			return remora_export_start(engine, &w->u.export, err, errlen);
		case REMORA_WORK_SET:
			if (ep)
				w->u.set.source_store = &ep->cfg;
			w->u.set.hub_url = cfg->hub_url;
			w->u.set.token =
				cfg->hf_token && cfg->hf_token[0] ? cfg->hf_token : NULL;
			w->u.set.job_id = row->job_id;
			w->u.set.attempt_id = row->attempt_id;
			w->u.set.fencing_token = row->token;
			/* what an earlier attempt, or the job reused from, holds */
			w->u.set.earlier_attempts = w->attempt_no > 1 || w->reuse_from > 0;
			w->u.set.host_arg = a;
			w->u.set.connections = connections;
			w->u.set.storage_class = w->storage_class;
			w->u.set.dry_run = w->dry_run;
			return remora_set_start(engine, &w->u.set, err, errlen);
		case REMORA_WORK_OBJECT:
			w->u.object.resume = resume;
			/* a mirror's earlier copy, if the source has not changed */
			if (w->reuse_from > 0 && resume == NULL &&
				remora_call_lookup(row->job_id, row->attempt_id,
								   (const char *const[]){w->file_name}, 1,
								   &unchanged) &&
				unchanged.found)
				w->u.object.unchanged = &unchanged; /* the engine copies it */
			w->u.object.job_id = row->job_id;
			w->u.object.attempt_id = row->attempt_id;
			w->u.object.fencing_token = row->token;
			w->u.object.connections = connections;
			w->u.object.storage_class = w->storage_class;
			w->u.object.dry_run = w->dry_run;
			return remora_task_start(engine, &w->u.object, err, errlen);
	}
	remora_errbuf_set(err, errlen, "unknown kind of work");
	return NULL;
}

/*
 * The source endpoint an s3 set names, or NULL when it needs none; false
 * (the attempt refused) when it cannot be read or is gone.
 */
static bool
endpoint_of(const RemoraWork *w, const RemoraClaimRow *row, RemoraEndpoint *ep,
			bool *found)
{
	memset(ep, 0, sizeof(*ep));
	*found = false;
	if (w->kind != REMORA_WORK_SET || w->u.set.kind != REMORA_SET_S3 ||
		w->endpoint == NULL)
		return true;
	if (!remora_call_endpoint(w->endpoint, ep, found))
	{
		refuse(row, REMORA_ERR_INTERNAL, true,
			   "the job's source endpoint could not be read");
		return false;
	}
	if (!*found)
	{
		refuse(row, REMORA_ERR_SOURCE, false,
			   "the job's source endpoint is no longer registered");
		return false;
	}
	return true;
}

static Attempt *
new_attempt(const RemoraWork *w, const RemoraClaimRow *row, const char *why,
			int64_t claim_sent_ms)
{
	Attempt *a = calloc(1, sizeof(Attempt));

	if (a == NULL)
		return NULL;
	a->bucket = strdup(w->bucket);
	a->file_name = strdup(w->file_name);
	if (a->bucket == NULL || a->file_name == NULL)
	{
		remora_attempt_free(a);
		return NULL;
	}
	a->kind = w->kind;
	a->job_id = row->job_id;
	snprintf(a->attempt_id, sizeof(a->attempt_id), "%s", row->attempt_id);
	a->token = row->token;
	a->owner = w->owner;
	a->forced_restart = why;
	a->fence_ms = remora_attempt_fence_after(claim_sent_ms);
	return a;
}

/*
 * Start the attempt a claim handed out, or fail it at once (its spec
 * cannot be read, its endpoint is gone, the engine refuses it).  The row's
 * texts are the caller's.
 */
void
remora_attempts_start(RemoraClaimRow *row, int64_t claim_sent_ms)
{
	RemoraWork     w;
	char           err[512];
	RemoraResume  *resume = NULL;
	const char    *why = NULL;
	RemoraEndpoint ep;
	bool           ep_found;
	Attempt       *a;

	if (row->spec == NULL ||
		!remora_codec_decode_spec(row->spec, &w, err, sizeof(err)))
	{
		char msg[600];

		snprintf(msg, sizeof(msg),
				 "the job's specification could not be read: %s",
				 row->spec ? err : "the claim handed out none");
		refuse(row, REMORA_ERR_INTERNAL, true, msg);
		return;
	}
	if (!endpoint_of(&w, row, &ep, &ep_found))
	{
		remora_codec_work_free(&w);
		return;
	}
	if (w.kind == REMORA_WORK_OBJECT)
	{
		resume = remora_codec_decode_resume(row->resume, &why);
		if (why)
			remora_rlog("job %" PRId64 " attempt %s starts from zero: %s",
						row->job_id, row->attempt_id, why);
	}
	a = new_attempt(&w, row, why, claim_sent_ms);
	if (a == NULL)
		snprintf(err, sizeof(err), "out of memory");
	else
		a->task = start_task(&w, row, a, resume, ep_found ? &ep : NULL, err,
							 sizeof(err));
	remora_endpoint_free(&ep);
	if (a == NULL || a->task == NULL)
	{
		remora_resume_free(resume);
		refuse(row, REMORA_ERR_INTERNAL, true, err);
		if (a)
			remora_attempt_free(a);
		remora_codec_work_free(&w);
		return;
	}
	remora_attempts_add(a);
	remora_rlog("job %" PRId64 " attempt %s started (%s, token %" PRId64 ")%s",
				a->job_id, a->attempt_id, w.source_kind, a->token,
				resume ? ", resuming from a checkpoint" : "");
	remora_resume_free(resume);
	remora_codec_work_free(&w);
}
