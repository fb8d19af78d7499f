/*-------------------------------------------------------------------------
 *
 * spi_host.c
 *	  The background worker as the runner's host: its operations table
 *	  over SPI (src/runner/host.h), and what only a worker inside the
 *	  server has: its shared-memory slot, live progress, the checkpoint
 *	  statistics, an engine made from the remora.* settings.
 *
 * Each statement is a call in a transaction of its own inside the error
 * boundary of xact.c (an ERROR in it is logged, rolled back alone, and
 * the call returns false), or, between batch_begin and batch_end, a
 * guarded subtransaction of the batch's one transaction.  Parameters are
 * text, cast in the statement; results are copied out as text (malloc'd,
 * the runner's) before the transaction ends.  Statements run under the
 * session's lock_timeout and a statement timeout of a third of the lease
 * (remora_spi_execute).
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "pg/guc.h"
#include "pg/shmem.h"
#include "pg/spi_host.h"
#include "pg/xact.h"

#define MAX_PARAMS 8

static int           host_slot;  /* this worker's slot in shared memory */
static MemoryContext host_cxt;   /* the worker's, for its life */
static bool          batch_open; /* batch_begin opened a transaction */
static MemoryContext batch_cxt;

/* ------------------------------------------------------------ statements */

typedef struct ExecCall
{
	const char        *sql;
	int                nparams;
	const char *const *params;
	RemoraRows        *out;
	bool               ok; /* out of memory copying the rows: false */
} ExecCall;

/* The last statement's rows, as text, into c->out (malloc'd). */
static void
copy_rows(ExecCall *c)
{
	TupleDesc desc = SPI_tuptable->tupdesc;
	int       nrows = (int) SPI_processed;
	int       ncols = desc->natts;

	c->ok = remora_rows_init(c->out, nrows, ncols);
	for (int col = 0; c->ok && col < ncols; col++)
		c->ok = remora_rows_set_name(
			c->out, col, NameStr(TupleDescAttr(desc, col)->attname));
	for (int row = 0; c->ok && row < nrows; row++)
		for (int col = 0; c->ok && col < ncols; col++)
		{
			char *v = SPI_getvalue(SPI_tuptable->vals[row], desc, col + 1);

			c->ok = remora_rows_set(c->out, row, col, v);
			if (v)
				pfree(v);
		}
}

static void
exec_call(void *arg)
{
	ExecCall *c = arg;
	Oid       types[MAX_PARAMS];
	Datum     values[MAX_PARAMS];
	char      nulls[MAX_PARAMS] = {0};

	Assert(c->nparams <= MAX_PARAMS);
	for (int i = 0; i < c->nparams; i++)
	{
		types[i] = TEXTOID;
		values[i] = c->params[i] ? CStringGetTextDatum(c->params[i]) : 0;
		nulls[i] = c->params[i] ? ' ' : 'n';
	}
	if (remora_spi_execute(c->sql, c->nparams, types, values, nulls, false, 0) <
		0)
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
						errmsg("a protocol statement failed"),
						errdetail("Statement: %s", c->sql)));
	c->ok = true;
	if (c->out && SPI_tuptable)
		copy_rows(c);
}

static bool
spi_exec(void *host, const char *what, const char *sql, int nparams,
		 const char *const *params, RemoraRows *out)
{
	ExecCall c = {sql, nparams, params, out, false};
	bool     called;

	if (nparams > MAX_PARAMS)
		return false;
	called = batch_open ? remora_tx_guarded(what, 0, exec_call, &c)
						: remora_tx_call(what, 0, exec_call, &c);
	if (called && c.ok)
		return true;
	if (out)
		remora_rows_wipe(out);
	return false;
}

/*
 * The checkpoints of a round in one transaction: a worker with many
 * attempts pays for one commit a second, not one each.
 */
static void
spi_batch_begin(void *host, const char *what)
{
	batch_cxt = CurrentMemoryContext;
	PG_TRY();
	{
		remora_tx_begin(what);
		batch_open = true;
	}
	PG_CATCH();
	{
		remora_tx_recover(batch_cxt);
		batch_open = false; /* each statement then commits alone */
	}
	PG_END_TRY();
}

static bool
spi_batch_end(void *host)
{
	volatile bool committed = true;

	if (!batch_open)
		return true;
	batch_open = false;
	PG_TRY();
	{
		remora_tx_end();
	}
	PG_CATCH();
	{
		remora_tx_recover(batch_cxt);
		committed = false;
	}
	PG_END_TRY();
	return committed;
}

/* ------------------------------------------------------------ the rest */

static void
spi_log(void *host, const char *line)
{
	ereport(LOG, (errmsg("remora %s", line)));
}

/*
 * An engine from the settings, its sources kept from Remora's own store,
 * endpoints and listeners (remora._blocked_origins, read in a transaction
 * of its own: an endpoint registered later is judged at submit, and here
 * from the next engine on, after a reload).
 */
static RemoraEngine *
spi_new_engine(void *host)
{
	RemoraEngineConfig cfg;
	RemoraRows         rows = {0};
	RemoraEngine      *e;
	bool               read;

	read =
		spi_exec(host, "reading the origins sources may not reach",
				 "SELECT remora._blocked_origins() AS origins", 0, NULL, &rows);
	remora_engine_config(&cfg);
	cfg.log = spi_log; /* the engine's own decisions, as the runner's */
	cfg.blocked_origins =
		read && rows.nrows == 1 ? remora_rows_get(&rows, 0, "origins") : NULL;
	e = remora_engine_from_config(&cfg, "remora worker");
	if (read)
		remora_rows_free(&rows);
	return e;
}

/* A new incarnation: in this worker's shared-memory slot first. */
static void
spi_incarnation_begins(void *host, const char *incarnation)
{
	pg_uuid_t id = *DatumGetUUIDP(
		DirectFunctionCall1(uuid_in, CStringGetDatum(incarnation)));
	RemoraWorkerSlot *slot = &remora_shared->workers[host_slot];

	LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
	slot->in_use = true;
	slot->stop_unrecorded = false;
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	slot->incarnation = id;
	slot->started_at = GetCurrentTimestamp();
	LWLockRelease(remora_shared->lock);
}

/* ------------------------------------------------------------- progress */

/* An attempt's live progress: its shared slot and its rate. */
typedef struct ProgressSlot
{
	int         slot;
	int64       rate_bytes; /* bytes at rate_at */
	TimestampTz rate_at;
	double      rate;
} ProgressSlot;

static void *
spi_attempt_started(void *host, const RemoraAttemptView *a)
{
	ProgressSlot *p = MemoryContextAllocZero(host_cxt, sizeof(ProgressSlot));
	pg_uuid_t     attempt = *DatumGetUUIDP(
			DirectFunctionCall1(uuid_in, CStringGetDatum(a->attempt_id)));

	p->slot = -1;
	p->rate_at = GetCurrentTimestamp();
	/* nothing that can fail while the lock is held */
	LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < REMORA_MAX_PROGRESS; i++)
		if (!remora_shared->progress[i].in_use)
		{
			RemoraProgress *s = &remora_shared->progress[i];

			memset(s, 0, sizeof(*s));
			s->in_use = true;
			s->worker = host_slot;
			s->job_id = a->job_id;
			s->owner = (Oid) a->owner;
			s->fencing_token = a->token;
			s->bytes_total = -1;
			s->started_at = s->updated_at = p->rate_at;
			s->attempt_id = attempt;
			p->slot = i;
			break;
		}
	remora_shared->workers[host_slot].active_tasks = remora_runner_count();
	LWLockRelease(remora_shared->lock);
	return p;
}

static void
spi_attempt_ended(void *host, void *host_slot_arg)
{
	ProgressSlot *p = host_slot_arg;

	if (p == NULL)
		return;
	LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
	if (p->slot >= 0)
		remora_shared->progress[p->slot].in_use = false;
	remora_shared->workers[host_slot].active_tasks = remora_runner_count();
	LWLockRelease(remora_shared->lock);
	pfree(p);
}

/* Live progress of every attempt, for remora_progress. */
void
remora_spi_host_publish_progress(void)
{
	RemoraAttemptView v[REMORA_RUNNER_MAX_ATTEMPTS];
	int               n = remora_runner_attempts(v, REMORA_RUNNER_MAX_ATTEMPTS);
	TimestampTz       at = GetCurrentTimestamp();

	LWLockAcquire(remora_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		ProgressSlot   *p = v[i].host_slot;
		RemoraProgress *s;
		int64_t         done, total;
		const char     *why;
		long            secs;
		int             usecs;

		if (p == NULL || p->slot < 0)
			continue;
		s = &remora_shared->progress[p->slot];
		remora_task_progress(v[i].task, &done, &total);
		TimestampDifference(p->rate_at, at, &secs, &usecs);
		if (secs >= 1)
		{
			double span = secs + usecs / 1e6;
			double inst = (done - p->rate_bytes) / span;

			p->rate = p->rate == 0 ? inst : 0.5 * p->rate + 0.5 * inst;
			p->rate_bytes = done;
			p->rate_at = at;
		}
		s->bytes_done = done;
		s->bytes_total = total;
		s->rate = p->rate;
		s->restarted = remora_task_restarted(v[i].task, &why);
		s->updated_at = at;
	}
	LWLockRelease(remora_shared->lock);
}

static void
spi_checkpoints_done(void *host, int n, int refused, int64_t usecs)
{
	remora_note_checkpoints(n, refused, (uint64) usecs);
}

static const RemoraHostOps ops = {
	.exec = spi_exec,
	.batch_begin = spi_batch_begin,
	.batch_end = spi_batch_end,
	.log = spi_log,
	.new_engine = spi_new_engine,
	.incarnation_begins = spi_incarnation_begins,
	.attempt_started = spi_attempt_started,
	.attempt_ended = spi_attempt_ended,
	.checkpoints_done = spi_checkpoints_done,
};

/*
 * The runner over SPI, for the worker in slot (its shared-memory slot);
 * cxt lives as long as the worker.
 */
void
remora_spi_host_start(int slot, MemoryContext cxt,
					  const RemoraRunnerConfig *cfg)
{
	host_slot = slot;
	host_cxt = cxt;
	remora_runner_init(&ops, NULL, cfg);
}
