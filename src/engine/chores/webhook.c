/*-------------------------------------------------------------------------
 *
 * webhook.c
 *	  One try of a webhook: a signed POST on the engine's multi handle.
 *
 * The headers follow the Standard Webhooks convention: webhook-id (the
 * same on every try), webhook-timestamp (unix seconds of this try) and
 * webhook-signature "v1,<base64 HMAC-SHA256 of id.timestamp.body>", keyed
 * by the owner's 32-byte secret.  The URL was judged by the outbound-source
 * policy at submit; it is judged again here, on the address connected to,
 * with the egress proxy of a source request (remora_req_set_source_options).
 * No redirect is followed.  The engine does not retry: its host records
 * the try and asks again when the database says it is due.
 *
 *-------------------------------------------------------------------------
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "engine/core/engine_int.h"

/* A receiver has this long to answer unless told (remora.webhook_timeout) */
#define WEBHOOK_TIMEOUT_MS 30000L

struct RemoraWebhook
{
	const RemoraEngine *engine; /* its log, for a policy's refusal */
	Request            *req;    /* NULL once ended */
	bool                done;   /* ended: the fields below are set */
	long                status;
	bool                retry;
	char                error[256];
};

/*
 * The signature header's value for a webhook: "v1," and the base64 of
 * HMAC-SHA256(key, id "." timestamp "." body).  False if it does not fit
 * out or OpenSSL failed.
 */
bool
remora_webhook_signature(const unsigned char *key, size_t keylen,
						 const char *id, long long timestamp, const char *body,
						 char *out, size_t outlen)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int  maclen = 0;
	size_t        len = strlen(id) + strlen(body) + 32;
	char         *msg;
	int           n;
	bool          ok;

	if (keylen > INT_MAX || outlen < 3 + 44 + 1 || (msg = malloc(len)) == NULL)
		return false;
	n = snprintf(msg, len, "%s.%lld.%s", id, timestamp, body);
	ok = n > 0 && (size_t) n < len &&
		 HMAC(EVP_sha256(), key, (int) keylen, (const unsigned char *) msg,
			  (size_t) n, mac, &maclen) != NULL &&
		 maclen == 32;
	free(msg);
	if (ok)
	{
		memcpy(out, "v1,", 3);
		EVP_EncodeBlock((unsigned char *) out + 3, mac, (int) maclen);
	}
	OPENSSL_cleanse(mac, sizeof(mac));
	return ok;
}

static void
ended(RemoraWebhook *w, long status, bool retry, const char *error)
{
	w->req = NULL;
	w->done = true;
	w->status = status;
	w->retry = retry;
	snprintf(w->error, sizeof(w->error), "%.255s", error ? error : "");
}

/*
 * Worth trying again: a 5xx answer, or a transport failure that is not the
 * policy's refusal nor a certificate the receiver cannot mend by waiting
 * (a timeout, a reset, a refused connection, a name that did not resolve).
 */
static void
post_done(Request *req, CURLcode rc)
{
	RemoraWebhook *w = req->data;

	if (rc == CURLE_OK)
	{
		char error[64] = "";

		if (req->status < 200 || req->status > 299)
			snprintf(error, sizeof(error), "the receiver answered HTTP %ld",
					 req->status);
		ended(w, req->status, req->status >= 500, error);
	}
	else if (remora_req_policy_refused(req, rc))
	{
		char error[300];

		snprintf(error, sizeof(error),
				 "the outbound-source policy refused the connection: %.200s",
				 remora_engine_refused(w->engine, req));
		ended(w, 0, false, error);
	}
	else
	{
		char error[256];

		snprintf(error, sizeof(error), "%.255s",
				 req->curl_error[0] ? req->curl_error : curl_easy_strerror(rc));
		ended(w, 0, !remora_curl_is_tls_failure(rc, req->curl_error), error);
	}
}

/*
 * Start one try: POST body (JSON) to url with the webhook's headers,
 * signed with key at timestamp.  NULL with errbuf set if it could not
 * start (then nothing was sent).
 */
RemoraWebhook *
remora_webhook_post(RemoraEngine *engine, const char *url, const char *id,
					const unsigned char *key, size_t keylen,
					long long timestamp, const char *body, long timeout_ms,
					char *errbuf, size_t errlen)
{
	RemoraWebhook *w = calloc(1, sizeof(RemoraWebhook));
	Request       *req = w ? remora_req_new(&engine->loop, w, post_done) : NULL;
	char           line[400];
	char           sig[64];

	if (req == NULL)
	{
		free(w);
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return NULL;
	}
	req->data = w;
	w->engine = engine;
	w->req = req;
	if (!remora_webhook_signature(key, keylen, id, timestamp, body, sig,
								  sizeof(sig)) ||
		strlen(id) > 300)
	{
		remora_req_cancel(req);
		free(w);
		remora_errbuf_set(errbuf, errlen, "the webhook could not be signed");
		return NULL;
	}
	req->headers =
		curl_slist_append(req->headers, "Content-Type: application/json");
	snprintf(line, sizeof(line), "webhook-id: %s", id);
	req->headers = curl_slist_append(req->headers, line);
	snprintf(line, sizeof(line), "webhook-timestamp: %lld", timestamp);
	req->headers = curl_slist_append(req->headers, line);
	snprintf(line, sizeof(line), "webhook-signature: %s", sig);
	req->headers = curl_slist_append(req->headers, line);
	/* no "Expect: 100-continue" round trip before a small body */
	req->headers = curl_slist_append(req->headers, "Expect:");
	curl_easy_setopt(req->easy, CURLOPT_URL, url);
	curl_easy_setopt(req->easy, CURLOPT_COPYPOSTFIELDS, body);
	curl_easy_setopt(req->easy, CURLOPT_TIMEOUT_MS,
					 timeout_ms > 0 ? timeout_ms : WEBHOOK_TIMEOUT_MS);
	if (req->headers == NULL || !remora_req_set_source_options(req, url) ||
		!remora_req_start(req))
	{
		bool denied = req->policy_denied;

		remora_errbuf_set(errbuf, errlen, "%s",
						  denied ? remora_engine_refused(engine, req)
								 : "the request could not be started");
		remora_req_cancel(req);
		free(w);
		return NULL;
	}
	return w;
}

/*
 * Has the try ended?  Then *status is the HTTP status (0: no answer),
 * *retry whether it is worth trying again, *error what went wrong ("" for
 * a 2xx answer).
 */
bool
remora_webhook_ended(const RemoraWebhook *w, long *status, bool *retry,
					 const char **error)
{
	if (!w->done)
		return false;
	*status = w->status;
	*retry = w->retry;
	*error = w->error;
	return true;
}

/* Free a try, cancelling it if it has not ended. */
void
remora_webhook_free(RemoraWebhook *w)
{
	if (w == NULL)
		return;
	if (w->req)
		remora_req_cancel(w->req);
	free(w);
}
