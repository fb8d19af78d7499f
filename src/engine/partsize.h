/*-------------------------------------------------------------------------
 *
 * partsize.h
 *	  The part size of a multipart upload, grown so that the store's part
 *	  limit holds the object.
 *
 * One rule for every upload the engine makes (a member's parts, its
 * ranged GETs, an export's UploadPartCopy ranges): parts of
 * remora.part_size while the store's limit of parts
 * (remora.max_upload_parts) holds the object, else parts of
 * ceil(size / limit) rounded up to a MiB, which is never smaller.
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

#endif /* REMORA_PARTSIZE_H */
