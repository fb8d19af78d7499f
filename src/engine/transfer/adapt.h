/*-------------------------------------------------------------------------
 *
 * adapt.h
 *	  How many ranged GETs one object gets, when its job does not pin a
 *	  number (options.connections): a controller that adds a connection
 *	  while each one it adds raises the object's byte rate.
 *
 * The rule (remora_adapt_tick):
 *
 *	  Every REMORA_ADAPT_WINDOW_MS the rate of the window just ended (bytes
 *	  from the source / elapsed time) is taken at the current count n.  A
 *	  window begins REMORA_ADAPT_SETTLE_MS after a change of the count, so
 *	  that a new connection's first burst (its socket buffers filling)
 *	  does not count as its rate.
 *	  With no baseline yet, that rate becomes the baseline (rate b at count
 *	  m = n) and one connection is added.  With a baseline, the addition is
 *	  judged: it paid when the total rose by more than
 *	  REMORA_ADAPT_GAIN_PCT percent of one connection's share of the
 *	  baseline, (rate - b) > b / m * GAIN / 100.  Then the window's rate
 *	  is the new baseline and one more connection is added, up to max.
 *	  When it did not pay, the count goes back to m and stops growing for
 *	  REMORA_ADAPT_HOLD_MS; after that it measures and probes again (the
 *	  source may give more later).
 *
 *	  A throttle (a 503 or 429 from the source, SlowDown from the store, a
 *	  connection reset) removes one connection at once (never below 1),
 *	  forgets the baseline and stops growing for REMORA_ADAPT_HOLD_MS.
 *
 * A pure function of the clock and byte counts it is given: the unit
 * tests drive it with a fake clock.  Ranges.c applies the count: it
 * starts a GET while fewer than n run, and lets a GET above n finish
 * without starting another.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_ADAPT_H
#define REMORA_ADAPT_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Connections an object starts with unless told (remora.object_connections
 * says, default 4): the fixed count of earlier releases, so that no
 * source is read with fewer than before.
 */
#define REMORA_ADAPT_START     4
#define REMORA_ADAPT_WINDOW_MS 1000 /* one measurement per count */
#define REMORA_ADAPT_SETTLE_MS 300  /* before a window, after a change */
/*
 * Of one connection's share: a connection that brings less than half of
 * what each one brought before is not worth its part buffer, and a
 * second's rate on a busy machine varies by more than a tenth.
 */
#define REMORA_ADAPT_GAIN_PCT 50
#define REMORA_ADAPT_HOLD_MS  20000

/*
 * Memory bound of an adaptive object: its part buffers (one per
 * connection, REMORA_PARTS_IN_FLIGHT more for uploads) of the part size it
 * goes in (remora.part_size, or larger to fit the store's part limit) stay
 * within this, whatever remora.max_connections_per_host allows, down to
 * REMORA_ADAPT_START connections.
 */
#define REMORA_ADAPT_MEMORY (512L * 1024 * 1024)

typedef enum RemoraAdaptEvent
{
	REMORA_ADAPT_NONE,
	REMORA_ADAPT_GREW,    /* the last addition paid: one more */
	REMORA_ADAPT_SETTLED, /* it did not: back to the baseline's count */
	REMORA_ADAPT_BACKOFF  /* throttled: one fewer */
} RemoraAdaptEvent;

typedef struct RemoraAdapt
{
	int     n;         /* connections allowed now */
	int     start;     /* the count it started with */
	int     max;       /* the bound */
	bool    win_open;  /* measuring; false: settling until win_start */
	int64_t win_start; /* ms: the current window began (or begins) */
	int64_t win_bytes; /* the byte count then */
	double  base_rate; /* bytes/s at base_n; base_n 0: no baseline */
	int     base_n;
	double  last_rate;  /* the last window's, for the log */
	int64_t hold_until; /* ms: no growth before */
} RemoraAdapt;

extern void             remora_adapt_init(RemoraAdapt *a, int start, int max,
										  int64_t now_ms, int64_t bytes);
extern RemoraAdaptEvent remora_adapt_tick(RemoraAdapt *a, int64_t now_ms,
										  int64_t bytes);
extern RemoraAdaptEvent remora_adapt_throttled(RemoraAdapt *a, int64_t now_ms,
											   int64_t bytes);
extern int              remora_adapt_bound(int max_per_host, int64_t part_size);

#endif /* REMORA_ADAPT_H */
