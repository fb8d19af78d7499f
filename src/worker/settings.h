/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The server's settings remora-worker runs with (settings.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_WORKER_SETTINGS_H
#define REMORA_WORKER_SETTINGS_H

#include "engine/engine.h"
#include "worker/conn.h"

#define REMORA_WSETTINGS_N 37

/* remora.worker_settings(), column by column (malloc'd strings) */
typedef struct RemoraWorkerSettings
{
	char *values[REMORA_WSETTINGS_N];
	int   lease_ms;
	int   concurrency; /* remora.worker_concurrency, the default */
} RemoraWorkerSettings;

extern bool        remora_settings_load(RemoraConn *c, RemoraWorkerSettings *s);
extern bool        remora_settings_equal(const RemoraWorkerSettings *a,
										 const RemoraWorkerSettings *b);
extern void        remora_settings_free(RemoraWorkerSettings *s);
extern const char *remora_setting(const RemoraWorkerSettings *s,
								  const char                 *name);
extern void        remora_settings_engine_config(const RemoraWorkerSettings *s,
												 RemoraEngineConfig         *cfg);

#endif /* REMORA_WORKER_SETTINGS_H */
