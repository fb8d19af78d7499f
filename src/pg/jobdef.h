/*-------------------------------------------------------------------------
 *
 * jobdef.h
 *	  The documents a submit writes (jobdef.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_JOBDEF_H
#define REMORA_JOBDEF_H

#include "remora.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

#include "engine/engine.h"
#include "engine/common/source_uri.h"

/* Validated options of a submit; only the "has"/non-NULL ones are written. */
typedef struct RemoraJobOptions
{
	bool   has_max_attempts;
	int    max_attempts;
	bool   has_priority;
	int    priority;
	bool   has_include; /* an empty list is still a list */
	char **include;
	int    ninclude;
	bool   has_exclude;
	char **exclude;
	int    nexclude;
	char  *endpoint;
	char  *expected_sha256;
	char  *label;
	bool   has_connections;
	int    connections;
	bool   has_max_bytes_per_second; /* the job's own byte-rate cap */
	int64  max_bytes_per_second;
	char  *notify_url; /* the webhook's URL (doc/user-guide.md, "Webhooks") */
	char  *storage_class; /* of what the job writes; NULL: the setting's */
	/* options.reuse_from (mirrors): a job id, or "latest"; 0/false: none */
	int64 reuse_from;
	bool  reuse_latest;
	/* options.dry_run: list and decide, write no member */
	bool dry_run;
} RemoraJobOptions;

/* submit: the job definition and the canonical request */
extern Jsonb *remora_jobspec_source(const RemoraSourceUri *uri);
extern Jsonb *remora_jobspec_definition(Jsonb *source, const char *bucket,
										const char             *prefix,
										const RemoraJobOptions *options);
extern Jsonb *remora_jobspec_request(Jsonb *source, const char *url,
									 const char *bucket, const char *prefix,
									 const RemoraJobOptions *options);

#endif /* REMORA_JOBDEF_H */
