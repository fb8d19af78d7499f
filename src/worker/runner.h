/*-------------------------------------------------------------------------
 *
 * runner.h
 *	  The attempts one remora-worker runs (runner.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_WORKER_RUNNER_H
#define REMORA_WORKER_RUNNER_H

#include "engine/engine.h"
#include "worker/calls.h"
#include "worker/conn.h"

#define REMORA_WORKER_MAX_ATTEMPTS 256

/* What the attempts need of the settings. */
typedef struct RemoraRunnerConfig
{
	int         lease_ms;
	const char *hub_url;
	const char *hf_token; /* "" for none */
} RemoraRunnerConfig;

extern void    remora_runner_init(RemoraConn *c, const RemoraRunnerConfig *cfg);
extern int     remora_runner_count(void);
extern void    remora_runner_start(RemoraEngine *engine, RemoraClaimRow *row,
								   int64_t claim_sent_ms);
extern void    remora_runner_answer_lookups(RemoraEngine *engine);
extern void    remora_runner_renew(void);
extern void    remora_runner_fence(void);
extern int64_t remora_runner_next_fence_ms(void);
extern void    remora_runner_finish(void);
extern void    remora_runner_checkpoint(void);
extern void    remora_runner_hand_back(void);

#endif /* REMORA_WORKER_RUNNER_H */
