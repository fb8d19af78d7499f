/*-------------------------------------------------------------------------
 *
 * sweep.c
 *	  remora.sweep_orphans: after a restore, find (and delete) the objects
 *	  in Remora's staging area of attempts the database does not know.
 *
 * A point-in-time recovery forgets the jobs and attempts that came after
 * its target; their objects stay in the store, where nothing would find
 * them (doc/operator-guide.md, "Backup and restore").  This function lists
 * the staging area of every place jobs write to (remora._sweep_areas),
 * with the transfer engine's sweep (src/engine/chores/sweep.c), and asks
 * remora._sweep_judge, a page at a time, which objects are orphans; it
 * returns those and, unless dry_run, deletes them.  The SQL decides what
 * an orphan is; this file does the I/O.
 *
 * It runs in the caller's transaction (an administrator's maintenance
 * call), waiting on the engine's sockets and the latch, so that a cancel
 * or a statement timeout stops it at once.  The engine's memory is
 * malloc'd, and freed on every path, an ERROR's included.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "engine/engine.h"
#include "pg/guc.h"
#include "pg/submit.h"

PG_FUNCTION_INFO_V1(remora_sweep_orphans);

/* What one sweep's pages are judged against, and where its rows go. */
typedef struct SweepHost
{
	const char    *bucket;
	const char    *prefix; /* the area's prefix, without the '/' */
	Datum          older_than;
	bool           dry_run;
	ReturnSetInfo *rsinfo;
	RemoraTask    *task; /* the area's sweep, while it runs */
} SweepHost;

static ArrayType *
text_array(const RemoraSweepObject *objects, int n, bool keys)
{
	Datum *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(keys ? objects[i].key
										: objects[i].last_modified);
	return construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT);
}

/*
 * Answer a page: remora._sweep_judge says which objects are orphans; each
 * is a row of the result, and doomed unless this is a dry run.  A
 * deletion that fails fails the whole call (ERROR), so a row says
 * deleted = true only of what the store let go.
 */
static void
judge_page(SweepHost *h, RemoraLookup *lookup)
{
	Oid types[5] = {TEXTOID, TEXTOID, TEXTARRAYOID, TEXTARRAYOID, INTERVALOID};
	Datum  args[5];
	bool   nulls[5] = {false, false, false, false, false};
	bool   isnull;
	Datum  r;
	Datum *pos;
	int    npos;

	args[0] = CStringGetTextDatum(h->bucket);
	args[1] = CStringGetTextDatum(h->prefix);
	args[2] = PointerGetDatum(text_array(lookup->objects, lookup->n, true));
	args[3] = PointerGetDatum(text_array(lookup->objects, lookup->n, false));
	args[4] = h->older_than;
	r = remora_call_internal("_sweep_judge", 5, types, args, nulls, &isnull);
	if (isnull)
		return;
	deconstruct_array(DatumGetArrayTypeP(r), INT4OID, 4, true, TYPALIGN_INT,
					  &pos, NULL, &npos);
	for (int j = 0; j < npos; j++)
	{
		int   i = DatumGetInt32(pos[j]) - 1;
		Datum values[4];
		bool  vnulls[4] = {false, false, false, false};

		if (i < 0 || i >= lookup->n)
			continue;
		values[0] = CStringGetTextDatum(h->bucket);
		values[1] = CStringGetTextDatum(lookup->objects[i].key);
		values[2] = Int64GetDatum(lookup->objects[i].size);
		values[3] = BoolGetDatum(!h->dry_run);
		tuplestore_putvalues(h->rsinfo->setResult, h->rsinfo->setDesc, values,
							 vnulls);
		if (!h->dry_run)
			lookup->doomed[i] = true;
	}
}

/* Run one area's sweep to its end; ERROR if it fails. */
static void
sweep_area(RemoraEngine *engine, SweepHost *h)
{
	char        err[256];
	char       *prefix = h->prefix[0] ? psprintf("%s/", h->prefix) : "";
	RemoraTask *task;

	task = h->task =
		remora_sweep_start(engine, h->bucket, prefix, h, err, sizeof(err));
	if (task == NULL)
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
						errmsg("could not sweep %s/%s", h->bucket, prefix),
						errdetail("%s", err)));
	for (;;)
	{
		RemoraTaskState state;
		RemoraLookup   *lookup;

		remora_engine_run(engine);
		while ((lookup = remora_engine_lookup_next(engine)) != NULL)
		{
			judge_page(h, lookup);
			remora_engine_lookup_done(engine, lookup, true);
		}
		state = remora_task_state(task);
		if (state == REMORA_TASK_FAILED)
		{
			const RemoraTaskError *e = remora_task_error(task);

			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("could not sweep the staging area s3://%s/%s",
							h->bucket, prefix),
					 errdetail("%s (class %s).", e->message, e->class),
					 errhint("Check that the target store is reachable and "
							 "that remora.s3_access_key_id may list and "
							 "delete in the bucket.")));
		}
		if (state != REMORA_TASK_RUNNING)
			break;
		(void) WaitLatchOrSocket(
			MyLatch,
			WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT |
				WL_EXIT_ON_PM_DEATH,
			remora_engine_fd(engine),
			Max(1, Min(remora_engine_timeout_ms(engine), 1000)),
			PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	remora_task_free(task);
	h->task = NULL;
}

/*
 * remora.sweep_orphans(bucket text DEFAULT NULL, older_than interval
 * DEFAULT '1 day', dry_run boolean DEFAULT true) RETURNS TABLE (bucket,
 * key, size, deleted): the orphans of every place jobs write to (of
 * bucket alone, if given), last modified longer ago than older_than.
 * remora_admin only (its privileges).
 */
Datum
remora_sweep_orphans(PG_FUNCTION_ARGS)
{
	ReturnSetInfo     *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SweepHost         *h = palloc0(sizeof(SweepHost));
	Oid                types[1] = {TEXTOID};
	Datum              args[1];
	bool               nulls[1];
	bool               isnull;
	Datum              areas;
	Datum             *area;
	int                narea;
	RemoraEngineConfig cfg;
	RemoraEngine *volatile engine = NULL;
	Interval zero = {0};

	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("%s must not be null",
							   PG_ARGISNULL(1) ? "older_than" : "dry_run")));
	h->older_than = PG_GETARG_DATUM(1);
	if (DatumGetBool(DirectFunctionCall2(interval_lt, h->older_than,
										 IntervalPGetDatum(&zero))))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("invalid older_than"),
						errdetail("An orphan's age cannot be negative.")));
	h->dry_run = PG_GETARG_BOOL(2);
	InitMaterializedSRF(fcinfo, 0);
	h->rsinfo = rsinfo;

	args[0] = PG_ARGISNULL(0) ? (Datum) 0 : PG_GETARG_DATUM(0);
	nulls[0] = PG_ARGISNULL(0);
	areas =
		remora_call_internal("_sweep_areas", 1, types, args, nulls, &isnull);
	if (isnull)
		PG_RETURN_NULL();
	deconstruct_array(DatumGetArrayTypeP(areas), TEXTOID, -1, false,
					  TYPALIGN_INT, &area, NULL, &narea);
	if (narea == 0)
		return (Datum) 0;

	remora_engine_config(&cfg);
	engine = remora_engine_from_config(&cfg, "remora.sweep_orphans");
	PG_TRY();
	{
		for (int i = 0; i + 1 < narea; i += 2)
		{
			h->bucket = TextDatumGetCString(area[i]);
			h->prefix = TextDatumGetCString(area[i + 1]);
			sweep_area(engine, h);
		}
	}
	PG_FINALLY();
	{
		/* the task before the engine, whose loop its requests are in */
		remora_task_free(h->task);
		remora_engine_free(engine);
	}
	PG_END_TRY();
	return (Datum) 0;
}
