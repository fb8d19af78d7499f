/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  Shared memory, and waking workers when a submit or cancel commits.
 *
 * A submit or cancel only notes that workers should hear of it; the
 * transaction callback wakes them at COMMIT, so a worker never looks for a
 * job before it is visible, and an aborted submit wakes nobody.  Workers
 * compare the generation counters with the ones they last saw to know
 * whether to claim (submit) or to renew at once (cancel).
 *
 * remora._progress() reads the live progress of running attempts; the
 * remora_progress view joins it with the jobs the reader may see.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "pg/shmem.h"

PG_FUNCTION_INFO_V1(remora_progress);
PG_FUNCTION_INFO_V1(remora_checkpoint_stats);

RemoraShared *remora_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static bool                    pending_submit = false;
static bool                    pending_cancel = false;

static void
shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(RemoraShared)));
	RequestNamedLWLockTranche("remora", 1);
}

static void
shmem_startup(void)
{
	bool found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	remora_shared = ShmemInitStruct("remora", sizeof(RemoraShared), &found);
	if (!found)
	{
		memset(remora_shared, 0, sizeof(RemoraShared));
		remora_shared->lock = &(GetNamedLWLockTranche("remora"))->lock;
		pg_atomic_init_u64(&remora_shared->submit_generation, 0);
		pg_atomic_init_u64(&remora_shared->cancel_generation, 0);
		pg_atomic_init_u64(&remora_shared->lease_reservations, 0);
		pg_atomic_init_u64(&remora_shared->turn, 0);
		pg_atomic_init_u64(&remora_shared->cp_transactions, 0);
		pg_atomic_init_u64(&remora_shared->cp_checkpoints, 0);
		pg_atomic_init_u64(&remora_shared->cp_max_batch, 0);
		pg_atomic_init_u64(&remora_shared->cp_commit_us_total, 0);
		pg_atomic_init_u64(&remora_shared->cp_commit_us_max, 0);
		pg_atomic_init_u64(&remora_shared->cp_refusals, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
remora_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = shmem_startup;
}

/*
 * Set the latch of every worker.  Not the launcher's: it claims nothing,
 * and a round of its (reconcile, a transaction that locks and commits)
 * after every submit's commit doubled the commits a stream of submits
 * waited on; its round once a second is soon enough for what it does.
 */
void
remora_wake_workers(void)
{
	if (remora_shared == NULL)
		return;
	LWLockAcquire(remora_shared->lock, LW_SHARED);
	for (int i = 0; i < REMORA_MAX_WORKERS; i++)
		if (remora_shared->workers[i].in_use && remora_shared->workers[i].latch)
			SetLatch(remora_shared->workers[i].latch);
	LWLockRelease(remora_shared->lock);
}

static void
xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (pending_submit)
				pg_atomic_fetch_add_u64(&remora_shared->submit_generation, 1);
			if (pending_cancel)
				pg_atomic_fetch_add_u64(&remora_shared->cancel_generation, 1);
			if (pending_submit || pending_cancel)
				remora_wake_workers();
			pending_submit = pending_cancel = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			pending_submit = pending_cancel = false;
			break;
		default:
			break;
	}
}

void
remora_xact_init(void)
{
	RegisterXactCallback(xact_callback, NULL);
}

void
remora_note_submit(void)
{
	pending_submit = true;
}

void
remora_note_cancel(void)
{
	pending_cancel = true;
}

/*
 * remora._progress(): one row per running attempt with live progress, of
 * the caller's jobs (of everyone's for remora_admin).
 */
Datum
remora_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid            me = GetUserId();
	Oid            admin = get_role_oid("remora_admin", true);
	bool           sees_all =
		superuser() || (OidIsValid(admin) && has_privs_of_role(me, admin));

	InitMaterializedSRF(fcinfo, 0);
	if (remora_shared == NULL)
		PG_RETURN_VOID();

	LWLockAcquire(remora_shared->lock, LW_SHARED);
	for (int i = 0; i < REMORA_MAX_PROGRESS; i++)
	{
		RemoraProgress *p = &remora_shared->progress[i];
		Datum           values[10];
		bool            nulls[10] = {0};
		pg_uuid_t      *uuid;

		if (!p->in_use || (!sees_all && p->owner != me))
			continue;
		uuid = palloc(sizeof(pg_uuid_t));
		*uuid = p->attempt_id;
		values[0] = Int64GetDatum(p->job_id);
		values[1] = UUIDPGetDatum(uuid);
		values[2] = Int64GetDatum(p->fencing_token);
		values[3] = Int64GetDatum(p->bytes_done);
		values[4] = Int64GetDatum(p->bytes_total);
		nulls[4] = p->bytes_total < 0;
		values[5] = Float8GetDatum(p->rate);
		values[6] = BoolGetDatum(p->restarted);
		values[7] = TimestampTzGetDatum(p->started_at);
		values[8] = TimestampTzGetDatum(p->updated_at);
		values[9] = Int32GetDatum(remora_shared->workers[p->worker].pid);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(remora_shared->lock);
	PG_RETURN_VOID();
}

static void
atomic_max(pg_atomic_uint64 *v, uint64 x)
{
	uint64 cur = pg_atomic_read_u64(v);

	while (x > cur && !pg_atomic_compare_exchange_u64(v, &cur, x))
		;
}

/* One checkpoint transaction of a worker: how many, how long, refused. */
void
remora_note_checkpoints(int batch, int refused, uint64 commit_us)
{
	pg_atomic_fetch_add_u64(&remora_shared->cp_transactions, 1);
	pg_atomic_fetch_add_u64(&remora_shared->cp_checkpoints, batch);
	pg_atomic_fetch_add_u64(&remora_shared->cp_refusals, refused);
	pg_atomic_fetch_add_u64(&remora_shared->cp_commit_us_total, commit_us);
	atomic_max(&remora_shared->cp_max_batch, batch);
	atomic_max(&remora_shared->cp_commit_us_max, commit_us);
}

/*
 * remora._checkpoint_stats(): the checkpoint writer's counters.
 */
Datum
remora_checkpoint_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum          values[6];
	bool           nulls[6] = {0};

	InitMaterializedSRF(fcinfo, 0);
	values[0] =
		Int64GetDatum(pg_atomic_read_u64(&remora_shared->cp_transactions));
	values[1] =
		Int64GetDatum(pg_atomic_read_u64(&remora_shared->cp_checkpoints));
	values[2] = Int64GetDatum(pg_atomic_read_u64(&remora_shared->cp_max_batch));
	values[3] = Float8GetDatum(
		pg_atomic_read_u64(&remora_shared->cp_commit_us_total) / 1000.0);
	values[4] = Float8GetDatum(
		pg_atomic_read_u64(&remora_shared->cp_commit_us_max) / 1000.0);
	values[5] = Int64GetDatum(pg_atomic_read_u64(&remora_shared->cp_refusals));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	PG_RETURN_VOID();
}
