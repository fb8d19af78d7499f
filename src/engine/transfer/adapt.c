/*-------------------------------------------------------------------------
 *
 * adapt.c
 *	  The connection-count controller of an object read in ranged GETs
 *	  (its rule is in adapt.h).  Pure: no clock, no I/O.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/transfer/adapt.h"
#include "engine/engine.h"

/*
 * The most connections an adaptive object may get: the per-host cap, and
 * as many part buffers as REMORA_ADAPT_MEMORY holds after those of the
 * uploads; never fewer than REMORA_ADAPT_START, never more than 64 (the
 * most options.connections pins).
 */
int
remora_adapt_bound(int max_per_host, int64_t part_size)
{
	int64_t by_memory =
		part_size > 0 ? REMORA_ADAPT_MEMORY / part_size - REMORA_PARTS_IN_FLIGHT
					  : 64;
	int64_t n = max_per_host > 0 ? max_per_host : 64;

	if (by_memory < n)
		n = by_memory;
	if (n > 64)
		n = 64;
	return n < REMORA_ADAPT_START ? REMORA_ADAPT_START : (int) n;
}

/* The next window: at once, or after a change once the count settles. */
static void
new_window(RemoraAdapt *a, int64_t now_ms, int64_t bytes, bool changed)
{
	a->win_open = !changed;
	a->win_start = now_ms + (changed ? REMORA_ADAPT_SETTLE_MS : 0);
	a->win_bytes = bytes;
}

void
remora_adapt_init(RemoraAdapt *a, int start, int max, int64_t now_ms,
				  int64_t bytes)
{
	a->max = max < 1 ? 1 : max;
	a->start = start < 1 ? REMORA_ADAPT_START : start;
	a->n = a->start < a->max ? a->start : a->max;
	a->base_rate = 0;
	a->base_n = 0;
	a->last_rate = 0;
	a->hold_until = 0;
	new_window(a, now_ms, bytes, true);
}

/* Did going from base_n to n connections raise the rate enough? */
static bool
addition_paid(const RemoraAdapt *a, double rate)
{
	double share = a->base_rate / a->base_n;

	return rate - a->base_rate > share * REMORA_ADAPT_GAIN_PCT / 100.0;
}

/*
 * Called as the object's bytes come in (bytes: its running total from the
 * source).  Returns what changed; a->n is the count to apply.
 */
RemoraAdaptEvent
remora_adapt_tick(RemoraAdapt *a, int64_t now_ms, int64_t bytes)
{
	int64_t elapsed = now_ms - a->win_start;
	double  rate;

	if (!a->win_open)
	{
		/* settling: the window opens at the first call after it */
		if (elapsed >= 0)
			new_window(a, now_ms, bytes, false);
		return REMORA_ADAPT_NONE;
	}
	if (elapsed < REMORA_ADAPT_WINDOW_MS)
		return REMORA_ADAPT_NONE;
	rate = (double) (bytes - a->win_bytes) * 1000.0 / (double) elapsed;
	a->last_rate = rate;
	if (now_ms < a->hold_until)
	{
		new_window(a, now_ms, bytes, false);
		return REMORA_ADAPT_NONE;
	}
	if (a->base_n > 0 && !addition_paid(a, rate))
	{
		a->n = a->base_n;
		a->base_n = 0;
		a->hold_until = now_ms + REMORA_ADAPT_HOLD_MS;
		new_window(a, now_ms, bytes, true);
		return REMORA_ADAPT_SETTLED;
	}
	/* a first measurement, or the last addition paid: the new baseline */
	a->base_rate = rate;
	a->base_n = a->n;
	if (a->n >= a->max)
	{
		a->base_n = 0; /* at the bound: nothing to judge */
		new_window(a, now_ms, bytes, false);
		return REMORA_ADAPT_NONE;
	}
	a->n++;
	new_window(a, now_ms, bytes, true);
	return REMORA_ADAPT_GREW;
}

/* A throttle answer or a reset: one connection fewer, and a pause. */
RemoraAdaptEvent
remora_adapt_throttled(RemoraAdapt *a, int64_t now_ms, int64_t bytes)
{
	if (a->n > 1)
		a->n--;
	a->base_n = 0;
	a->hold_until = now_ms + REMORA_ADAPT_HOLD_MS;
	new_window(a, now_ms, bytes, true);
	return REMORA_ADAPT_BACKOFF;
}
