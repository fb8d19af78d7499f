/*-------------------------------------------------------------------------
 *
 * engine_int.h
 *	  Internals shared by the engine's files: requests on the curl multi
 *	  handle, S3 request construction, hashing with a resumable state.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_ENGINE_INT_H
#define REMORA_ENGINE_INT_H

#include <curl/curl.h>

#include "engine/engine.h"
#include "engine/sigv4.h"
#include "engine/util.h"

typedef struct Request Request;
typedef void (*RequestDone)(Request *req, CURLcode rc);

/* Response bodies kept for parsing (XML, error text) are capped. */
#define REQ_BODY_LIMIT (1024 * 1024)

/*
 * One HTTP exchange on the multi handle.  The engine calls done() once when
 * it ends (not when it is cancelled) and frees the request after done()
 * returns.
 */
struct Request
{
	RemoraEngine      *engine;
	void              *owner; /* the task, or NULL */
	CURL              *easy;
	struct curl_slist *headers;
	RequestDone        done;
	int                kind;  /* owner's own tag */
	int                index; /* owner's own tag (segment, part) */
	void              *data;  /* owner's own pointer (a buffer) */

	/* the response */
	long    status; /* HTTP status of the last response */
	char    etag[256];
	char    last_modified[64];
	char    content_range[128];
	char   *link_next;      /* a Link header's rel="next" target (malloc'd) */
	int64_t content_length; /* -1 if none */
	long    retry_after;    /* seconds, -1 if none */
	char   *body;           /* captured body (when not streamed) */
	size_t  body_len;
	size_t  body_cap;
	bool    body_truncated;

	/* streaming: when set, receives the body instead of the buffer above */
	size_t (*on_data)(Request *req, char *ptr, size_t len);
	bool policy_denied; /* a connection was refused by policy */
	char policy_why[256];

	bool     linked; /* on the multi handle and the list */
	Request *prev;
	Request *next;
};

struct RemoraEngine
{
	CURLM      *multi;
	int         epfd;
	long        timer_ms;       /* curl's timeout at timer_set, -1 = none */
	int64_t     timer_deadline; /* monotonic ms */
	int64_t     wake_deadline;  /* a task's own timer (a retry), -1 = none */
	Request    *requests;       /* every request on the multi handle */
	RemoraTask *tasks;          /* every task not yet freed */

	/* configuration */
	char            *base_url; /* scheme://host[:port] of the target */
	char            *host;     /* host[:port] as sent and signed */
	bool             https;
	bool             path_style;
	char            *region;
	char            *access_key_id;
	char            *secret_access_key;
	size_t           part_size;
	long             connect_timeout_ms;
	long             stall_timeout_ms;
	char            *user_agent;
	RemoraNetPolicy *policy;
};

/* loop.c */
extern Request *remora_req_new(RemoraEngine *engine, void *owner,
							   RequestDone done);
extern bool     remora_req_start(Request *req);
extern void     remora_req_cancel(Request *req);
extern int64_t  remora_now_ms(void);
extern void     remora_req_set_source_options(Request *req);

/* s3.c: a signed S3 request on bucket/key (key may be NULL for the bucket) */
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
	bool            unsigned_payload; /* sign as UNSIGNED-PAYLOAD */
	bool            head;             /* HEAD: no body expected */
} S3Call;

typedef struct S3Address
{
	char *url;  /* what curl requests */
	char *host; /* the Host header, as signed */
	char *path; /* the unencoded path that is signed */
} S3Address;

/* An S3 store other than the target (a source endpoint). */
typedef struct S3Endpoint
{
	const char *base_url;
	const char *host;
	bool        https;
	bool        path_style;
	const char *region;
	const char *access_key_id;
	const char *secret_access_key;
} S3Endpoint;

extern bool remora_s3_target_parse(const RemoraTargetConfig *cfg,
								   char **base_url, char **host, bool *https,
								   char *errbuf, size_t errlen);
extern bool remora_s3_address(const RemoraEngine *engine, const char *bucket,
							  const char *key, const RemoraKV *query,
							  int nquery, S3Address *out);
extern void remora_s3_address_free(S3Address *a);
extern Request *remora_s3_request(RemoraEngine *engine, void *owner,
								  const S3Call *call, RequestDone done,
								  char *errbuf, size_t errlen);
extern Request *remora_s3_request_to(RemoraEngine *engine, const S3Endpoint *ep,
									 void *owner, const S3Call *call,
									 RequestDone done, char *errbuf,
									 size_t errlen);
extern bool     remora_s3_failed(const Request *req, CURLcode rc,
								 RemoraTaskError *err, const char *what);
extern void     remora_md5_base64(const unsigned char md5[16], char out[25]);

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
extern bool  remora_s3_head_etag(const Request *req, CURLcode rc, int64_t size,
								 char *etag, size_t etaglen,
								 RemoraTaskError *err, const char *what);
extern bool  remora_etag_of_parts(const char *const *part_etags, int nparts,
								  char *dst, size_t dstlen);
extern char *remora_s3_answer_etag(const Request *req, const char *root,
								   RemoraTaskError *err, const char *what);

/* hash.c: SHA-256 whose state can be saved at a block boundary */
typedef struct RemoraSha256 RemoraSha256;

extern RemoraSha256 *remora_sha256_new(void);
extern void          remora_sha256_free(RemoraSha256 *s);
extern void          remora_sha256_reset(RemoraSha256 *s);
extern void remora_sha256_update(RemoraSha256 *s, const void *data, size_t len);
extern void remora_sha256_final_hex(RemoraSha256 *s, char out[65]);
extern bool remora_sha256_save(const RemoraSha256 *s, char *out, size_t outlen);
extern bool remora_sha256_restore(RemoraSha256 *s, const char *saved);
extern int64_t remora_sha256_bytes(const RemoraSha256 *s);

/* loop.c: a task wants to run again at this monotonic time */
extern void remora_engine_wake_at(RemoraEngine *engine, int64_t when_ms);

/* task.c */
extern char *remora_url_origin(const char *url);
extern void  remora_task_unlink_all(RemoraEngine *engine);
extern void  remora_task_pump_all(RemoraEngine *engine);

/* set.c: a set behind a task handle (task.c dispatches to these) */
typedef struct RemoraSet RemoraSet;

extern RemoraTask     *remora_task_shell(RemoraEngine *engine, RemoraSet *set);
extern void            remora_set_pump(RemoraSet *set);
extern RemoraTaskState remora_set_state(const RemoraSet *set);
extern void            remora_set_progress(const RemoraSet *set, int64_t *done,
										   int64_t *total);
extern bool remora_set_checkpoint(RemoraSet *set, RemoraTaskCheckpoint *out);
extern const RemoraTaskResult *remora_set_result(const RemoraSet *set);
extern const RemoraTaskError  *remora_set_error(const RemoraSet *set);
extern void                    remora_set_abort(RemoraSet *set);
extern void                    remora_set_free(RemoraSet *set);

#endif /* REMORA_ENGINE_INT_H */
