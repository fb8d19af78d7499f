/*-------------------------------------------------------------------------
 *
 * attempts.h
 *	  Inside the runner: the attempt table (attempts.c) that the round
 *	  (round.c) drives.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_RUNNER_ATTEMPTS_H
#define REMORA_RUNNER_ATTEMPTS_H

#include "runner/calls.h"
#include "runner/runner.h"

extern int  remora_attempts_count(void);
extern void remora_attempts_start(RemoraClaimRow *row, int64_t claim_sent_ms);
extern void remora_attempts_answer_lookups(void);
extern void remora_attempts_renew(void);
extern void remora_attempts_apply_rates(void);
extern void remora_attempts_fence(void);
extern int64_t remora_attempts_next_fence_ms(void);
extern bool    remora_attempts_finish(void);
extern void    remora_attempts_checkpoint(void);
extern void    remora_attempts_hand_back(void);
extern int     remora_attempts_view(RemoraAttemptView *out, int max);

#endif /* REMORA_RUNNER_ATTEMPTS_H */
