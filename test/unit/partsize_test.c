/*
 * partsize_test.c: the part size of a multipart upload (partsize.h), the
 * one rule for a member's parts, its ranges and an export's part copies.
 *
 * Each case checks the rule's three promises: the store's limit holds the
 * object (ceil(size / part) <= limit), a part is never below
 * remora.part_size, and a grown part is a whole number of MiB.
 */
#include <inttypes.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/partsize.h"
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

int
main(void)
{
	limit_10000();
	limit_1000();
	limit_3();
	edges();
	return unit_done();
}
