/*-------------------------------------------------------------------------
 *
 * subranges.c
 *	  The sub-ranges of an object read in ranged GETs: their length, and
 *	  the table of those asked for and not yet hashed (subranges.h).
 *	  Pure: no I/O.
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>

#include "engine/transfer/subranges.h"

/*
 * The length of the sub-ranges of the rest of an object (rest bytes),
 * read over at most `connections` GETs at once, in parts of part_size:
 * REMORA_SUBRANGES_PER_CONNECTION per connection, no shorter than
 * REMORA_SUBRANGE_MIN, no longer than a part; and an even cut of the part,
 * so that its last sub-range is not a sliver.
 */
int64_t
remora_subrange_size(int64_t rest, int connections, int64_t part_size)
{
	int64_t size;
	int64_t cuts;

	if (part_size <= REMORA_SUBRANGE_MIN)
		return part_size;
	if (connections < 1)
		connections = 1;
	size = rest / ((int64_t) connections * REMORA_SUBRANGES_PER_CONNECTION);
	if (size < REMORA_SUBRANGE_MIN)
		size = REMORA_SUBRANGE_MIN;
	if (size >= part_size)
		return part_size;
	cuts = part_size / size; /* at least 1: size < part_size */
	return (part_size + cuts - 1) / cuts;
}

/* A table of nsubs free slots (any earlier one freed); false: no memory. */
bool
remora_subs_init(SubTable *t, int nsubs, int64_t size)
{
	remora_subs_free(t);
	t->subs = calloc(nsubs, sizeof(SubRange));
	if (t->subs == NULL)
		return false;
	t->nsubs = nsubs;
	t->size = size;
	return true;
}

void
remora_subs_free(SubTable *t)
{
	free(t->subs);
	t->subs = NULL;
	t->nsubs = 0;
}

/* A new sub-range, running; NULL when every slot is taken. */
SubRange *
remora_subs_add(SubTable *t, int partno, int64_t off, int64_t want, void *buf)
{
	for (int i = 0; i < t->nsubs; i++)
	{
		SubRange *s = &t->subs[i];

		if (s->state != SUB_FREE)
			continue;
		s->state = SUB_RUNNING;
		s->partno = partno;
		s->off = off;
		s->want = want;
		s->len = 0;
		s->checked = false;
		s->discard = false;
		s->buf = buf;
		return s;
	}
	return NULL;
}

/*
 * The throttled sub-range to ask for again first: the earliest, which
 * holds up the hashing of everything after it.
 */
SubRange *
remora_subs_repeat(const SubTable *t)
{
	SubRange *first = NULL;

	for (int i = 0; i < t->nsubs; i++)
	{
		SubRange *s = &t->subs[i];

		if (s->state == SUB_AGAIN &&
			(first == NULL || s->partno < first->partno ||
			 (s->partno == first->partno && s->off < first->off)))
			first = s;
	}
	return first;
}

/* The finished sub-range of part partno that begins at off, if any. */
SubRange *
remora_subs_in_order(const SubTable *t, int partno, int64_t off)
{
	for (int i = 0; i < t->nsubs; i++)
	{
		SubRange *s = &t->subs[i];

		if (s->state == SUB_DONE && s->partno == partno && s->off == off)
			return s;
	}
	return NULL;
}

int
remora_subs_count(const SubTable *t, SubState state)
{
	int n = 0;

	for (int i = 0; i < t->nsubs; i++)
		n += t->subs[i].state == state;
	return n;
}

/* Its bytes are hashed (or it is given up): the slot is free. */
void
remora_subs_release(SubRange *s)
{
	s->state = SUB_FREE;
	s->buf = NULL;
}
