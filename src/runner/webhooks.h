/*-------------------------------------------------------------------------
 *
 * webhooks.h
 *	  Inside the runner: the webhooks a worker delivers (webhooks.c), which
 *	  the round (round.c) drives.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_RUNNER_WEBHOOKS_H
#define REMORA_RUNNER_WEBHOOKS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"

extern void remora_webhooks_round(RemoraEngine *engine, const char *incarnation,
								  bool up, bool may_start);
extern int  remora_webhooks_in_flight(void);
extern int64_t remora_webhooks_next_ms(void);
extern void    remora_webhooks_stop(void);

#endif /* REMORA_RUNNER_WEBHOOKS_H */
