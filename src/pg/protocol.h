/*-------------------------------------------------------------------------
 *
 * protocol.h
 *	  The SQL of the launcher and the workers: the worker protocol's calls
 *	  (claim, renew, checkpoint, commit, fail, reconcile, ...) and the one
 *	  transaction helper they all run in.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_PROTOCOL_H
#define REMORA_PROTOCOL_H

#include "remora.h"

#include "utils/jsonb.h"
#include "utils/uuid.h"

#include "engine/engine.h"
#include "pg/jobspec.h"

#define REMORA_UUID_TEXT_LEN (UUID_LEN * 2 + 5)

/* ----------------------------------------------------------- transactions */

typedef void (*RemoraCallFn)(void *arg);

extern void remora_tx_begin(const char *what);
extern void remora_tx_end(void);
extern void remora_tx_abort(void);
extern void remora_tx_recover(MemoryContext cxt);
extern bool remora_tx_guarded(const char *what, int64 job_id, RemoraCallFn fn,
							  void *arg);
extern bool remora_tx_run(const char *what, RemoraCallFn fn, void *arg);
extern bool remora_tx_call(const char *what, int64 job_id, RemoraCallFn fn,
						   void *arg);
extern bool remora_tx_in_progress(void);

/* ------------------------------------------------------ the worker's calls */

/* A claimed attempt: its job decoded, and what could not be used. */
typedef struct RemoraClaim
{
	RemoraJobSpec      job;
	RemoraResume      *resume;         /* malloc'd (the engine's), or NULL */
	const char        *broken;         /* the spec cannot be used: why */
	const char        *why_restart;    /* the offered checkpoint was not used */
	bool               endpoint_found; /* job.endpoint is registered */
	RemoraTargetConfig endpoint;
} RemoraClaim;

extern void  remora_protocol_start_incarnation(const pg_uuid_t *incarnation);
extern void  remora_protocol_end_incarnation(const pg_uuid_t *incarnation);
extern bool  remora_protocol_heartbeat(const pg_uuid_t *incarnation);
extern int   remora_protocol_claim(const pg_uuid_t *incarnation, int room,
								   RemoraClaim *out);
extern bool  remora_protocol_renew(int64 job_id, const char *attempt_id,
								   int64 token, bool *ok, bool *cancelled);
extern bool  remora_protocol_checkpoint(int64 job_id, const char *attempt_id,
										int64 token, Jsonb *checkpoint,
										bool *ok);
extern bool  remora_protocol_commit(int64 job_id, const char *attempt_id,
									int64 token, Jsonb *descriptor, bool *ok);
extern bool  remora_protocol_commit_many(int n, const char *const *attempt_ids,
										 const int64 *tokens, Jsonb *const *docs,
										 bool *ok);
extern char *remora_protocol_fail(int64 job_id, const char *attempt_id,
								  int64 token, Jsonb *error, bool retryable);
extern bool remora_protocol_lookup_members(int64 job_id, const char *attempt_id,
										   const char *const *paths, int n,
										   RemoraPrior *out);
extern bool remora_protocol_export_members(int64 job_id, const char *attempt_id,
										   int64 token, RemoraLookup *lookup);
extern bool remora_protocol_next_cleanup(char *attempt_id, int64 *job_id,
										 char **bucket, char **prefix);
extern void remora_protocol_cleanup_done(const char *attempt_id, int64 job_id,
										 bool ok);

/* ---------------------------------------------------- the launcher's calls */

extern char *remora_protocol_extension_version(void);
extern bool  remora_protocol_check_role(const char *role, const char **why);
extern void  remora_protocol_end_previous_lifetime(void);
extern bool  remora_protocol_reconcile(int64 *repairs);
extern bool  remora_protocol_prune(int limit, int64 *pruned);

#endif /* REMORA_PROTOCOL_H */
