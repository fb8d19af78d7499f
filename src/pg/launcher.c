/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The remora launcher: a static background worker that reconciles
 *	  coordination state and keeps remora.max_workers workers running.
 *
 * Once a second, in remora.database, while the extension is installed:
 *	  - record the end of worker incarnations that exited;
 *	  - run remora.reconcile() (rebuild queue and leases, expire leases);
 *	  - start workers into free slots, stop the ones above the limit.
 *
 * The first launcher in a fresh shared memory (server start, or restart
 * after a crash) also records the end of every worker incarnation of the
 * previous server lifetime: none of them can still be running, and their
 * attempts need not wait for their leases to lapse.
 *
 * Every statement is a call of launcher_sql.c, a short transaction inside
 * its error boundary (xact.c): one that fails is logged and the rest of the
 * round still runs, so that workers are kept running whatever one call
 * does.  An ERROR outside a call is reported, the transaction aborted, and
 * the next round tries again.
 *
 * Like the workers, the launcher runs with search_path pg_catalog, pg_temp
 * and names every operator and function by schema, so that nothing a user
 * creates is called with its rights, and with lock_timeout and a statement
 * timeout (remora_pin_session), so that a user holding a lock cannot stall
 * reconcile: it gives up and tries again next round.  It connects as the
 * bootstrap superuser even when remora.worker_role is set: it must be able
 * to tell a misconfigured role apart, and runs no SQL but its own.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

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

#include <signal.h>

#include "pg/bgw_common.h"
#include "pg/guc.h"
#include "pg/launcher.h"
#include "pg/launcher_sql.h"
#include "pg/shmem.h"
#include "pg/xact.h"

/*
 * Jobs retention prunes in one call (remora.prune): its statements go by
 * the batch's ids, so a batch costs the same at any history size; a full
 * one is followed by another a second later, some 60,000 jobs a minute at
 * most, without holding a transaction open for long.
 */
#define PRUNE_BATCH 1000

PGDLLEXPORT void remora_launcher_main(Datum main_arg);

static BackgroundWorkerHandle *handles[REMORA_MAX_WORKERS];
static TimestampTz             last_prune = 0;

void
remora_register_launcher(void)
{
	remora_register_static_worker("remora_launcher_main", "remora launcher");
}

/*
 * Is the extension installed, at the version of this library?  After an
 * upgrade of the library the schema must be updated first: until then the
 * launcher does nothing and says so, once.
 */
static bool
extension_ready(void)
{
	static bool warned = false;
	char       *version = remora_protocol_extension_version();

	if (version && strcmp(version, REMORA_VERSION) != 0 && !warned)
		ereport(
			WARNING,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("remora %s is installed in database \"%s\", but the "
					"library is %s",
					version, remora_database, REMORA_VERSION),
			 errdetail("No transfer runs until the extension is updated."),
			 errhint("Run ALTER EXTENSION remora UPDATE in that database.")));
	warned = version && strcmp(version, REMORA_VERSION) != 0;
	return version && !warned;
}

/* Workers that exited: record it, and free their slots. */
static void
collect_exited_workers(void)
{
	for (int i = 0; i < REMORA_MAX_WORKERS; i++)
	{
		RemoraWorkerSlot *slot = &remora_shared->workers[i];
		pid_t             pid;
		bool              exited = false;
		pg_uuid_t         incarnation;

		if (handles[i] &&
			GetBackgroundWorkerPid(handles[i], &pid) == BGWH_STOPPED)
		{
			pfree(handles[i]);
			handles[i] = NULL;
			exited = true;
		}
		LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
		incarnation = slot->incarnation;
		if (slot->stop_unrecorded || (exited && slot->in_use))
		{
			/* an exit without its own clean-up (or that never attached) */
			exited = true;
			slot->in_use = false;
			slot->latch = NULL;
		}
		else
			exited = false;
		LWLockRelease(remora_shared->lock);

		if (exited)
		{
			bool zero = true;

			for (int b = 0; b < UUID_LEN; b++)
				zero = zero && incarnation.data[b] == 0;
			if (!zero)
				remora_protocol_end_incarnation(&incarnation);
			LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
			slot->stop_unrecorded = false;
			memset(&slot->incarnation, 0, sizeof(pg_uuid_t));
			LWLockRelease(remora_shared->lock);
		}
	}
}

static void
start_worker(int slotno)
{
	BackgroundWorker  worker;
	RemoraWorkerSlot *slot = &remora_shared->workers[slotno];
	MemoryContext     oldcxt;
	bool              registered;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags =
		BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "remora");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "remora_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "remora worker %d", slotno);
	snprintf(worker.bgw_type, BGW_MAXLEN, "remora worker");
	worker.bgw_main_arg = Int32GetDatum(slotno);
	worker.bgw_notify_pid = MyProcPid;

	LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
	slot->in_use = true;
	slot->pid = 0;
	slot->latch = NULL;
	LWLockRelease(remora_shared->lock);

	/* the handle lives as long as the launcher */
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	registered = RegisterDynamicBackgroundWorker(&worker, &handles[slotno]);
	MemoryContextSwitchTo(oldcxt);
	if (!registered)
	{
		LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
		slot->in_use = false;
		LWLockRelease(remora_shared->lock);
		handles[slotno] = NULL;
		ereport(
			WARNING,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("could not start a remora worker"),
			 errhint(
				 "Raise max_worker_processes, or lower remora.max_workers.")));
	}
}

/*
 * Can the workers connect as remora.worker_role and do their work?  It must
 * exist, have LOGIN (PostgreSQL 15 checks it for background workers too),
 * be a member of remora_worker and not be a superuser (the point of it).
 * Otherwise no worker starts and the launcher says why, once: falling back
 * to the bootstrap superuser would hide the mistake.
 */
static bool
worker_role_usable(void)
{
	static bool warned = false;
	const char *why = NULL;

	if (remora_worker_role == NULL || remora_worker_role[0] == '\0')
		return true;
	if (!remora_protocol_check_role(remora_worker_role, &why))
		return false; /* cannot be told now: next round */
	if (why && !warned)
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("remora.worker_role \"%s\" cannot run the remora "
						"workers; none is started",
						remora_worker_role),
				 errdetail("%s", why),
				 errhint("Create it with CREATE ROLE ... LOGIN and GRANT "
						 "remora_worker to it, or set remora.worker_role to "
						 "an empty string and restart.")));
	warned = why != NULL;
	return why == NULL;
}

/* Keep remora.max_workers workers: start the missing, stop the extra. */
static void
balance_workers(void)
{
	int want = Min(remora_max_workers, REMORA_MAX_WORKERS);

	for (int i = 0; i < REMORA_MAX_WORKERS; i++)
	{
		bool in_use;

		LWLockAcquire(remora_shared->lock, LW_SHARED);
		in_use = remora_shared->workers[i].in_use;
		LWLockRelease(remora_shared->lock);

		/* want is a setting, not a constant */
		/* cppcheck-suppress knownConditionTrueFalse */
		if (i < want && !in_use)
			start_worker(i);
		/* cppcheck-suppress knownConditionTrueFalse */
		else if (i >= want && in_use && handles[i])
			TerminateBackgroundWorker(handles[i]);
	}
}

static void
round_of_work(bool *first)
{
	int64 repairs = 0;

	if (!extension_ready())
		return;
	if (*first)
	{
		remora_protocol_end_previous_lifetime();
		*first = false;
	}
	collect_exited_workers();
	if (remora_protocol_reconcile(&repairs) && repairs > 0)
	{
		ereport(DEBUG1, (errmsg("remora reconcile made %lld repairs",
								(long long) repairs)));
		/* lost attempts may have made jobs claimable */
		remora_wake_workers();
	}
	if (worker_role_usable())
		balance_workers();

	/* every minute, or as often as the retention if that is shorter */
	if (remora_retention_s > 0 &&
		TimestampDifferenceExceeds(last_prune, GetCurrentTimestamp(),
								   Min(remora_retention_s, 60) * 1000))
	{
		int64 pruned = 0;

		(void) remora_protocol_prune(PRUNE_BATCH, &pruned);
		/* a full batch: more are due, in the next round (a second) */
		last_prune = pruned == PRUNE_BATCH ? 0 : GetCurrentTimestamp();
	}
}

void
remora_launcher_main(Datum main_arg)
{
	bool          first;
	MemoryContext cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(remora_database, NULL, 0);
	remora_reload_at_start();
	remora_pin_session();
	pgstat_report_appname("remora launcher");

	LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
	first = !remora_shared->launcher_ran;
	remora_shared->launcher_ran = true;
	remora_shared->launcher_pid = MyProcPid;

	/*
	 * A launcher restarted after an error has no handles for the workers of
	 * its predecessor: keep the ones that run, and let go of the slots of
	 * those that are gone (or never started).
	 */
	for (int i = 0; !first && i < REMORA_MAX_WORKERS; i++)
	{
		RemoraWorkerSlot *slot = &remora_shared->workers[i];

		if (slot->in_use && (slot->pid == 0 || kill(slot->pid, 0) != 0))
			slot->stop_unrecorded = true;
	}
	LWLockRelease(remora_shared->lock);

	cxt = AllocSetContextCreate(TopMemoryContext, "remora launcher",
								ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		MemoryContextSwitchTo(cxt);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			remora_pin_session(); /* the lease may have changed */
		}

		PG_TRY();
		{
			round_of_work(&first);
		}
		PG_CATCH();
		{
			/* report, clean up, and try again next round */
			remora_tx_recover(cxt);
		}
		PG_END_TRY();
		MemoryContextReset(cxt);

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
