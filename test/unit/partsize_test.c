/*
 * partsize_test.c: the part size of a multipart upload (partsize.h), the
 * one rule for a member's parts, its ranges and an export's part copies.
 *
 * Each case checks the rule's three promises: the store's limit holds the
 * object (ceil(size / part) <= limit), a part is never below
 * remora.part_size, and a grown part is a whole number of MiB.  And the
 * same rule part by part for an upload whose size is known only at its
 * end (a set's manifest).
 */
#include <inttypes.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/s3/partsize.h"
#include "unit.h"

#define KIB ((int64_t) 1024)
#define MIB (1024 * KIB)
#define GIB (1024 * MIB)

static int64_t
parts_of(int64_t size, int64_t part)
{
	return (size + part - 1) / part;
}

/* fit(size) is want, and keeps the rule's promises */
static void
expect(int64_t size, int64_t part_size, int limit, int64_t want)
{
	int64_t got = remora_part_size_fit(size, part_size, limit);

	CHECK(got == want,
		  "size %" PRId64 ", part %" PRId64 ", limit %d: %" PRId64
		  " (got %" PRId64 ")",
		  size, part_size, limit, want, got);
	if (got <= 0 || size <= 0)
		return;
	CHECK(parts_of(size, got) <= limit, "  ... in %" PRId64 " parts, <= %d",
		  parts_of(size, got), limit);
	CHECK(got >= part_size, "  ... never below the configured part size");
	CHECK(got == part_size || got % MIB == 0,
		  "  ... grown to a whole number of MiB");
}

static void
limit_10000(void)
{
	int64_t p = 16 * MIB;
	int64_t full = 10000 * p;

	expect(-1, p, 10000, p); /* size not known */
	expect(0, p, 10000, p);
	expect(1, p, 10000, p);
	expect(full - 1, p, 10000, p);
	expect(full, p, 10000, p); /* exactly 10,000 parts */
	/* one byte more: ceil(size / 10000) = 16 MiB + 1, up to 17 MiB */
	expect(full + 1, p, 10000, 17 * MIB);
	expect(1024 * GIB, p, 10000, 105 * MIB); /* 1 TiB: 104.86 MiB -> 105 */
	/* S3's largest object: 5 TiB in parts of at most 5 GiB */
	expect(5 * 1024 * GIB, p, 10000, 525 * MIB);
}

static void
limit_1000(void)
{
	int64_t p = 16 * MIB;
	int64_t full = 1000 * p;

	expect(full, p, 1000, p);
	expect(full + 1, p, 1000, 17 * MIB);
	/* the case: 20 GiB into Swift, 20.48 MiB -> 21 MiB, 976 parts */
	expect(20 * GIB, p, 1000, 21 * MIB);
	CHECK(parts_of(20 * GIB, 21 * MIB) == 976, "20 GiB: 976 parts of 21 MiB");
	/* a larger configured part still fits: kept */
	expect(20 * GIB, 64 * MIB, 1000, 64 * MIB);
	/* a part of exactly 5 GiB holds 5000 GiB; one byte more cannot go */
	expect(1000 * 5 * GIB, p, 1000, REMORA_PART_SIZE_MAX);
	expect(1000 * 5 * GIB + 1, p, 1000, -1);
}

static void
limit_3(void)
{
	int64_t p = 5 * MIB;

	expect(15 * MIB, p, 3, p);            /* exactly three parts */
	expect(15 * MIB + 1, p, 3, 6 * MIB);  /* 5 MiB + 1 byte -> 6 MiB */
	expect(40 * MIB, p, 3, 14 * MIB);     /* 13.33 MiB -> 14 MiB */
	expect(40 * MIB + 1, p, 3, 14 * MIB); /* still 3 parts of 14 MiB */
	expect(42 * MIB, p, 3, 14 * MIB);     /* exactly 3 x 14 MiB */
	expect(42 * MIB + 1, p, 3, 15 * MIB);
	/* a configured part that is not a whole MiB (tests use 64 kB) */
	expect(192 * KIB, 64 * KIB, 3, 64 * KIB);
	expect(192 * KIB + 1, 64 * KIB, 3, MIB);
}

static void
edges(void)
{
	/* a limit of one: the object is one part */
	expect(100 * MIB, 5 * MIB, 1, 100 * MIB);
	expect(100 * MIB + 1, 5 * MIB, 1, 101 * MIB);
	/* no part left (a resume's checkpoint used them all) */
	expect(5 * MIB, 5 * MIB, 0, -1);
	expect(0, 5 * MIB, 0, 5 * MIB); /* nothing left to send */
	CHECK(REMORA_MAX_PARTS == 10000, "S3's limit is 10,000 parts");
}

/*
 * A set's manifest, its size known only at its end, written as the
 * manifest writer does (set_manifest.c): a part of remora_part_size_next
 * as soon as that much more is written, the rest as the last part.  The
 * parts it takes, the largest part before the last, and the last's size.
 */
typedef struct Streamed
{
	int     parts;
	int     same;    /* parts of part_size from the first */
	int     odd;     /* parts below part_size, or grown to no whole MiB */
	int64_t largest; /* before the last */
	int64_t last;
} Streamed;

static Streamed
stream(int64_t total, int64_t part_size, int limit)
{
	Streamed st = {0, 0, 0, 0, 0};
	int64_t  sent = 0;
	int64_t  p;

	while ((p = remora_part_size_next(sent, part_size, st.parts, limit)) > 0 &&
		   total - sent > p)
	{
		st.odd += p < part_size || (p != part_size && p % MIB != 0) ||
				  p > REMORA_PART_SIZE_MAX;
		if (p == part_size && st.same == st.parts)
			st.same++;
		if (p > st.largest)
			st.largest = p;
		sent += p;
		st.parts++;
	}
	st.last = total - sent;
	st.parts++;
	return st;
}

static void
streamed(void)
{
	int64_t  p = 5 * MIB;
	Streamed st;

	/*
	 * 5.5 GB at Swift's 1,000: parts of 5 MiB alone would take 1,050, and
	 * the upload would fail at part 1,001
	 */
	CHECK(parts_of(5500 * 1000 * 1000LL, p) == 1050,
		  "5.5 GB in 5 MiB parts: 1,050 of them");
	st = stream(5500 * 1000 * 1000LL, p, 1000);
	CHECK(st.parts <= 1000 && st.last <= REMORA_PART_SIZE_MAX && st.odd == 0,
		  "5.5 GB at 1,000: %d parts, the last %" PRId64 " MiB", st.parts,
		  st.last / MIB);
	CHECK(st.same == 500, "  ... 5 MiB for the first half of the limit (%d)",
		  st.same);
	CHECK(st.largest <= 32 * MIB, "  ... the largest %" PRId64 " MiB",
		  st.largest / MIB);
	/* what the limit holds before the parts reach 5 GiB: about 160 GiB */
	st = stream(150 * GIB, p, 1000);
	CHECK(st.parts <= 1000 && st.last <= REMORA_PART_SIZE_MAX && st.odd == 0,
		  "150 GiB at 1,000: %d parts, the last %" PRId64 " MiB", st.parts,
		  st.last / MIB);
	st = stream(170 * GIB, p, 1000);
	CHECK(st.parts == 1000 && st.last > REMORA_PART_SIZE_MAX,
		  "170 GiB at 1,000: too much for the last part (%" PRId64 " MiB)",
		  st.last / MIB);
	/* S3's 10,000: the same 5 MiB parts as ever, to 24 GiB */
	st = stream(20 * GIB, p, 10000);
	CHECK(st.parts == parts_of(20 * GIB, p) && st.same == st.parts - 1,
		  "20 GiB at 10,000: %d parts of 5 MiB", st.parts);
	/* a small limit: two parts of 5 MiB, the rest in the last */
	CHECK(remora_part_size_next(0, p, 0, 3) == p &&
			  remora_part_size_next(p, p, 1, 3) == p &&
			  remora_part_size_next(2 * p, p, 2, 3) == 0,
		  "limit 3: 5 MiB, 5 MiB, then only the last");
	st = stream(40 * MIB, p, 3);
	CHECK(st.parts == 3 && st.last == 30 * MIB,
		  "40 MiB at 3: 3 parts, the last 30 MiB (%d, %" PRId64 ")", st.parts,
		  st.last / MIB);
	CHECK(remora_part_size_next(0, p, 0, 1) == 0,
		  "limit 1: no part before the last (one PUT)");
	/* the engine tests' 64 kB parts */
	CHECK(remora_part_size_next(0, 64 * KIB, 0, 3) == 64 * KIB &&
			  remora_part_size_next(64 * KIB, 64 * KIB, 1, 3) == 64 * KIB &&
			  remora_part_size_next(64 * KIB, 64 * KIB, 1, 2) == 0,
		  "64 kB parts at limits 3 and 2");
}

int
main(void)
{
	limit_10000();
	limit_1000();
	limit_3();
	edges();
	streamed();
	return unit_done();
}
