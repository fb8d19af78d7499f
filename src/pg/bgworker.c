/*-------------------------------------------------------------------------
 *
 * bgworker.c
 *	  A remora worker: one background process that runs the runner
 *	  (src/runner/) over SPI, up to remora.worker_concurrency attempts at
 *	  once in the transfer engine.
 *
 * The loop waits on its latch and on the engine's descriptor together, so
 * a submit (its commit sets the latch), a cancel, SIGTERM, SIGHUP and
 * network activity all act at once, mid-stream.  Each time, the runner's
 * round (src/runner/round.c: fence, renew, finish, checkpoint, claim,
 * sweep) runs, told whether a submit or a cancel was committed since;
 * then live progress goes to shared memory (every 250 ms) and the
 * activity to pg_stat_activity.  Every statement is a call of the SPI
 * host (spi_host.c), a short transaction of its own inside its error
 * boundary (xact.c).  No transaction is open while bytes move.
 *
 * The error boundaries, innermost first: a statement that raises fails
 * alone, for its attempt only, and is tried again later; an ERROR outside
 * one abandons the round: it is reported, the transaction aborted, and
 * every step that did not finish is done again in the next round.  Only
 * an ERROR before the loop (no engine) ends the process; the launcher
 * starts another.
 *
 * SIGTERM cancels the statement in progress, a lock wait included, ends
 * the loop, and hands the attempts back (remora.fail, retryable) with a
 * short lock_timeout: an attempt whose job row someone holds is left to
 * its lease rather than hold up the stop.
 *
 * Memory: a context for the worker's life, one reset every round; the
 * runner's and the engine's own memory is malloc'd, bounded per attempt.
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
#include "pg/bgw_common.h"
#include "pg/guc.h"
#include "pg/shmem.h"
#include "pg/spi_host.h"
#include "pg/xact.h"
#include "runner/runner.h"

PGDLLEXPORT void remora_worker_main(Datum main_arg);

#define PROGRESS_MS 250

static volatile sig_atomic_t got_sigterm = false;
static int                   my_slot;
static MemoryContext         worker_cxt;

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

/* What the runner takes from the settings (it copies them). */
static RemoraRunnerConfig
runner_config(void)
{
	RemoraRunnerConfig rc;

	memset(&rc, 0, sizeof(rc));
	rc.lease_ms = remora_lease_duration_ms;
	rc.concurrency = remora_worker_concurrency;
	rc.connections = remora_object_connections;
	rc.hub_url = remora_hf_endpoint;
	rc.hf_token = remora_hf_token;
	rc.kind = "worker";
	return rc;
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
	remora_runner_stop();
}

/*
 * What pg_stat_activity shows for this worker between transactions: the
 * jobs and attempts it is moving, or that it is idle.
 */
static void
report_activity(void)
{
	RemoraAttemptView v[20];
	int               n = remora_runner_attempts(v, 20);
	int               all = remora_runner_count();
	int64             sweeping = remora_runner_sweep_job();
	StringInfoData    buf;

	initStringInfo(&buf);
	if (all == 0 && sweeping < 0)
		appendStringInfoString(&buf, "remora: waiting for jobs");
	else
	{
		appendStringInfoString(&buf, "remora: transferring");
		for (int i = 0; i < n; i++)
			appendStringInfo(&buf, "%s job " INT64_FORMAT " attempt %s",
							 i ? "," : "", v[i].job_id, v[i].attempt_id);
		if (all > n)
			appendStringInfo(&buf, ", and %d more", all - n);
		if (sweeping >= 0)
			appendStringInfo(&buf, "%s deleting objects of job " INT64_FORMAT,
							 all ? ";" : "", sweeping);
	}
	remora_tx_set_idle(buf.data);
	pfree(buf.data);
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
	MemoryContext      loop_cxt;
	RemoraRunnerConfig rc;

	/* static: they live across the error boundary's longjmp */
	static uint64      seen_submit = (uint64) -1;
	static uint64      seen_cancel;
	static TimestampTz next_progress;

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
	before_shmem_exit(worker_exit, (Datum) 0);
	rc = runner_config();
	remora_spi_host_start(my_slot, worker_cxt, &rc);
	seen_cancel = pg_atomic_read_u64(&remora_shared->cancel_generation);
	ereport(LOG, (errmsg("remora worker started, incarnation %s",
						 remora_runner_incarnation())));

	while (!got_sigterm)
	{
		volatile long timeout = 1000;

		MemoryContextSwitchTo(worker_cxt);
		MemoryContextReset(loop_cxt);
		MemoryContextSwitchTo(loop_cxt);

		/*
		 * An error in one round (a cancelled statement, a deadlock, a
		 * statement that raised) is reported and the round abandoned;
		 * nothing is lost, since every step that did not finish is done
		 * again in the next round.  Without this boundary any ERROR would
		 * end the incarnation and cost every attempt it runs a retry.
		 */
		PG_TRY();
		{
			RemoraRound in = {.connected = true};
			TimestampTz ts;
			uint64      gen;
			int64_t     deadline;

			CHECK_FOR_INTERRUPTS();
			if (ConfigReloadPending)
			{
				ConfigReloadPending = false;
				ProcessConfigFile(PGC_SIGHUP);
				/* the lease may have changed: new timeouts, renew now */
				remora_pin_session();
				rc = runner_config();
				remora_runner_reconfigure(&rc, true);
			}
			gen = pg_atomic_read_u64(&remora_shared->cancel_generation);
			in.renew_now = gen != seen_cancel;
			seen_cancel = gen;
			gen = pg_atomic_read_u64(&remora_shared->submit_generation);
			in.claim_now = gen != seen_submit;
			seen_submit = gen;
			deadline = remora_runner_round(&in);

			ts = GetCurrentTimestamp();
			if (ts >= next_progress)
			{
				remora_spi_host_publish_progress();
				next_progress = TimestampTzPlusMilliseconds(ts, PROGRESS_MS);
			}
			/* sleep until something happens, or the next thing is due */
			timeout = Max(0, Min(timeout, deadline - remora_clock_ms()));
			if (remora_runner_count() > 0)
				timeout = Min(timeout, ms_until(ts, next_progress));
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
								 remora_engine_fd(remora_runner_engine()),
								 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}

	MemoryContextSwitchTo(worker_cxt);
	shut_down();
	ereport(LOG, (errmsg("remora worker stopped")));
	proc_exit(0);
}
