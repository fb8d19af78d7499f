/*-------------------------------------------------------------------------
 *
 * sigv4_int.h
 *	  What the three files of SigV4 share: sigv4_check.c (validation of
 *	  credentials and requests), sigv4_canon.c (URI encoding, the canonical
 *	  request and the string to sign) and sigv4_sign.c (the signature, the
 *	  Authorization header and presigned URLs, the public entry points).
 *
 * Calls go one way: sigv4_sign.c -> sigv4_check.c, sigv4_canon.c.  Every
 * function that can fail writes one sentence into (errbuf, errlen), never
 * a secret, a header name or a header value.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_SIGV4_INT_H
#define REMORA_SIGV4_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "engine/s3/sigv4.h"

#define SIGV4_ALGORITHM  "AWS4-HMAC-SHA256"
#define SIGV4_TERMINATOR "aws4_request"
#define SIGV4_UNSIGNED   "UNSIGNED-PAYLOAD"
#define SHA256_LEN       32

/* sigv4_check.c */
extern bool remora_sigv4_validate_scope(const RemoraSigV4Creds *creds,
										char *errbuf, size_t errlen);
extern bool remora_sigv4_validate_creds(const RemoraSigV4Creds *creds,
										char *errbuf, size_t errlen);
extern bool remora_sigv4_validate_request(const RemoraSigV4Request *req,
										  bool need_payload, char *errbuf,
										  size_t errlen);

/* sigv4_canon.c: one signing operation, its time, scope and canonical forms */
typedef struct SignCtx
{
	char  amz_date[17];   /* YYYYMMDDTHHMMSSZ */
	char  date8[9];       /* YYYYMMDD */
	char *scope;          /* date8/region/service/aws4_request */
	char *query;          /* canonical query string */
	char *signed_headers; /* host;x-amz-date;... */
	char *canonical_request;
	char *string_to_sign;
} SignCtx;

extern void remora_sigv4_ctx_free(SignCtx *ctx);
extern bool remora_sigv4_ctx_begin(SignCtx *ctx, const RemoraSigV4Creds *creds,
								   time_t now, char *errbuf, size_t errlen);
extern bool remora_sigv4_check_amz_headers(const RemoraSigV4Request *req,
										   const SignCtx *ctx, char *errbuf,
										   size_t errlen);
extern bool remora_sigv4_canonicalise(SignCtx                  *ctx,
									  const RemoraSigV4Request *req,
									  const RemoraKV *extra, int nextra,
									  bool host_only, const char *payload_hash,
									  char *errbuf, size_t errlen);

#endif /* REMORA_SIGV4_INT_H */
