/*
 * adapt_test.c: the connection-count controller (adapt.h) as a pure
 * function, driven by a fake clock and a model of a source.
 *
 * The model: each connection brings per_conn bytes a second, the total
 * capped at ceiling (the store, or the machine); 0: no cap.
 */
#include <stdint.h>

#include "engine/transfer/adapt.h"
#include "unit.h"

typedef struct Source
{
	double per_conn; /* bytes/s a connection gets */
	double ceiling;  /* bytes/s all of them get at most; 0: none */
} Source;

static double
source_rate(const Source *s, int n)
{
	double r = s->per_conn * n;

	return s->ceiling > 0 && r > s->ceiling ? s->ceiling : r;
}

/*
 * Run the controller for ms milliseconds in steps of 100 ms, from
 * *now and *bytes; returns the largest count it reached.
 */
static int
drive(RemoraAdapt *a, const Source *s, int64_t *now, double *bytes, int ms)
{
	int most = a->n;

	for (int t = 0; t < ms; t += 100)
	{
		*now += 100;
		*bytes += source_rate(s, a->n) / 10.0;
		remora_adapt_tick(a, *now, (int64_t) *bytes);
		if (a->n > most)
			most = a->n;
	}
	return most;
}

static void
capped_source_grows_to_bound(void)
{
	RemoraAdapt a;
	Source      s = {2.0 * 1024 * 1024, 0};
	int64_t     now = 1000;
	double      bytes = 0;

	remora_adapt_init(&a, REMORA_ADAPT_START, 16, now, 0);
	CHECK(a.n == REMORA_ADAPT_START, "capped: starts with %d (%d)",
		  REMORA_ADAPT_START, a.n);
	drive(&a, &s, &now, &bytes, 30000);
	CHECK(a.n == 16, "capped per connection: grows to the bound 16 (%d)", a.n);
	drive(&a, &s, &now, &bytes, 10000);
	CHECK(a.n == 16, "capped: stays at the bound (%d)", a.n);
}

static void
store_bound_source_stops(void)
{
	RemoraAdapt a;
	/* one connection more than the start's worth, then no more */
	Source  s = {100.0 * 1024 * 1024,
				 (REMORA_ADAPT_START + 1) * 100.0 * 1024 * 1024};
	int64_t now = 0;
	double  bytes = 0;
	int     most;

	remora_adapt_init(&a, REMORA_ADAPT_START, 16, now, 0);
	most = drive(&a, &s, &now, &bytes, 10000);
	CHECK(most == REMORA_ADAPT_START + 2,
		  "store-bound: probes one past what pays (most %d)", most);
	CHECK(a.n == REMORA_ADAPT_START + 1,
		  "store-bound: settles where the rate stopped rising (%d)", a.n);
	most = drive(&a, &s, &now, &bytes, (int) (a.hold_until - now) - 100);
	CHECK(most == REMORA_ADAPT_START + 1,
		  "store-bound: no growth while it holds (most %d)", most);
	most = drive(&a, &s, &now, &bytes, 20000);
	CHECK(most <= REMORA_ADAPT_START + 2 && a.n == REMORA_ADAPT_START + 1,
		  "store-bound: a later probe finds the same (most %d, now %d)", most,
		  a.n);
}

static void
uncapped_flat_source_stays(void)
{
	RemoraAdapt a;
	/* one connection already fills what the store takes */
	Source  s = {500.0 * 1024 * 1024, 400.0 * 1024 * 1024};
	int64_t now = 0;
	double  bytes = 0;

	remora_adapt_init(&a, REMORA_ADAPT_START, 16, now, 0);
	drive(&a, &s, &now, &bytes, 5000);
	CHECK(a.n == REMORA_ADAPT_START,
		  "uncapped, store-bound from the start: stays at %d (%d)",
		  REMORA_ADAPT_START, a.n);
}

static void
throttle_shrinks(void)
{
	RemoraAdapt a;
	Source      s = {2.0 * 1024 * 1024, 0};
	int64_t     now = 0;
	double      bytes = 0;
	int         before, most;

	remora_adapt_init(&a, REMORA_ADAPT_START, 16, now, 0);
	drive(&a, &s, &now, &bytes, 6000);
	before = a.n;
	CHECK(remora_adapt_throttled(&a, now, (int64_t) bytes) ==
				  REMORA_ADAPT_BACKOFF &&
			  a.n == before - 1,
		  "a 503: one connection fewer (%d -> %d)", before, a.n);
	most = drive(&a, &s, &now, &bytes, REMORA_ADAPT_HOLD_MS - 200);
	CHECK(most == before - 1, "after a 503: no growth for a while (most %d)",
		  most);
	drive(&a, &s, &now, &bytes, 5000);
	CHECK(a.n > before - 1, "after the pause: grows again (%d)", a.n);
	for (int i = 0; i < 40; i++)
		remora_adapt_throttled(&a, now, (int64_t) bytes);
	CHECK(a.n == 1, "throttled again and again: never below one (%d)", a.n);
}

static void
bounds(void)
{
	RemoraAdapt a;
	int64_t     mib = 1024 * 1024;

	CHECK(remora_adapt_bound(16, 16 * mib) == 16,
		  "bound: the per-host cap (%d)", remora_adapt_bound(16, 16 * mib));
	CHECK(remora_adapt_bound(1024, 16 * mib) == 30,
		  "bound: 512 MiB of 16 MiB buffers, two for uploads (%d)",
		  remora_adapt_bound(1024, 16 * mib));
	CHECK(remora_adapt_bound(1024, 5 * mib) == 64, "bound: never above 64 (%d)",
		  remora_adapt_bound(1024, 5 * mib));
	CHECK(remora_adapt_bound(1, 16 * mib) == REMORA_ADAPT_START,
		  "bound: never below the start (%d)", remora_adapt_bound(1, 16 * mib));
	remora_adapt_init(&a, REMORA_ADAPT_START, 1, 0, 0);
	CHECK(a.n == 1, "a bound of one starts with one (%d)", a.n);
	CHECK(remora_adapt_tick(&a, 500, 1000) == REMORA_ADAPT_NONE,
		  "no judgement inside a window");
	CHECK(remora_adapt_tick(&a, -5, 1000) == REMORA_ADAPT_NONE && a.n == 1,
		  "a clock that goes back changes nothing");
}

int
main(void)
{
	capped_source_grows_to_bound();
	store_bound_source_stops();
	uncapped_flat_source_stays();
	throttle_shrinks();
	bounds();
	return unit_done();
}
