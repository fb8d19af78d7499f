/*-------------------------------------------------------------------------
 *
 * attempt.h
 *	  Inside the runner: one running attempt, as the table (attempts.c)
 *	  keeps it and a claim's start (start.c) makes it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_RUNNER_ATTEMPT_H
#define REMORA_RUNNER_ATTEMPT_H

#include "runner/calls.h"
#include "runner/codec.h"

typedef struct RemoraAttempt
{
	RemoraTask    *task;
	RemoraWorkKind kind;
	int64_t        job_id;
	char           attempt_id[REMORA_UUID_LEN];
	int64_t        token;
	int64_t        owner;
	char          *bucket;
	char          *file_name;
	const char    *forced_restart; /* a constant string */
	bool           restart_reported;
	bool           renew_blocked; /* the last renewal failed: renew it last */
	int            call_failures;
	int64_t        first_call_failure_ms;
	int64_t        next_call_ms; /* a failed commit or fail call: when again */
	char          *commit_doc;
	RemoraDocs     unsent; /* members or references not yet recorded */
	int64_t        fence_ms;
	void          *host_slot;
	int64_t        max_rate;    /* the byte-rate cap applied; 0: none */
	bool           yield_asked; /* a renewal asked it to yield */
} RemoraAttempt;

/* attempts.c: the table */
extern void    remora_attempts_add(RemoraAttempt *a);
extern void    remora_attempt_free(RemoraAttempt *a);
extern int64_t remora_attempt_fence_after(int64_t sent_ms);

#endif /* REMORA_RUNNER_ATTEMPT_H */
