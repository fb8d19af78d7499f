/*-------------------------------------------------------------------------
 *
 * manifest.c
 *	  Manifest lines (doc/manifest.md): the header, a member, the totals,
 *	  and the source validators a member line records.
 *
 * The field order is part of the format: the root digest is the SHA-256
 * of the member lines exactly as written here.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>

#include "engine/transfer/manifest.h"

bool
remora_manifest_header(RemoraBuf *b, int64_t job_id, const char *attempt_id,
					   int64_t fencing_token, const char *source,
					   const char *bucket, const char *commit)
{
	remora_buf_printf(
		b, "{\"remora_manifest\":1,\"job_id\":%" PRId64 ",\"attempt_id\":",
		job_id);
	remora_buf_json_string(b, attempt_id);
	remora_buf_printf(
		b, ",\"fencing_token\":%" PRId64 ",\"source\":", fencing_token);
	remora_buf_json_string(b, source);
	remora_buf_puts(b, ",\"bucket\":");
	remora_buf_json_string(b, bucket);
	if (commit)
	{
		remora_buf_puts(b, ",\"commit\":");
		remora_buf_json_string(b, commit);
	}
	return remora_buf_puts(b, "}\n");
}

bool
remora_manifest_member(RemoraBuf *b, const char *path, const char *key,
					   int64_t size, const char *sha256, const char *etag,
					   const char *source_json, bool reused,
					   int64_t reused_from_job)
{
	remora_buf_puts(b, "{\"path\":");
	remora_buf_json_string(b, path);
	if (key == NULL)
	{
		/* a dry run's plan: what the job would do, and no object */
		remora_buf_printf(b, ",\"size\":%" PRId64 ",\"action\":\"%s\"", size,
						  reused_from_job > 0 ? "reuse" : "download");
		remora_buf_puts(b, ",\"source\":");
		remora_buf_puts(b, source_json);
		if (reused_from_job > 0)
			remora_buf_printf(b, ",\"reused_from_job\":%" PRId64,
							  reused_from_job);
		return remora_buf_puts(b, "}\n");
	}
	remora_buf_puts(b, ",\"key\":");
	remora_buf_json_string(b, key);
	remora_buf_printf(b, ",\"size\":%" PRId64 ",\"sha256\":", size);
	remora_buf_json_string(b, sha256);
	remora_buf_puts(b, ",\"etag\":");
	remora_buf_json_string(b, etag);
	remora_buf_puts(b, ",\"source\":");
	remora_buf_puts(b, source_json);
	if (reused)
		remora_buf_puts(b, ",\"reused\":true");
	if (reused_from_job > 0)
		remora_buf_printf(b, ",\"reused_from_job\":%" PRId64, reused_from_job);
	return remora_buf_puts(b, "}\n");
}

bool
remora_manifest_totals(RemoraBuf *b, int64_t members, int64_t bytes,
					   const char *members_sha256)
{
	remora_buf_printf(
		b, "{\"members\":%" PRId64 ",\"bytes\":%" PRId64 ",\"members_sha256\":",
		members, bytes);
	remora_buf_json_string(b, members_sha256);
	return remora_buf_puts(b, "}\n");
}

bool
remora_manifest_source_http(RemoraBuf *b, const char *etag,
							const char *last_modified)
{
	remora_buf_puts(b, "{\"etag\":");
	remora_buf_json_string(b, etag);
	remora_buf_puts(b, ",\"last_modified\":");
	remora_buf_json_string(b, last_modified);
	return remora_buf_puts(b, "}");
}

bool
remora_manifest_source_s3(RemoraBuf *b, const char *key, const char *etag,
						  const char *last_modified, int64_t size)
{
	remora_buf_puts(b, "{\"key\":");
	remora_buf_json_string(b, key);
	remora_buf_puts(b, ",\"etag\":");
	remora_buf_json_string(b, etag);
	remora_buf_puts(b, ",\"last_modified\":");
	remora_buf_json_string(b, last_modified);
	return remora_buf_printf(b, ",\"size\":%" PRId64 "}", size);
}

bool
remora_manifest_source_hf(RemoraBuf *b, const char *commit, const char *oid,
						  int64_t size, bool lfs)
{
	remora_buf_puts(b, "{\"commit\":");
	remora_buf_json_string(b, commit);
	remora_buf_puts(b, ",\"oid\":");
	remora_buf_json_string(b, oid);
	return remora_buf_printf(b, ",\"size\":%" PRId64 ",\"lfs\":%s}", size,
							 lfs ? "true" : "false");
}
