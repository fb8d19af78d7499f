/*-------------------------------------------------------------------------
 *
 * host.h
 *	  What the runner needs of its host: the operations table.  The
 *	  background worker implements it over SPI (src/pg/spi_host.c),
 *	  remora-worker over libpq (src/worker/pq_host.c).  The runner calls
 *	  no other name of either host.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_RUNNER_HOST_H
#define REMORA_RUNNER_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

/*
 * One statement's answer: rows of values as text (SQL NULL is NULL), read
 * by column name.  Made by the host (remora_rows_init, remora_rows_set),
 * freed by the runner (remora_rows_free).
 */
typedef struct RemoraRows
{
	int    nrows;
	int    ncols;
	char **names;  /* ncols */
	char **values; /* nrows * ncols, row after row */
} RemoraRows;

extern bool remora_rows_init(RemoraRows *r, int nrows, int ncols);
extern bool remora_rows_set_name(RemoraRows *r, int col, const char *s);
extern bool remora_rows_set(RemoraRows *r, int row, int col, const char *s);
extern const char *remora_rows_get(const RemoraRows *r, int row,
								   const char *name);
extern void        remora_rows_free(RemoraRows *r);
extern void        remora_rows_wipe(RemoraRows *r);

/* An attempt as the host sees it (live progress, activity). */
typedef struct RemoraAttemptView
{
	int64_t     job_id;
	const char *attempt_id;
	int64_t     token;
	int64_t     owner; /* the owner's oid, 0 if unknown */
	RemoraTask *task;
	void       *host_slot; /* what attempt_started returned */
} RemoraAttemptView;

typedef struct RemoraHostOps
{
	/*
	 * One statement with text parameters (NULL: SQL NULL), cast in the
	 * statement, in a transaction of its own, or in the open batch.  what
	 * names it in the log ("job 7: checkpointing").  False when it failed
	 * (the host logged why); *out is then empty.  out may be NULL.
	 */
	bool (*exec)(void *host, const char *what, const char *sql, int nparams,
				 const char *const *params, RemoraRows *out);

	/*
	 * Several statements in one transaction (a round's checkpoints), each
	 * failing alone; batch_end says whether the transaction committed.  A
	 * host without transactions of several statements answers true, each
	 * statement having committed on its own.  Both may be NULL.
	 */
	void (*batch_begin)(void *host, const char *what);
	bool (*batch_end)(void *host);

	/* One line for the log, "job N attempt A ..." (no newline). */
	void (*log)(void *host, const char *line);

	/*
	 * A new engine from the host's settings (at start, and once idle after
	 * new settings).  The host does not return without one.
	 */
	RemoraEngine *(*new_engine)(void *host);

	/* Optional: a new incarnation begins (before it is recorded). */
	void (*incarnation_begins)(void *host, const char *incarnation);

	/*
	 * Optional: an attempt started (its slot for live progress, or NULL),
	 * or ended.
	 */
	void *(*attempt_started)(void *host, const RemoraAttemptView *a);
	void (*attempt_ended)(void *host, void *host_slot);

	/* Optional: a round's checkpoints, for the statistics. */
	void (*checkpoints_done)(void *host, int n, int refused, int64_t usecs);
} RemoraHostOps;

#endif /* REMORA_RUNNER_HOST_H */
