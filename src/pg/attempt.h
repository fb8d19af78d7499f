/*-------------------------------------------------------------------------
 *
 * attempt.h
 *	  The attempts one worker runs (attempt.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_ATTEMPT_H
#define REMORA_ATTEMPT_H

#include "remora.h"

#include "lib/stringinfo.h"

#include "engine/engine.h"
#include "pg/protocol.h"

#define REMORA_MAX_ATTEMPTS 256 /* per worker, whatever the setting */

extern void remora_attempts_init(MemoryContext cxt, int worker_slot);
extern int  remora_attempts_count(void);
extern void remora_attempt_start(RemoraEngine *engine, RemoraClaim *claim);
extern void remora_attempts_answer_lookups(RemoraEngine *engine);
extern void remora_attempts_renew(void);
extern void remora_attempts_finish(void);
extern void remora_attempts_checkpoint(void);
extern void remora_attempts_publish_progress(void);
extern void remora_attempts_hand_back(void);
extern void remora_attempts_describe(StringInfo buf, int max);

#endif /* REMORA_ATTEMPT_H */
