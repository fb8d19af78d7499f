/*-------------------------------------------------------------------------
 *
 * subranges.h
 *	  The sub-ranges of a large object read in ranged GETs: several GETs
 *	  fill one part's buffer at different offsets, so that an object of
 *	  few parts still has enough ranges for its connections.
 *
 * A part is asked for as sub-ranges of about the same length, in order
 * (part by part, offset by offset), each one GET.  A sub-range's record
 * lives in a slot of a fixed table from its start until its bytes are
 * hashed in order (ranges.c); a throttled one waits in its slot to be
 * asked for again, the earliest first.  When every slot is taken, no new
 * sub-range starts: the table bounds what is asked for ahead of the
 * part to hash next, as the part buffers do.
 *
 * Pure bookkeeping, no I/O: the unit tests drive it directly.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_SUBRANGES_H
#define REMORA_SUBRANGES_H

#include <stdbool.h>
#include <stdint.h>

/*
 * The shortest sub-range: below it a GET's own cost (a request, its first
 * byte's wait) outweighs what one more connection brings.
 */
#define REMORA_SUBRANGE_MIN (1024L * 1024)
/*
 * Sub-ranges an object is cut into per connection it may get at most: the
 * adaptive count has ranges to grow into, and the last ranges, running
 * while fewer connections remain busy, are short.
 */
#define REMORA_SUBRANGES_PER_CONNECTION 4

typedef enum SubState
{
	SUB_FREE = 0,
	SUB_RUNNING, /* its GET runs */
	SUB_DONE,    /* all its bytes are in its part's buffer, not yet hashed */
	SUB_AGAIN    /* throttled: to be asked for again */
} SubState;

typedef struct SubRange
{
	SubState state;
	int      partno;  /* the part it is of */
	int64_t  off;     /* its first byte, in the part */
	int64_t  want;    /* its length */
	int64_t  len;     /* bytes received */
	bool     checked; /* the answer's status and range looked at */
	bool     discard; /* the body of an error answer */
	void    *buf;     /* its part's buffer */
} SubRange;

typedef struct SubTable
{
	SubRange *subs;
	int       nsubs;
	int64_t   size; /* a sub-range's length (a part's last may be shorter) */
} SubTable;

extern int64_t   remora_subrange_size(int64_t rest, int connections,
									  int64_t part_size);
extern bool      remora_subs_init(SubTable *t, int nsubs, int64_t size);
extern void      remora_subs_free(SubTable *t);
extern SubRange *remora_subs_add(SubTable *t, int partno, int64_t off,
								 int64_t want, void *buf);
extern SubRange *remora_subs_repeat(const SubTable *t);
extern SubRange *remora_subs_in_order(const SubTable *t, int partno,
									  int64_t off);
extern int       remora_subs_count(const SubTable *t, SubState state);
extern void      remora_subs_release(SubRange *s);

#endif /* REMORA_SUBRANGES_H */
