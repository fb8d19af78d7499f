/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  A remora worker: one incarnation that claims attempts and runs up to
 *	  remora.worker_concurrency of them at once in the transfer engine.
 *
 * The loop waits on its latch and on the engine's descriptor together, so
 * a submit (its commit sets the latch), a cancel, SIGTERM, SIGHUP and
 * network activity all act at once, mid-stream.  Each round:
 *
 *	  engine	move bytes (no transaction is open)
 *	  renew		every third of the lease, or at once after a cancel; before
 *				any other protocol call, so that none can delay it
 *	  finish	commit the attempts that succeeded, fail those that failed
 *	  checkpoint  validated progress, all dirty attempts in one transaction,
 *				at most once a second
 *	  claim		when there is room and a submit committed (or now and then)
 *	  cleanup	delete staging of attempts that can no longer commit
 *
 * Every protocol call is a short transaction of its own, made through
 * protocol.c (the SQL, and the error boundary every call runs in) with
 * documents built and read by jobspec.c (the codec); no transaction is
 * open while bytes move.  An attempt that loses authority (renew or
 * checkpoint refused) is stopped; safety never depends on that stop,
 * because remora.commit would refuse it anyway.
 *
 * Attempt states, as this worker sees them:
 *
 *	  claimed --> running --(checkpoint)--> running
 *	                 |--> succeeded --commit--> done  (or refused: lost,
 *	                 |                                  or fails retryable)
 *	                 |--> failed --fail--> done
 *	                 |--> renew or checkpoint refused, cancelled: stopped
 *	                 `--> SIGTERM: handed back (fail, retryable)
 *
 * A commit or fail call that raised is tried again next round, at most
 * CALL_TRIES times; then the attempt is given up and its lease lapses.
 *
 * Nothing a user does can stall the worker: every protocol call runs with
 * lock_timeout and a statement timeout, in a subtransaction of its own, and
 * fails alone, for its attempt only (protocol.c); SIGTERM cancels the
 * statement in progress, a lock wait included; whatever claim hands back
 * is checked before use (a malformed checkpoint makes the attempt start
 * from zero, never a crash); members handed to a checkpoint or commit whose
 * transaction did not commit are offered again with the next call, never
 * lost.  An ERROR that escapes a call anyway abandons the round (the main
 * loop's boundary); every step that did not finish is done again.
 *
 * Memory: a context for the worker's life, one reset every round, and the
 * engine's own malloc'd memory, bounded per task.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "engine/engine.h"
#include "pg/jobspec.h"
#include "pg/protocol.h"
#include "pg/shmem.h"

PGDLLEXPORT void remora_worker_main(Datum main_arg);

#define MAX_TASKS     256
#define CLAIM_POLL_MS 5000
#define CHECKPOINT_MS 1000
#define PROGRESS_MS   250
#define SWEEP_MS      5000
#define CALL_TRIES    5 /* a commit or fail that raised, tried again */

typedef struct Attempt
{
	RemoraTask *task;
	int64       job_id;
	Oid         owner;
	char        attempt_id[REMORA_UUID_TEXT_LEN];
	int64       token;
	char       *bucket;
	char       *file_name;
	bool        is_set; /* many members: checkpoints carry them */
	int         progress_slot;
	bool        restart_reported;
	int64       rate_bytes; /* bytes at rate_at */
	TimestampTz rate_at;
	double      rate;
	const char *forced_restart; /* why the offered checkpoint was not used */
	bool        renew_blocked;  /* the last renewal failed: renew it last */
	int         call_failures;  /* commit or fail calls that raised */
	Jsonb      *commit_doc;     /* the descriptor, kept to try again */

	/*
	 * Members (remora_jobspec_member documents) not yet recorded by a
	 * checkpoint whose transaction committed: they go with the next
	 * checkpoint or the commit.
	 */
	List *unsent;
} Attempt;

static volatile sig_atomic_t got_sigterm = false;
static int                   my_slot;
static pg_uuid_t             my_incarnation;
static char                  my_incarnation_text[REMORA_UUID_TEXT_LEN];
static MemoryContext         worker_cxt;
static RemoraEngine         *engine;
static Attempt              *attempts[MAX_TASKS];
static int                   nattempts;

/* staging cleanup or hard delete in progress */
static RemoraTask *sweep_task;
static char  sweep_attempt[REMORA_UUID_TEXT_LEN]; /* "" for a hard delete */
static int64 sweep_job;

/*
 * SIGTERM: stop after this round.  A statement in progress (a lock wait
 * included) is cancelled at once, so that a call stuck behind a user's lock
 * does not hold up the stop; the calls that hand the attempts back are not
 * (only the first SIGTERM cancels).
 */
static void
worker_sigterm(SIGNAL_ARGS)
{
	int save_errno = errno;

	if (remora_tx_in_progress() && !got_sigterm)
	{
		QueryCancelPending = true;
		InterruptPending = true;
	}
	got_sigterm = true;
	SetLatch(MyLatch);
	errno = save_errno;
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
			p->worker = my_slot;
			p->job_id = a->job_id;
			p->owner = a->owner;
			p->fencing_token = a->token;
			p->bytes_total = -1;
			p->started_at = p->updated_at = GetCurrentTimestamp();
			p->attempt_id = attempt;
			found = i;
			break;
		}
	remora_shared->workers[my_slot].active_tasks = nattempts + 1;
	LWLockRelease(remora_shared->lock);
	return found;
}

static void
publish_progress(void)
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
		remora_shared->workers[my_slot].active_tasks = nattempts - 1;
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
 * Members the engine hands out now, kept (in the worker's context) until a
 * checkpoint or the commit that carries them has committed.
 */
static void
keep_members(Attempt *a, const RemoraSetMember *m, int n)
{
	MemoryContext old = MemoryContextSwitchTo(worker_cxt);

	for (int i = 0; i < n; i++)
		a->unsent = lappend(a->unsent, remora_jobspec_member(a->bucket, &m[i]));
	MemoryContextSwitchTo(old);
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
 * Commit a result.  The descriptor is built once (the engine hands out a
 * set's last members only once) and kept, so that a commit whose call or
 * transaction failed is tried again with exactly the same members.
 */
static CommitOutcome
report_success(Attempt *a, const RemoraTaskResult *r)
{
	bool ok;

	if (a->commit_doc == NULL)
	{
		MemoryContext old;

		if (a->is_set)
		{
			RemoraTaskCheckpoint cp;

			if (remora_task_checkpoint(a->task, &cp))
				keep_members(a, cp.members, cp.nmembers);
		}
		old = MemoryContextSwitchTo(worker_cxt);
		a->commit_doc =
			a->is_set
				? remora_jobspec_set_descriptor(r, a->unsent)
				: remora_jobspec_object_descriptor(r, a->bucket, a->file_name);
		MemoryContextSwitchTo(old);
		members_sent(a);
	}
	if (!remora_protocol_commit(a->job_id, a->attempt_id, a->token,
								a->commit_doc, &ok))
		return COMMIT_AGAIN;
	return ok ? COMMIT_DONE : COMMIT_REFUSED;
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

/* Commit what succeeded, report what failed. */
static void
finish_attempts(void)
{
	for (int i = nattempts - 1; i >= 0; i--)
	{
		Attempt        *a = attempts[i];
		RemoraTaskState st = remora_task_state(a->task);

		if (st == REMORA_TASK_SUCCEEDED)
		{
			CommitOutcome o = report_success(a, remora_task_result(a->task));

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
			char *state = report_failure(a->job_id, a->attempt_id, a->token, e);

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
static void
renew_all(void)
{
	bool keep[MAX_TASKS] = {0};
	bool cancelled[MAX_TASKS] = {0};

	(void) remora_protocol_heartbeat(&my_incarnation);

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
		return a->unsent
				   ? remora_jobspec_checkpoint(NULL, true, NULL, a->unsent)
				   : NULL;
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
 * Record validated progress of every attempt that has new, in one
 * transaction, each call in a subtransaction of its own: one that fails is
 * rolled back alone, and the members it carried are offered again with the
 * attempt's next checkpoint.  Members count as recorded only once the
 * transaction has committed.  Documents are built before the transaction.
 */
static void
checkpoint_all(void)
{
	Jsonb      *docs[MAX_TASKS] = {0};
	bool        keep[MAX_TASKS] = {0};
	bool        sent[MAX_TASKS] = {0};
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

/* ---------------------------------------------------------------- claim */

/*
 * Members an earlier attempt of the job completed, for a replacement to
 * reuse (the engine asks a listing page at a time).  The engine called us:
 * the lookup is its own transaction inside the protocol's error boundary,
 * so no ERROR unwinds through the engine; one that happens is logged and
 * the members are found in no earlier attempt (they are transferred again).
 */
static void
prior_lookup(void *arg, const char *const *paths, int n, RemoraPrior *out)
{
	Attempt *a = arg;

	(void) remora_protocol_lookup_members(a->job_id, a->attempt_id, paths, n,
										  out);
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

static void
start_attempt(RemoraClaim *c)
{
	RemoraJobSpec *job = &c->job;
	char           err[256];
	RemoraTask    *task;
	Attempt       *a;
	bool           resumed = false;
	MemoryContext  old;

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
	a = MemoryContextAllocZero(worker_cxt, sizeof(Attempt));
	a->job_id = job->job_id;
	snprintf(a->attempt_id, sizeof(a->attempt_id), "%s", job->attempt_id);
	a->token = job->fencing_token;
	a->is_set = job->is_set;
	if (job->is_set)
	{
		RemoraSetSpec *s = &job->set;

		if (c->endpoint_found)
			s->source_store = &c->endpoint;
		s->hub_url = remora_hf_endpoint;
		s->token = remora_hf_token;
		s->job_id = job->job_id;
		s->attempt_id = job->attempt_id;
		s->fencing_token = job->fencing_token;
		s->prior = prior_lookup;
		s->prior_arg = a;
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
	a->bucket = MemoryContextStrdup(worker_cxt, job->bucket);
	a->file_name = MemoryContextStrdup(worker_cxt, job->file_name);
	a->rate_at = GetCurrentTimestamp();
	old = MemoryContextSwitchTo(worker_cxt);
	a->forced_restart = c->why_restart ? pstrdup(c->why_restart) : NULL;
	MemoryContextSwitchTo(old);
	a->progress_slot = progress_slot_acquire(a);
	attempts[nattempts++] = a;
	ereport(LOG, (errmsg("remora job " INT64_FORMAT
						 " attempt %s started (token " INT64_FORMAT ")%s",
						 a->job_id, a->attempt_id, a->token,
						 resumed ? ", resuming from a checkpoint" : "")));
}

/* Claim as many attempts as there is room for; true if the batch was full. */
static bool
claim(void)
{
	int          room = Min(remora_worker_concurrency, MAX_TASKS) - nattempts;
	RemoraClaim *rows;
	int          n;

	if (room <= 0)
		return false;
	rows = palloc0(sizeof(RemoraClaim) * room);
	n = remora_protocol_claim(&my_incarnation, room, rows);
	for (int i = 0; i < n; i++)
		start_attempt(&rows[i]);
	return n == room;
}

/* ---------------------------------------------------------------- sweep */

/*
 * Delete the objects of one hard-deleted job, or the staging of one attempt
 * that can no longer commit, if there is any.  A cleanup that fails is
 * recorded, and tried again after a backoff.
 */
static void
sweep(bool start)
{
	char *bucket = NULL;
	char *prefix = NULL;
	char  err[256];

	if (sweep_task)
	{
		RemoraTaskState st = remora_task_state(sweep_task);
		bool            ok = st == REMORA_TASK_SUCCEEDED;

		if (st == REMORA_TASK_RUNNING)
			return;
		if (!ok)
			ereport(
				LOG,
				(errmsg("remora job " INT64_FORMAT ": could not delete %s: %s",
						sweep_job,
						sweep_attempt[0] ? "staging objects" : "its objects",
						remora_task_error(sweep_task)->message),
				 errdetail("The deletion will be tried again later.")));
		else if (!sweep_attempt[0])
			ereport(LOG, (errmsg("remora job " INT64_FORMAT
								 ": its objects are deleted",
								 sweep_job)));
		remora_protocol_cleanup_done(sweep_attempt, sweep_job, ok);
		remora_task_free(sweep_task);
		sweep_task = NULL;
	}
	if (!start || !remora_protocol_next_cleanup(sweep_attempt, &sweep_job,
												&bucket, &prefix))
		return;
	sweep_task = remora_cleanup_start(engine, bucket, prefix, err, sizeof(err));
	if (sweep_task == NULL)
		ereport(LOG, (errmsg("remora: could not start a cleanup: %s", err)));
}

/* --------------------------------------------------------------- engine */

static RemoraEngine *
make_engine(void)
{
	RemoraEngineConfig cfg;
	char               err[256];
	RemoraEngine      *e;

	memset(&cfg, 0, sizeof(cfg));
	cfg.target.endpoint = remora_s3_endpoint;
	cfg.target.region = remora_s3_region;
	cfg.target.path_style = remora_s3_path_style;
	cfg.target.access_key_id = remora_s3_access_key_id;
	cfg.target.secret_access_key = remora_target_secret();
	cfg.part_size = (size_t) remora_part_size_kb * 1024;
	cfg.allow_networks = remora_allow_networks;
	cfg.deny_networks = remora_deny_networks;
	cfg.allow_ports = remora_allow_ports;
	cfg.connect_timeout_ms = 10000;
	cfg.stall_timeout_ms = remora_stall_timeout_ms;
	cfg.user_agent = "remora/" REMORA_VERSION;
	e = remora_engine_new(&cfg, err, sizeof(err));
	if (e == NULL)
		ereport(
			ERROR,
			(errcode(ERRCODE_CONFIG_FILE_ERROR),
			 errmsg("remora worker cannot start its transfer engine"),
			 errdetail("%s", err),
			 errhint("Check remora.s3_endpoint and the network settings.")));
	return e;
}

/* ------------------------------------------------------------ lifecycle */

/*
 * On exit (also after an error): free our progress slots and tell the
 * launcher the incarnation ended.  The slot stays in_use until the launcher
 * has recorded that, so that no new worker takes it in between.
 */
static void
worker_exit(int code, Datum arg)
{
	RemoraWorkerSlot *slot = &remora_shared->workers[my_slot];

	LWLockReleaseAll();
	LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < REMORA_MAX_PROGRESS; i++)
		if (remora_shared->progress[i].in_use &&
			remora_shared->progress[i].worker == my_slot)
			remora_shared->progress[i].in_use = false;
	if (slot->pid == MyProcPid)
	{
		slot->stop_unrecorded = true;
		slot->latch = NULL;
		slot->pid = 0;
		slot->active_tasks = 0;
	}
	LWLockRelease(remora_shared->lock);
}

static void
new_incarnation(void)
{
	if (!pg_strong_random(my_incarnation.data, UUID_LEN))
		elog(ERROR, "could not generate a random incarnation id");
	my_incarnation.data[6] = (my_incarnation.data[6] & 0x0f) | 0x40;
	my_incarnation.data[8] = (my_incarnation.data[8] & 0x3f) | 0x80;
	snprintf(my_incarnation_text, sizeof(my_incarnation_text), "%s",
			 DatumGetCString(DirectFunctionCall1(
				 uuid_out, UUIDPGetDatum(&my_incarnation))));

	LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
	remora_shared->workers[my_slot].in_use = true;
	remora_shared->workers[my_slot].stop_unrecorded = false;
	remora_shared->workers[my_slot].pid = MyProcPid;
	remora_shared->workers[my_slot].latch = MyLatch;
	remora_shared->workers[my_slot].incarnation = my_incarnation;
	remora_shared->workers[my_slot].started_at = GetCurrentTimestamp();
	LWLockRelease(remora_shared->lock);
	before_shmem_exit(worker_exit, (Datum) 0);

	remora_protocol_start_incarnation(&my_incarnation);
}

/* SIGTERM: hand the attempts back at once rather than let leases lapse. */
static void
shut_down(void)
{
	RemoraTaskError e = {0};
	char            lock_timeout[32];

	/* a cancel SIGTERM left pending must not cancel the calls below */
	QueryCancelPending = false;

	/*
	 * Hand back at once what can be handed back: an attempt whose job row
	 * someone holds is left to its lease rather than hold up the stop.
	 */
	snprintf(lock_timeout, sizeof(lock_timeout), "%d",
			 Min(remora_protocol_lock_timeout_ms(), 500));
	SetConfigOption("lock_timeout", lock_timeout, PGC_SUSET, PGC_S_OVERRIDE);
	e.class = "worker";
	e.retryable = true;
	e.retry_after = 0;
	snprintf(e.message, sizeof(e.message), "the worker was stopped");
	for (int i = nattempts - 1; i >= 0; i--)
	{
		remora_task_abort(attempts[i]->task, false);
		/* one that cannot be handed back is left to its lease */
		(void) report_failure(attempts[i]->job_id, attempts[i]->attempt_id,
							  attempts[i]->token, &e);
		forget_attempt(i);
	}
	if (sweep_task)
		remora_task_free(sweep_task);
	remora_engine_free(engine);
	engine = NULL;

	/* if this fails, the launcher records it */
	remora_protocol_end_incarnation(&my_incarnation);
}

/*
 * What pg_stat_activity shows for this worker between transactions: the
 * jobs and attempts it is moving, or that it is idle.
 */
static void
report_activity(void)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (nattempts == 0 && sweep_task == NULL)
		appendStringInfoString(&buf, "remora: waiting for jobs");
	else
	{
		appendStringInfoString(&buf, "remora: transferring");
		for (int i = 0; i < nattempts && i < 20; i++)
			appendStringInfo(&buf, "%s job " INT64_FORMAT " attempt %s",
							 i ? "," : "", attempts[i]->job_id,
							 attempts[i]->attempt_id);
		if (nattempts > 20)
			appendStringInfo(&buf, ", and %d more", nattempts - 20);
		if (sweep_task)
			appendStringInfo(&buf, "%s deleting objects of job " INT64_FORMAT,
							 nattempts ? ";" : "", sweep_job);
	}
	pgstat_report_activity(STATE_IDLE, buf.data);
}

static long
ms_until(TimestampTz from, TimestampTz then)
{
	long secs;
	int  usecs;

	if (then <= from)
		return 0;
	TimestampDifference(from, then, &secs, &usecs);
	return secs * 1000 + usecs / 1000;
}

void
remora_worker_main(Datum main_arg)
{
	MemoryContext loop_cxt;

	/* static: they live across the error boundary's longjmp */
	static uint64      seen_submit = (uint64) -1;
	static uint64      seen_cancel;
	static TimestampTz next_renew, next_checkpoint, next_poll, next_sweep,
		next_progress;
	static bool config_changed = false;

	my_slot = DatumGetInt32(main_arg);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, worker_sigterm);
	BackgroundWorkerUnblockSignals();
	/* as remora.worker_role if one is set (the launcher checked it) */
	BackgroundWorkerInitializeConnection(
		remora_database,
		remora_worker_role && remora_worker_role[0] ? remora_worker_role : NULL,
		0);
	remora_pin_session();
	pgstat_report_appname("remora worker");

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "remora worker",
									   ALLOCSET_DEFAULT_SIZES);
	loop_cxt = AllocSetContextCreate(worker_cxt, "remora worker round",
									 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(worker_cxt);
	new_incarnation();
	engine = make_engine();
	seen_cancel = pg_atomic_read_u64(&remora_shared->cancel_generation);
	ereport(LOG, (errmsg("remora worker started, incarnation %s",
						 my_incarnation_text)));

	while (!got_sigterm)
	{
		volatile long timeout = 1000;

		MemoryContextSwitchTo(worker_cxt);
		MemoryContextReset(loop_cxt);
		MemoryContextSwitchTo(loop_cxt);

		/*
		 * An error in one round (a cancelled statement, a deadlock, a protocol
		 * call that raised) is reported and the round abandoned; nothing is
		 * lost, since every step that did not finish is done again in the
		 * next round.  Without this boundary any ERROR would end the
		 * incarnation and cost every attempt it runs a retry.
		 */
		PG_TRY();
		{
			TimestampTz ts;
			uint64      gen;
			long        engine_timeout;

			CHECK_FOR_INTERRUPTS();
			if (ConfigReloadPending)
			{
				ConfigReloadPending = false;
				ProcessConfigFile(PGC_SIGHUP);
				/* the lease may have changed: new timeouts, renew now */
				remora_pin_session();
				next_renew = 0;
				config_changed = true;
			}

			/*
			 * Bytes first (no transaction, nothing that waits), then the
			 * renewals before any other protocol call of the round, so that
			 * none can delay them.
			 */
			remora_engine_run(engine);
			ts = GetCurrentTimestamp();
			gen = pg_atomic_read_u64(&remora_shared->cancel_generation);
			if (gen != seen_cancel || ts >= next_renew)
			{
				seen_cancel = gen;
				next_renew = TimestampTzPlusMilliseconds(
					ts, remora_lease_duration_ms / 3);
				renew_all();
			}
			finish_attempts();

			ts = GetCurrentTimestamp();
			if (ts >= next_checkpoint)
			{
				checkpoint_all();
				next_checkpoint =
					TimestampTzPlusMilliseconds(ts, CHECKPOINT_MS);
			}
			if (ts >= next_progress)
			{
				publish_progress();
				next_progress = TimestampTzPlusMilliseconds(ts, PROGRESS_MS);
			}

			/* new settings take effect in a new engine, once it is idle */
			if (config_changed && nattempts == 0 && sweep_task == NULL)
			{
				remora_engine_free(engine);
				engine = make_engine();
				config_changed = false;
				ereport(LOG, (errmsg("remora worker: new settings in effect, "
									 "incarnation %s",
									 my_incarnation_text)));
			}

			gen = pg_atomic_read_u64(&remora_shared->submit_generation);
			if (!config_changed && (gen != seen_submit || ts >= next_poll))
			{
				seen_submit = gen;
				next_poll = TimestampTzPlusMilliseconds(ts, CLAIM_POLL_MS);
				if (claim())
					next_poll = ts; /* a full batch: there may be more */
			}
			/*
			 * While new settings wait for an idle engine, a cleanup that
			 * ends is still recorded (or the engine would never be idle),
			 * but no new one starts.
			 */
			if (ts >= next_sweep && (!config_changed || sweep_task))
			{
				sweep(!config_changed);
				next_sweep = TimestampTzPlusMilliseconds(
					ts, sweep_task ? 100 : SWEEP_MS);
			}

			/* sleep until something happens, or the next thing is due */
			timeout = Min(timeout, ms_until(ts, next_renew));
			timeout = Min(timeout, ms_until(ts, next_poll));
			timeout = Min(timeout, ms_until(ts, next_sweep));
			if (nattempts > 0)
			{
				timeout = Min(timeout, ms_until(ts, next_checkpoint));
				timeout = Min(timeout, ms_until(ts, next_progress));
			}
			engine_timeout = remora_engine_timeout_ms(engine);
			if (engine_timeout >= 0)
				timeout = Min(timeout, engine_timeout);
			report_activity();
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(worker_cxt);
			EmitErrorReport();
			FlushErrorState();
			remora_tx_abort();
			timeout = 1000; /* do not spin on a repeating error */
		}
		PG_END_TRY();

		(void) WaitLatchOrSocket(MyLatch,
								 WL_LATCH_SET | WL_SOCKET_READABLE |
									 WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 remora_engine_fd(engine), timeout,
								 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}

	MemoryContextSwitchTo(worker_cxt);
	shut_down();
	ereport(LOG, (errmsg("remora worker stopped, incarnation %s",
						 my_incarnation_text)));
	proc_exit(0);
}
