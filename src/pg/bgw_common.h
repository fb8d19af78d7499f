/*-------------------------------------------------------------------------
 *
 * bgw_common.h
 *	  What every background process of Remora does alike (bgw_common.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_BGW_COMMON_H
#define REMORA_BGW_COMMON_H

#include "pg/remora.h"

/* a static background worker of this library (the launcher, the web
 * server); only during shared_preload_libraries */
extern void remora_register_static_worker(const char *function,
										  const char *name);
/* read the configuration files once, at a process's start */
extern void remora_reload_at_start(void);

#endif /* REMORA_BGW_COMMON_H */
