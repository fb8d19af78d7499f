/*-------------------------------------------------------------------------
 *
 * attempt.c
 *	  The attempts one worker runs: each from its claim to its commit, its
 *	  failure or its stop.
 *
 * Attempt states, as the worker sees them (worker.c calls each step once a
 * round, in this order, renewals first):
 *
 *	  claimed --start--> running --checkpoint--> running
 *	    |                  |--> succeeded --commit--> done
 *	    |                  |        (refused: lost its authority, or, still
 *	    |                  |         holding it, fails retryable)
 *	    |                  |--> failed --fail--> done
 *	    |                  |--> renewal or checkpoint refused, or the job
 *	    |                  |    cancelled: stopped (its staging is cleaned
 *	    |                  |    up later by the sweep)
 *	    |                  `--> SIGTERM: handed back (fail, retryable)
 *	    `--> spec unreadable, endpoint gone, engine refuses: failed at once
 *
 * A commit or fail call that raised is tried again next round, at most
 * CALL_TRIES times; then the attempt is given up and its lease lapses (the
 * job is retried by another attempt).  Members a set completes are kept
 * until a checkpoint or commit that carries them has committed: members
 * handed to a call whose transaction did not commit are offered again,
 * never lost.  Documents come from the codec (jobspec.c), calls from
 * protocol.c; nothing here runs SQL of its own.
 *
 * Memory: an attempt and what it keeps live in the worker's context until
 * it is forgotten; the engine's task is malloc'd and freed with it.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "engine/engine.h"
#include "pg/attempt.h"
#include "pg/jobspec.h"
#include "pg/protocol.h"
#include "pg/shmem.h"

#define CALL_TRIES 5 /* a commit or fail that raised, tried again */

typedef struct Attempt
{
	RemoraTask *task;
	int64       job_id;
	Oid         owner;
	char        attempt_id[REMORA_UUID_TEXT_LEN];
	int64       token;
	char       *bucket;
	char       *file_name;
	bool        is_set;    /* many members: checkpoints carry them */
	bool        is_export; /* an export: checkpoints carry references */
	int         progress_slot;
	bool        restart_reported;
	int64       rate_bytes; /* bytes at rate_at */
	TimestampTz rate_at;
	double      rate;
	const char *forced_restart; /* why the offered checkpoint was not used
								 * (a constant string) */
	bool   renew_blocked;       /* the last renewal failed: renew it last */
	int    call_failures;       /* commit or fail calls that raised */
	Jsonb *commit_doc;          /* the descriptor, kept to try again */

	/*
	 * Members (remora_jobspec_member documents) not yet recorded by a
	 * checkpoint whose transaction committed: they go with the next
	 * checkpoint or the commit.
	 */
	List *unsent;
} Attempt;

static MemoryContext attempt_cxt;
static int           worker_slot;
static Attempt      *attempts[REMORA_MAX_ATTEMPTS];
static int           nattempts;

/*
 * Before the first attempt: the worker's context (attempts live there) and
 * its shared-memory slot.
 */
void
remora_attempts_init(MemoryContext cxt, int slot)
{
	attempt_cxt = cxt;
	worker_slot = slot;
}

/* ------------------------------------------------------------- progress */

static int
progress_slot_acquire(Attempt *a)
{
	int       found = -1;
	pg_uuid_t attempt = *DatumGetUUIDP(
		DirectFunctionCall1(uuid_in, CStringGetDatum(a->attempt_id)));

	/* nothing that can fail while the lock is held */
	LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < REMORA_MAX_PROGRESS; i++)
		if (!remora_shared->progress[i].in_use)
		{
			RemoraProgress *p = &remora_shared->progress[i];

			memset(p, 0, sizeof(*p));
			p->in_use = true;
			p->worker = worker_slot;
			p->job_id = a->job_id;
			p->owner = a->owner;
			p->fencing_token = a->token;
			p->bytes_total = -1;
			p->started_at = p->updated_at = GetCurrentTimestamp();
			p->attempt_id = attempt;
			found = i;
			break;
		}
	remora_shared->workers[worker_slot].active_tasks = nattempts + 1;
	LWLockRelease(remora_shared->lock);
	return found;
}

/* Live progress of every attempt, for remora_progress. */
void
remora_attempts_publish_progress(void)
{
	TimestampTz at = GetCurrentTimestamp();

	LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nattempts; i++)
	{
		Attempt        *a = attempts[i];
		RemoraProgress *p;
		int64_t         done, total;
		const char     *why;
		long            secs;
		int             usecs;

		if (a->progress_slot < 0)
			continue;
		p = &remora_shared->progress[a->progress_slot];
		remora_task_progress(a->task, &done, &total);
		TimestampDifference(a->rate_at, at, &secs, &usecs);
		if (secs >= 1)
		{
			double span = secs + usecs / 1e6;
			double inst = (done - a->rate_bytes) / span;

			a->rate = a->rate == 0 ? inst : 0.5 * a->rate + 0.5 * inst;
			a->rate_bytes = done;
			a->rate_at = at;
		}
		p->bytes_done = done;
		p->bytes_total = total;
		p->rate = a->rate;
		p->restarted = remora_task_restarted(a->task, &why);
		p->updated_at = at;
	}
	LWLockRelease(remora_shared->lock);
}

/* ------------------------------------------------------------- attempts */

static void
forget_attempt(int i)
{
	Attempt *a = attempts[i];

	if (a->progress_slot >= 0)
	{
		LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
		remora_shared->progress[a->progress_slot].in_use = false;
		remora_shared->workers[worker_slot].active_tasks = nattempts - 1;
		LWLockRelease(remora_shared->lock);
	}
	remora_task_free(a->task);
	pfree(a->bucket);
	pfree(a->file_name);
	if (a->commit_doc)
		pfree(a->commit_doc);
	list_free_deep(a->unsent);
	pfree(a);
	attempts[i] = attempts[--nattempts];
}

/* Report a failed attempt: the job's resulting state, or NULL (try again). */
static char *
report_failure(int64 job_id, const char *attempt_id, int64 token,
			   const RemoraTaskError *e)
{
	return remora_protocol_fail(job_id, attempt_id, token,
								remora_jobspec_task_error(e), e->retryable);
}

/*
 * Keep a document (built in the round's context, which is reset) in the
 * worker's context, in unsent: only the document itself, not what
 * building it allocated, which would stay in the worker's context for
 * good (about a kilobyte a member).
 */
static void
keep_doc(Attempt *a, const Jsonb *doc)
{
	MemoryContext old = MemoryContextSwitchTo(attempt_cxt);
	Jsonb        *copy = palloc(VARSIZE(doc));

	memcpy(copy, doc, VARSIZE(doc));
	a->unsent = lappend(a->unsent, copy);
	MemoryContextSwitchTo(old);
}

/*
 * Members the engine hands out now, kept (in the worker's context) until a
 * checkpoint or the commit that carries them has committed.
 */
static void
keep_members(Attempt *a, const RemoraSetMember *m, int n)
{
	for (int i = 0; i < n; i++)
	{
		Jsonb *doc = remora_jobspec_member(a->bucket, &m[i]);

		keep_doc(a, doc);
		pfree(doc);
	}
}

/*
 * An export's conclusive answers the engine hands out now, kept like a
 * set's members (in unsent) until a checkpoint or the commit that carries
 * them has committed.
 */
static void
keep_refs(Attempt *a, const RemoraExportRef *r, int n)
{
	for (int i = 0; i < n; i++)
	{
		Jsonb *doc = remora_jobspec_ref(&r[i]);

		keep_doc(a, doc);
		pfree(doc);
	}
}

/* The members are recorded: forget them. */
static void
members_sent(Attempt *a)
{
	list_free_deep(a->unsent);
	a->unsent = NIL;
}

typedef enum CommitOutcome
{
	COMMIT_DONE,
	COMMIT_REFUSED,
	COMMIT_AGAIN /* the call failed: try again with the same descriptor */
} CommitOutcome;

/*
 * The descriptor of a result.  It is built once (the engine hands out a
 * set's last members only once) and kept, so that a commit whose call or
 * transaction failed is tried again with exactly the same members.
 */
static Jsonb *
commit_doc(Attempt *a, const RemoraTaskResult *r)
{
	MemoryContext        old;
	RemoraTaskCheckpoint cp;
	bool                 more;

	if (a->commit_doc)
		return a->commit_doc;
	more = (a->is_set || a->is_export) && remora_task_checkpoint(a->task, &cp);
	/* what the engine hands out last goes with the commit */
	if (more && a->is_export)
		keep_refs(a, cp.refs, cp.nrefs);
	else if (more)
		keep_members(a, cp.members, cp.nmembers);
	old = MemoryContextSwitchTo(attempt_cxt);
	a->commit_doc =
		a->is_export ? remora_jobspec_export_descriptor(r, a->unsent)
		: a->is_set
			? remora_jobspec_set_descriptor(r, a->unsent)
			: remora_jobspec_object_descriptor(r, a->bucket, a->file_name);
	MemoryContextSwitchTo(old);
	members_sent(a);
	return a->commit_doc;
}

/* Commit one result, in a transaction of its own. */
static CommitOutcome
report_success(Attempt *a)
{
	bool ok;

	if (!remora_protocol_commit(a->job_id, a->attempt_id, a->token,
								commit_doc(a, remora_task_result(a->task)),
								&ok))
		return COMMIT_AGAIN;
	return ok ? COMMIT_DONE : COMMIT_REFUSED;
}

/*
 * Commit the results of the attempts that succeeded (outcome[i] for
 * attempts[i]).  Several commit in one call and one transaction
 * (remora.commit_many decides each item as remora.commit would): a round
 * in which many small jobs finish pays for one commit, not one each.  If
 * that call fails, each is committed alone.
 */
static void
commit_succeeded(CommitOutcome *outcome)
{
	const char *ids[REMORA_MAX_ATTEMPTS];
	int64       tokens[REMORA_MAX_ATTEMPTS];
	Jsonb      *docs[REMORA_MAX_ATTEMPTS];
	bool        ok[REMORA_MAX_ATTEMPTS];
	int         which[REMORA_MAX_ATTEMPTS];
	int         n = 0;

	for (int i = 0; i < nattempts; i++)
	{
		Attempt *a = attempts[i];

		if (remora_task_state(a->task) != REMORA_TASK_SUCCEEDED)
			continue;
		ids[n] = a->attempt_id;
		tokens[n] = a->token;
		docs[n] = commit_doc(a, remora_task_result(a->task));
		which[n++] = i;
	}
	if (n > 1 && remora_protocol_commit_many(n, ids, tokens, docs, ok))
	{
		for (int k = 0; k < n; k++)
			outcome[which[k]] = ok[k] ? COMMIT_DONE : COMMIT_REFUSED;
		return;
	}
	for (int k = 0; k < n; k++)
		outcome[which[k]] = report_success(attempts[which[k]]);
}

/*
 * A commit or fail call that raised is tried again in the next rounds (the
 * lease is renewed meanwhile); after CALL_TRIES the attempt is given up and
 * its lease left to lapse, so that the job is retried by another attempt.
 */
static bool
give_up_calls(Attempt *a, const char *what)
{
	if (++a->call_failures < CALL_TRIES)
		return false;
	ereport(LOG, (errmsg("remora job " INT64_FORMAT " attempt %s: %s failed %d "
						 "times, giving the attempt up",
						 a->job_id, a->attempt_id, what, a->call_failures),
				  errdetail("Its lease lapses and the job is retried.")));
	return true;
}

/*
 * Does the attempt still hold its job?  (A renewal, which also extends its
 * lease.)  False also when that cannot be told.
 */
static bool
still_authorized(Attempt *a)
{
	bool ok, cancelled;

	return remora_protocol_renew(a->job_id, a->attempt_id, a->token, &ok,
								 &cancelled) &&
		   ok;
}

static void export_flush(Attempt *a);

/* Commit what succeeded, report what failed. */
void
remora_attempts_finish(void)
{
	CommitOutcome outcome[REMORA_MAX_ATTEMPTS];

	commit_succeeded(outcome);
	/* backwards: forgetting attempts[i] moves the last one into its place */
	for (int i = nattempts - 1; i >= 0; i--)
	{
		Attempt        *a = attempts[i];
		RemoraTaskState st = remora_task_state(a->task);

		if (st == REMORA_TASK_SUCCEEDED)
		{
			CommitOutcome o = outcome[i];

			if (o == COMMIT_DONE)
				ereport(LOG, (errmsg("remora job " INT64_FORMAT
									 " attempt %s committed its result",
									 a->job_id, a->attempt_id)));
			else if (o == COMMIT_REFUSED && !still_authorized(a))
				ereport(LOG,
						(errmsg("remora job " INT64_FORMAT
								" attempt %s: commit refused",
								a->job_id, a->attempt_id),
						 errdetail(
							 "The attempt no longer holds the job's authority; "
							 "its staging objects will be removed.")));
			else if (o == COMMIT_REFUSED)
			{
				/*
				 * Refused although the attempt still holds the job: the
				 * result did not match what the attempt recorded.  Not lost
				 * authority: the attempt fails, retryable, at once.
				 */
				ereport(LOG, (errmsg("remora job " INT64_FORMAT
									 " attempt %s: commit refused",
									 a->job_id, a->attempt_id),
							  errdetail("The attempt still holds the job; its "
										"result did not match what it "
										"recorded, and it fails, "
										"retryable.")));
				(void) remora_protocol_fail(
					a->job_id, a->attempt_id, a->token,
					remora_jobspec_error(
						REMORA_ERR_INTERNAL,
						"the commit of the result was refused although the "
						"attempt holds the job",
						0, 0, NULL, -1),
					true);
			}
			else if (!give_up_calls(a, "committing its result"))
				continue;
			forget_attempt(i);
		}
		else if (st == REMORA_TASK_FAILED)
		{
			const RemoraTaskError *e = remora_task_error(a->task);
			char                  *state;

			if (a->is_export)
				export_flush(a);
			state = report_failure(a->job_id, a->attempt_id, a->token, e);

			if (state == NULL)
			{
				if (give_up_calls(a, "reporting its failure"))
					forget_attempt(i);
				continue;
			}
			ereport(LOG,
					(errmsg("remora job " INT64_FORMAT " attempt %s failed: %s",
							a->job_id, a->attempt_id, e->message),
					 errdetail(
						 "Error class %s, %s; the job is now %s.", e->class,
						 e->retryable ? "retryable" : "not retryable", state)));
			forget_attempt(i);
		}
	}
}

static int
by_job_id(const void *a, const void *b)
{
	int64 x = (*(Attempt *const *) a)->job_id;
	int64 y = (*(Attempt *const *) b)->job_id;

	return x < y ? -1 : x > y;
}

/* Renewals whose last try failed go last, so that they delay no other. */
static int
by_blocked_then_job_id(const void *a, const void *b)
{
	bool x = (*(Attempt *const *) a)->renew_blocked;
	bool y = (*(Attempt *const *) b)->renew_blocked;

	return x != y ? (x ? 1 : -1) : by_job_id(a, b);
}

/* Stop an attempt that can no longer commit, and forget it. */
static void
stop_attempt(int i, const char *why)
{
	ereport(LOG, (errmsg("remora job " INT64_FORMAT " attempt %s stopped: %s",
						 attempts[i]->job_id, attempts[i]->attempt_id, why)));
	remora_task_abort(attempts[i]->task, false);
	forget_attempt(i);
}

/*
 * Renew every lease, each in a transaction of its own (a renewal that
 * waits on a row a user holds delays no other by more than lock_timeout,
 * and holds no lock the others need), and the incarnation's heartbeat;
 * stop attempts that lost authority or were cancelled.  A renewal that
 * failed keeps its attempt: the lease still runs, and the next round tries
 * again.
 */
void
remora_attempts_renew(void)
{
	bool keep[REMORA_MAX_ATTEMPTS] = {0};
	bool cancelled[REMORA_MAX_ATTEMPTS] = {0};

	qsort(attempts, nattempts, sizeof(Attempt *), by_blocked_then_job_id);
	for (int i = 0; i < nattempts; i++)
	{
		Attempt *a = attempts[i];
		bool     ok;
		bool called = remora_protocol_renew(a->job_id, a->attempt_id, a->token,
											&ok, &cancelled[i]);

		a->renew_blocked = !called;
		keep[i] = !called || ok;
	}

	/*
	 * An attempt whose result is ready is left to remora.commit, which
	 * refuses it as surely and says so.
	 */
	for (int i = nattempts - 1; i >= 0; i--)
		if (!keep[i] &&
			remora_task_state(attempts[i]->task) != REMORA_TASK_SUCCEEDED)
			stop_attempt(i, cancelled[i] ? "the job was cancelled"
										 : "the attempt lost its lease");
}

/*
 * The checkpoint of an attempt that has new progress (or members whose
 * checkpoint did not commit), or NULL.
 */
static Jsonb *
checkpoint_doc(Attempt *a)
{
	RemoraTaskCheckpoint cp;
	const char          *why = NULL;
	const char          *restarted;

	if (!remora_task_checkpoint(a->task, &cp))
		return a->unsent == NIL ? NULL
			   : a->is_export
				   ? remora_jobspec_export_checkpoint(NULL, a->unsent)
				   : remora_jobspec_checkpoint(NULL, true, NULL, a->unsent);
	if (a->is_export)
	{
		/* until the transaction commits, they count as unsent */
		keep_refs(a, cp.refs, cp.nrefs);
		return remora_jobspec_export_checkpoint(&cp, a->unsent);
	}
	if (a->is_set)
	{
		/* until the transaction commits, they count as unsent */
		keep_members(a, cp.members, cp.nmembers);
		return remora_jobspec_checkpoint(&cp, true, NULL, a->unsent);
	}
	/* why it restarted from zero, said once */
	if (!a->restart_reported && a->forced_restart)
		why = a->forced_restart;
	else if (!a->restart_reported && remora_task_restarted(a->task, &restarted))
		why = restarted;
	a->restart_reported = a->restart_reported || why != NULL;
	return remora_jobspec_checkpoint(&cp, false, why, NIL);
}

/*
 * An export that failed: record the conclusive answers it still holds
 * before its failure is reported, so that a verify or a retry knows them.
 * One that cannot be recorded is observed again by the verify.
 */
static void
export_flush(Attempt *a)
{
	Jsonb *doc = checkpoint_doc(a);
	bool   ok;
	bool   sent;

	if (doc == NULL)
		return;
	remora_tx_begin("checkpointing");
	sent = remora_protocol_checkpoint(a->job_id, a->attempt_id, a->token, doc,
									  &ok);
	remora_tx_end();
	if (sent)
		members_sent(a);
}

/*
 * Record validated progress of every attempt that has new, in one
 * transaction, each call in a subtransaction of its own: one that fails is
 * rolled back alone, and the members it carried are offered again with the
 * attempt's next checkpoint.  Members count as recorded only once the
 * transaction has committed.  Documents are built before the transaction.
 */
void
remora_attempts_checkpoint(void)
{
	Jsonb      *docs[REMORA_MAX_ATTEMPTS] = {0};
	bool        keep[REMORA_MAX_ATTEMPTS] = {0};
	bool        sent[REMORA_MAX_ATTEMPTS] = {0};
	int         batch = 0;
	int         refused = 0;
	TimestampTz started;
	long        secs;
	int         usecs;

	/* job rows are locked in job id order everywhere, as reconcile does */
	qsort(attempts, nattempts, sizeof(Attempt *), by_job_id);
	for (int i = 0; i < nattempts; i++)
		batch += (docs[i] = checkpoint_doc(attempts[i])) != NULL;
	if (batch == 0)
		return;

	started = GetCurrentTimestamp();
	remora_tx_begin("checkpointing");
	for (int i = 0; i < nattempts; i++)
	{
		Attempt *a = attempts[i];

		keep[i] = true;
		if (docs[i] == NULL)
			continue;
		sent[i] = remora_protocol_checkpoint(a->job_id, a->attempt_id, a->token,
											 docs[i], &keep[i]);
		if (!sent[i])
			keep[i] = true;
		refused += !keep[i];
	}
	remora_tx_end();
	for (int i = 0; i < nattempts; i++)
		if (sent[i])
			members_sent(attempts[i]);
	TimestampDifference(started, GetCurrentTimestamp(), &secs, &usecs);
	remora_note_checkpoints(batch, refused, (uint64) secs * 1000000 + usecs);
	for (int i = nattempts - 1; i >= 0; i--)
		if (!keep[i])
			stop_attempt(i, "its checkpoint was refused");
}

/* ---------------------------------------------------------------- start */

/*
 * Answer the lookups the engine queued in its last run: the members an
 * earlier attempt of each asking set completed, for a replacement to
 * reuse, and the next page of each asking export's members.  Each is its
 * own transaction inside the protocol's error boundary (the engine is not
 * running meanwhile); one that fails is logged and handed back unanswered:
 * a set's members are then transferred again, an export fails (retryable).
 */
void
remora_attempts_answer_lookups(RemoraEngine *engine)
{
	RemoraLookup *l;

	while ((l = remora_engine_lookup_next(engine)) != NULL)
	{
		Attempt *a = l->host_arg;
		bool     ok;

		if (l->kind == REMORA_LOOKUP_EXPORT_PAGE)
			ok = remora_protocol_export_members(a->job_id, a->attempt_id,
												a->token, l);
		else
			ok = remora_protocol_lookup_members(a->job_id, a->attempt_id,
												l->paths, l->n, l->out);
		remora_engine_lookup_done(engine, l, ok);
	}
}

static void
refuse_attempt(RemoraClaim *c, const char *class, bool retryable,
			   const char *msg)
{
	remora_resume_free(c->resume);
	c->resume = NULL;
	(void) remora_protocol_fail(
		c->job.job_id, c->job.attempt_id, c->job.fencing_token,
		remora_jobspec_error(class, msg, 0, 0, NULL, -1), retryable);
}

/*
 * Start the attempt a claim handed out, in the engine, or fail it at once
 * (its spec cannot be read, its endpoint is gone, the engine refuses it).
 */
void
remora_attempt_start(RemoraEngine *engine, RemoraClaim *c)
{
	RemoraJobSpec *job = &c->job;
	char           err[256];
	RemoraTask    *task;
	Attempt       *a;
	bool           resumed = false;

	if (c->broken)
	{
		refuse_attempt(c, REMORA_ERR_INTERNAL, true,
					   psprintf("the job's specification could not be read: "
								"%s",
								c->broken));
		return;
	}
	if (job->is_set && job->set.kind == REMORA_SET_S3 && job->endpoint &&
		!c->endpoint_found)
	{
		refuse_attempt(c, REMORA_ERR_SOURCE, false,
					   "the job's source endpoint is no longer registered");
		return;
	}
	a = MemoryContextAllocZero(attempt_cxt, sizeof(Attempt));
	a->job_id = job->job_id;
	snprintf(a->attempt_id, sizeof(a->attempt_id), "%s", job->attempt_id);
	a->token = job->fencing_token;
	a->is_set = job->is_set;
	a->is_export = job->is_export;
	if (job->is_export)
	{
		job->export.host_arg = a;
		task = remora_export_start(engine, &job->export, err, sizeof(err));
	}
	else if (job->is_set)
	{
		RemoraSetSpec *s = &job->set;

		if (c->endpoint_found)
			s->source_store = &c->endpoint;
		s->hub_url = remora_hf_endpoint;
		s->token = remora_hf_token;
		s->job_id = job->job_id;
		s->attempt_id = job->attempt_id;
		s->fencing_token = job->fencing_token;
		s->earlier_attempts = job->attempt_no > 1;
		s->host_arg = a;
		task = remora_set_start(engine, s, err, sizeof(err));
	}
	else
	{
		RemoraTaskSpec *t = &job->task;

		t->resume = c->resume;
		t->job_id = job->job_id;
		t->attempt_id = job->attempt_id;
		t->fencing_token = job->fencing_token;
		task = remora_task_start(engine, t, err, sizeof(err));
		resumed = c->resume != NULL;
	}
	if (task == NULL)
	{
		pfree(a);
		refuse_attempt(c, REMORA_ERR_INTERNAL, true, err);
		return;
	}
	remora_resume_free(c->resume);
	c->resume = NULL;
	a->task = task;
	a->owner = job->owner;
	a->bucket = MemoryContextStrdup(attempt_cxt, job->bucket);
	a->file_name = MemoryContextStrdup(attempt_cxt, job->file_name);
	a->rate_at = GetCurrentTimestamp();
	a->forced_restart = c->why_restart; /* a constant string */
	a->progress_slot = progress_slot_acquire(a);
	attempts[nattempts++] = a;
	ereport(LOG, (errmsg("remora job " INT64_FORMAT
						 " attempt %s started (token " INT64_FORMAT ")%s",
						 a->job_id, a->attempt_id, a->token,
						 resumed ? ", resuming from a checkpoint" : "")));
}

/* How many attempts run. */
int
remora_attempts_count(void)
{
	return nattempts;
}

/*
 * SIGTERM: hand every attempt back at once rather than let leases lapse;
 * one that cannot be handed back is left to its lease.
 */
void
remora_attempts_hand_back(void)
{
	for (int i = nattempts - 1; i >= 0; i--)
	{
		Attempt *a = attempts[i];

		remora_task_abort(a->task, false);
		(void) remora_protocol_fail(
			a->job_id, a->attempt_id, a->token,
			remora_jobspec_error("worker", "the worker was stopped", 0, 0, NULL,
								 0),
			true);
		forget_attempt(i);
	}
}

/* The jobs and attempts that run, at most max of them, for the activity. */
void
remora_attempts_describe(StringInfo buf, int max)
{
	for (int i = 0; i < nattempts && i < max; i++)
		appendStringInfo(buf, "%s job " INT64_FORMAT " attempt %s",
						 i ? "," : "", attempts[i]->job_id,
						 attempts[i]->attempt_id);
	if (nattempts > max)
		appendStringInfo(buf, ", and %d more", nattempts - max);
}
