/*-------------------------------------------------------------------------
 *
 * runner.h
 *	  The runner: the attempts of one worker incarnation, from claim to
 *	  commit, failure or stop, and the round that drives them.  One for
 *	  both hosts, the background worker (src/pg/bgworker.c) and
 *	  remora-worker (src/worker/main.c); see src/runner/README.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_RUNNER_H
#define REMORA_RUNNER_H

#include "engine/engine.h"
#include "runner/host.h"

#define REMORA_RUNNER_MAX_ATTEMPTS 256 /* per worker, whatever the setting */

/* What the runner takes from the host's settings (copied). */
typedef struct RemoraRunnerConfig
{
	int         lease_ms;
	int         concurrency; /* attempts at once */
	int         connections; /* remora.object_connections; 0: adapt */
	const char *hub_url;
	const char *hf_token; /* NULL or "" for none */
	/* the incarnation's record */
	const char *kind;      /* "worker" (a background worker) or "external" */
	const char *host_name; /* or NULL */
	const char *label;     /* or NULL */
} RemoraRunnerConfig;

/* What happened since the last round, as the host knows it. */
typedef struct RemoraRound
{
	bool connected;   /* statements can run now */
	bool reconnected; /* a new session since the last round */
	bool renew_now;   /* a job was cancelled: renew at once */
	bool claim_now;   /* a job was queued: claim at once */
} RemoraRound;

extern void    remora_runner_init(const RemoraHostOps *ops, void *host,
								  const RemoraRunnerConfig *cfg);
extern void    remora_runner_reconfigure(const RemoraRunnerConfig *cfg,
										 bool                      new_engine);
extern int64_t remora_runner_round(const RemoraRound *in);
extern void    remora_runner_stop(void);

extern RemoraEngine *remora_runner_engine(void);
extern const char   *remora_runner_incarnation(void);
extern int           remora_runner_count(void);
extern int           remora_runner_attempts(RemoraAttemptView *out, int max);
extern int64_t       remora_runner_sweep_job(void);
extern int64_t       remora_clock_ms(void);

#endif /* REMORA_RUNNER_H */
