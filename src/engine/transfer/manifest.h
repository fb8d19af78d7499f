/*-------------------------------------------------------------------------
 *
 * manifest.h
 *	  The one writer of manifest lines (doc/manifest.md), for a job of one
 *	  member and for a set alike.
 *
 * A manifest is JSON Lines: a header line, one line per member, and a
 * totals line with the SHA-256 of the member lines (the root digest).
 * Each function appends one line (or one source object) to a RemoraBuf
 * and returns false when it could not (out of memory): nothing is ever
 * truncated.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_MANIFEST_H
#define REMORA_MANIFEST_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/common/util.h"

/* commit: a Hugging Face snapshot's pinned commit, or NULL */
extern bool remora_manifest_header(RemoraBuf *b, int64_t job_id,
								   const char *attempt_id,
								   int64_t fencing_token, const char *source,
								   const char *bucket, const char *commit);

/*
 * source_json: the member's source validators, a JSON object.  key NULL:
 * a dry run's plan, with its action and no key, SHA-256 or ETag.
 */
extern bool remora_manifest_member(RemoraBuf *b, const char *path,
								   const char *key, int64_t size,
								   const char *sha256, const char *etag,
								   const char *source_json, bool reused,
								   int64_t reused_from_job);

extern bool remora_manifest_totals(RemoraBuf *b, int64_t members, int64_t bytes,
								   const char *members_sha256);

/* The validators of a member's source, as JSON objects. */
extern bool remora_manifest_source_http(RemoraBuf *b, const char *etag,
										const char *last_modified);
extern bool remora_manifest_source_s3(RemoraBuf *b, const char *key,
									  const char *etag,
									  const char *last_modified, int64_t size);
extern bool remora_manifest_source_hf(RemoraBuf *b, const char *commit,
									  const char *oid, int64_t size, bool lfs);

#endif /* REMORA_MANIFEST_H */
