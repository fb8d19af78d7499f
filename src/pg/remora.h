/*-------------------------------------------------------------------------
 *
 * remora.h
 *	  What every file of the PostgreSQL-facing part includes first:
 *	  postgres.h and Remora's own SQLSTATE class.  Each file's own
 *	  functions are declared in the header of its name (guc.h, xact.h...).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_H
#define REMORA_H

#include "postgres.h"

/*
 * Remora's own SQLSTATE class "RM": what no standard code says.  RM001: the
 * outbound policy refuses a source.  (A lost lease or a refused commit is
 * not an error: the protocol functions answer false or NULL, and a worker
 * acts on that.)
 */
#define ERRCODE_REMORA_POLICY_DENIED MAKE_SQLSTATE('R', 'M', '0', '0', '1')

#endif /* REMORA_H */
