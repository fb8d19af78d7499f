/*-------------------------------------------------------------------------
 *
 * egress.c
 *	  What leaves the machine, request by request: TLS trust, the egress
 *	  proxy, the outbound policy on sources, and what a transport failure
 *	  is (class tls, never retried, or network).
 *
 * Every request verifies its peer against the configured CAs with TLS 1.2
 * at least (loop.c sets that up); a source request is judged by the
 * outbound policy on the address actually connected to (opensocket and
 * pre-request callbacks) or, through a proxy, on what its host resolves to
 * here before the proxy is asked (doc/security.md says what that can and
 * cannot see).  Proxy credentials never reach an error message.
 *
 *-------------------------------------------------------------------------
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem, strcasestr */
#endif
#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "engine/net/loop.h"

/*
 * The policy decision on the address actually connected to: every
 * connection of a source request, redirects included, comes through here.
 */
static curl_socket_t
opensocket_cb(void *clientp, curlsocktype purpose,
			  struct curl_sockaddr *address)
{
	Request *req = clientp;

	(void) purpose;
	if (!remora_netpolicy_allows(req->loop->policy, &address->addr,
								 req->policy_why, sizeof(req->policy_why)))
	{
		req->policy_denied = true;
		remora_netpolicy_address(&address->addr, req->policy_addr,
								 sizeof(req->policy_addr));
		return CURL_SOCKET_BAD;
	}
	req->policy_passed = true;
	return socket(address->family, address->socktype, address->protocol);
}

/*
 * The same decision again for every request, on the connection it is about
 * to be sent on: curl may hand a request a pooled connection that another
 * request opened (one to the target store, which the policy does not
 * judge), and then no socket is opened for it.
 */
static int
prereq_cb(void *clientp, char *primary_ip, char *local_ip, int primary_port,
		  int local_port)
{
	Request                *req = clientp;
	struct sockaddr_storage ss;
	struct sockaddr_in     *in4 = (struct sockaddr_in *) &ss;
	struct sockaddr_in6    *in6 = (struct sockaddr_in6 *) &ss;

	(void) local_ip;
	(void) local_port;
	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, primary_ip, &in4->sin_addr) == 1)
	{
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t) primary_port);
	}
	else if (inet_pton(AF_INET6, primary_ip, &in6->sin6_addr) == 1)
	{
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t) primary_port);
	}
	if (!remora_netpolicy_allows(req->loop->policy, (struct sockaddr *) &ss,
								 req->policy_why, sizeof(req->policy_why)))
	{
		req->policy_denied = true;
		remora_netpolicy_address((struct sockaddr *) &ss, req->policy_addr,
								 sizeof(req->policy_addr));
		return CURL_PREREQFUNC_ABORT;
	}
	return CURL_PREREQFUNC_OK;
}

/* NULL for NULL or "", else a copy; *ok false when out of memory */
static char *
dup_setting(const char *v, bool *ok)
{
	char *d;

	if (v == NULL || v[0] == '\0')
		return NULL;
	d = strdup(v);
	if (d == NULL)
		*ok = false;
	return d;
}

/*
 * TLS trust and egress proxies for every request started from now on (see
 * RemoraEngineConfig).  False when out of memory.
 */
bool
remora_loop_set_egress(RemoraLoop *loop, const char *ca_file,
					   const char *ca_path, const char *http_proxy,
					   const char *https_proxy, const char *no_proxy)
{
	bool ok = true;

	loop->ca_file = dup_setting(ca_file, &ok);
	loop->ca_path = dup_setting(ca_path, &ok);
	loop->http_proxy = dup_setting(http_proxy, &ok);
	loop->https_proxy = dup_setting(https_proxy, &ok);
	loop->no_proxy = dup_setting(no_proxy, &ok);
	return ok;
}

/*
 * Is host reached directly by no_proxy ("name,.domain,address"; "*": every
 * host)?  A name matches itself and its subdomains, case-insensitively; an
 * IPv6 address may be written with or without brackets.
 */
bool
remora_no_proxy_matches(const char *no_proxy, const char *host)
{
	const char *p = no_proxy;
	char        h[256];
	size_t      hl;

	if (no_proxy == NULL || host == NULL)
		return false;
	hl = strlen(host);
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']')
		host++, hl -= 2;
	if (hl == 0 || hl >= sizeof(h))
		return false;
	memcpy(h, host, hl);
	h[hl] = '\0';
	while (hl > 0 && h[hl - 1] == '.')
		h[--hl] = '\0';
	while (*p)
	{
		size_t n;

		p += strspn(p, ", \t");
		n = strcspn(p, ", \t");
		if (n == 0)
			break;
		{
			const char *e = p;
			size_t      en = n;

			if (en == 1 && e[0] == '*')
				return true;
			if (en >= 2 && e[0] == '[' && e[en - 1] == ']')
				e++, en -= 2;
			while (en > 0 && e[0] == '.')
				e++, en--;
			while (en > 0 && e[en - 1] == '.')
				en--;
			if (en > 0 && en <= hl && strncasecmp(h + hl - en, e, en) == 0 &&
				(en == hl || h[hl - en - 1] == '.'))
				return true;
		}
		p += n;
	}
	return false;
}

/*
 * The URL's scheme, host (without brackets) and port, by curl's own
 * parser, so that what is judged is what curl will ask for.  False when it
 * cannot be parsed.
 */
static bool
url_parts(const char *url, bool *https, char *host, size_t hostlen, int *port)
{
	CURLU *u = curl_url();
	char  *scheme = NULL;
	char  *h = NULL;
	char  *p = NULL;
	bool   ok = false;

	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) == CURLUE_OK)
	{
		size_t      n = strlen(h);
		const char *s = h;

		if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
			s++, n -= 2;
		*https = strcasecmp(scheme, "https") == 0;
		*port = atoi(p);
		ok = n > 0 && n < hostlen;
		if (ok)
		{
			memcpy(host, s, n);
			host[n] = '\0';
		}
	}
	curl_free(scheme);
	curl_free(h);
	curl_free(p);
	curl_url_cleanup(u);
	return ok;
}

/* The proxy a request for url goes through, or NULL: direct. */
static const char *
proxy_for(const RemoraLoop *loop, const char *url, char *host, size_t hostlen,
		  int *port)
{
	bool        https = false;
	const char *proxy;

	if (!url_parts(url, &https, host, hostlen, port))
		return NULL;
	proxy = https ? loop->https_proxy : loop->http_proxy;
	if (proxy == NULL || remora_no_proxy_matches(loop->no_proxy, host))
		return NULL;
	return proxy;
}

/*
 * The policy on a proxied request, before anything is sent: the proxy
 * connects, not us, so the addresses judged are those the URL's host
 * resolves to here (every one of them must be allowed).  A name that does
 * not resolve here is the proxy's to resolve (doc/security.md).
 *
 * The lookup blocks the worker's loop (libcurl's own resolver is not used
 * for it): a slow resolver stalls this worker's other transfers while it
 * answers.  Only proxied requests pay this; making it asynchronous (c-ares,
 * or a lookup thread) is left to do.
 */
static bool
proxied_allowed(Request *req, const char *host, int port)
{
	struct addrinfo  hints;
	struct addrinfo *res = NULL;
	char             service[16];
	bool             ok = true;

	if (!remora_netpolicy_port_allowed(req->loop->policy, port))
	{
		snprintf(req->policy_why, sizeof(req->policy_why),
				 "port %d is not in remora.allow_ports", port);
		req->policy_denied = true;
		return false;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(service, sizeof(service), "%d", port);
	if (getaddrinfo(host, service, &hints, &res) != 0)
		return true;
	for (const struct addrinfo *ai = res; ai && ok; ai = ai->ai_next)
		if (!remora_netpolicy_allows(req->loop->policy, ai->ai_addr,
									 req->policy_why, sizeof(req->policy_why)))
		{
			ok = false;
			remora_netpolicy_address(ai->ai_addr, req->policy_addr,
									 sizeof(req->policy_addr));
		}
	freeaddrinfo(res);
	if (!ok)
		req->policy_denied = true;
	return ok;
}

/*
 * Did the policy decide the failure of a request (rc)?  Only if no address
 * it allows was tried: a name with a denied address and an allowed one
 * (localhost as ::1 and 127.0.0.1, only the second allowed) that fails to
 * connect to the allowed one failed as the network does, and is retried.
 */
bool
remora_req_policy_refused(const Request *req, CURLcode rc)
{
	return rc != CURLE_OK && req->policy_denied && !req->policy_passed;
}

/*
 * Options for a request to a user-supplied location (url; every redirect
 * hop is a new request).  Direct: the policy is decided on the address
 * actually connected to (opensocket, prereq).  Through the egress proxy:
 * on the addresses the host resolves to here, now.  False, with
 * req->policy_denied and policy_why set, when the policy refuses it: the
 * request must not be started.
 */
bool
remora_req_set_source_options(Request *req, const char *url)
{
	char        host[256];
	int         port = 0;
	const char *proxy = proxy_for(req->loop, url, host, sizeof(host), &port);

	if (proxy == NULL)
	{
		curl_easy_setopt(req->easy, CURLOPT_OPENSOCKETFUNCTION, opensocket_cb);
		curl_easy_setopt(req->easy, CURLOPT_OPENSOCKETDATA, req);
		curl_easy_setopt(req->easy, CURLOPT_PREREQFUNCTION, prereq_cb);
		curl_easy_setopt(req->easy, CURLOPT_PREREQDATA, req);
		curl_easy_setopt(req->easy, CURLOPT_PROXY, "");
		return true;
	}
	if (!proxied_allowed(req, host, port))
		return false;
	req->proxied = true;
	curl_easy_setopt(req->easy, CURLOPT_PROXY, proxy);
	/*
	 * https:// through a CONNECT tunnel; http:// as a proxy request (the
	 * proxy sees its URL).  remora.no_proxy was applied above.
	 */
	curl_easy_setopt(req->easy, CURLOPT_NOPROXY, "");
	return true;
}

/*
 * The egress proxy for a request to a location the administrator chose
 * (the Hub's API), unless remora.no_proxy names its host.
 */
void
remora_req_set_proxy(Request *req, const char *url)
{
	char        host[256];
	int         port = 0;
	const char *proxy = proxy_for(req->loop, url, host, sizeof(host), &port);

	req->proxied = proxy != NULL;
	curl_easy_setopt(req->easy, CURLOPT_PROXY, proxy ? proxy : "");
	curl_easy_setopt(req->easy, CURLOPT_NOPROXY, "");
}

/* Trust these CAs (PEM) too, for this request (a source endpoint's). */
void
remora_req_set_ca_pem(Request *req, const char *pem)
{
	struct curl_blob blob;

	if (pem == NULL || pem[0] == '\0')
		return;
	blob.data = (void *) pem;
	blob.len = strlen(pem);
	blob.flags = CURL_BLOB_COPY;
	curl_easy_setopt(req->easy, CURLOPT_CAINFO_BLOB, &blob);
}

/*
 * Is this failure one that trying again cannot mend: the peer's
 * certificate or host name did not verify, a CA file could not be used,
 * or the two sides share no protocol version or cipher?  detail is curl's
 * error buffer.  A handshake the network cut (reset, timeout, an early
 * end of the stream) is not: it is retried like any network failure.
 */
bool
remora_curl_is_tls_failure(CURLcode rc, const char *detail)
{
	static const char *const protocol[] = {"wrong version number",
										   "unsupported protocol",
										   "no protocols available",
										   "protocol version",
										   "handshake failure",
										   "no shared cipher",
										   "certificate",
										   "unknown ca",
										   "bad ecpoint",
										   "sslv3 alert illegal parameter",
										   "packet length too long",
										   "record layer failure"};

	switch (rc)
	{
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_SSL_CIPHER:
		case CURLE_SSL_ISSUER_ERROR:
		case CURLE_SSL_CRL_BADFILE:
		case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		case CURLE_SSL_INVALIDCERTSTATUS:
			return true;
		case CURLE_SSL_CONNECT_ERROR:
			if (detail == NULL)
				return false;
			for (size_t i = 0; i < sizeof(protocol) / sizeof(protocol[0]); i++)
				if (strcasestr(detail, protocol[i]) != NULL)
					return true;
			return false;
		default:
			return false;
	}
}

/*
 * What kind of TLS failure (one remora_curl_is_tls_failure accepts) this
 * is, for its message's advice: a certificate that did not verify (trust
 * its CA), a server that answered without TLS (check the URL), or no
 * protocol version or cipher the two sides share.
 */
RemoraTlsFailure
remora_tls_failure_kind(CURLcode rc, const char *detail)
{
	static const char *const plain[] = {"wrong version number",
										"packet length too long",
										"record layer failure"};

	if (rc != CURLE_SSL_CONNECT_ERROR && rc != CURLE_SSL_CIPHER)
		return REMORA_TLS_CERTIFICATE;
	if (detail && (strcasestr(detail, "certificate") != NULL ||
				   strcasestr(detail, "unknown ca") != NULL))
		return REMORA_TLS_CERTIFICATE;
	for (size_t i = 0; detail && i < sizeof(plain) / sizeof(plain[0]); i++)
		if (strcasestr(detail, plain[i]) != NULL)
			return REMORA_TLS_PLAIN;
	return REMORA_TLS_PROTOCOL;
}

/*
 * Replace the user information of proxy_url ("user:password"), wherever it
 * appears in text, with "(redacted)"; text keeps its length or shrinks.
 */
void
remora_redact_userinfo(char *text, const char *proxy_url)
{
	const char *start;
	const char *at;
	size_t      n;
	char       *hit;
	const char  mark[] = "(redacted)";
	size_t      m = sizeof(mark) - 1;

	if (text == NULL || proxy_url == NULL ||
		(start = strstr(proxy_url, "://")) == NULL)
		return;
	start += 3;
	at = strchr(start, '@');
	if (at == NULL || at == start)
		return;
	n = (size_t) (at - start);
	while ((hit = memmem(text, strlen(text), start, n)) != NULL)
	{
		if (n < m)
			memset(hit, '*', n); /* too short for the mark */
		else
		{
			memcpy(hit, mark, m);
			memmove(hit + m, hit + n, strlen(hit + n) + 1);
		}
	}
}

/*
 * Describe in err a request curl could not complete (rc != CURLE_OK).  A
 * certificate or protocol failure (remora_curl_is_tls_failure) is class
 * tls, not retryable, and names the host, curl's reason and, as trust,
 * the setting that trusts a private CA for it; anything else is a
 * retryable network failure.  Proxy credentials never appear in it.
 */
void
remora_req_transport_error(const Request *req, CURLcode rc,
						   RemoraTaskError *err, const char *what,
						   const char *trust)
{
	const char *detail =
		req->curl_error[0] ? req->curl_error : curl_easy_strerror(rc);
	char *url = NULL;
	char  host[256] = "";
	bool  https = false;
	int   port = 0;

	memset(err, 0, sizeof(*err));
	err->retry_after = -1;
	err->curl_code = rc;
	curl_easy_getinfo(req->easy, CURLINFO_EFFECTIVE_URL, &url);
	if (url == NULL || !url_parts(url, &https, host, sizeof(host), &port))
		snprintf(host, sizeof(host), "the server");
	if (remora_curl_is_tls_failure(rc, req->curl_error))
	{
		RemoraTlsFailure kind = remora_tls_failure_kind(rc, req->curl_error);

		err->class = REMORA_ERR_TLS;
		err->retryable = false;
		if (kind == REMORA_TLS_CERTIFICATE)
			snprintf(err->message, sizeof(err->message),
					 "%.60s: TLS with %.100s failed: %.180s (a private CA: "
					 "trust it with %.90s)",
					 what, host, detail,
					 trust        ? trust
					 : req->trust ? req->trust
								  : "remora.ca_file");
		else
			snprintf(err->message, sizeof(err->message),
					 "%.60s: TLS with %.100s failed: %.180s (%s)", what, host,
					 detail,
					 kind == REMORA_TLS_PLAIN
						 ? "the server did not answer in TLS: is it an "
						   "http:// URL, or another port?"
						 : "the server and Remora share no TLS version or "
						   "cipher");
	}
	else
	{
		err->class = REMORA_ERR_NETWORK;
		err->retryable = true;
		snprintf(err->message, sizeof(err->message), "%.100s: %s%.300s", what,
				 req->proxied ? "through the proxy: " : "", detail);
	}
	remora_redact_userinfo(err->message, req->loop->http_proxy);
	remora_redact_userinfo(err->message, req->loop->https_proxy);
}
