/*-------------------------------------------------------------------------
 *
 * runner.c
 *	  The attempts one remora-worker runs: each from its claim to its
 *	  commit, its failure or its stop.  The same state machine as the
 *	  background workers' (src/pg/attempt.c, src/pg/README.md), over libpq:
 *
 *	  claimed --start--> running --checkpoint--> running
 *	    |                  |--> succeeded --commit--> done
 *	    |                  |--> failed --fail--> done
 *	    |                  |--> renewal or checkpoint refused, or the job
 *	    |                  |    cancelled: stopped (the sweep cleans up)
 *	    |                  |--> its lease could not be renewed in time:
 *	    |                  |    stopped (fenced, below)
 *	    |                  `--> SIGTERM: handed back (fail, retryable)
 *	    `--> spec unreadable, endpoint gone, engine refuses: failed at once
 *
 * Fencing on the worker's own clock: an attempt may go on (and commit)
 * only while the lease it last renewed surely runs.  Its fence is the
 * moment the last successful renewal (or the claim) was sent, plus the
 * lease, less a margin (a quarter of the lease, at least 500 ms); when the
 * fence passes without a renewal (the server unreachable, paused, or its
 * answers lost) the attempt is aborted before its lease could have
 * expired, so that it never commits afterwards.  Safety does not depend
 * on it: remora.commit refuses an attempt that lost its authority.
 *
 * A commit or fail call that failed is tried again next round, at most
 * CALL_TRIES times; members and references a checkpoint carries are kept
 * until the call that recorded them has returned (each call is its own
 * transaction), and offered again otherwise.  Documents come from the
 * codec (encode.c, decode.c), statements from calls.c.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/codec.h"
#include "worker/log.h"
#include "worker/runner.h"

#define CALL_TRIES 5

typedef struct Attempt
{
	RemoraTask *task;
	int64_t     job_id;
	char        attempt_id[REMORA_UUID_LEN];
	int64_t     token;
	char       *bucket;
	char       *file_name;
	bool        is_set;
	bool        is_export;
	const char *forced_restart; /* a constant string */
	bool        restart_reported;
	bool        renew_blocked; /* the last renewal failed: renew it last */
	int         call_failures;
	char       *commit_doc;
	RemoraDocs  unsent; /* members or references not yet recorded */
	int64_t     fence_ms;
} Attempt;

static RemoraConn        *conn;
static RemoraRunnerConfig config;
static Attempt           *attempts[REMORA_WORKER_MAX_ATTEMPTS];
static int                nattempts;

void
remora_runner_init(RemoraConn *c, const RemoraRunnerConfig *cfg)
{
	conn = c;
	config = *cfg;
}

int
remora_runner_count(void)
{
	return nattempts;
}

static int64_t
fence_after(int64_t sent_ms)
{
	int margin = config.lease_ms / 4 > 500 ? config.lease_ms / 4 : 500;

	return sent_ms + config.lease_ms - margin;
}

static void
forget_attempt(int i)
{
	Attempt *a = attempts[i];

	remora_task_free(a->task);
	free(a->bucket);
	free(a->file_name);
	free(a->commit_doc);
	remora_docs_clear(&a->unsent);
	free(a);
	attempts[i] = attempts[--nattempts];
}

static void
stop_attempt(int i, const char *why)
{
	remora_wlog("job %" PRId64 " attempt %s stopped: %s", attempts[i]->job_id,
				attempts[i]->attempt_id, why);
	remora_task_abort(attempts[i]->task, false);
	forget_attempt(i);
}

/* Members or references the engine hands out now, kept until recorded. */
static void
keep_docs(Attempt *a, const RemoraTaskCheckpoint *cp)
{
	for (int i = 0; a->is_export && i < cp->nrefs; i++)
		(void) remora_docs_add(&a->unsent, remora_codec_ref(&cp->refs[i]));
	for (int i = 0; a->is_set && i < cp->nmembers; i++)
		(void) remora_docs_add(&a->unsent,
							   remora_codec_member(a->bucket, &cp->members[i]));
}

/* ------------------------------------------------------------ renewals */

static int
by_blocked_then_job(const void *x, const void *y)
{
	const Attempt *a = *(Attempt *const *) x;
	const Attempt *b = *(Attempt *const *) y;

	if (a->renew_blocked != b->renew_blocked)
		return a->renew_blocked ? 1 : -1;
	return a->job_id < b->job_id ? -1 : a->job_id > b->job_id;
}

/*
 * Renew every lease; stop the attempts that lost authority or were
 * cancelled.  One whose renewal failed keeps running until its fence.
 */
void
remora_runner_renew(void)
{
	bool stop[REMORA_WORKER_MAX_ATTEMPTS] = {0};
	bool cancelled[REMORA_WORKER_MAX_ATTEMPTS] = {0};

	/* renewals whose last try failed go last: they delay no other */
	qsort(attempts, nattempts, sizeof(Attempt *), by_blocked_then_job);
	for (int i = 0; i < nattempts; i++)
	{
		Attempt *a = attempts[i];
		int64_t  sent = remora_wclock_ms();
		bool     ok;
		bool     called = remora_call_renew(conn, a->job_id, a->attempt_id,
											a->token, &ok, &cancelled[i]);

		a->renew_blocked = !called;
		if (called && ok)
			a->fence_ms = fence_after(sent);
		/* one whose result is ready is left to remora.commit */
		stop[i] = called && !ok &&
				  remora_task_state(a->task) != REMORA_TASK_SUCCEEDED;
	}
	for (int i = nattempts - 1; i >= 0; i--)
		if (stop[i])
			stop_attempt(i, cancelled[i] ? "the job was cancelled"
										 : "the attempt lost its lease");
}

/* Abort the attempts whose lease may be about to lapse (see the header). */
void
remora_runner_fence(void)
{
	int64_t now = remora_wclock_ms();

	for (int i = nattempts - 1; i >= 0; i--)
		if (now >= attempts[i]->fence_ms)
			stop_attempt(i, "its lease could not be renewed in time; it "
							"will not commit");
}

/* When the next fence passes (INT64_MAX with no attempt). */
int64_t
remora_runner_next_fence_ms(void)
{
	int64_t next = INT64_MAX;

	for (int i = 0; i < nattempts; i++)
		if (attempts[i]->fence_ms < next)
			next = attempts[i]->fence_ms;
	return next;
}

/* ------------------------------------------------------------- finish */

static bool
give_up_calls(Attempt *a, const char *what)
{
	if (++a->call_failures < CALL_TRIES)
		return false;
	remora_wlog("job %" PRId64 " attempt %s: %s failed %d times, giving the "
				"attempt up; its lease lapses and the job is retried",
				a->job_id, a->attempt_id, what, a->call_failures);
	return true;
}

typedef enum Outcome
{
	DONE,
	REFUSED,
	AGAIN
} Outcome;

/*
 * The descriptor of a result, built once and kept (the engine hands out a
 * set's last members only once), or NULL when it cannot be built yet.
 */
static const char *
commit_doc(Attempt *a, const RemoraTaskResult *r)
{
	RemoraTaskCheckpoint cp;

	if (a->commit_doc)
		return a->commit_doc;
	if ((a->is_set || a->is_export) && remora_task_checkpoint(a->task, &cp))
		keep_docs(a, &cp);
	a->commit_doc = a->is_export ? remora_codec_export_descriptor(r, &a->unsent)
					: a->is_set  ? remora_codec_set_descriptor(r, &a->unsent)
								 : remora_codec_object_descriptor(r, a->bucket,
																  a->file_name);
	if (a->commit_doc)
		remora_docs_clear(&a->unsent);
	return a->commit_doc;
}

static Outcome
report_success(Attempt *a)
{
	bool ok;

	if (commit_doc(a, remora_task_result(a->task)) == NULL)
		return AGAIN;
	if (!remora_call_commit(conn, a->job_id, a->attempt_id, a->token,
							a->commit_doc, &ok))
		return AGAIN;
	return ok ? DONE : REFUSED;
}

/* May this attempt commit now?  (Past its fence remora_runner_fence stops it.)
 */
static bool
may_commit(const Attempt *a)
{
	return remora_task_state(a->task) == REMORA_TASK_SUCCEEDED &&
		   remora_wclock_ms() < a->fence_ms;
}

/*
 * Commit the results of the attempts that succeeded and may still commit
 * (committing[i]; outcome[i] for attempts[i]): several in one call and one
 * transaction (remora.commit_many, which decides each item as remora.commit
 * would); if that call fails, each alone.
 */
static void
commit_succeeded(const bool *committing, Outcome *outcome)
{
	const char *ids[REMORA_WORKER_MAX_ATTEMPTS];
	int64_t     tokens[REMORA_WORKER_MAX_ATTEMPTS];
	const char *docs[REMORA_WORKER_MAX_ATTEMPTS];
	bool        ok[REMORA_WORKER_MAX_ATTEMPTS];
	int         which[REMORA_WORKER_MAX_ATTEMPTS];
	int         n = 0;

	for (int i = 0; i < nattempts; i++)
	{
		Attempt *a = attempts[i];

		outcome[i] = AGAIN;
		if (!committing[i] ||
			commit_doc(a, remora_task_result(a->task)) == NULL)
			continue;
		ids[n] = a->attempt_id;
		tokens[n] = a->token;
		docs[n] = a->commit_doc;
		which[n++] = i;
	}
	if (n > 1 && remora_call_commit_many(conn, n, ids, tokens, docs, ok))
	{
		for (int k = 0; k < n; k++)
			outcome[which[k]] = ok[k] ? DONE : REFUSED;
		return;
	}
	for (int k = 0; k < n; k++)
		outcome[which[k]] = report_success(attempts[which[k]]);
}

static void export_flush(Attempt *a);

/* Commit what succeeded, report what failed. */
void
remora_runner_finish(void)
{
	Outcome outcome[REMORA_WORKER_MAX_ATTEMPTS];
	bool    committing[REMORA_WORKER_MAX_ATTEMPTS];

	for (int i = 0; i < nattempts; i++)
		committing[i] = may_commit(attempts[i]);
	commit_succeeded(committing, outcome);
	/* backwards: forgetting attempts[i] moves the last one into its place */
	for (int i = nattempts - 1; i >= 0; i--)
	{
		Attempt        *a = attempts[i];
		RemoraTaskState st = remora_task_state(a->task);

		if (st == REMORA_TASK_SUCCEEDED)
		{
			Outcome o = outcome[i];
			bool    ok = false, cancelled;

			if (!committing[i])
				continue; /* remora_runner_fence stops it */
			if (o == DONE)
				remora_wlog("job %" PRId64 " attempt %s committed its result",
							a->job_id, a->attempt_id);
			else if (o == REFUSED &&
					 (!remora_call_renew(conn, a->job_id, a->attempt_id,
										 a->token, &ok, &cancelled) ||
					  !ok))
				remora_wlog("job %" PRId64 " attempt %s: commit refused; it "
							"no longer holds the job, its staging objects "
							"will be removed",
							a->job_id, a->attempt_id);
			else if (o == REFUSED)
			{
				char *state;

				remora_wlog("job %" PRId64 " attempt %s: commit refused "
							"although it holds the job; it fails, retryable",
							a->job_id, a->attempt_id);
				state = remora_call_fail(
					conn, a->job_id, a->attempt_id, a->token,
					remora_codec_error(REMORA_ERR_INTERNAL,
									   "the commit of the result was refused "
									   "although the attempt holds the job",
									   0, 0, NULL, -1),
					true);
				free(state);
			}
			else if (!give_up_calls(a, "committing its result"))
				continue;
			forget_attempt(i);
		}
		else if (st == REMORA_TASK_FAILED)
		{
			const RemoraTaskError *e = remora_task_error(a->task);
			char                  *doc, *state;

			if (a->is_export)
				export_flush(a);
			doc = remora_codec_task_error(e);
			state = remora_call_fail(conn, a->job_id, a->attempt_id, a->token,
									 doc, e->retryable);
			free(doc);
			if (state == NULL)
			{
				if (give_up_calls(a, "reporting its failure"))
					forget_attempt(i);
				continue;
			}
			remora_wlog("job %" PRId64 " attempt %s failed: %s (class %s, "
						"%s; the job is now %s)",
						a->job_id, a->attempt_id, e->message, e->class,
						e->retryable ? "retryable" : "not retryable", state);
			free(state);
			forget_attempt(i);
		}
	}
}

/* --------------------------------------------------------- checkpoints */

/* The checkpoint of an attempt with new progress, or NULL. */
static char *
checkpoint_doc(Attempt *a)
{
	RemoraTaskCheckpoint cp;
	const char          *why = NULL;
	const char          *restarted;

	if (!remora_task_checkpoint(a->task, &cp))
		return a->unsent.n == 0 ? NULL
			   : a->is_export
				   ? remora_codec_export_checkpoint(NULL, &a->unsent)
				   : remora_codec_checkpoint(NULL, true, NULL, &a->unsent);
	if (a->is_export || a->is_set)
	{
		keep_docs(a, &cp);
		return a->is_export
				   ? remora_codec_export_checkpoint(&cp, &a->unsent)
				   : remora_codec_checkpoint(&cp, true, NULL, &a->unsent);
	}
	if (!a->restart_reported && a->forced_restart)
		why = a->forced_restart;
	else if (!a->restart_reported && remora_task_restarted(a->task, &restarted))
		why = restarted;
	a->restart_reported = a->restart_reported || why != NULL;
	return remora_codec_checkpoint(&cp, false, why, NULL);
}

/* One checkpoint call; false when the attempt must stop (refused). */
static bool
checkpoint_one(Attempt *a)
{
	char *doc = checkpoint_doc(a);
	bool  ok = true;

	if (doc == NULL)
		return true;
	if (remora_call_checkpoint(conn, a->job_id, a->attempt_id, a->token, doc,
							   &ok))
		remora_docs_clear(&a->unsent);
	else
		ok = true; /* the call failed: offered again next time */
	free(doc);
	return ok;
}

/* An export that failed: record the answers it holds before its failure. */
static void
export_flush(Attempt *a)
{
	(void) checkpoint_one(a);
}

/* Record validated progress of every attempt that has new. */
void
remora_runner_checkpoint(void)
{
	for (int i = nattempts - 1; i >= 0; i--)
		if (!checkpoint_one(attempts[i]))
			stop_attempt(i, "its checkpoint was refused");
}

/* ---------------------------------------------------------------- start */

void
remora_runner_answer_lookups(RemoraEngine *engine)
{
	RemoraLookup *l;

	while ((l = remora_engine_lookup_next(engine)) != NULL)
	{
		Attempt *a = l->host_arg;
		bool     ok;

		if (l->kind == REMORA_LOOKUP_EXPORT_PAGE)
			ok = remora_call_export_members(conn, a->job_id, a->attempt_id,
											a->token, l);
		else
			ok = remora_call_lookup(conn, a->job_id, a->attempt_id, l->paths,
									l->n, l->out);
		remora_engine_lookup_done(engine, l, ok);
	}
}

static void
refuse(const RemoraClaimRow *row, const char *class, bool retryable,
	   const char *msg)
{
	char *doc = remora_codec_error(class, msg, 0, 0, NULL, -1);
	char *state = remora_call_fail(conn, row->job_id, row->attempt_id,
								   row->token, doc, retryable);

	remora_wlog("job %" PRId64 " attempt %s refused: %s (the job is now %s)",
				row->job_id, row->attempt_id, msg, state ? state : "unknown");
	free(doc);
	free(state);
}

/* Start the engine's task for a job; NULL with err set when it refuses. */
static RemoraTask *
start_task(RemoraEngine *engine, RemoraWJob *job, const RemoraClaimRow *row,
		   Attempt *a, RemoraResume *resume, const RemoraEndpoint *ep,
		   char *err, size_t errlen)
{
	int connections =
		job->connections > 0 ? (int) job->connections : config.connections;

	if (job->is_export)
	{
		job->export.host_arg = a;
		return remora_export_start(engine, &job->export, err, errlen);
	}
	if (job->is_set)
	{
		RemoraSetSpec *s = &job->set;

		if (ep)
			s->source_store = &ep->cfg;
		s->hub_url = config.hub_url;
		s->token =
			config.hf_token && config.hf_token[0] ? config.hf_token : NULL;
		s->job_id = row->job_id;
		s->attempt_id = row->attempt_id;
		s->fencing_token = row->token;
		s->earlier_attempts = job->attempt_no > 1;
		s->host_arg = a;
		s->connections = connections;
		return remora_set_start(engine, s, err, errlen);
	}
	job->task.resume = resume;
	job->task.job_id = row->job_id;
	job->task.attempt_id = row->attempt_id;
	job->task.fencing_token = row->token;
	job->task.connections = connections;
	return remora_task_start(engine, &job->task, err, errlen);
}

/*
 * Start the attempt a claim handed out, or fail it at once.  The row's
 * texts are the caller's.
 */
void
remora_runner_start(RemoraEngine *engine, RemoraClaimRow *row,
					int64_t claim_sent_ms)
{
	RemoraWJob     job;
	char           err[512];
	RemoraResume  *resume = NULL;
	const char    *why = NULL;
	RemoraEndpoint ep;
	bool           ep_found = false;
	bool           resumed;
	Attempt       *a;

	if (row->spec == NULL ||
		!remora_codec_decode_spec(row->spec, &job, err, sizeof(err)))
	{
		char msg[600];

		snprintf(msg, sizeof(msg),
				 "the job's specification could not be read: %s",
				 row->spec ? err : "the claim handed out none");
		refuse(row, REMORA_ERR_INTERNAL, true, msg);
		return;
	}
	memset(&ep, 0, sizeof(ep));
	if (job.is_set && job.set.kind == REMORA_SET_S3 && job.endpoint)
	{
		if (!remora_call_endpoint(conn, job.endpoint, &ep, &ep_found))
		{
			refuse(row, REMORA_ERR_INTERNAL, true,
				   "the job's source endpoint could not be read");
			remora_codec_job_free(&job);
			return;
		}
		if (!ep_found)
		{
			refuse(row, REMORA_ERR_SOURCE, false,
				   "the job's source endpoint is no longer registered");
			remora_codec_job_free(&job);
			return;
		}
	}
	if (!job.is_set && !job.is_export)
	{
		resume = remora_codec_decode_resume(row->resume, &why);
		if (why)
			remora_wlog("job %" PRId64 " attempt %s starts from zero: %s",
						row->job_id, row->attempt_id, why);
	}
	a = calloc(1, sizeof(Attempt));
	if (a)
	{
		a->bucket = strdup(job.bucket);
		a->file_name = strdup(job.file_name);
	}
	if (a == NULL || a->bucket == NULL || a->file_name == NULL)
		snprintf(err, sizeof(err), "out of memory");
	else
		a->task = start_task(engine, &job, row, a, resume,
							 ep_found ? &ep : NULL, err, sizeof(err));
	resumed = resume != NULL;
	remora_resume_free(resume);
	remora_endpoint_free(&ep);
	if (a == NULL || a->task == NULL)
	{
		refuse(row, REMORA_ERR_INTERNAL, true, err);
		if (a)
		{
			free(a->bucket);
			free(a->file_name);
			free(a);
		}
		remora_codec_job_free(&job);
		return;
	}
	a->job_id = row->job_id;
	snprintf(a->attempt_id, sizeof(a->attempt_id), "%s", row->attempt_id);
	a->token = row->token;
	a->is_set = job.is_set;
	a->is_export = job.is_export;
	a->forced_restart = why;
	a->fence_ms = fence_after(claim_sent_ms);
	attempts[nattempts++] = a;
	remora_wlog("job %" PRId64 " attempt %s started (%s, token %" PRId64 ")%s",
				a->job_id, a->attempt_id, job.kind, a->token,
				resumed ? ", resuming from a checkpoint" : "");
	remora_codec_job_free(&job);
}

/*
 * SIGTERM: hand every attempt back at once rather than let leases lapse;
 * one that cannot be handed back is left to its lease.
 */
void
remora_runner_hand_back(void)
{
	for (int i = nattempts - 1; i >= 0; i--)
	{
		Attempt *a = attempts[i];
		char *doc = remora_codec_error("worker", "the worker was stopped", 0, 0,
									   NULL, 0);
		char *state;

		remora_task_abort(a->task, false);
		state = remora_call_fail(conn, a->job_id, a->attempt_id, a->token, doc,
								 true);
		remora_wlog("job %" PRId64 " attempt %s handed back%s%s", a->job_id,
					a->attempt_id,
					state ? ": the job is now "
						  : " (failed: "
							"its lease "
							"lapses)",
					state ? state : "");
		free(doc);
		free(state);
		forget_attempt(i);
	}
}
