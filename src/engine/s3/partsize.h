/*-------------------------------------------------------------------------
 *
 * partsize.h
 *	  The part size of a multipart upload, grown so that the store's part
 *	  limit holds the object.
 *
 * One rule for every upload the engine makes (a member's parts, its
 * ranged GETs, an export's UploadPartCopy ranges, a set's manifest):
 * parts of remora.part_size while the store's limit of parts
 * (remora.max_upload_parts) holds the object, else parts of
 * ceil(size / limit) rounded up to a MiB, which is never smaller.  An
 * upload whose size is not known until it ends applies it to what it has
 * sent, part by part (remora_part_size_next).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_PARTSIZE_H
#define REMORA_PARTSIZE_H

#include <stdint.h>

/* S3's largest part (UploadPart and UploadPartCopy alike) */
#define REMORA_PART_SIZE_MAX ((int64_t) 5 * 1024 * 1024 * 1024)

/*
 * The part size for an object of size bytes (< 0: not known, so
 * part_size) in at most max_parts parts of at least part_size bytes.
 * -1 when no part size up to REMORA_PART_SIZE_MAX holds it (or
 * max_parts < 1 for a non-empty object).  Pure.
 */
extern int64_t remora_part_size_fit(int64_t size, int64_t part_size,
									int max_parts);

/*
 * The next part of an upload whose size is known only at its end (a set's
 * manifest, written as its members complete), after sent bytes in nparts
 * parts: remora_part_size_fit's part for as much again as has been sent,
 * over the part numbers left before the last one, which is kept for the
 * rest.  So parts stay part_size while the first half of the limit is
 * used, then grow with what has been sent, up to REMORA_PART_SIZE_MAX: at
 * 1,000 parts of at least 5 MiB, 5 MiB parts up to 2.4 GiB sent, 22 MiB
 * at 5.5 GB, and 160 GiB in all (10,000 parts: 24 GiB, 1.6 TiB).  0: only
 * the last part number is left, and the rest goes as that part.  Pure.
 */
extern int64_t remora_part_size_next(int64_t sent, int64_t part_size,
									 int nparts, int max_parts);

#endif /* REMORA_PARTSIZE_H */
