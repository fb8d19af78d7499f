/*-------------------------------------------------------------------------
 *
 * launcher_sql.h
 *	  The launcher's statements (launcher_sql.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_LAUNCHER_SQL_H
#define REMORA_LAUNCHER_SQL_H

#include "remora.h"

#include "utils/uuid.h"

extern char *remora_protocol_extension_version(void);
extern bool  remora_protocol_check_role(const char *role, const char **why);
extern void  remora_protocol_end_incarnation(const pg_uuid_t *incarnation);
extern void  remora_protocol_end_previous_lifetime(void);
extern bool  remora_protocol_reconcile(int64 *repairs);
extern bool  remora_protocol_prune(int limit, int64 *pruned);

#endif /* REMORA_LAUNCHER_SQL_H */
