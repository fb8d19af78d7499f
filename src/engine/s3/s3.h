/*-------------------------------------------------------------------------
 *
 * s3.h
 *	  Signed S3 requests on the loop, the classification of their
 *	  failures, and the ETags of different stores' dialects.
 *
 * Knows S3 and the loop; nothing of transfers, sets or the engine.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_S3_H
#define REMORA_S3_H

#include "engine/engine.h"
#include "engine/net/loop.h"
#include "engine/s3/sigv4.h"

/*
 * An S3 request on bucket/key (key may be NULL for the bucket), signed
 * unless its endpoint is anonymous.
 */
typedef struct S3Call
{
	const char     *method;
	const char     *bucket;
	const char     *key;
	const RemoraKV *query;
	int             nquery;
	const RemoraKV *headers; /* extra headers, signed */
	int             nheaders;
	const char     *body; /* not copied: must outlive the request */
	size_t          body_len;
	const char     *payload_sha256; /* the body's SHA-256 in hex, taken by
									 * the caller; NULL: hashed here */
	bool head;                      /* HEAD: no body expected */

	/*
	 * What the target's encryption needs to know (S3Sse): the storage
	 * class of an object it creates (NULL: the engine's), and whether a
	 * copy's source is an object Remora wrote there (with SSE-C, the
	 * copy then sends that object's key too) rather than a user's.
	 */
	const char *storage_class;
	bool        copy_source_ours;
} S3Call;

/*
 * How the target encrypts what is written to it, and in which storage
 * class (RemoraSseConfig, checked): the headers each kind of request
 * carries follow from it (s3.c, sse_headers).  NULL fields: none.
 */
typedef struct S3Sse
{
	char *sse;              /* "AES256", "aws:kms", "customer" */
	char *kms_key_id;       /* with aws:kms */
	char *customer_key;     /* with customer: base64 of 32 bytes */
	char  customer_md5[32]; /* base64 of the key's MD5 */
	char *storage_class;
} S3Sse;

extern S3Sse *remora_s3_sse_new(const RemoraSseConfig *cfg, char *errbuf,
								size_t errlen);
extern void   remora_s3_sse_free(S3Sse *sse);
/* the encryption and storage-class headers of call, into h (room for 8) */
extern int remora_s3_sse_headers(const S3Sse *sse, const S3Call *call,
								 RemoraKV *h);

typedef struct S3Address
{
	char *url;  /* what curl requests */
	char *host; /* the Host header, as signed */
	char *path; /* the unencoded path that is signed */
} S3Address;

/* An S3 store other than the target (a source endpoint). */
typedef struct S3Endpoint
{
	const char               *base_url;
	const char               *host;
	bool                      https;
	bool                      path_style;
	const char               *region;
	const RemoraTargetConfig *auth; /* where its credentials come from
									 * (creds.h) */
	const char  *ca_pem; /* its own CAs (PEM) besides remora.ca_file, or NULL */
	const char  *trust;  /* the setting that trusts its CA, for messages */
	bool         anonymous; /* no credentials: requests go unsigned */
	const S3Sse *sse;       /* the target's encryption; NULL: a source's */
} S3Endpoint;

extern bool remora_s3_target_parse(const RemoraTargetConfig *cfg,
								   char **base_url, char **host, bool *https,
								   char *errbuf, size_t errlen);
extern bool remora_s3_address(const S3Endpoint *ep, const char *bucket,
							  const char *key, const RemoraKV *query,
							  int nquery, S3Address *out);
extern void remora_s3_address_free(S3Address *a);
/* x-amz-copy-source of bucket/key, malloc'd (NULL: out of memory) */
extern char    *remora_s3_copy_source(const char *bucket, const char *key);
extern Request *remora_s3_request(RemoraLoop *loop, const S3Endpoint *ep,
								  void *owner, const S3Call *call,
								  RequestDone done, char *errbuf,
								  size_t errlen);
/* The same, started; NULL (errbuf set) when it could not be. */
extern Request *remora_s3_start(RemoraLoop *loop, const S3Endpoint *ep,
								void *owner, const S3Call *call,
								RequestDone done, char *errbuf, size_t errlen);
extern bool     remora_s3_failed(const Request *req, CURLcode rc,
								 RemoraTaskError *err, const char *what);

/*
 * ETags differ in form between stores and answers: quoted in headers and
 * listings, unquoted in some copy answers, entity-quoted where nothing
 * decoded the XML.  Canonical form: one pair of plain quotes around the
 * value.  Equality ignores the case of hex digits.
 */
#define REMORA_ETAG_MAX 256
extern void  remora_etag_canon(const char *src, char *dst, size_t dstlen);
extern bool  remora_etag_equal(const char *a, const char *b);
extern bool  remora_etag_is_md5(const char *etag);
extern bool  remora_etag_is_multipart(const char *etag, int nparts);
extern bool  remora_etag_fits_parts(const char        *etag,
									const char *const *part_etags, int nparts);
extern bool  remora_s3_put_etag(const Request *req, CURLcode rc, char *etag,
								size_t etaglen, RemoraTaskError *err,
								const char *what);
extern bool  remora_s3_head_etag(const Request *req, CURLcode rc, int64_t size,
								 char *etag, size_t etaglen,
								 RemoraTaskError *err, const char *what);
extern bool  remora_etag_of_parts(const char *const *part_etags, int nparts,
								  char *dst, size_t dstlen);
extern char *remora_s3_answer_etag(const Request *req, const char *root,
								   RemoraTaskError *err, const char *what);

#endif /* REMORA_S3_H */
