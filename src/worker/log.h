/*-------------------------------------------------------------------------
 *
 * log.h
 *	  remora-worker's log: one line per event on standard error.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_WORKER_LOG_H
#define REMORA_WORKER_LOG_H

#include <stdint.h>

/* remora_clock_ms (CLOCK_MONOTONIC): every deadline of the worker */
#include "runner/runner.h"

/* "2026-12-01T05:50:00.123Z remora-worker[pid]: <message>\n" */
extern void remora_wlog(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

#endif /* REMORA_WORKER_LOG_H */
