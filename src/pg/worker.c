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
 *	  finish	commit the attempts that succeeded (those of one round in one
 *				call, remora.commit_many), fail those that failed
 *	  checkpoint  validated progress, all dirty attempts in one transaction,
 *				at most once a second
 *	  claim		when there is room and a submit committed, now and then, and
 *				as soon as an attempt ends after a full batch
 *	  cleanup	delete staging of attempts that can no longer commit
 *
 * The attempts themselves, from claim to commit, failure or stop, are
 * attempt.c's; every statement is a call of protocol.c, a short
 * transaction of its own inside its error boundary, with documents built
 * and read by jobspec.c.  No transaction is open while bytes move.
 *
 * The error boundaries, innermost first: a protocol call that raises fails
 * alone, for its attempt only, and is tried again later (protocol.c); an
 * ERROR outside a call (a commit of a checkpoint batch that fails, say)
 * abandons the round: it is reported, the transaction aborted, and every
 * step that did not finish is done again in the next round.  Only an
 * ERROR before the loop (no engine, the incarnation not recorded) ends the
 * process; the launcher starts another.
 *
 * SIGTERM cancels the statement in progress, a lock wait included, ends
 * the loop, and hands the attempts back (remora.fail, retryable) with a
 * short lock_timeout: an attempt whose job row someone holds is left to
 * its lease rather than hold up the stop.
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
#include "pg/attempt.h"
#include "pg/protocol.h"
#include "pg/shmem.h"

PGDLLEXPORT void remora_worker_main(Datum main_arg);

#define CLAIM_POLL_MS 5000
#define CHECKPOINT_MS 1000
#define PROGRESS_MS   250
#define SWEEP_MS      5000

static volatile sig_atomic_t got_sigterm = false;
static int                   my_slot;
static pg_uuid_t             my_incarnation;
static char                  my_incarnation_text[REMORA_UUID_TEXT_LEN];
static MemoryContext         worker_cxt;
static RemoraEngine         *engine;

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

/* Room for more attempts: concurrency less what runs. */
static int
claim_room(void)
{
	return Min(remora_worker_concurrency, REMORA_MAX_ATTEMPTS) -
		   remora_attempts_count();
}

/*
 * Claim as many attempts as there is room for.  True when jobs may be left
 * waiting: the batch was full, or there was no room to look.  Then the
 * worker claims again as soon as an attempt ends, rather than at its next
 * poll: otherwise a worker that filled up would sit idle until then, however
 * long the queue.
 */
static bool
claim(void)
{
	int          room = claim_room();
	RemoraClaim *rows;
	int          n;

	if (room <= 0)
		return true;
	rows = palloc0(sizeof(RemoraClaim) * room);
	n = remora_protocol_claim(&my_incarnation, room, rows);
	for (int i = 0; i < n; i++)
		remora_attempt_start(engine, &rows[i]);
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
	remora_target_config(&cfg.target);
	cfg.part_size = (size_t) remora_part_size_kb * 1024;
	cfg.export_copy_cutoff = (int64_t) remora_export_copy_cutoff_kb * 1024;
	cfg.allow_networks = remora_allow_networks;
	cfg.deny_networks = remora_deny_networks;
	cfg.allow_ports = remora_allow_ports;
	cfg.connect_timeout_ms = 10000;
	cfg.stall_timeout_ms = remora_stall_timeout_ms;
	cfg.user_agent = "remora/" REMORA_VERSION;
	cfg.ca_file = remora_ca_file;
	cfg.ca_path = remora_ca_path;
	cfg.http_proxy = remora_http_proxy;
	cfg.https_proxy = remora_https_proxy;
	cfg.no_proxy = remora_no_proxy;
	cfg.max_connections_per_host = remora_max_connections_per_host;
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
	char lock_timeout[32];

	/* a cancel SIGTERM left pending must not cancel the calls below */
	QueryCancelPending = false;

	/*
	 * Hand back at once what can be handed back: an attempt whose job row
	 * someone holds is left to its lease rather than hold up the stop.
	 */
	snprintf(lock_timeout, sizeof(lock_timeout), "%d",
			 Min(remora_protocol_lock_timeout_ms(), 500));
	SetConfigOption("lock_timeout", lock_timeout, PGC_SUSET, PGC_S_OVERRIDE);
	remora_attempts_hand_back();
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
	if (remora_attempts_count() == 0 && sweep_task == NULL)
		appendStringInfoString(&buf, "remora: waiting for jobs");
	else
	{
		appendStringInfoString(&buf, "remora: transferring");
		remora_attempts_describe(&buf, 20);
		if (sweep_task)
			appendStringInfo(&buf, "%s deleting objects of job " INT64_FORMAT,
							 remora_attempts_count() ? ";" : "", sweep_job);
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
	static bool backlog = false; /* jobs may be waiting (claim) */

	my_slot = DatumGetInt32(main_arg);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, worker_sigterm);
	BackgroundWorkerUnblockSignals();
	/* as remora.worker_role if one is set (the launcher checked it) */
	BackgroundWorkerInitializeConnection(
		remora_database,
		remora_worker_role && remora_worker_role[0] ? remora_worker_role : NULL,
		0);
	remora_reload_at_start();
	remora_pin_session();
	pgstat_report_appname("remora worker");

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "remora worker",
									   ALLOCSET_DEFAULT_SIZES);
	loop_cxt = AllocSetContextCreate(worker_cxt, "remora worker round",
									 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(worker_cxt);
	remora_attempts_init(worker_cxt, my_slot);
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
			remora_attempts_answer_lookups(engine);
			ts = GetCurrentTimestamp();
			gen = pg_atomic_read_u64(&remora_shared->cancel_generation);
			if (gen != seen_cancel || ts >= next_renew)
			{
				seen_cancel = gen;
				next_renew = TimestampTzPlusMilliseconds(
					ts, remora_lease_duration_ms / 3);
				(void) remora_protocol_heartbeat(&my_incarnation);
				remora_attempts_renew();
			}
			remora_attempts_finish();

			ts = GetCurrentTimestamp();
			if (ts >= next_checkpoint)
			{
				remora_attempts_checkpoint();
				next_checkpoint =
					TimestampTzPlusMilliseconds(ts, CHECKPOINT_MS);
			}
			if (ts >= next_progress)
			{
				remora_attempts_publish_progress();
				next_progress = TimestampTzPlusMilliseconds(ts, PROGRESS_MS);
			}

			/* new settings take effect in a new engine, once it is idle */
			if (config_changed && remora_attempts_count() == 0 &&
				sweep_task == NULL)
			{
				remora_engine_free(engine);
				engine = make_engine();
				config_changed = false;
				ereport(LOG, (errmsg("remora worker: new settings in effect, "
									 "incarnation %s",
									 my_incarnation_text)));
			}

			gen = pg_atomic_read_u64(&remora_shared->submit_generation);
			if (!config_changed && (gen != seen_submit || ts >= next_poll ||
									(backlog && claim_room() > 0)))
			{
				seen_submit = gen;
				next_poll = TimestampTzPlusMilliseconds(ts, CLAIM_POLL_MS);
				backlog = claim();
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
			if (remora_attempts_count() > 0)
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
			remora_tx_recover(worker_cxt);
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
