/*-------------------------------------------------------------------------
 *
 * ranges_adapt.c
 *	  An object's count of ranged GETs when its job does not pin one
 *	  (options.connections): the controller of adapt.h applied to a
 *	  transfer, and its back-off from throttle answers.
 *
 * ranges.c starts a GET while fewer than task->connections run; this file
 * moves that number.  It grows while each added connection adds bytes a
 * second, up to remora.max_connections_per_host and REMORA_ADAPT_MEMORY of
 * part buffers (remora_adapt_bound) at the part size in use: grown to
 * fit the store's part limit, the parts are larger and the count fewer.
 * A 503 or 429 from the source, a reset connection, or a 503 / SlowDown /
 * 429 from the store for a part removes a connection, caps the part
 * uploads in flight below the count that was refused, and pauses: the
 * range or part is asked for again after the pause (Retry-After when
 * longer, up to ADAPT_MAX_PAUSE_MS), at most ADAPT_MAX_THROTTLES times
 * in an attempt; then the attempt fails as it always did, retryably.  A
 * pinned count is left as the job asked: a throttle answer fails the
 * attempt, and the job's retry takes over.
 *
 *-------------------------------------------------------------------------
 */
#include <limits.h>
#include <stdio.h>

#include "engine/transfer/transfer.h"

#define ADAPT_PAUSE_MS      1000
#define ADAPT_MAX_PAUSE_MS  10000
#define ADAPT_MAX_THROTTLES 16

/*
 * The task's connection count from its spec: a pinned one (1..64), or
 * REMORA_CONNECTIONS_ADAPT(start): the controller's, from start, bounded
 * at remora.part_size until the parts are sized
 * (remora_xfer_adapt_part_size).
 */
void
remora_xfer_adapt_init(Transfer *task, int connections)
{
	const RemoraEngine *e = task->base.engine;
	int64_t             now = remora_now_ms();

	task->upload_cap = INT_MAX;
	if (connections >= 0)
	{
		task->connections = connections < 1    ? 1
							: connections > 64 ? 64
											   : connections;
		return;
	}
	task->adaptive = true;
	task->started_ms = now;
	remora_adapt_init(
		&task->adapt, -connections,
		remora_adapt_bound(e->max_per_host, (int64_t) e->part_size), now, 0);
	task->connections = task->adapt.n;
}

/*
 * The task's parts (and buffers) are task->part_size from now on: bound
 * an adaptive count again at that size.  Parts grown so that the store's
 * limit holds the object are larger than the remora.part_size the bound
 * was taken at, and each connection may hold a buffer of that size, so
 * the old bound would let the buffers outgrow REMORA_ADAPT_MEMORY by the
 * ratio of the two.  Never above the buffers the task has: parts smaller
 * than remora.part_size (a resume's) raise no cap.  Returns the buffers
 * the task needs from now on (its nbufs when it does not adapt).  Called
 * by parts.c before any byte is in a buffer.
 */
int
remora_xfer_adapt_part_size(Transfer *task)
{
	int max;

	if (!task->adaptive)
		return task->nbufs;
	max = remora_adapt_bound(task->base.engine->max_per_host,
							 (int64_t) task->part_size);
	if (max > task->nbufs - REMORA_PARTS_IN_FLIGHT)
		max = task->nbufs - REMORA_PARTS_IN_FLIGHT;
	task->adapt.max = max;
	if (task->adapt.n > max)
		task->adapt.n = max;
	task->connections = task->adapt.n;
	return max + REMORA_PARTS_IN_FLIGHT;
}

static void
log_count(const Transfer *task, int was, const char *why)
{
	remora_engine_log(task->base.engine,
					  "job %lld: ranged connections %d -> %d at %.1f s "
					  "(%.1f MiB/s): %s",
					  (long long) task->job_id, was, task->connections,
					  (double) (remora_now_ms() - task->started_ms) / 1000.0,
					  task->adapt.last_rate / (1024.0 * 1024.0), why);
}

/*
 * The ranges begin (the first GET said the object's size): measure from
 * here, not from the first GET alone.
 */
void
remora_xfer_adapt_begin(Transfer *task)
{
	char why[128];

	if (!task->adaptive)
		return;
	remora_adapt_init(&task->adapt, task->adapt.start, task->adapt.max,
					  remora_now_ms(), task->src_bytes);
	task->connections = task->adapt.n;
	/* the bound and the part size it was taken at: what memory allows */
	snprintf(why, sizeof(why), "the ranges begin, at most %d (parts of %zu kB)",
			 task->adapt.max, task->part_size / 1024);
	log_count(task, 0, why);
}

/* After each run of the loop: judge the window that may have ended. */
void
remora_xfer_adapt_tick(Transfer *task)
{
	RemoraAdaptEvent ev;
	int              was = task->connections;

	/* every range asked for: the tail's falling rate is no verdict */
	if (!task->adaptive || !task->ranged || task->range_next > task->range_last)
		return;
	ev = remora_adapt_tick(&task->adapt, remora_now_ms(), task->src_bytes);
	if (ev == REMORA_ADAPT_NONE)
		return;
	task->connections = task->adapt.n;
	log_count(task, was,
			  ev == REMORA_ADAPT_GREW ? "the last one added paid"
									  : "the last one added did not pay");
}

/*
 * A throttle answer (what says which) to a range or a part: back off and
 * ask again later.  False when the task does not adapt or has backed off
 * too often: the caller fails the attempt.
 */
bool
remora_xfer_throttled(Transfer *task, const char *what, int64_t retry_after)
{
	int64_t now = remora_now_ms();
	int64_t pause = ADAPT_PAUSE_MS;
	int     was = task->connections;

	if (!task->adaptive || task->throttles >= ADAPT_MAX_THROTTLES)
		return false;
	task->throttles++;
	if (retry_after > 0 && retry_after * 1000 > pause)
		pause = retry_after * 1000 < ADAPT_MAX_PAUSE_MS ? retry_after * 1000
														: ADAPT_MAX_PAUSE_MS;
	remora_adapt_throttled(&task->adapt, now, task->src_bytes);
	task->connections = task->adapt.n;
	task->calm_at = now + pause;
	remora_loop_wake_at(&task->base.engine->loop, task->calm_at);
	log_count(task, was, what);
	return true;
}

/* May a throttled request be asked again (or a new one started)? */
bool
remora_xfer_calm(const Transfer *task)
{
	return task->calm_at == 0 || remora_now_ms() >= task->calm_at;
}
