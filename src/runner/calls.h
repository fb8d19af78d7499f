/*-------------------------------------------------------------------------
 *
 * calls.h
 *	  Every SQL statement a worker runs (calls.c), over the host's exec.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_RUNNER_CALLS_H
#define REMORA_RUNNER_CALLS_H

#include "engine/engine.h"
#include "runner/host.h"

#define REMORA_UUID_LEN 37 /* text, with its NUL */

/* A claimed attempt, as remora.claim hands it out (malloc'd texts). */
typedef struct RemoraClaimRow
{
	int64_t job_id;
	char    attempt_id[REMORA_UUID_LEN];
	int64_t token;
	char   *spec;
	char   *resume; /* NULL: none offered */
} RemoraClaimRow;

/* A registered source endpoint (its secret stays in memory). */
typedef struct RemoraEndpoint
{
	RemoraTargetConfig cfg;
	char              *strings[10];
} RemoraEndpoint;

/* A webhook claimed for one try (remora.webhooks_due; malloc'd texts). */
typedef struct RemoraWebhookRow
{
	int64_t       job_id;
	char         *id; /* webhook-id, the same on every try */
	char         *url;
	char         *body;
	unsigned char key[32]; /* the job owner's secret */
	int           attempt;
	long          timeout_ms; /* for the try; 0: the engine's */
} RemoraWebhookRow;

extern bool remora_call_start_incarnation(const char *inc, const char *kind,
										  const char *host, const char *label);
extern int  remora_call_heartbeat(const char *inc, const char *credentials,
								  int64_t expires, int64_t *server_ms);
extern void remora_call_end_incarnation(const char *inc);
extern int  remora_call_claim(const char *inc, int room, RemoraClaimRow *out);
extern int64_t remora_call_next_due(const char *inc);
extern bool  remora_call_renew(int64_t job, const char *attempt, int64_t token,
							   bool *ok, bool *cancelled, bool *yield);
extern bool  remora_call_rate_limits(int n, const char *const *attempts,
									 int64_t *caps, bool *known);
extern bool  remora_call_checkpoint(int64_t job, const char *attempt,
									int64_t token, const char *doc, bool *ok);
extern bool  remora_call_commit(int64_t job, const char *attempt, int64_t token,
								const char *doc, bool *ok);
extern bool  remora_call_commit_many(int n, const char *const *attempts,
									 const int64_t     *tokens,
									 const char *const *docs, bool *ok);
extern char *remora_call_fail(int64_t job, const char *attempt, int64_t token,
							  const char *error, bool retryable);
extern char *remora_call_yield(int64_t job, const char *attempt, int64_t token);
extern bool  remora_call_lookup(int64_t job, const char *attempt,
								const char *const *paths, int n,
								RemoraPrior *out);
extern bool  remora_call_export_members(int64_t job, const char *attempt,
										int64_t token, RemoraLookup *l);
extern bool  remora_call_endpoint(const char *name, RemoraEndpoint *out,
								  bool *found);
extern void  remora_endpoint_free(RemoraEndpoint *e);
extern bool  remora_call_next_cleanup(char *attempt_id, int64_t *job,
									  char **bucket, char **prefix);
extern void  remora_call_cleanup_done(const char *attempt_id, int64_t job,
									  bool ok);

extern int  remora_call_webhooks_due(const char *inc, int room,
									 RemoraWebhookRow *out);
extern void remora_webhook_row_free(RemoraWebhookRow *r);
extern bool remora_call_webhook_tried(int64_t job, const char *id, int attempt,
									  long status, const char *error,
									  bool retry);

#endif /* REMORA_RUNNER_CALLS_H */
