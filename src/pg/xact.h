/*-------------------------------------------------------------------------
 *
 * xact.h
 *	  The transactions and error boundaries of the launcher's and the
 *	  background workers' statements (xact.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_XACT_H
#define REMORA_XACT_H

#include "remora.h"

typedef void (*RemoraCallFn)(void *arg);

/* the context that was current at remora_tx_begin: results are kept there */
extern MemoryContext remora_tx_caller_cxt;

extern void remora_tx_begin(const char *what);
extern void remora_tx_end(void);
extern void remora_tx_abort(void);
extern void remora_tx_recover(MemoryContext cxt);
extern bool remora_tx_guarded(const char *what, int64 job_id, RemoraCallFn fn,
							  void *arg);
extern bool remora_tx_run(const char *what, RemoraCallFn fn, void *arg);
extern bool remora_tx_call(const char *what, int64 job_id, RemoraCallFn fn,
						   void *arg);
extern bool remora_tx_in_progress(void);
extern void remora_tx_set_idle(const char *activity);

/* one statement through SPI, under the protocol's statement timeout */
extern int remora_spi_execute(const char *query, int nargs, Oid *types,
							  Datum *values, const char *nulls, bool read_only,
							  long count);

#endif /* REMORA_XACT_H */
