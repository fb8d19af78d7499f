/*-------------------------------------------------------------------------
 *
 * creds_int.h
 *	  Between the credential cache (creds_cache.c), the chain's sources
 *	  (creds_chain.c) and the requests that fetch credentials
 *	  (creds_fetch.c: HTTP, STS).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_CREDS_INT_H
#define REMORA_CREDS_INT_H

#include "engine/s3/creds.h"

#include <curl/curl.h>

/* One set of credentials, owned (malloc'd strings, wiped when cleared). */
typedef struct Cred
{
	char  *access_key_id;
	char  *secret_access_key;
	char  *session_token; /* NULL: none */
	time_t expires;       /* 0: not temporary */
	time_t fetched;
	char   source[200]; /* where from, no secret */
} Cred;

extern void remora_cred_clear(Cred *c);
extern bool remora_cred_set(Cred *c, const char *akid, const char *secret,
							const char *token, time_t expires, time_t now);

/* The chain: the first source that has credentials (creds_chain.c). */
extern bool remora_creds_chain(const RemoraTargetConfig *cfg, time_t now,
							   Cred *out, char *errbuf, size_t errlen);

/* An answer to one request of a fetch. */
typedef struct CredsAnswer
{
	long   status;
	char  *body; /* NUL-terminated */
	size_t len;
} CredsAnswer;

/*
 * One blocking request (no proxy, no redirect, TLS as remora_creds_set_tls
 * says, timeout_ms at most).  False, errbuf set, when no answer came; an
 * answer of any status is true.  The caller frees out->body.
 */
extern bool remora_creds_request(const char *method, const char *url,
								 struct curl_slist *headers, const char *body,
								 long timeout_ms, CredsAnswer *out,
								 char *errbuf, size_t errlen);

/* STS (creds_fetch.c): a role assumed with base's credentials. */
extern bool remora_sts_assume_role(const RemoraTargetConfig *cfg,
								   const Cred *base, time_t now, Cred *out,
								   char *errbuf, size_t errlen);
/* ... and with a web identity token. */
extern bool remora_sts_web_identity(const RemoraTargetConfig *cfg,
									const char               *role_arn,
									const char *session_name, const char *token,
									time_t now, Cred *out, char *errbuf,
									size_t errlen);

/* STS's endpoint for cfg, malloc'd. */
extern char *remora_sts_url(const RemoraTargetConfig *cfg);

/* "2026-12-07T08:00:00Z" (fractions and a +00:00 allowed) as a time. */
extern bool remora_creds_parse_time(const char *s, time_t *out);

#endif /* REMORA_CREDS_INT_H */
