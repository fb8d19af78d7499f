/*-------------------------------------------------------------------------
 *
 * loop.h
 *	  The curl multi loop: requests, sockets in an epoll set, timers.
 *
 * The lowest layer of the engine's transfers.  It knows HTTP exchanges and
 * nothing of S3, transfers, sets or the Hub: what runs above it registers
 * a hook, called after every run once the finished requests have been
 * handed to their owners (where work that may not start inside a curl
 * callback is started).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_LOOP_H
#define REMORA_LOOP_H

#include <curl/curl.h>

#include "engine/engine.h"
#include "engine/common/http_headers.h"
#include "engine/common/netpolicy.h"

typedef struct RemoraLoop RemoraLoop;
typedef struct Request    Request;

/*
 * A byte-rate cap shared by the requests that point to it (their response
 * bodies): a token bucket that may go into debt by the chunk that emptied
 * it, refilled at max_rate bytes a second up to a tenth of a second's
 * worth.  A request that finds it empty is paused (CURL_WRITEFUNC_PAUSE)
 * and resumed by the loop once it has refilled.  Its owner keeps it alive
 * while any request points to it.
 */
typedef struct RemoraRate
{
	int64_t max_rate; /* bytes a second; 0: no cap */
	double  tokens;   /* bytes that may be taken now; < 0: debt */
	int64_t at_ms;    /* when tokens was last refilled (monotonic) */
} RemoraRate;
typedef void (*RequestDone)(Request *req, CURLcode rc);
typedef void (*RemoraLoopHook)(void *arg);

/* Response bodies kept for parsing (XML, error text) are capped. */
#define REQ_BODY_LIMIT (1024 * 1024)

/*
 * One HTTP exchange on the multi handle.  The loop calls done() once when
 * it ends (not when it is cancelled) and frees the request after done()
 * returns.
 */
struct Request
{
	RemoraLoop        *loop;
	void              *owner; /* who cancels it (a job), or NULL */
	CURL              *easy;
	struct curl_slist *headers;
	RequestDone        done;
	int                kind;  /* owner's own tag */
	int                index; /* owner's own tag (a part number) */
	void              *data;  /* owner's own pointer (a buffer) */

	/* the response */
	long              status; /* HTTP status of the last response */
	RemoraHttpHeaders hdr;
	char             *body; /* captured body (when not streamed) */
	size_t            body_len;
	size_t            body_cap;
	bool              body_truncated;

	/* streaming: when set, receives the body instead of the buffer above */
	size_t (*on_data)(Request *req, char *ptr, size_t len);
	bool        policy_denied;   /* a connection was refused by policy */
	bool        policy_passed;   /* and one to an address it allows was tried */
	char        policy_why[256]; /* the rule that refused it */
	char        policy_addr[64]; /* the address it refused, for the log */
	bool        proxied;         /* sent through an egress proxy */
	const char *trust;  /* the setting that trusts its CA, for messages */
	const char *region; /* an S3 request's region (its endpoint's), or NULL */
	char        curl_error[CURL_ERROR_SIZE]; /* curl's own words on a failure */
	RemoraRate *rate;        /* the cap on its body, or NULL; not owned */
	bool        rate_paused; /* paused by that cap (not by its owner) */

	/*
	 * Asked when the exchange ended, before done(): true if it sent the
	 * request again instead (remora_req_resend), so that done() waits for
	 * that answer (s3.c: a store that said the credentials had expired).
	 * again_arg is freed with the request by again_free.  NULL: never.
	 */
	bool (*again)(Request *req);
	void *again_arg;
	void (*again_free)(void *arg);

	bool     linked; /* on the multi handle and the list */
	Request *prev;
	Request *next;
};

#define REMORA_LOOP_HOOKS 4

struct RemoraLoop
{
	CURLM   *multi;
	int      epfd;
	long     timer_ms;       /* curl's timeout at timer_set, -1 = none */
	int64_t  timer_deadline; /* monotonic ms */
	int64_t  wake_deadline;  /* a client's own timer (a retry), -1 = none */
	Request *requests;       /* every request on the multi handle */

	RemoraLoopHook hooks[REMORA_LOOP_HOOKS];
	void          *hook_args[REMORA_LOOP_HOOKS];
	int            nhooks;

	/* configuration */
	long                   connect_timeout_ms;
	long                   stall_timeout_ms;
	char                  *user_agent;
	const RemoraNetPolicy *policy; /* for source requests; not owned */

	/* TLS trust and egress proxies (engine.h), owned; NULL: none */
	char *ca_file;
	char *ca_path;
	char *http_proxy;
	char *https_proxy;
	char *no_proxy;
};

extern bool    remora_loop_init(RemoraLoop *loop, const char *user_agent,
								long connect_timeout_ms, long stall_timeout_ms,
								const RemoraNetPolicy *policy);
extern void    remora_loop_destroy(RemoraLoop *loop);
extern void    remora_loop_set_host_cap(RemoraLoop *loop, int max_per_host);
extern bool    remora_loop_add_hook(RemoraLoop *loop, RemoraLoopHook hook,
									void *arg);
extern long    remora_loop_timeout_ms(const RemoraLoop *loop);
extern void    remora_loop_run(RemoraLoop *loop);
extern void    remora_loop_wake_at(RemoraLoop *loop, int64_t when_ms);
extern int64_t remora_now_ms(void);
extern void    remora_rate_set(RemoraRate *rate, int64_t max_rate);

extern Request *remora_req_new(RemoraLoop *loop, void *owner, RequestDone done);
extern bool     remora_req_start(Request *req);
/* Send a finished request again with new headers (from its again hook). */
extern bool remora_req_resend(Request *req, struct curl_slist *headers);
extern void remora_req_cancel(Request *req);
extern void remora_req_cancel_owner(RemoraLoop *loop, const void *owner);
extern bool remora_loop_set_egress(RemoraLoop *loop, const char *ca_file,
								   const char *ca_path, const char *http_proxy,
								   const char *https_proxy,
								   const char *no_proxy);
extern bool remora_req_set_source_options(Request *req, const char *url);
extern bool remora_req_policy_refused(const Request *req, CURLcode rc);
extern void remora_req_set_proxy(Request *req, const char *url);
extern void remora_req_set_ca_pem(Request *req, const char *pem);
extern void remora_req_transport_error(const Request *req, CURLcode rc,
									   RemoraTaskError *err, const char *what,
									   const char *trust);

/* Pure helpers, for the unit tests too. */
typedef enum RemoraTlsFailure
{
	REMORA_TLS_CERTIFICATE, /* did not verify: trust its CA */
	REMORA_TLS_PLAIN,       /* the server answered without TLS */
	REMORA_TLS_PROTOCOL     /* no version or cipher in common */
} RemoraTlsFailure;

extern bool remora_curl_is_tls_failure(CURLcode rc, const char *detail);
extern RemoraTlsFailure remora_tls_failure_kind(CURLcode    rc,
												const char *detail);
extern bool remora_no_proxy_matches(const char *no_proxy, const char *host);
extern void remora_redact_userinfo(char *text, const char *proxy_url);

#endif /* REMORA_LOOP_H */
