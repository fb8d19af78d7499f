/*-------------------------------------------------------------------------
 *
 * sigv4.h
 *	  AWS Signature Version 4 for S3: header signing and presigned URLs.
 *
 * Pure functions over their arguments (the time is passed in), so that
 * they can be checked against AWS's published examples.  OpenSSL provides
 * SHA-256 and HMAC; everything else (canonical request, URI and query
 * encoding) is here because libcurl's CURLOPT_AWS_SIGV4 does not sort or
 * encode query strings and cannot presign.
 *
 * S3 rules, which differ from other services: the canonical URI is the
 * path URI-encoded once, '/' kept, no normalisation of "." or "..".
 *
 * No secret ever appears in an output except as a signature.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_SIGV4_H
#define REMORA_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

typedef struct RemoraSigV4Creds
{
	const char *access_key_id;
	const char *secret_access_key;
	const char *region;        /* e.g. "us-east-1" */
	const char *service;       /* "s3" */
	const char *session_token; /* temporary credentials' (NULL: none):
								* presigning puts it in the URL; header
								* signing leaves it to the caller, who
								* signs x-amz-security-token */
} RemoraSigV4Creds;

typedef struct RemoraKV
{
	const char *key;
	const char *value; /* NULL or "" for a valueless query key */
} RemoraKV;

typedef struct RemoraSigV4Request
{
	const char     *method; /* "GET", "PUT", ... */
	const char     *path;  /* unencoded absolute path, e.g. "/bucket/a b.txt" */
	const RemoraKV *query; /* unencoded query parameters, any order */
	int             nquery;
	const RemoraKV *headers; /* headers to sign; must include "host";
							  * names any case, values unfolded */
	int         nheaders;
	const char *payload_hash; /* lower-case hex SHA-256 of the body, or
							   * "UNSIGNED-PAYLOAD" */
} RemoraSigV4Request;

/*
 * URI-encode s (len bytes) per SigV4: A-Z a-z 0-9 '-' '_' '.' '~' are kept,
 * every other byte becomes %XX (upper-case hex); '/' is kept when
 * keep_slash.  Returns a malloc'd string, or NULL on allocation failure.
 */
extern char *remora_uri_encode(const char *s, size_t len, bool keep_slash);

/* Lower-case hex SHA-256 of data into out (65 bytes with the NUL). */
extern void remora_sha256_hex(const void *data, size_t len, char out[65]);

/*
 * Sign a request for the given time.  Writes into out:
 *	  authorization: the full Authorization header value
 *		("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...")
 *	  amz_date: the x-amz-date value ("YYYYMMDDTHHMMSSZ")
 * The caller must send x-amz-date and x-amz-content-sha256 (= payload_hash)
 * headers with these values, and should include both among req->headers so
 * that they are signed.  Returns false (with errbuf set) on bad input.
 */
typedef struct RemoraSigV4Result
{
	char authorization[1024];
	char amz_date[17];
} RemoraSigV4Result;

extern bool remora_sigv4_sign(const RemoraSigV4Request *req,
							  const RemoraSigV4Creds *creds, time_t now,
							  RemoraSigV4Result *out, char *errbuf,
							  size_t errlen);

/*
 * The intermediate strings, for tests and debugging: the canonical request
 * and the string to sign (each malloc'd; the caller frees).  x-amz-date is
 * taken from now.
 */
extern bool remora_sigv4_debug(const RemoraSigV4Request *req,
							   const RemoraSigV4Creds *creds, time_t now,
							   char **canonical_request, char **string_to_sign);

/*
 * Presign a request (query-string authentication, payload UNSIGNED-PAYLOAD,
 * SignedHeaders=host): returns the malloc'd query string to append after
 * '?' (the request's own query parameters included, X-Amz-Signature last),
 * e.g. "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=...&
 * X-Amz-Date=...&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&
 * X-Amz-Signature=...".  expires_seconds must be 1..604800.  req->headers
 * must contain "host".
 */
extern char *remora_sigv4_presign(const RemoraSigV4Request *req,
								  const RemoraSigV4Creds *creds, time_t now,
								  int expires_seconds, char *errbuf,
								  size_t errlen);

#endif /* REMORA_SIGV4_H */
