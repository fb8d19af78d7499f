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
 * Every protocol call is a short transaction of its own.  An attempt that
 * loses authority (renew or checkpoint refused) is stopped; safety never
 * depends on that stop, because remora.commit would refuse it anyway.
 *
 * Nothing a user does can subvert or stall the worker:
 *	  - the session's search_path is pg_catalog, pg_temp and every operator
 *		and function below is named with its schema, so no object a user
 *		creates is ever called (remora_pin_session);
 *	  - every protocol call runs with lock_timeout and a statement timeout
 *		derived from remora.lease_duration, and in a subtransaction of its
 *		own (guarded): a call that waits on a row a user holds, or raises,
 *		fails alone, for its attempt only, and is tried again later;
 *	  - SIGTERM cancels the statement in progress, a lock wait included;
 *	  - whatever claim hands back is checked before use: a malformed
 *		checkpoint makes the attempt start from zero, never a crash;
 *	  - members handed to a checkpoint or commit whose transaction did not
 *		commit are offered again with the next call, never lost.
 *
 * Memory: a context for the worker's life, one reset every round, and the
 * engine's own malloc'd memory, bounded per task.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "engine/engine.h"
#include "pg/shmem.h"

PGDLLEXPORT void remora_worker_main(Datum main_arg);

#define MAX_TASKS     256
#define CLAIM_POLL_MS 5000
#define CHECKPOINT_MS 1000
#define PROGRESS_MS   250
#define SWEEP_MS      5000
#define CALL_TRIES    5 /* a commit or fail that raised, tried again */

/* operators, always from pg_catalog (see the file header) */
#define OP_EQ        " OPERATOR(pg_catalog.=) "
#define OP_NE        " OPERATOR(pg_catalog.<>) "
#define OP_GET       " OPERATOR(pg_catalog.->) "
#define OP_GET_TEXT  " OPERATOR(pg_catalog.->>) "
#define OP_PATH      " OPERATOR(pg_catalog.#>) "
#define OP_PATH_TEXT " OPERATOR(pg_catalog.#>>) "

typedef struct Attempt
{
	RemoraTask *task;
	int64       job_id;
	Oid         owner;
	char        attempt_id[UUID_LEN * 2 + 5];
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
	const char *forced_restart; /* why the offered checkpoint was not used */
	bool        renew_blocked;  /* the last renewal failed: renew it last */
	int         call_failures;  /* commit or fail calls that raised */
	char       *commit_json;    /* the descriptor, kept to try again */

	/*
	 * Members (an export's references: JSON objects, comma-separated)
	 * handed to a checkpoint whose transaction did not commit: they go with
	 * the next checkpoint or the commit.
	 */
	StringInfoData unsent;
} Attempt;

static volatile sig_atomic_t got_sigterm = false;
static int                   my_slot;
static pg_uuid_t             my_incarnation;
static char                  my_incarnation_text[UUID_LEN * 2 + 5];
static MemoryContext         worker_cxt;
static RemoraEngine         *engine;
static Attempt              *attempts[MAX_TASKS];
static int                   nattempts;

/* staging cleanup or hard delete in progress */
static RemoraTask *sweep_task;
static char        sweep_attempt[UUID_LEN * 2 + 5]; /* "" for a hard delete */
static int64       sweep_job;

static volatile sig_atomic_t in_sql = false;

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

	if (in_sql && !got_sigterm)
	{
		QueryCancelPending = true;
		InterruptPending = true;
	}
	got_sigterm = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

/* ------------------------------------------------------------ SQL calls */

static MemoryContext tx_caller_cxt;

/*
 * A short transaction with SPI.  tx_end() returns to the memory context the
 * caller was in (committing leaves TopMemoryContext current), and results
 * the caller keeps must be copied there before tx_end().
 */
static void
tx_begin(const char *activity)
{
	tx_caller_cxt = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
	in_sql = true;
}

static void
tx_end(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	in_sql = false;
	MemoryContextSwitchTo(tx_caller_cxt);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* After an error left a transaction open: abort it, and SPI with it. */
static void
tx_abort(void)
{
	disable_timeout(STATEMENT_TIMEOUT, false);
	AbortCurrentTransaction();
	SPI_finish();
	in_sql = false;
	QueryCancelPending = false;
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Run fn(arg) in a subtransaction of the open transaction, as PL/pgSQL runs
 * a block with an exception handler: an ERROR in it (a timeout, a refused
 * argument, a trigger that raises) is logged and rolled back alone, and
 * false returned; the transaction and SPI stay usable for the next call.
 * Memory fn allocates in the caller's context is kept either way.
 */
static bool
guarded(const char *what, int64 job_id, void (*fn)(void *), void *arg)
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
		ErrorData *edata;

		disable_timeout(STATEMENT_TIMEOUT, false);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		QueryCancelPending = false;
		ereport(LOG,
				(errcode(edata->sqlerrcode),
				 job_id ? errmsg("remora job " INT64_FORMAT ": %s failed: %s",
								 job_id, what, edata->message)
						: errmsg("remora worker: %s failed: %s", what,
								 edata->message),
				 edata->detail ? errdetail("%s", edata->detail) : 0,
				 errhint("The call is tried again later; the other attempts "
						 "of this worker carry on.")));
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return ok;
}

/* A copy in the caller's context of a value read inside tx_begin/tx_end. */
static char *
keep_str(const char *s)
{
	return s ? MemoryContextStrdup(tx_caller_cxt, s) : NULL;
}

static void
sql(const char *query, int nargs, Oid *types, Datum *values, const char *nulls)
{
	if (remora_spi_execute(query, nargs, types, values, nulls, false, 0) < 0)
		elog(ERROR, "remora worker: query failed: %s", query);
}

static char *
col_text(int row, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
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
	if (a->commit_json)
		pfree(a->commit_json);
	pfree(a->unsent.data);
	pfree(a);
	attempts[i] = attempts[--nattempts];
}

static void
error_json(StringInfo buf, const RemoraTaskError *e)
{
	appendStringInfoString(buf, "{\"class\": ");
	escape_json(buf, e->class);
	appendStringInfoString(buf, ", \"message\": ");
	escape_json(buf, e->message);
	if (e->http_status)
		appendStringInfo(buf, ", \"http_status\": %ld", e->http_status);
	if (e->curl_code)
		appendStringInfo(buf, ", \"curl_code\": %d", e->curl_code);
	if (e->s3_code[0])
	{
		appendStringInfoString(buf, ", \"s3_code\": ");
		escape_json(buf, e->s3_code);
	}
	if (e->retry_after >= 0)
		appendStringInfo(buf, ", \"retry_after\": %ld", e->retry_after);
	appendStringInfoChar(buf, '}');
}

/*
 * Report a failed attempt.  Returns the job's resulting state (in the
 * caller's context), or NULL if the call failed: the caller tries again.
 */
typedef struct FailCall
{
	const char *attempt_id;
	int64       token;
	const char *error;
	bool        retryable;
	char       *state;
} FailCall;

static void
fail_call(void *arg)
{
	FailCall *c = arg;
	Oid       types[4] = {UUIDOID, INT8OID, JSONBOID, BOOLOID};
	Datum     values[4];

	values[0] = DirectFunctionCall1(uuid_in, CStringGetDatum(c->attempt_id));
	values[1] = Int64GetDatum(c->token);
	values[2] = DirectFunctionCall1(jsonb_in, CStringGetDatum(c->error));
	values[3] = BoolGetDatum(c->retryable);
	sql("SELECT remora.fail($1, $2, $3, $4)", 4, types, values, NULL);
	c->state = keep_str(col_text(0, 1));
	if (c->state == NULL)
		c->state = keep_str("unknown");
}

static char *
report_failure(int64 job_id, const char *attempt_id, int64 token,
			   const RemoraTaskError *e)
{
	StringInfoData buf;
	FailCall       c = {0};

	initStringInfo(&buf);
	error_json(&buf, e);
	c.attempt_id = attempt_id;
	c.token = token;
	c.error = buf.data;
	c.retryable = e->retryable;
	tx_begin("remora: reporting a failed attempt");
	if (!guarded("reporting a failed attempt", job_id, fail_call, &c))
		c.state = NULL;
	tx_end();
	return c.state;
}

/* An export's conclusive answers as remora.checkpoint/commit take them. */
static void
refs_json(StringInfo buf, const RemoraExportRef *r, int n)
{
	for (int i = 0; i < n; i++)
	{
		appendStringInfoString(buf, i ? ", {\"path\": " : "{\"path\": ");
		escape_json(buf, r[i].path);
		appendStringInfoString(buf, ", \"key\": ");
		escape_json(buf, r[i].key);
		appendStringInfoString(buf, ", \"etag\": ");
		escape_json(buf, r[i].etag);
		appendStringInfoString(buf, ", \"version_id\": ");
		escape_json(buf, r[i].version_id);
		appendStringInfo(buf, ", \"size\": " INT64_FORMAT ", \"outcome\": ",
						 (int64) r[i].size);
		escape_json(buf, r[i].outcome);
		appendStringInfoChar(buf, '}');
	}
}

/* The references not yet recorded, then these. */
static void
refs_to_send(StringInfo buf, Attempt *a, const RemoraExportRef *r, int n)
{
	appendBinaryStringInfo(buf, a->unsent.data, a->unsent.len);
	if (a->unsent.len > 0 && n > 0)
		appendStringInfoString(buf, ", ");
	refs_json(buf, r, n);
}

/* An export's descriptor: its output digest and every last reference. */
static void
export_descriptor(StringInfo buf, Attempt *a, const RemoraTaskResult *r)
{
	RemoraTaskCheckpoint cp;
	bool                 more = remora_task_checkpoint(a->task, &cp);

	appendStringInfo(buf,
					 "{\"sha256\": \"%s\", \"members\": " INT64_FORMAT
					 ", \"bytes\": " INT64_FORMAT ", \"references\": [",
					 r->manifest_sha256, (int64) r->members, (int64) r->bytes);
	refs_to_send(buf, a, more ? cp.refs : NULL, more ? cp.nrefs : 0);
	appendStringInfoString(buf, "]}");
	resetStringInfo(&a->unsent);
}

static void members_json(StringInfo buf, const char *bucket,
						 const RemoraSetMember *m, int n);

/*
 * The members of a set to hand over now: those a checkpoint that did not
 * commit was given, then the ones the engine hands out now.
 */
static void
members_to_send(StringInfo buf, Attempt *a, const RemoraSetMember *m, int n)
{
	appendBinaryStringInfo(buf, a->unsent.data, a->unsent.len);
	if (a->unsent.len > 0 && n > 0)
		appendStringInfoString(buf, ", ");
	members_json(buf, a->bucket, m, n);
}

/*
 * The descriptor of a set's manifest; its members not yet recorded by a
 * checkpoint go with it as "entries".
 */
static void
set_descriptor(StringInfo buf, Attempt *a, const RemoraTaskResult *r)
{
	RemoraTaskCheckpoint cp;
	bool                 more = remora_task_checkpoint(a->task, &cp);

	appendStringInfoString(buf, "{\"key\": ");
	escape_json(buf, r->manifest_key);
	appendStringInfoString(buf, ", \"etag\": ");
	escape_json(buf, r->manifest_etag);
	appendStringInfo(
		buf,
		", \"sha256\": \"%s\", \"members\": " INT64_FORMAT
		", \"bytes\": " INT64_FORMAT
		", \"members_sha256\": \"%s\", \"members_reused\": " INT64_FORMAT,
		r->manifest_sha256, (int64) r->members, (int64) r->bytes,
		r->members_sha256, (int64) r->members_reused);
	if (r->source_commit[0])
		appendStringInfo(buf, ", \"source_commit\": \"%s\"", r->source_commit);
	appendStringInfoString(buf, ", \"entries\": [");
	members_to_send(buf, a, more ? cp.members : NULL, more ? cp.nmembers : 0);
	appendStringInfoString(buf, "]}");
	resetStringInfo(&a->unsent);
}

/* The descriptor remora.commit takes for a single object. */
static void
object_descriptor(StringInfo buf, Attempt *a, const RemoraTaskResult *r)
{
	appendStringInfoString(buf, "{\"key\": ");
	escape_json(buf, r->manifest_key);
	appendStringInfoString(buf, ", \"etag\": ");
	escape_json(buf, r->manifest_etag);
	appendStringInfo(
		buf, ", \"sha256\": \"%s\", \"members\": 1, \"bytes\": " INT64_FORMAT,
		r->manifest_sha256, (int64) r->member_size);
	appendStringInfoString(buf, ", \"entries\": [{\"path\": ");
	escape_json(buf, a->file_name);
	appendStringInfoString(buf, ", \"bucket\": ");
	escape_json(buf, a->bucket);
	appendStringInfoString(buf, ", \"key\": ");
	escape_json(buf, r->member_key);
	appendStringInfo(
		buf, ", \"size\": " INT64_FORMAT ", \"sha256\": \"%s\", \"etag\": ",
		(int64) r->member_size, r->member_sha256);
	escape_json(buf, r->member_etag);
	appendStringInfoString(buf, ", \"source\": {\"etag\": ");
	escape_json(buf, r->source_etag);
	appendStringInfoString(buf, ", \"last_modified\": ");
	escape_json(buf, r->source_last_modified);
	appendStringInfoString(buf, "}}]}");
}

typedef struct CommitCall
{
	Attempt *a;
	bool     ok;
} CommitCall;

static void
commit_call(void *arg)
{
	CommitCall *c = arg;
	Oid         types[3] = {UUIDOID, INT8OID, JSONBOID};
	Datum       values[3];
	bool        isnull;

	values[0] = DirectFunctionCall1(uuid_in, CStringGetDatum(c->a->attempt_id));
	values[1] = Int64GetDatum(c->a->token);
	values[2] =
		DirectFunctionCall1(jsonb_in, CStringGetDatum(c->a->commit_json));
	sql("SELECT remora.commit($1, $2, $3)", 3, types, values, NULL);
	c->ok = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull)) &&
			!isnull;
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
	CommitCall c = {a, false};
	bool       called;

	if (a->commit_json == NULL)
	{
		StringInfoData buf;
		MemoryContext  old = MemoryContextSwitchTo(worker_cxt);

		initStringInfo(&buf);
		if (a->is_export)
			export_descriptor(&buf, a, r);
		else if (a->is_set)
			set_descriptor(&buf, a, r);
		else
			object_descriptor(&buf, a, r);
		a->commit_json = buf.data;
		MemoryContextSwitchTo(old);
	}
	tx_begin("remora: committing a result");
	called = guarded("committing a result", a->job_id, commit_call, &c);
	tx_end();
	if (!called)
		return COMMIT_AGAIN;
	return c.ok ? COMMIT_DONE : COMMIT_REFUSED;
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

static bool still_authorized(Attempt *a);
static void export_flush(Attempt *a);

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
				RemoraTaskError e = {0};

				e.class = REMORA_ERR_INTERNAL;
				e.retryable = true;
				e.retry_after = -1;
				snprintf(e.message, sizeof(e.message),
						 "the commit of the result was refused although the "
						 "attempt holds the job");
				ereport(LOG, (errmsg("remora job " INT64_FORMAT
									 " attempt %s: commit refused",
									 a->job_id, a->attempt_id),
							  errdetail("The attempt still holds the job; its "
										"result did not match what it "
										"recorded, and it fails, "
										"retryable.")));
				(void) report_failure(a->job_id, a->attempt_id, a->token, &e);
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

/* Job rows are locked in job id order everywhere, as reconcile does. */
static void
sort_attempts(void)
{
	qsort(attempts, nattempts, sizeof(Attempt *), by_job_id);
}

/* Renewals whose last try failed go last, so that they delay no other. */
static int
by_blocked_then_job_id(const void *a, const void *b)
{
	bool x = (*(Attempt *const *) a)->renew_blocked;
	bool y = (*(Attempt *const *) b)->renew_blocked;

	return x != y ? (x ? 1 : -1) : by_job_id(a, b);
}

static void
heartbeat_call(void *arg)
{
	Oid   types[1] = {UUIDOID};
	Datum hb[1] = {UUIDPGetDatum(&my_incarnation)};

	sql("UPDATE remora.incarnations SET heartbeat_at = pg_catalog.now() "
		"WHERE incarnation" OP_EQ "$1",
		1, types, hb, NULL);
}

typedef struct RenewCall
{
	Attempt *a;
	bool     ok;
	bool     cancelled;
} RenewCall;

static void
renew_call(void *arg)
{
	RenewCall *c = arg;
	Oid        types[2] = {UUIDOID, INT8OID};
	Datum      values[2];

	values[0] = DirectFunctionCall1(uuid_in, CStringGetDatum(c->a->attempt_id));
	values[1] = Int64GetDatum(c->a->token);
	sql("SELECT ok, cancel_requested FROM remora.renew($1, $2)", 2, types,
		values, NULL);
	c->ok = SPI_processed == 1 && col_text(0, 1) &&
			strcmp(col_text(0, 1), "t") == 0;
	c->cancelled = SPI_processed == 1 && col_text(0, 2) &&
				   strcmp(col_text(0, 2), "t") == 0;
}

/*
 * Does the attempt still hold its job?  (A renewal, which also extends its
 * lease.)  False also when that cannot be told.
 */
static bool
still_authorized(Attempt *a)
{
	RenewCall c = {a, false, false};
	bool      called;

	tx_begin("remora: renewing a lease");
	called = guarded("renewing the lease", a->job_id, renew_call, &c);
	tx_end();
	return called && c.ok;
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

	tx_begin("remora: heartbeat");
	(void) guarded("recording the heartbeat", 0, heartbeat_call, NULL);
	tx_end();

	qsort(attempts, nattempts, sizeof(Attempt *), by_blocked_then_job_id);
	for (int i = 0; i < nattempts; i++)
	{
		RenewCall c = {attempts[i], false, false};
		bool      called;

		tx_begin("remora: renewing a lease");
		called =
			guarded("renewing the lease", attempts[i]->job_id, renew_call, &c);
		tx_end();
		attempts[i]->renew_blocked = !called;
		keep[i] = !called || c.ok;
		cancelled[i] = called && c.cancelled;
	}

	/*
	 * An attempt whose result is ready is left to remora.commit, which
	 * refuses it as surely and says so.
	 */
	for (int i = nattempts - 1; i >= 0; i--)
		if (!keep[i] &&
			remora_task_state(attempts[i]->task) != REMORA_TASK_SUCCEEDED)
		{
			ereport(LOG, (errmsg("remora job " INT64_FORMAT
								 " attempt %s stopped: %s",
								 attempts[i]->job_id, attempts[i]->attempt_id,
								 cancelled[i] ? "the job was cancelled"
											  : "the attempt lost its lease")));
			remora_task_abort(attempts[i]->task, false);
			forget_attempt(i);
		}
}

/* Completed members as remora.checkpoint and remora.commit take them. */
static void
members_json(StringInfo buf, const char *bucket, const RemoraSetMember *m,
			 int n)
{
	for (int i = 0; i < n; i++)
	{
		appendStringInfoString(buf, i ? ", {\"path\": " : "{\"path\": ");
		escape_json(buf, m[i].path);
		appendStringInfoString(buf, ", \"bucket\": ");
		escape_json(buf, bucket);
		appendStringInfoString(buf, ", \"key\": ");
		escape_json(buf, m[i].key);
		appendStringInfo(
			buf, ", \"size\": " INT64_FORMAT ", \"sha256\": \"%s\", \"etag\": ",
			(int64) m[i].size, m[i].sha256);
		escape_json(buf, m[i].etag);
		appendStringInfo(buf, ", \"source\": %s, \"reused\": %s}",
						 m[i].source_json, m[i].reused ? "true" : "false");
	}
}

static void
checkpoint_json(StringInfo buf, Attempt *a, const RemoraTaskCheckpoint *cp)
{
	const char *why;

	if (a->is_export)
	{
		appendStringInfo(buf,
						 "{\"bytes_done\": " INT64_FORMAT
						 ", \"bytes_total\": " INT64_FORMAT
						 ", \"references\": [",
						 (int64) cp->bytes_done, (int64) cp->bytes_total);
		refs_to_send(buf, a, cp->refs, cp->nrefs);
		appendStringInfoString(buf, "]}");
		return;
	}
	if (a->is_set)
	{
		appendStringInfo(buf,
						 "{\"bytes_done\": " INT64_FORMAT
						 ", \"state\": {\"members_done\": " INT64_FORMAT,
						 (int64) cp->bytes_done, (int64) cp->members_done);
		if (cp->members_total >= 0)
			appendStringInfo(buf, ", \"members_total\": " INT64_FORMAT,
							 (int64) cp->members_total);
		appendStringInfoChar(buf, '}');
		if (cp->bytes_total >= 0)
			appendStringInfo(buf, ", \"bytes_total\": " INT64_FORMAT,
							 (int64) cp->bytes_total);
		appendStringInfoString(buf, ", \"members\": [");
		members_to_send(buf, a, cp->members, cp->nmembers);
		appendStringInfoString(buf, "]}");
		return;
	}

	appendStringInfo(buf, "{\"bytes_done\": " INT64_FORMAT,
					 (int64) cp->bytes_done);
	if (cp->bytes_total >= 0)
		appendStringInfo(buf, ", \"bytes_total\": " INT64_FORMAT,
						 (int64) cp->bytes_total);
	if (!a->restart_reported && a->forced_restart)
	{
		appendStringInfoString(buf, ", \"restart_reason\": ");
		escape_json(buf, a->forced_restart);
		a->restart_reported = true;
	}
	else if (!a->restart_reported && remora_task_restarted(a->task, &why))
	{
		appendStringInfoString(buf, ", \"restart_reason\": ");
		escape_json(buf, why);
		a->restart_reported = true;
	}
	if (cp->nsegments > 0)
	{
		appendStringInfoString(buf, ", \"state\": {\"etag\": ");
		escape_json(buf, cp->etag);
		appendStringInfoString(buf, ", \"last_modified\": ");
		escape_json(buf, cp->last_modified);
		appendStringInfo(buf,
						 ", \"size\": " INT64_FORMAT ", \"sha256_state\": ",
						 (int64) cp->bytes_total);
		escape_json(buf, cp->sha256_state);
		appendStringInfoString(buf, ", \"segments\": [");
		for (int s = 0; s < cp->nsegments; s++)
		{
			appendStringInfoString(buf, s ? ", {\"key\": " : "{\"key\": ");
			escape_json(buf, cp->segments[s].key);
			appendStringInfo(buf, ", \"size\": " INT64_FORMAT ", \"etag\": ",
							 (int64) cp->segments[s].size);
			escape_json(buf, cp->segments[s].etag);
			appendStringInfoChar(buf, '}');
		}
		appendStringInfoString(buf, "]}");
	}
	appendStringInfoChar(buf, '}');
}

typedef struct CheckpointCall
{
	Attempt    *a;
	const char *json;
	bool        ok;
} CheckpointCall;

static void
checkpoint_call(void *arg)
{
	CheckpointCall *c = arg;
	Oid             types[3] = {UUIDOID, INT8OID, JSONBOID};
	Datum           values[3];

	values[0] = DirectFunctionCall1(uuid_in, CStringGetDatum(c->a->attempt_id));
	values[1] = Int64GetDatum(c->a->token);
	values[2] = DirectFunctionCall1(jsonb_in, CStringGetDatum(c->json));
	sql("SELECT remora.checkpoint($1, $2, $3)", 3, types, values, NULL);
	c->ok = SPI_processed == 1 && col_text(0, 1) &&
			strcmp(col_text(0, 1), "t") == 0;
}

/*
 * An export that failed: record the conclusive answers it still holds
 * before the failure is reported, so that a retry or a verify knows them.
 */
static void
export_flush(Attempt *a)
{
	RemoraTaskCheckpoint cp;
	bool                 fresh = remora_task_checkpoint(a->task, &cp);
	StringInfoData       buf;
	CheckpointCall       c = {a, NULL, false};

	if (!fresh && a->unsent.len == 0)
		return;
	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"references\": [");
	refs_to_send(&buf, a, fresh ? cp.refs : NULL, fresh ? cp.nrefs : 0);
	appendStringInfoString(&buf, "]}");
	c.json = buf.data;
	tx_begin("remora: checkpointing");
	if (guarded("checkpointing", a->job_id, checkpoint_call, &c))
		resetStringInfo(&a->unsent);
	tx_end();
	pfree(buf.data);
}

/*
 * Record validated progress of every attempt that has new, in one
 * transaction, each call in a subtransaction of its own: one that fails is
 * rolled back alone, and the members it carried are offered again with the
 * attempt's next checkpoint.  Members count as recorded only once the
 * transaction has committed.
 */
static void
checkpoint_all(void)
{
	bool        keep[MAX_TASKS] = {0};
	bool        sent[MAX_TASKS] = {0};
	bool        any = false;
	int         batch = 0;
	int         refused = 0;
	TimestampTz started = 0;

	sort_attempts();
	for (int i = 0; i < nattempts; i++)
	{
		Attempt             *a = attempts[i];
		RemoraTaskCheckpoint cp;
		StringInfoData       buf;
		CheckpointCall       c = {a, NULL, false};
		bool                 fresh;

		keep[i] = true;
		fresh = remora_task_checkpoint(a->task, &cp);
		if (!fresh && a->unsent.len == 0)
			continue;
		if (!any)
		{
			started = GetCurrentTimestamp();
			tx_begin("remora: checkpointing");
		}
		any = true;
		batch++;
		initStringInfo(&buf);
		if (fresh)
			checkpoint_json(&buf, a, &cp);
		else if (a->is_export)
		{
			appendStringInfoString(&buf, "{\"references\": [");
			refs_to_send(&buf, a, NULL, 0);
			appendStringInfoString(&buf, "]}");
		}
		else
		{
			appendStringInfoString(&buf, "{\"members\": [");
			members_to_send(&buf, a, NULL, 0);
			appendStringInfoString(&buf, "]}");
		}
		/* until the transaction commits, what was sent counts as unsent */
		if (a->is_set && fresh && cp.nmembers > 0)
		{
			MemoryContext old = MemoryContextSwitchTo(worker_cxt);

			if (a->unsent.len > 0)
				appendStringInfoString(&a->unsent, ", ");
			members_json(&a->unsent, a->bucket, cp.members, cp.nmembers);
			MemoryContextSwitchTo(old);
		}
		else if (a->is_export && fresh && cp.nrefs > 0)
		{
			MemoryContext old = MemoryContextSwitchTo(worker_cxt);

			if (a->unsent.len > 0)
				appendStringInfoString(&a->unsent, ", ");
			refs_json(&a->unsent, cp.refs, cp.nrefs);
			MemoryContextSwitchTo(old);
		}
		c.json = buf.data;
		if (guarded("checkpointing", a->job_id, checkpoint_call, &c))
		{
			sent[i] = true;
			keep[i] = c.ok;
			refused += !keep[i];
		}
	}
	if (!any)
		return;
	tx_end();
	for (int i = 0; i < nattempts; i++)
		if (sent[i])
			resetStringInfo(&attempts[i]->unsent);
	{
		long secs;
		int  usecs;

		TimestampDifference(started, GetCurrentTimestamp(), &secs, &usecs);
		remora_note_checkpoints(batch, refused,
								(uint64) secs * 1000000 + usecs);
	}
	for (int i = nattempts - 1; i >= 0; i--)
		if (!keep[i])
		{
			ereport(LOG,
					(errmsg("remora job " INT64_FORMAT
							" attempt %s stopped: its checkpoint was refused",
							attempts[i]->job_id, attempts[i]->attempt_id)));
			remora_task_abort(attempts[i]->task, false);
			forget_attempt(i);
		}
}

/* ---------------------------------------------------------------- claim */

typedef struct Claimed
{
	int64         job_id;
	Oid           owner;
	char         *attempt_id;
	int64         token;
	char         *kind;
	char         *url;
	char         *file_name;
	char         *bucket;
	char         *staging;
	char         *expected_sha256;
	RemoraResume *resume;

	/* s3 and hf sources */
	char              *source_bucket;
	char              *source_key;
	char              *repo_type;
	char              *repo;
	char              *revision;
	char             **include;
	int                ninclude;
	char             **exclude;
	int                nexclude;
	bool               has_endpoint; /* options.endpoint names one */
	bool               endpoint_found;
	RemoraTargetConfig endpoint;

	/* an export */
	char               *prefix;
	char               *x_members; /* spec.export.members, JSON text */
	RemoraExportMember *xmembers;
	int                 nxmembers;
	bool                x_verify;
	RemoraIfExists      x_if_exists;
	char               *x_digest;

	bool        broken;      /* its spec or options cannot be read */
	const char *why_restart; /* its checkpoint could not be used */
} Claimed;

static char *
malloc_copy(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* A whole decimal number, and nothing else; false for NULL. */
static bool
parse_int64(const char *s, int64 *out)
{
	char     *end;
	long long v;

	if (s == NULL || *s == '\0')
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = v;
	return true;
}

/*
 * The resume offered at claim, as the engine wants it (malloc'd), or NULL
 * with *why set when the checkpoint's state is not one a worker writes (a
 * member missing, a wrong type): the attempt then starts from zero and
 * says why.  The state is read by key with types checked, so a malformed
 * row cannot make it dereference a NULL; an ERROR (the caller guards the
 * call) is a restart from zero too.  Nothing is malloc'd before the last
 * statement, so an ERROR leaks nothing.
 */
static RemoraResume *
read_resume(const char *state, const char **why)
{
	RemoraResume *r;
	Oid           types[1] = {JSONBOID};
	Datum         values[1];
	char         *etag, *last_modified, *sha256_state;
	int64         size;
	int           nseg;
	char        **seg_key, **seg_etag;
	int64        *seg_size;

	*why = NULL;
	if (state == NULL)
		return NULL;
	*why = "the checkpoint it was offered is malformed";
	values[0] = DirectFunctionCall1(jsonb_in, CStringGetDatum(state));
	sql("SELECT pg_catalog.jsonb_typeof(s), s" OP_GET_TEXT "'etag', "
		"s" OP_GET_TEXT "'last_modified', "
		"CASE WHEN pg_catalog.jsonb_typeof(s" OP_GET "'size')" OP_EQ
		"'number' THEN s" OP_GET_TEXT "'size' END, "
		"CASE WHEN pg_catalog.jsonb_typeof(s" OP_GET "'sha256_state')" OP_EQ
		"'string' THEN s" OP_GET_TEXT "'sha256_state' END, "
		"pg_catalog.jsonb_typeof(s" OP_GET "'segments') "
		"FROM (SELECT $1 AS s) x",
		1, types, values, NULL);
	if (SPI_processed != 1 || col_text(0, 1) == NULL ||
		strcmp(col_text(0, 1), "object") != 0 ||
		!parse_int64(col_text(0, 4), &size) || size < 0 ||
		col_text(0, 5) == NULL || col_text(0, 6) == NULL ||
		strcmp(col_text(0, 6), "array") != 0)
		return NULL;
	etag = col_text(0, 2);
	last_modified = col_text(0, 3);
	sha256_state = col_text(0, 5);

	sql("SELECT e" OP_GET_TEXT "'key', "
		"CASE WHEN pg_catalog.jsonb_typeof(e" OP_GET "'size')" OP_EQ
		"'number' THEN e" OP_GET_TEXT "'size' END, "
		"e" OP_GET_TEXT "'etag' "
		"FROM pg_catalog.jsonb_array_elements($1" OP_GET "'segments') "
		"WITH ORDINALITY AS t(e, n) ORDER BY n",
		1, types, values, NULL);
	nseg = (int) Min(SPI_processed, (uint64) INT_MAX / 2);
	seg_key = palloc0(sizeof(char *) * (nseg + 1));
	seg_etag = palloc0(sizeof(char *) * (nseg + 1));
	seg_size = palloc0(sizeof(int64) * (nseg + 1));
	for (int i = 0; i < nseg; i++)
	{
		seg_key[i] = col_text(i, 1);
		seg_etag[i] = col_text(i, 3);
		if (seg_key[i] == NULL || seg_etag[i] == NULL ||
			strlen(seg_etag[i]) >= sizeof(((RemoraSegment *) 0)->etag) ||
			!parse_int64(col_text(i, 2), &seg_size[i]) || seg_size[i] <= 0)
			return NULL;
	}

	*why = "the checkpoint it was offered could not be loaded";
	r = calloc(1, sizeof(RemoraResume));
	if (r == NULL)
		return NULL;
	r->etag = malloc_copy(etag);
	r->last_modified = malloc_copy(last_modified);
	r->size = size;
	r->sha256_state = malloc_copy(sha256_state);
	r->segments = calloc(nseg + 1, sizeof(RemoraSegment));
	if (r->segments == NULL || r->sha256_state == NULL)
	{
		remora_resume_free(r);
		return NULL;
	}
	for (int i = 0; i < nseg; i++)
	{
		r->segments[i].key = malloc_copy(seg_key[i]);
		if (r->segments[i].key == NULL)
		{
			remora_resume_free(r);
			return NULL;
		}
		r->segments[i].size = seg_size[i];
		snprintf(r->segments[i].etag, sizeof(r->segments[i].etag), "%s",
				 seg_etag[i]);
		r->nsegments++;
	}
	*why = NULL;
	return r;
}

/* A glob list of the options (a JSON array of strings), kept. */
static char **
read_globs(const char *json, int *n)
{
	Oid    types[1] = {JSONBOID};
	Datum  values[1];
	char **out;

	*n = 0;
	if (json == NULL)
		return NULL;
	values[0] = DirectFunctionCall1(jsonb_in, CStringGetDatum(json));
	sql("SELECT pg_catalog.jsonb_array_elements_text($1)", 1, types, values,
		NULL);
	out = MemoryContextAllocZero(tx_caller_cxt,
								 sizeof(char *) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
		if (col_text(i, 1) != NULL)
			out[(*n)++] = keep_str(col_text(i, 1));
	return out;
}

/* The registered endpoint an s3 source names (its secret stays in memory). */
static void
read_endpoint(Claimed *c, const char *name)
{
	Oid   types[1] = {TEXTOID};
	Datum values[1];

	c->has_endpoint = name != NULL;
	if (name == NULL)
		return;
	values[0] = CStringGetTextDatum(name);
	sql("SELECT url, region, path_style::pg_catalog.text, "
		"coalesce(access_key_id, ''), coalesce(secret_access_key, '') "
		"FROM remora.source_endpoints WHERE name" OP_EQ "$1",
		1, types, values, NULL);
	if (SPI_processed != 1 || col_text(0, 1) == NULL)
		return;
	c->endpoint_found = true;
	c->endpoint.endpoint = keep_str(col_text(0, 1));
	c->endpoint.region = keep_str(col_text(0, 2) ? col_text(0, 2) : "");
	c->endpoint.path_style =
		col_text(0, 3) && strcmp(col_text(0, 3), "true") == 0;
	c->endpoint.access_key_id = keep_str(col_text(0, 4));
	c->endpoint.secret_access_key = keep_str(col_text(0, 5));
}

/* What a claimed row carries besides its columns, read in a guarded call. */
typedef struct ClaimExtras
{
	Claimed    *c;
	const char *state; /* the resume's state, or NULL */
	const char *include;
	const char *exclude;
	const char *endpoint;
	const char *why_restart;
} ClaimExtras;

static void
claim_extras(void *arg)
{
	ClaimExtras *x = arg;
	Claimed     *c = x->c;

	c->include = read_globs(x->include, &c->ninclude);
	c->exclude = read_globs(x->exclude, &c->nexclude);
	read_endpoint(c, x->endpoint);
}

/* The members an export publishes, from spec.export.members. */
static void
claim_export(void *arg)
{
	Claimed *c = arg;
	Oid      types[1] = {TEXTOID};
	Datum    values[1];

	values[0] = CStringGetTextDatum(c->x_members);
	sql("SELECT m" OP_GET_TEXT "'path', m" OP_GET_TEXT "'bucket', "
		"m" OP_GET_TEXT "'key', m" OP_GET_TEXT "'etag', "
		"m" OP_GET_TEXT "'sha256', m" OP_GET_TEXT "'size', "
		"m" OP_PATH_TEXT "'{ref,etag}' "
		"FROM pg_catalog.jsonb_array_elements($1::pg_catalog.jsonb) m",
		1, types, values, NULL);
	c->nxmembers = (int) SPI_processed;
	c->xmembers = MemoryContextAllocZero(
		tx_caller_cxt, sizeof(RemoraExportMember) * (c->nxmembers + 1));
	for (int i = 0; i < c->nxmembers; i++)
	{
		RemoraExportMember *m = &c->xmembers[i];
		int64               size = -1;

		m->path = keep_str(col_text(i, 1));
		m->bucket = keep_str(col_text(i, 2));
		m->key = keep_str(col_text(i, 3));
		m->etag = keep_str(col_text(i, 4));
		m->sha256 = keep_str(col_text(i, 5));
		if (!parse_int64(col_text(i, 6), &size) || m->path == NULL ||
			m->bucket == NULL || m->key == NULL || m->etag == NULL ||
			m->sha256 == NULL)
			elog(ERROR, "a member of the export is not complete");
		m->size = size;
		m->ref_etag = keep_str(col_text(i, 7));
	}
}

static void
claim_resume(void *arg)
{
	ClaimExtras *x = arg;

	x->c->resume = read_resume(x->state, &x->why_restart);
}

static int
claim_rows(int room, Claimed *out)
{
	Oid            types[2] = {UUIDOID, INT4OID};
	Datum          values[2];
	int            n;
	SPITupleTable *claimed;

	tx_begin("remora: claiming");
	values[0] = UUIDPGetDatum(&my_incarnation);
	values[1] = Int32GetDatum(room);
	sql("SELECT c.job_id, c.attempt_id, c.fencing_token, "
		"c.spec" OP_PATH_TEXT "'{source,kind}', "
		"c.spec" OP_PATH_TEXT "'{source,uri}', "
		"c.spec" OP_PATH_TEXT "'{source,file_name}', "
		"c.spec" OP_GET_TEXT "'bucket', "
		"c.spec" OP_GET_TEXT "'staging_prefix', "
		"c.spec" OP_PATH_TEXT "'{options,expected_sha256}', "
		"(c.resume" OP_GET "'state')::pg_catalog.text, "
		"c.spec" OP_GET_TEXT "'owner', "
		"c.spec" OP_PATH_TEXT "'{source,bucket}', "
		"c.spec" OP_PATH_TEXT "'{source,key}', "
		"c.spec" OP_PATH_TEXT "'{source,repo_type}', "
		"c.spec" OP_PATH_TEXT "'{source,repo}', "
		"c.spec" OP_PATH_TEXT "'{source,revision}', "
		"(c.spec" OP_PATH "'{options,include}')::pg_catalog.text, "
		"(c.spec" OP_PATH "'{options,exclude}')::pg_catalog.text, "
		"c.spec" OP_PATH_TEXT "'{options,endpoint}', "
		"c.spec" OP_GET_TEXT "'prefix', "
		"c.spec" OP_PATH_TEXT "'{export,mode}', "
		"c.spec" OP_PATH_TEXT "'{export,if_exists}', "
		"c.spec" OP_PATH_TEXT "'{export,output_digest}', "
		"(c.spec" OP_PATH "'{export,members}')::pg_catalog.text "
		"FROM remora.claim($1, $2) c",
		2, types, values, NULL);
	claimed = SPI_tuptable;
	n = (int) SPI_processed;
	for (int i = 0; i < n; i++)
	{
		ClaimExtras x = {&out[i]};
		int64       owner = 0;

		SPI_tuptable = claimed;
		out[i].job_id = strtoll(col_text(i, 1), NULL, 10);
		out[i].attempt_id = keep_str(col_text(i, 2));
		out[i].token = strtoll(col_text(i, 3), NULL, 10);
		out[i].kind = keep_str(col_text(i, 4) ? col_text(i, 4) : "");
		out[i].url = keep_str(col_text(i, 5));
		out[i].file_name = keep_str(col_text(i, 6));
		out[i].bucket = keep_str(col_text(i, 7));
		out[i].staging = keep_str(col_text(i, 8));
		out[i].expected_sha256 = keep_str(col_text(i, 9));
		(void) parse_int64(col_text(i, 11), &owner);
		out[i].owner = (Oid) owner;
		out[i].source_bucket = keep_str(col_text(i, 12));
		out[i].source_key = keep_str(col_text(i, 13));
		out[i].repo_type = keep_str(col_text(i, 14));
		out[i].repo = keep_str(col_text(i, 15));
		out[i].revision = keep_str(col_text(i, 16));
		x.state = keep_str(col_text(i, 10));
		x.include = keep_str(col_text(i, 17));
		x.exclude = keep_str(col_text(i, 18));
		x.endpoint = keep_str(col_text(i, 19));
		out[i].prefix = keep_str(col_text(i, 20));
		if (strcmp(out[i].kind, "export") == 0)
		{
			const char *mode = col_text(i, 21);
			const char *ie = col_text(i, 22);

			out[i].x_verify = mode && strcmp(mode, "verify") == 0;
			out[i].x_if_exists = ie && strcmp(ie, "overwrite") == 0
									 ? REMORA_IF_EXISTS_OVERWRITE
								 : ie && strcmp(ie, "skip_identical") == 0
									 ? REMORA_IF_EXISTS_SKIP_IDENTICAL
									 : REMORA_IF_EXISTS_FAIL;
			out[i].x_digest = keep_str(col_text(i, 23));
			out[i].x_members = keep_str(col_text(i, 24));
			if (out[i].prefix == NULL || out[i].x_digest == NULL ||
				out[i].x_members == NULL ||
				!guarded("reading a claimed export", out[i].job_id,
						 claim_export, &out[i]))
				out[i].broken = true;
			continue;
		}

		/* a spec a submit cannot have made is refused, not run */
		if (out[i].bucket == NULL || out[i].staging == NULL ||
			(strcmp(out[i].kind, "http") == 0 && out[i].url == NULL) ||
			!guarded("reading a claimed job's options", out[i].job_id,
					 claim_extras, &x))
		{
			out[i].broken = true;
			continue;
		}
		if (strcmp(out[i].kind, "http") == 0 && x.state != NULL)
		{
			if (!guarded("reading a claimed job's checkpoint", out[i].job_id,
						 claim_resume, &x))
				x.why_restart = "the checkpoint it was offered is malformed";
			if (x.why_restart)
			{
				out[i].why_restart = x.why_restart;
				ereport(LOG, (errmsg("remora job " INT64_FORMAT
									 " attempt %s starts from zero: %s",
									 out[i].job_id, out[i].attempt_id,
									 x.why_restart)));
			}
		}
	}
	tx_end();
	return n;
}

/*
 * Members an earlier attempt of the job completed, for a replacement to
 * reuse (the engine asks a listing page at a time, as a lookup that
 * answer_lookups hands over between engine runs).  False when the
 * database could not answer.
 */
static bool
prior_lookup(void *arg, const char *const *paths, int n, RemoraPrior *out)
{
	Attempt      *a = arg;
	Datum        *elems = palloc(sizeof(Datum) * n);
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = true;

	for (int i = 0; i < n; i++)
		elems[i] = CStringGetTextDatum(paths[i]);

	/*
	 * An ERROR is logged and the members are found in no earlier attempt
	 * (they are transferred again).
	 */
	PG_TRY();
	{
		Oid   types[3] = {INT8OID, UUIDOID, TEXTARRAYOID};
		Datum values[3];

		tx_begin("remora: looking up members of earlier attempts");
		values[0] = Int64GetDatum(a->job_id);
		values[1] =
			DirectFunctionCall1(uuid_in, CStringGetDatum(a->attempt_id));
		values[2] = PointerGetDatum(
			construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
		/* the newest attempt's copy of each path */
		sql("SELECT DISTINCT ON (m.path) pg_catalog.array_position($3, "
			"m.path), m.key, m.etag, m.sha256, m.size, "
			"coalesce(m.source" OP_GET_TEXT "'etag', ''), "
			"coalesce(m.source" OP_GET_TEXT "'oid', '') "
			"FROM remora.members m JOIN remora.attempts t "
			"ON t.attempt_id" OP_EQ "m.attempt_id "
			"WHERE t.job_id" OP_EQ "$1 AND t.attempt_id" OP_NE "$2 "
			"AND m.path" OP_EQ "ANY ($3) "
			"AND m.bucket" OP_EQ "(SELECT j.bucket FROM remora.jobs j "
			"WHERE j.job_id" OP_EQ "$1) "
			"ORDER BY m.path, t.attempt_no DESC",
			3, types, values, NULL);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			int          i;
			RemoraPrior *p;
			int64        size;

			if (col_text(r, 1) == NULL || col_text(r, 2) == NULL ||
				col_text(r, 3) == NULL || col_text(r, 4) == NULL ||
				!parse_int64(col_text(r, 5), &size))
				continue;
			i = atoi(col_text(r, 1)) - 1;
			if (i < 0 || i >= n)
				continue;
			p = &out[i];
			p->found = true;
			snprintf(p->key, sizeof(p->key), "%s", col_text(r, 2));
			snprintf(p->etag, sizeof(p->etag), "%s", col_text(r, 3));
			snprintf(p->sha256, sizeof(p->sha256), "%s", col_text(r, 4));
			p->size = size;
			snprintf(p->source_etag, sizeof(p->source_etag), "%s",
					 col_text(r, 6));
			snprintf(p->source_oid, sizeof(p->source_oid), "%s",
					 col_text(r, 7));
		}
		tx_end();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		tx_abort();
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	pfree(elems);
	return ok;
}

/* Answer the lookups the engine queued in its last run. */
static void
answer_lookups(void)
{
	RemoraLookup *l;

	while ((l = remora_engine_lookup_next(engine)) != NULL)
		remora_engine_lookup_done(
			engine, l, prior_lookup(l->host_arg, l->paths, l->n, l->out));
}

static void
refuse_attempt(Claimed *c, const char *class, bool retryable, const char *msg)
{
	RemoraTaskError e = {0};

	e.class = class;
	e.retryable = retryable;
	e.retry_after = -1;
	snprintf(e.message, sizeof(e.message), "%s", msg);
	remora_resume_free(c->resume);
	c->resume = NULL;
	(void) report_failure(c->job_id, c->attempt_id, c->token, &e);
}

/* An s3 or hf source: a set of members. */
static RemoraTask *
start_set(Claimed *c, Attempt *a, char *err, size_t errlen)
{
	RemoraSetSpec spec;
	bool          hf = strcmp(c->kind, "hf") == 0;

	memset(&spec, 0, sizeof(spec));
	spec.kind = hf ? REMORA_SET_HF : REMORA_SET_S3;
	spec.display = c->url;
	if (c->endpoint_found)
		spec.source_store = &c->endpoint;
	spec.source_bucket = c->source_bucket;
	spec.source_key = c->source_key ? c->source_key : "";
	spec.single = strcmp(c->kind, "s3_object") == 0;
	spec.file_name = c->file_name;
	spec.hub_url = remora_hf_endpoint;
	spec.repo_type = c->repo_type;
	spec.repo = c->repo;
	spec.revision = c->revision;
	spec.token = remora_hf_token;
	spec.include = (const char *const *) c->include;
	spec.ninclude = c->ninclude;
	spec.exclude = (const char *const *) c->exclude;
	spec.nexclude = c->nexclude;
	spec.bucket = c->bucket;
	spec.staging_prefix = c->staging;
	spec.job_id = c->job_id;
	spec.attempt_id = c->attempt_id;
	spec.fencing_token = c->token;
	spec.earlier_attempts = true;
	spec.host_arg = a;
	return remora_set_start(engine, &spec, err, errlen);
}

static void
start_attempt(Claimed *c)
{
	RemoraTaskSpec spec;
	char           err[256];
	RemoraTask    *task;
	Attempt       *a;
	bool           is_export = strcmp(c->kind, "export") == 0;
	bool           is_set = !is_export && strcmp(c->kind, "http") != 0;
	bool           resumed = false;
	MemoryContext  old;

	if (c->broken)
	{
		refuse_attempt(c, REMORA_ERR_INTERNAL, true,
					   "the job's specification could not be read");
		return;
	}
	if (is_set && strcmp(c->kind, "hf") != 0 && c->has_endpoint &&
		!c->endpoint_found)
	{
		refuse_attempt(c, REMORA_ERR_SOURCE, false,
					   "the job's source endpoint is no longer registered");
		return;
	}
	a = MemoryContextAllocZero(worker_cxt, sizeof(Attempt));
	a->job_id = c->job_id;
	snprintf(a->attempt_id, sizeof(a->attempt_id), "%s", c->attempt_id);
	a->is_set = is_set;
	a->is_export = is_export;
	if (is_export)
	{
		RemoraExportSpec x;

		memset(&x, 0, sizeof(x));
		x.bucket = c->bucket;
		x.prefix = c->prefix;
		x.if_exists = c->x_if_exists;
		x.verify = c->x_verify;
		x.members = c->xmembers;
		x.nmembers = c->nxmembers;
		x.output_digest = c->x_digest;
		task = remora_export_start(engine, &x, err, sizeof(err));
		if (task == NULL)
		{
			pfree(a);
			refuse_attempt(c, REMORA_ERR_INTERNAL, false, err);
			return;
		}
		goto started;
	}
	if (is_set)
	{
		task = start_set(c, a, err, sizeof(err));
		if (task == NULL)
		{
			pfree(a);
			refuse_attempt(c, REMORA_ERR_INTERNAL, true, err);
			return;
		}
		goto started;
	}
	memset(&spec, 0, sizeof(spec));
	spec.source_url = c->url;
	spec.file_name = c->file_name;
	spec.bucket = c->bucket;
	spec.staging_prefix = c->staging;
	spec.expected_sha256 = c->expected_sha256;
	spec.resume = c->resume;
	spec.job_id = c->job_id;
	spec.attempt_id = c->attempt_id;
	spec.fencing_token = c->token;
	task = remora_task_start(engine, &spec, err, sizeof(err));
	resumed = c->resume != NULL;
	if (task == NULL)
	{
		pfree(a);
		refuse_attempt(c, REMORA_ERR_INTERNAL, true, err);
		return;
	}
	remora_resume_free(c->resume);
started:
	a->task = task;
	a->owner = c->owner;
	a->token = c->token;
	a->bucket = MemoryContextStrdup(worker_cxt, c->bucket);
	a->file_name =
		MemoryContextStrdup(worker_cxt, c->file_name ? c->file_name : "");
	a->rate_at = GetCurrentTimestamp();
	a->forced_restart = c->why_restart;
	old = MemoryContextSwitchTo(worker_cxt);
	initStringInfo(&a->unsent);
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
	int      room = Min(remora_worker_concurrency, MAX_TASKS) - nattempts;
	Claimed *rows;
	int      n;

	if (room <= 0)
		return false;
	rows = palloc0(sizeof(Claimed) * room);
	n = claim_rows(room, rows);
	for (int i = 0; i < n; i++)
		start_attempt(&rows[i]);
	return n == room;
}

/* ---------------------------------------------------------------- sweep */

/* One statement whose result is read after the guarded call. */
typedef struct PlainCall
{
	const char *query;
	int         nargs;
	Oid        *types;
	Datum      *values;
} PlainCall;

static void
plain_call(void *arg)
{
	PlainCall *c = arg;

	sql(c->query, c->nargs, c->types, c->values, NULL);
}

/*
 * Delete the objects of one hard-deleted job, or the staging of one attempt
 * that can no longer commit, if there is any.  A cleanup that fails is
 * recorded, and tried again after a backoff.
 */
static void
sweep(bool start)
{
	Oid       types[1] = {INT4OID};
	Datum     values[1] = {Int32GetDatum(1)};
	char     *bucket = NULL;
	char     *prefix = NULL;
	PlainCall c = {0};

	if (sweep_task)
	{
		RemoraTaskState st = remora_task_state(sweep_task);
		bool            ok = st == REMORA_TASK_SUCCEEDED;
		Oid             t2[2] = {sweep_attempt[0] ? UUIDOID : INT8OID, BOOLOID};
		Datum           v2[2];

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
		tx_begin("remora: recording a cleanup");
		v2[0] =
			sweep_attempt[0]
				? DirectFunctionCall1(uuid_in, CStringGetDatum(sweep_attempt))
				: Int64GetDatum(sweep_job);
		v2[1] = BoolGetDatum(ok);
		c.query = sweep_attempt[0]
					  ? "SELECT remora.staging_cleaned($1, $2)"
					  : "SELECT remora.job_objects_deleted($1, $2)";
		c.nargs = 2;
		c.types = t2;
		c.values = v2;
		/* if this fails, the cleanup is simply found and done again */
		(void) guarded("recording a cleanup", sweep_job, plain_call, &c);
		tx_end();
		remora_task_free(sweep_task);
		sweep_task = NULL;
	}
	if (!start)
		return;

	tx_begin("remora: looking for objects to delete");
	c.query = "SELECT attempt_id, job_id, bucket, prefix FROM "
			  "remora.staging_to_clean($1)";
	c.nargs = 1;
	c.types = types;
	c.values = values;
	if (guarded("looking for objects to delete", 0, plain_call, &c) &&
		SPI_processed > 0 && col_text(0, 2) && col_text(0, 3) && col_text(0, 4))
	{
		char *att = col_text(0, 1);

		snprintf(sweep_attempt, sizeof(sweep_attempt), "%s", att ? att : "");
		sweep_job = strtoll(col_text(0, 2), NULL, 10);
		bucket = keep_str(col_text(0, 3));
		prefix = keep_str(col_text(0, 4));
	}
	tx_end();
	if (bucket)
	{
		char err[256];

		sweep_task =
			remora_cleanup_start(engine, bucket, prefix, err, sizeof(err));
		if (sweep_task == NULL)
			ereport(LOG,
					(errmsg("remora: could not start a cleanup: %s", err)));
	}
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
	Oid   types[2] = {UUIDOID, INT4OID};
	Datum values[2];

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

	tx_begin("remora: recording the incarnation");
	values[0] = UUIDPGetDatum(&my_incarnation);
	values[1] = Int32GetDatum(MyProcPid);
	sql("INSERT INTO remora.incarnations (incarnation, pid, kind) "
		"VALUES ($1, $2, 'worker')",
		2, types, values, NULL);
	tx_end();
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

	tx_begin("remora: recording the end of the incarnation");
	{
		Oid       types[1] = {UUIDOID};
		Datum     values[1] = {UUIDPGetDatum(&my_incarnation)};
		PlainCall c = {"UPDATE remora.incarnations SET stopped_at = "
					   "pg_catalog.now() WHERE incarnation" OP_EQ "$1",
					   1, types, values};

		/* if this fails, the launcher records it */
		(void) guarded("recording the end of the incarnation", 0, plain_call,
					   &c);
	}
	tx_end();
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
			answer_lookups();
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
			tx_abort();
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
