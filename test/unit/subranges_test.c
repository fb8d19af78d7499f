/*
 * subranges_test.c: the bookkeeping of sub-ranges (subranges.h): their
 * length, the table's slots, the order they are hashed and asked for
 * again in.
 */
#include <stdint.h>

#include "engine/transfer/subranges.h"
#include "unit.h"

#define MiB (1024L * 1024)

static void
test_size(void)
{
	/* 64 MiB over at most 16 connections, 16 MiB parts: 64 of 1 MiB */
	CHECK(remora_subrange_size(64 * MiB, 16, 16 * MiB) == MiB,
		  "64 MiB, 16 connections: 1 MiB sub-ranges");
	/* 512 MiB: 8 MiB, two a part */
	CHECK(remora_subrange_size(512 * MiB, 16, 16 * MiB) == 8 * MiB,
		  "512 MiB, 16 connections: 8 MiB sub-ranges");
	/* never shorter than the minimum */
	CHECK(remora_subrange_size(3 * MiB, 16, 16 * MiB) == REMORA_SUBRANGE_MIN,
		  "a small rest: the shortest sub-range");
	/* never longer than a part: a large object is asked for a part a GET */
	CHECK(remora_subrange_size(100 * 1024 * MiB, 16, 16 * MiB) == 16 * MiB,
		  "100 GiB: a part a GET");
	/* a part at or below the minimum is one GET */
	CHECK(remora_subrange_size(64 * MiB, 16, 64 * 1024) == 64 * 1024,
		  "a 64 KiB part: the part");
	CHECK(remora_subrange_size(64 * MiB, 16, MiB) == MiB,
		  "a part of the minimum: the part");
	/* an even cut, no shorter than aimed at: 5 MiB at 2 MiB is 2 x 2.5 */
	CHECK(remora_subrange_size(64 * MiB, 8, 5 * MiB) == 5 * MiB / 2,
		  "5 MiB parts cut in two (%ld)",
		  (long) remora_subrange_size(64 * MiB, 8, 5 * MiB));
	/* no connection count, an empty rest: still a sane length */
	CHECK(remora_subrange_size(0, 0, 16 * MiB) == REMORA_SUBRANGE_MIN,
		  "no rest, no connections: the shortest sub-range");
	/* the cut covers the part in whole sub-ranges and a shorter last one */
	for (int64_t part = MiB + 1; part < 40 * MiB; part += 3 * MiB + 7)
	{
		int64_t size = remora_subrange_size(64 * MiB, 4, part);
		int64_t cuts = (part + size - 1) / size;

		CHECK(size >= REMORA_SUBRANGE_MIN && size <= part &&
				  part - (cuts - 1) * size > 0 &&
				  part - (cuts - 1) * size <= size,
			  "part %ld: sub-ranges of %ld, %ld of them", (long) part,
			  (long) size, (long) cuts);
	}
}

static void
test_table(void)
{
	SubTable  t = {0};
	int       buf = 0;
	SubRange *a, *b, *c;

	CHECK(remora_subs_init(&t, 3, MiB), "a table of three slots");
	a = remora_subs_add(&t, 1, MiB, MiB, &buf);
	b = remora_subs_add(&t, 1, 2 * MiB, MiB, &buf);
	c = remora_subs_add(&t, 2, 0, MiB / 2, &buf);
	CHECK(a && b && c && a != b && b != c, "three sub-ranges added");
	CHECK(remora_subs_add(&t, 2, MiB / 2, MiB, &buf) == NULL,
		  "a fourth finds no slot: nothing more is asked for");
	CHECK(remora_subs_count(&t, SUB_RUNNING) == 3 &&
			  remora_subs_count(&t, SUB_FREE) == 0,
		  "three running, none free");
	CHECK(a->state == SUB_RUNNING && a->partno == 1 && a->off == MiB &&
			  a->want == MiB && a->len == 0 && a->buf == &buf,
		  "a sub-range's record");

	/* finished out of order: only the one at the hashed offset is next */
	b->state = SUB_DONE;
	CHECK(remora_subs_in_order(&t, 1, MiB) == NULL,
		  "the second is done, the first is not: nothing to hash");
	CHECK(remora_subs_in_order(&t, 1, 2 * MiB) == b,
		  "the second is found at its own offset");
	CHECK(remora_subs_in_order(&t, 2, 2 * MiB) == NULL,
		  "not at that offset of another part");
	a->state = SUB_DONE;
	CHECK(remora_subs_in_order(&t, 1, MiB) == a, "then the first is next");
	remora_subs_release(a);
	CHECK(a->state == SUB_FREE && a->buf == NULL &&
			  remora_subs_count(&t, SUB_FREE) == 1,
		  "hashed: its slot is free");
	CHECK(remora_subs_add(&t, 2, MiB / 2, MiB, &buf) == a,
		  "and taken by the next sub-range");

	/* throttled: asked for again earliest first */
	CHECK(remora_subs_repeat(&t) == NULL, "nothing to ask for again");
	a->state = SUB_AGAIN;
	c->state = SUB_AGAIN;
	CHECK(remora_subs_repeat(&t) == c,
		  "of two in one part, the one at the lower offset first");
	b->state = SUB_AGAIN;
	CHECK(remora_subs_repeat(&t) == b, "of two parts, the earlier first");

	/* init again frees the old table */
	CHECK(remora_subs_init(&t, 2, 2 * MiB) && t.nsubs == 2 &&
			  t.size == 2 * MiB && remora_subs_count(&t, SUB_FREE) == 2,
		  "a table made again is empty");
	remora_subs_free(&t);
	CHECK(t.subs == NULL && t.nsubs == 0 && remora_subs_repeat(&t) == NULL &&
			  remora_subs_add(&t, 1, 0, 1, &buf) == NULL,
		  "a freed table holds nothing");
	remora_subs_free(&t); /* twice is harmless */
}

int
main(void)
{
	test_size();
	test_table();
	return unit_done();
}
