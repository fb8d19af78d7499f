/*-------------------------------------------------------------------------
 *
 * partsize.c
 *	  The part size of a multipart upload, grown so that the store's part
 *	  limit holds the object (partsize.h).
 *
 * Rounded up to a MiB so that every part but the last is a multiple of
 * 1 kB, as the hash states saved in checkpoints need (hash.c), and so
 * that the sizes read well in a listing of parts.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/s3/partsize.h"

#define MIB ((int64_t) 1024 * 1024)

int64_t
remora_part_size_fit(int64_t size, int64_t part_size, int max_parts)
{
	int64_t want;

	if (size <= 0)
		return part_size;
	if (max_parts < 1)
		return -1;
	if ((size + part_size - 1) / part_size <= max_parts)
		return part_size;
	/* size > max_parts * part_size, so this is larger than part_size */
	want = (size + max_parts - 1) / max_parts;
	want = (want + MIB - 1) / MIB * MIB;
	return want <= REMORA_PART_SIZE_MAX ? want : -1;
}

int64_t
remora_part_size_next(int64_t sent, int64_t part_size, int nparts,
					  int max_parts)
{
	int     left = max_parts - nparts - 1; /* before the last part */
	int64_t want;

	if (left < 1)
		return 0;
	want = remora_part_size_fit(sent, part_size, left);
	/* past what the limit holds: the largest parts, as long as they go */
	return want < 0 ? REMORA_PART_SIZE_MAX : want;
}
