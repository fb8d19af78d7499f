/*-------------------------------------------------------------------------
 *
 * runner_int.h
 *	  Inside the runner: its state, its log, and the attempt table
 *	  (attempts.c) that the round (round.c) drives.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_RUNNER_INT_H
#define REMORA_RUNNER_INT_H

#include "runner/calls.h"
#include "runner/runner.h"

typedef struct RemoraRunnerState
{
	const RemoraHostOps *ops;
	void                *host;
	RemoraRunnerConfig   cfg; /* strings malloc'd */
	RemoraEngine        *engine;
} RemoraRunnerState;

extern RemoraRunnerState remora_runner;

extern void remora_rlog(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* attempts.c */
extern int  remora_attempts_count(void);
extern void remora_attempts_start(RemoraClaimRow *row, int64_t claim_sent_ms);
extern void remora_attempts_answer_lookups(void);
extern void remora_attempts_renew(void);
extern void remora_attempts_fence(void);
extern int64_t remora_attempts_next_fence_ms(void);
extern void    remora_attempts_finish(void);
extern void    remora_attempts_checkpoint(void);
extern void    remora_attempts_hand_back(void);
extern int     remora_attempts_view(RemoraAttemptView *out, int max);

#endif /* REMORA_RUNNER_INT_H */
