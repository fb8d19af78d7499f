/*-------------------------------------------------------------------------
 *
 * jobspec.h
 *	  The one codec between the job protocol's jsonb and the engine's
 *	  structs: the job definition and request (remora_submit), the spec a
 *	  claim hands out, the resume checkpoint, checkpoints, members, the
 *	  manifest descriptor and the error of a failed attempt.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_JOBSPEC_H
#define REMORA_JOBSPEC_H

#include "remora.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

#include "engine/engine.h"
#include "engine/source_uri.h"

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
} RemoraJobOptions;

/*
 * A claimed attempt's job, decoded from the spec remora.claim hands out.
 * Strings are palloc'd in the memory context current at the decode.  The
 * engine's spec for it is task (an http(s) object) or set (an s3 or hf
 * source); the host fills in what is not in the spec: the set's source
 * store, hub URL and token, the resume and the member lookup.
 */
typedef struct RemoraJobSpec
{
	int64       job_id;
	const char *attempt_id;
	int64       fencing_token;
	int64       attempt_no; /* 1 for the first; 0 if the spec omits it */
	Oid         owner;
	const char *kind; /* "http", "s3_object", "s3_prefix", "hf" or
					   * "export" */
	bool           is_set;
	bool           is_export;
	const char    *bucket;
	const char    *file_name; /* the member path; "" when there is none */
	const char    *endpoint;  /* options.endpoint, or NULL */
	RemoraTaskSpec task;      /* !is_set */
	RemoraSetSpec  set;       /* is_set */
	const char    *prefix;    /* is_export: the target prefix */
	RemoraExportSpec export;  /* is_export */
} RemoraJobSpec;

/* submit: the job definition and the canonical request */
extern Jsonb *remora_jobspec_source(const RemoraSourceUri *uri);
extern Jsonb *remora_jobspec_definition(Jsonb *source, const char *bucket,
										const char             *prefix,
										const RemoraJobOptions *options);
extern Jsonb *remora_jobspec_request(Jsonb *source, const char *url,
									 const char *bucket, const char *prefix,
									 const RemoraJobOptions *options);

/* claim: the spec and the resume offered with it */
extern void          remora_jobspec_decode(Jsonb *spec, RemoraJobSpec *out);
extern RemoraResume *remora_jobspec_decode_resume(Jsonb       *resume,
												  const char **why);
extern void          remora_jobspec_prior(RemoraPrior *out, const char *key,
										  const char *etag, const char *sha256,
										  int64 size, Jsonb *source);

/* worker to protocol: what an attempt records */
extern Jsonb *remora_jobspec_error(const char *class, const char *message,
								   long http_status, int curl_code,
								   const char *s3_code, long retry_after);
extern Jsonb *remora_jobspec_task_error(const RemoraTaskError *e);
extern Jsonb *remora_jobspec_member(const char            *bucket,
									const RemoraSetMember *m);
extern Jsonb *remora_jobspec_checkpoint(const RemoraTaskCheckpoint *cp,
										bool is_set, const char *restart_reason,
										List *members);
extern Jsonb *remora_jobspec_object_descriptor(const RemoraTaskResult *r,
											   const char             *bucket,
											   const char *file_name);
extern Jsonb *remora_jobspec_ref(const RemoraExportRef *r);
extern Jsonb *remora_jobspec_export_checkpoint(const RemoraTaskCheckpoint *cp,
											   List *refs);
extern Jsonb *remora_jobspec_export_descriptor(const RemoraTaskResult *r,
											   List                   *refs);
extern Jsonb *remora_jobspec_set_descriptor(const RemoraTaskResult *r,
											List                   *members);

#endif /* REMORA_JOBSPEC_H */
