/*-------------------------------------------------------------------------
 *
 * state.c
 *	  What every file of the runner shares: the host it runs on, its
 *	  settings and engine, its log and its clock.
 *
 * Below the attempts (attempts.c), the calls (calls.c) and the round
 * (round.c), so that none of them calls up into another for these.
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "runner/state.h"

RemoraRunnerState remora_runner;

/*
 * The monotonic clock of every deadline, in milliseconds.  Weak, so that
 * the runner's unit test (test/unit/runner_test.c) can move time itself.
 */
__attribute__((weak)) int64_t
remora_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
remora_rlog(const char *fmt, ...)
{
	char    line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	remora_runner.ops->log(remora_runner.host, line);
}
