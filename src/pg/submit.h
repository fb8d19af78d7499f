/*-------------------------------------------------------------------------
 *
 * submit.h
 *	  What the validating entry points share (submit.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_SUBMIT_H
#define REMORA_SUBMIT_H

#include "pg/remora.h"

/* Call remora.<name> as the extension's owner, at most 6 arguments. */
extern Datum remora_call_internal(const char *name, int nargs,
								  const Oid *argtypes, const Datum *args,
								  const bool *nulls, bool *resnull);

/* A job's options.notify_url, validated and canonical. */
extern char *remora_notify_url(const char *url);

#endif /* REMORA_SUBMIT_H */
