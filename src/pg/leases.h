/*-------------------------------------------------------------------------
 *
 * leases.h
 *	  Lease reservations of claims in flight (leases.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_LEASES_H
#define REMORA_LEASES_H

#include "pg/remora.h"

/* register the transaction callback that releases a claim's reservation */
extern void remora_leases_init(void);

#endif /* REMORA_LEASES_H */
