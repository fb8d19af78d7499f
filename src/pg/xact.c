/*-------------------------------------------------------------------------
 *
 * xact.c
 *	  The transactions and error boundaries of the launcher's and the
 *	  background workers' statements.
 *
 * A call is a short transaction of its own (no transaction is ever open
 * across network I/O), with SPI, and the statement inside it runs in a
 * subtransaction, as PL/pgSQL runs a block with an exception handler:
 *
 *	  remora_tx_call(what, job, fn, arg)
 *	    remora_tx_begin     StartTransactionCommand, SPI_connect, snapshot
 *	      remora_tx_guarded BeginInternalSubTransaction
 *	        fn(arg)         the statements; may ERROR
 *	      an ERROR here     logged ("<what> failed: ..."), the
 *	                        subtransaction rolled back alone
 *	    remora_tx_end       SPI_finish, CommitTransactionCommand
 *	  an ERROR here         (a commit that fails) logged, the transaction
 *	                        aborted (remora_tx_abort)
 *
 * so that a call that waits on a row a user holds, times out or raises
 * fails alone and returns false; the caller tries again later.  Several
 * guarded calls may share one transaction (the checkpoints of one round).
 *
 * Memory: results are copied into the memory context that was current at
 * remora_tx_begin (the caller's); SPI's memory goes with the transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

#include "pg/guc.h"
#include "pg/xact.h"

/* ----------------------------------------------------------- transactions */

MemoryContext                remora_tx_caller_cxt;
static volatile sig_atomic_t in_call = false;

/* what pg_stat_activity shows between transactions; empty: the last call */
static char idle_activity[1024];

/*
 * Is a protocol call running?  (For a SIGTERM handler: it may cancel the
 * statement in progress.)
 */
bool
remora_tx_in_progress(void)
{
	return in_call;
}

/*
 * Start a short transaction with SPI.  what ("claiming") is shown in
 * pg_stat_activity as "remora: claiming".  Results the caller keeps must be
 * copied into its context (see keep_str) before remora_tx_end.
 */
void
remora_tx_begin(const char *what)
{
	char activity[128];

	remora_tx_caller_cxt = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	snprintf(activity, sizeof(activity), "remora: %s", what);
	pgstat_report_activity(STATE_RUNNING, activity);
	in_call = true;
}

/*
 * Say what this process does between its transactions (a worker: the
 * attempts it moves).  Each transaction's end shows it again, so that a
 * sample taken between two calls of one round does not show the last
 * call's name as if it were still the work in hand.
 */
void
remora_tx_set_idle(const char *activity)
{
	strlcpy(idle_activity, activity, sizeof(idle_activity));
	pgstat_report_activity(STATE_IDLE, idle_activity);
}

static void
report_idle(void)
{
	pgstat_report_activity(STATE_IDLE, idle_activity[0] ? idle_activity : NULL);
}

/* Commit; back in the caller's context (committing leaves another). */
void
remora_tx_end(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	in_call = false;
	MemoryContextSwitchTo(remora_tx_caller_cxt);
	pgstat_report_stat(false);
	report_idle();
}

/*
 * After an ERROR left a transaction open (the caller has caught and
 * flushed it): abort it, and SPI with it.  Harmless with none open.
 */
void
remora_tx_abort(void)
{
	disable_timeout(STATEMENT_TIMEOUT, false);
	AbortCurrentTransaction();
	SPI_finish();
	in_call = false;
	QueryCancelPending = false;
	report_idle();
}

/*
 * The outer error boundary, in a PG_CATCH: report the ERROR caught, abort
 * the transaction it left open (if any), and go back to cxt.
 */
void
remora_tx_recover(MemoryContext cxt)
{
	MemoryContextSwitchTo(cxt);
	EmitErrorReport();
	FlushErrorState();
	remora_tx_abort();
	MemoryContextSwitchTo(cxt);
}

/*
 * Run fn(arg) in a subtransaction of the open transaction: an ERROR in it
 * (a timeout, a refused argument, a trigger that raises) is logged, for
 * job_id when it is not 0, and rolled back alone, and false returned; the
 * transaction and SPI stay usable for the next call.  Memory fn allocates
 * in the caller's context is kept either way.
 */
bool
remora_tx_guarded(const char *what, int64 job_id, RemoraCallFn fn, void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		const char *who =
			MyBgworkerEntry ? MyBgworkerEntry->bgw_type : "remora";

		disable_timeout(STATEMENT_TIMEOUT, false);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		QueryCancelPending = false;
		ereport(LOG,
				(errcode(edata->sqlerrcode),
				 job_id
					 ? errmsg("remora job " INT64_FORMAT ": %s failed: %s",
							  job_id, what, edata->message)
					 : errmsg("%s: %s failed: %s", who, what, edata->message),
				 edata->detail ? errdetail("%s", edata->detail) : 0,
				 errhint("The call is tried again later.")));
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return ok;
}

/*
 * A short transaction inside the error boundary: fn(arg) runs between
 * remora_tx_begin and remora_tx_end and makes its calls with
 * remora_tx_guarded.  False when an ERROR escaped fn or the commit: it is
 * reported and the transaction aborted.
 */
bool
remora_tx_run(const char *what, RemoraCallFn fn, void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = false;

	PG_TRY();
	{
		remora_tx_begin(what);
		fn(arg);
		remora_tx_end();
		ok = true;
	}
	PG_CATCH();
	{
		remora_tx_recover(cxt);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	return ok;
}

typedef struct GuardedCall
{
	const char  *what;
	int64        job_id;
	RemoraCallFn fn;
	void        *arg;
	bool         ok;
} GuardedCall;

static void
guarded_call(void *arg)
{
	GuardedCall *g = arg;

	g->ok = remora_tx_guarded(g->what, g->job_id, g->fn, g->arg);
}

/*
 * One call in a transaction of its own, inside the error boundary: false
 * when it failed (logged), whether in fn or at commit.
 */
bool
remora_tx_call(const char *what, int64 job_id, RemoraCallFn fn, void *arg)
{
	GuardedCall g = {what, job_id, fn, arg, false};

	return remora_tx_run(what, guarded_call, &g) && g.ok;
}

/* Run one statement through SPI with the protocol's statement timeout. */
int
remora_spi_execute(const char *query, int nargs, Oid *types, Datum *values,
				   const char *nulls, bool read_only, long count)
{
	volatile int rc = -1;

	enable_timeout_after(STATEMENT_TIMEOUT,
						 remora_protocol_statement_timeout_ms());
	PG_TRY();
	{
		rc = SPI_execute_with_args(query, nargs, types, values, nulls,
								   read_only, count);
	}
	PG_FINALLY();
	{
		disable_timeout(STATEMENT_TIMEOUT, false);
	}
	PG_END_TRY();
	return rc;
}
