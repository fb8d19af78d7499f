/*-------------------------------------------------------------------------
 *
 * state.h
 *	  Inside the runner: the state every file shares and its log
 *	  (state.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_RUNNER_STATE_H
#define REMORA_RUNNER_STATE_H

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

#endif /* REMORA_RUNNER_STATE_H */
