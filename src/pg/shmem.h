/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  Remora's shared memory: worker slots, live progress, wake-ups.
 *
 * All of it is coordination state: a crash restart re-initialises it and
 * nothing durable depends on it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_SHMEM_H
#define REMORA_SHMEM_H

#include "postgres.h"

#include "access/xact.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#define REMORA_MAX_WORKERS  64
#define REMORA_MAX_PROGRESS (REMORA_MAX_WORKERS * 64)

typedef struct RemoraWorkerSlot
{
	bool        in_use;          /* a worker process holds it */
	bool        stop_unrecorded; /* exited; stopped_at not yet written */
	pid_t       pid;
	Latch      *latch;
	pg_uuid_t   incarnation;
	TimestampTz started_at;
	int         active_tasks;
} RemoraWorkerSlot;

/* Live progress of one attempt, written only by the worker running it. */
typedef struct RemoraProgress
{
	bool        in_use;
	int         worker; /* slot index */
	int64       job_id;
	Oid         owner; /* the job's owner: who may see this */
	pg_uuid_t   attempt_id;
	int64       fencing_token;
	int64       bytes_done;
	int64       bytes_total; /* -1 if unknown */
	double      rate;        /* bytes per second, smoothed */
	bool        restarted;   /* this attempt restarted from zero */
	TimestampTz started_at;
	TimestampTz updated_at;
} RemoraProgress;

typedef struct RemoraShared
{
	LWLock          *lock;
	bool             launcher_ran; /* since this shared memory was made */
	pid_t            launcher_pid;
	pg_atomic_uint64 submit_generation;  /* bumped by committed submits */
	pg_atomic_uint64 cancel_generation;  /* bumped by committed cancels */
	pg_atomic_uint64 lease_reservations; /* claims in flight (leases.c) */
	pg_atomic_uint64 turn;               /* the claims' turn (leases.c) */

	/* checkpoint writer statistics, since the server started */
	pg_atomic_uint64 cp_transactions;
	pg_atomic_uint64 cp_checkpoints;
	pg_atomic_uint64 cp_max_batch;
	pg_atomic_uint64 cp_commit_us_total;
	pg_atomic_uint64 cp_commit_us_max;
	pg_atomic_uint64 cp_refusals;
	RemoraWorkerSlot workers[REMORA_MAX_WORKERS];
	RemoraProgress   progress[REMORA_MAX_PROGRESS];
} RemoraShared;

extern RemoraShared *remora_shared;

extern void remora_shmem_init(void);
extern void remora_xact_init(void);
extern void remora_note_submit(void);
extern void remora_note_cancel(void);
extern void remora_wake_workers(void);
extern void remora_note_checkpoints(int batch, int refused, uint64 commit_us);

#endif /* REMORA_SHMEM_H */
