/*-------------------------------------------------------------------------
 *
 * s3.c
 *	  Signed S3 requests and the classification of their failures.
 *
 * Addressing is path-style (endpoint/bucket/key) or virtual-host style
 * (bucket.endpoint/key).  The Host header is set explicitly to the value
 * that was signed.  Every body is signed with its SHA-256, which the store
 * checks: parts and objects with the one their caller took while the bytes
 * came in, small bodies (XML, manifests) hashed here.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "engine/s3/creds.h"
#include "engine/s3/s3.h"
#include "engine/s3/s3xml.h"
#include "engine/common/util.h"

#define MAX_SIGNED_HEADERS 16

/* "k=v&k2" with SigV4 encoding, in the given order */
static char *
encode_query(const RemoraKV *query, int n)
{
	size_t cap = 1;
	char  *out;
	char **parts = calloc(2 * (n + 1), sizeof(char *));

	if (parts == NULL)
		return NULL;
	for (int i = 0; i < n; i++)
	{
		parts[2 * i] =
			remora_uri_encode(query[i].key, strlen(query[i].key), false);
		parts[2 * i + 1] =
			query[i].value && query[i].value[0]
				? remora_uri_encode(query[i].value, strlen(query[i].value),
									false)
				: strdup("");
		if (parts[2 * i] == NULL || parts[2 * i + 1] == NULL)
		{
			cap = 0;
			break;
		}
		cap += strlen(parts[2 * i]) + strlen(parts[2 * i + 1]) + 2;
	}
	out = cap ? malloc(cap) : NULL;
	if (out)
	{
		out[0] = '\0';
		for (int i = 0; i < n; i++)
		{
			if (i > 0)
				strcat(out, "&");
			strcat(out, parts[2 * i]);
			if (query[i].value && query[i].value[0])
			{
				strcat(out, "=");
				strcat(out, parts[2 * i + 1]);
			}
		}
	}
	for (int i = 0; i < 2 * n; i++)
		free(parts[i]);
	free(parts);
	return out;
}

/*
 * The target's base URL (scheme://host[:port]) and Host header value, from
 * the configured endpoint; an empty endpoint is AWS S3 in the region.
 * Both strings are malloc'd.
 */
bool
remora_s3_target_parse(const RemoraTargetConfig *cfg, char **base_url,
					   char **host, bool *https, char *errbuf, size_t errlen)
{
	const char *endpoint = cfg->endpoint;
	char        aws[128];
	const char *authority;

	*base_url = *host = NULL;
	if (endpoint == NULL || endpoint[0] == '\0')
	{
		snprintf(aws, sizeof(aws), "https://s3.%s.amazonaws.com",
				 cfg->region ? cfg->region : "us-east-1");
		endpoint = aws;
	}
	if (strncmp(endpoint, "http://", 7) != 0 &&
		strncmp(endpoint, "https://", 8) != 0)
	{
		snprintf(errbuf, errlen,
				 "the target endpoint must be an http:// or https:// URL");
		return false;
	}
	*https = strncmp(endpoint, "https://", 8) == 0;
	authority = endpoint + (*https ? 8 : 7);
	*host = strndup(authority, strcspn(authority, "/"));
	*base_url =
		strndup(endpoint, (authority - endpoint) + strcspn(authority, "/"));
	if (*host == NULL || *base_url == NULL || (*host)[0] == '\0')
	{
		free(*host);
		free(*base_url);
		*base_url = *host = NULL;
		snprintf(errbuf, errlen, "the target endpoint has no host");
		return false;
	}
	return true;
}

/*
 * Where a request on bucket/key goes: the URL, the Host header, and the
 * path that is signed.  Path style: endpoint/bucket/key; virtual-host
 * style: bucket.endpoint/key.  key NULL addresses the bucket itself.  The
 * key is URI-encoded once, '/' kept, exactly as the signature encodes it.
 */
static bool
address_of(const char *base_url, const char *ehost, bool https, bool path_style,
		   const char *bucket, const char *key, const RemoraKV *query,
		   int nquery, S3Address *out)
{
	const char *k = key ? key : "";
	char       *enc_key = remora_uri_encode(k, strlen(k), true);
	char       *q = encode_query(query, nquery);
	size_t      n;

	memset(out, 0, sizeof(*out));
	if (enc_key == NULL || q == NULL)
	{
		free(enc_key);
		free(q);
		return false;
	}
	n = strlen(base_url) + strlen(bucket) + strlen(enc_key) + strlen(q) + 16;
	out->url = malloc(n);
	out->path = malloc(strlen(bucket) + strlen(k) + 3);
	out->host = malloc(strlen(ehost) + strlen(bucket) + 2);
	if (out->url && out->path && out->host)
	{
		if (path_style)
		{
			/* a bucket-level request is "/bucket", an object's "/bucket/key" */
			snprintf(out->url, n, "%s/%s%s%s%s%s", base_url, bucket,
					 key ? "/" : "", enc_key, q[0] ? "?" : "", q);
			sprintf(out->path, "/%s%s%s", bucket, key ? "/" : "", k);
			strcpy(out->host, ehost);
		}
		else
		{
			snprintf(out->url, n, "%s://%s.%s/%s%s%s", https ? "https" : "http",
					 bucket, ehost, enc_key, q[0] ? "?" : "", q);
			sprintf(out->path, "/%s", k);
			sprintf(out->host, "%s.%s", bucket, ehost);
		}
	}
	free(enc_key);
	free(q);
	if (!out->url || !out->path || !out->host)
	{
		remora_s3_address_free(out);
		return false;
	}
	return true;
}

/*
 * A presigned GET URL for bucket/key, valid for expires seconds from now
 * (1..604800); for an anonymous store the plain URL, which carries no
 * credential of any kind.  Returns a malloc'd URL, or NULL with errbuf set.
 */
char *
remora_s3_presign_get(const RemoraTargetConfig *cfg, const char *bucket,
					  const char *key, time_t now, int expires, char *errbuf,
					  size_t errlen)
{
	char              *base_url;
	char              *host;
	bool               https;
	S3Address          addr;
	RemoraKV           headers[1];
	RemoraSigV4Creds   creds;
	RemoraCreds        c;
	RemoraSigV4Request req;
	char              *query;
	char              *url = NULL;

	if (!remora_s3_target_parse(cfg, &base_url, &host, &https, errbuf, errlen))
		return NULL;
	if (!address_of(base_url, host, https, cfg->path_style, bucket, key, NULL,
					0, &addr))
	{
		snprintf(errbuf, errlen, "out of memory");
		free(base_url);
		free(host);
		return NULL;
	}
	if (cfg->anonymous)
	{
		url = addr.url;
		addr.url = NULL;
		remora_s3_address_free(&addr);
		free(base_url);
		free(host);
		return url;
	}
	if (!remora_creds_get(cfg, now, &c, errbuf, errlen))
	{
		remora_s3_address_free(&addr);
		free(base_url);
		free(host);
		return NULL;
	}
	headers[0] = (RemoraKV){"host", addr.host};
	creds = (RemoraSigV4Creds){c.access_key_id, c.secret_access_key,
							   cfg->region, "s3", c.session_token};
	req = (RemoraSigV4Request){"GET", addr.path,         NULL, 0, headers,
							   1,     "UNSIGNED-PAYLOAD"};
	query = remora_sigv4_presign(&req, &creds, now, expires, errbuf, errlen);
	if (query)
	{
		size_t n = strlen(addr.url) + strlen(query) + 2;

		url = malloc(n);
		if (url)
			snprintf(url, n, "%s?%s", addr.url, query);
		else
			snprintf(errbuf, errlen, "out of memory");
	}
	free(query);
	remora_s3_address_free(&addr);
	free(base_url);
	free(host);
	return url;
}

/*
 * The value of x-amz-copy-source for an object: "/bucket/key", the key
 * URI-encoded with its slashes kept, as S3 asks.
 */
char *
remora_s3_copy_source(const char *bucket, const char *key)
{
	char  *enc = remora_uri_encode(key, strlen(key), true);
	size_t n = strlen(bucket) + (enc ? strlen(enc) : 0) + 3;
	char  *src = enc ? malloc(n) : NULL;

	if (src)
		snprintf(src, n, "/%s/%s", bucket, enc);
	free(enc);
	return src;
}

void
remora_s3_address_free(S3Address *a)
{
	free(a->url);
	free(a->path);
	free(a->host);
	memset(a, 0, sizeof(*a));
}

bool
remora_s3_address(const S3Endpoint *ep, const char *bucket, const char *key,
				  const RemoraKV *query, int nquery, S3Address *out)
{
	return address_of(ep->base_url, ep->host, ep->https, ep->path_style, bucket,
					  key, query, nquery, out);
}

/*
 * CreateMultipartUpload is the one request whose repeat makes something
 * new: a second upload, and the first, whose id nobody learns, keeps its
 * parts invisible to every listing of objects (under a committed attempt
 * no cleanup looks for it).  libcurl sends a request again by itself when
 * a reused connection closes before any byte of the answer, though the
 * store may have carried it out; on a connection of its own it never
 * does, and a lost answer fails the attempt, whose cleanup aborts the
 * upload.
 */
static bool
creates_upload(const S3Call *call)
{
	if (strcmp(call->method, "POST") != 0)
		return false;
	for (int i = 0; i < call->nquery; i++)
		if (strcmp(call->query[i].key, "uploads") == 0)
			return true;
	return false;
}

/* ----------------------------------------------------------------
 * Signed requests
 * ----------------------------------------------------------------
 */

/*
 * What a request is signed from, kept with it so that it can be signed
 * again (with new credentials) and sent again: copies of everything its
 * caller's S3Call pointed to, but the body.
 */
typedef struct S3Signing
{
	const S3Endpoint *ep;
	char             *method;
	char             *path;
	char             *host;
	char              payload_hash[65];
	RemoraKV         *query;
	int               nquery;
	RemoraKV         *headers; /* the caller's and the encryption's */
	int               nheaders;
	char              signed_with[128]; /* the access key id used */
	bool              resent;
} S3Signing;

static void
signing_free(void *arg)
{
	S3Signing *s = arg;

	if (s == NULL)
		return;
	for (int i = 0; i < s->nquery; i++)
	{
		free((char *) s->query[i].key);
		free((char *) s->query[i].value);
	}
	for (int i = 0; i < s->nheaders; i++)
	{
		free((char *) s->headers[i].key);
		/* an SSE-C key is among the values */
		if (s->headers[i].value)
			OPENSSL_cleanse((char *) s->headers[i].value,
							strlen(s->headers[i].value));
		free((char *) s->headers[i].value);
	}
	free(s->query);
	free(s->headers);
	free(s->method);
	free(s->path);
	free(s->host);
	free(s);
}

static bool
copy_kvs(const RemoraKV *from, int n, const RemoraKV *more, int nmore,
		 RemoraKV **to, int *nto)
{
	*nto = 0;
	*to = calloc(n + nmore + 1, sizeof(RemoraKV));
	if (*to == NULL)
		return false;
	for (int i = 0; i < n + nmore; i++)
	{
		const RemoraKV *kv = i < n ? &from[i] : &more[i - n];

		(*to)[i].key = strdup(kv->key);
		(*to)[i].value = strdup(kv->value ? kv->value : "");
		(*nto)++;
		if ((*to)[i].key == NULL || (*to)[i].value == NULL)
			return false;
	}
	return true;
}

static S3Signing *
signing_new(const S3Endpoint *ep, const S3Call *call, const S3Address *addr)
{
	S3Signing *s = calloc(1, sizeof(S3Signing));
	RemoraKV   sse[8];
	int        nsse = ep->sse ? remora_s3_sse_headers(ep->sse, call, sse) : 0;

	if (s == NULL)
		return NULL;
	s->ep = ep;
	s->method = strdup(call->method);
	s->path = strdup(addr->path);
	s->host = strdup(addr->host);
	if (call->payload_sha256)
		snprintf(s->payload_hash, sizeof(s->payload_hash), "%s",
				 call->payload_sha256);
	else
		remora_sha256_hex(call->body ? call->body : "", call->body_len,
						  s->payload_hash);
	if (!s->method || !s->path || !s->host ||
		!copy_kvs(call->query, call->nquery, NULL, 0, &s->query, &s->nquery) ||
		!copy_kvs(call->headers, call->nheaders, sse, nsse, &s->headers,
				  &s->nheaders))
	{
		signing_free(s);
		return NULL;
	}
	return s;
}

static bool
append_header(struct curl_slist **list, const char *name, const char *value)
{
	size_t             n = strlen(name) + strlen(value) + 3;
	char              *line = malloc(n);
	struct curl_slist *l;

	if (line == NULL)
		return false;
	snprintf(line, n, "%s: %s", name, value);
	l = curl_slist_append(*list, line);
	OPENSSL_cleanse(line, n);
	free(line);
	if (l == NULL)
		return false;
	*list = l;
	return true;
}

/*
 * The request's headers, signed now with the credentials its endpoint has
 * now (an anonymous endpoint's unsigned: neither an Authorization header
 * nor x-amz-date, so that a public bucket reads it as anyone's).  NULL,
 * errbuf set, when it cannot be signed.
 */
static struct curl_slist *
signed_headers(S3Signing *s, char *errbuf, size_t errlen)
{
	const S3Endpoint  *ep = s->ep;
	time_t             now = remora_engine_wall_time();
	struct tm          tm;
	char               amz_date[17];
	RemoraKV           h[MAX_SIGNED_HEADERS];
	int                nh = 0;
	RemoraCreds        creds;
	RemoraSigV4Creds   sc;
	RemoraSigV4Request sreq;
	RemoraSigV4Result  sig;
	struct curl_slist *list = NULL;
	bool               ok = true;

	if (s->nheaders > MAX_SIGNED_HEADERS - 4)
	{
		snprintf(errbuf, errlen, "too many headers");
		return NULL;
	}
	memset(&creds, 0, sizeof(creds));
	if (!ep->anonymous &&
		!remora_creds_get(ep->auth, now, &creds, errbuf, errlen))
		return NULL;
	gmtime_r(&now, &tm);
	strftime(amz_date, sizeof(amz_date), "%Y%m%dT%H%M%SZ", &tm);
	h[nh++] = (RemoraKV){"host", s->host};
	if (!ep->anonymous)
	{
		h[nh++] = (RemoraKV){"x-amz-content-sha256", s->payload_hash};
		h[nh++] = (RemoraKV){"x-amz-date", amz_date};
		if (creds.session_token)
			h[nh++] = (RemoraKV){"x-amz-security-token", creds.session_token};
	}
	for (int i = 0; i < s->nheaders; i++)
		h[nh++] = s->headers[i];
	if (!ep->anonymous)
	{
		sc = (RemoraSigV4Creds){creds.access_key_id, creds.secret_access_key,
								ep->region, "s3", NULL};
		sreq = (RemoraSigV4Request){
			s->method, s->path, s->query, s->nquery, h, nh, s->payload_hash};
		if (!remora_sigv4_sign(&sreq, &sc, now, &sig, errbuf, errlen))
			return NULL;
		snprintf(s->signed_with, sizeof(s->signed_with), "%s",
				 creds.access_key_id);
	}
	for (int i = 0; i < nh && ok; i++)
		ok = append_header(&list, h[i].key, h[i].value);
	if (ok && !ep->anonymous)
		ok = append_header(&list, "Authorization", sig.authorization);
	ok = ok && append_header(&list, "Expect", "") &&
		 append_header(&list, "Content-Type", "application/octet-stream");
	if (!ok)
	{
		curl_slist_free_all(list);
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	return list;
}

/*
 * The store refused the credentials as expired (a clock that is off, or
 * credentials revoked early): fetched again, the request is signed and
 * sent once more, and its caller sees only the second answer.  Ceph RGW
 * says AccessDenied of an expired session token, so that too, for
 * credentials that are fetched (a denial of static keys stands).
 */
static bool
resend_expired(Request *req)
{
	S3Signing         *s = req->again_arg;
	RemoraS3Error      e;
	struct curl_slist *headers;
	char               err[256];
	bool               expired;

	if (s->resent || req->on_data ||
		!(req->status == 400 || req->status == 403) || req->body == NULL)
		return false;
	memset(&e, 0, sizeof(e));
	expired = remora_s3xml_error(req->body, req->body_len, &e) && e.code &&
			  (strcmp(e.code, "ExpiredToken") == 0 ||
			   strcmp(e.code, "TokenRefreshRequired") == 0 ||
			   strcmp(e.code, "AccessDenied") == 0);
	remora_s3xml_error_free(&e);
	if (!expired || !remora_creds_expired(s->ep->auth, s->signed_with,
										  remora_engine_wall_time()))
		return false;
	s->resent = true;
	if ((headers = signed_headers(s, err, sizeof(err))) == NULL)
		return false;
	return remora_req_resend(req, headers);
}

/*
 * A request to a store given by ep (the target, or a source), signed with
 * ep's credentials, carrying what the target's encryption asks.
 */
Request *
remora_s3_request(RemoraLoop *loop, const S3Endpoint *ep, void *owner,
				  const S3Call *call, RequestDone done, char *errbuf,
				  size_t errlen)
{
	Request   *req = NULL;
	S3Address  addr;
	S3Signing *s;

	if (call->nheaders > MAX_SIGNED_HEADERS - 12)
	{
		snprintf(errbuf, errlen, "too many headers");
		return NULL;
	}
	if (!address_of(ep->base_url, ep->host, ep->https, ep->path_style,
					call->bucket, call->key, call->query, call->nquery, &addr))
	{
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	s = signing_new(ep, call, &addr);
	req = s ? remora_req_new(loop, owner, done) : NULL;
	if (req == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		signing_free(s);
		remora_s3_address_free(&addr);
		return NULL;
	}
	req->again = resend_expired;
	req->again_arg = s;
	req->again_free = signing_free;
	if ((req->headers = signed_headers(s, errbuf, errlen)) == NULL)
	{
		remora_req_cancel(req);
		remora_s3_address_free(&addr);
		return NULL;
	}
	curl_easy_setopt(req->easy, CURLOPT_URL, addr.url);
	if (creates_upload(call))
		curl_easy_setopt(req->easy, CURLOPT_FRESH_CONNECT, 1L);
	/* the store is the administrator's: direct, with its own CAs if any */
	curl_easy_setopt(req->easy, CURLOPT_PROXY, "");
	remora_req_set_ca_pem(req, ep->ca_pem);
	req->trust = ep->trust;
	req->region = ep->region;

	if (call->head)
		curl_easy_setopt(req->easy, CURLOPT_NOBODY, 1L);
	else if (strcmp(call->method, "GET") != 0)
	{
		curl_easy_setopt(req->easy, CURLOPT_CUSTOMREQUEST, call->method);
		if (strcmp(call->method, "DELETE") != 0)
		{
			curl_easy_setopt(req->easy, CURLOPT_POSTFIELDS,
							 call->body ? call->body : "");
			curl_easy_setopt(req->easy, CURLOPT_POSTFIELDSIZE_LARGE,
							 (curl_off_t) call->body_len);
		}
	}
	remora_s3_address_free(&addr);
	return req;
}

Request *
remora_s3_start(RemoraLoop *loop, const S3Endpoint *ep, void *owner,
				const S3Call *call, RequestDone done, char *errbuf,
				size_t errlen)
{
	Request *req =
		remora_s3_request(loop, ep, owner, call, done, errbuf, errlen);

	if (req && !remora_req_start(req))
	{
		remora_req_cancel(req);
		snprintf(errbuf, errlen, "could not start a request");
		req = NULL;
	}
	return req;
}

static bool
retryable_s3_code(const char *code)
{
	static const char *const transient[] = {
		"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout",
		"RequestTimeTooSkewed", "OperationAborted", "Throttling",
		"ThrottlingException", "RequestLimitExceeded",
		/* temporary credentials fetched again may be good */
		"ExpiredToken", "TokenRefreshRequired"};

	for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++)
		if (strcmp(code, transient[i]) == 0)
			return true;
	return false;
}

/* A region as S3 names them ("eu-west-1"), so that a message may quote it. */
static bool
region_name_ok(const char *r)
{
	size_t n = r ? strlen(r) : 0;

	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') ||
			  r[i] == '-'))
			return false;
	return true;
}

/*
 * Did the store refuse a request for being sent to the wrong region?
 * PermanentRedirect (301, the bucket lives elsewhere), AuthorizationHeader-
 * Malformed naming a <Region>, or an x-amz-bucket-region header that names
 * another region than the request's.  Asking again never helps: the error
 * is final, and its message names what to register or set
 * (doc/operator-guide.md, "Source endpoints").
 */
static bool
region_error(const Request *req, const RemoraS3Error *s3err,
			 RemoraTaskError *err, const char *what)
{
	const char *code = s3err->code ? s3err->code : "";
	const char *header = req->hdr.bucket_region;
	const char *region = NULL;
	bool        redirect = strcmp(code, "PermanentRedirect") == 0;
	bool        named = strcmp(code, "AuthorizationHeaderMalformed") == 0 &&
				 region_name_ok(s3err->region);
	bool elsewhere = region_name_ok(header) &&
					 !(req->region && strcmp(req->region, header) == 0);

	if (!redirect && !named && !elsewhere)
		return false;
	if (region_name_ok(header))
		region = header;
	else if (region_name_ok(s3err->region))
		region = s3err->region;

	err->retryable = false;
	if (region)
		snprintf(err->message, sizeof(err->message),
				 "%s: the bucket is in region %s (%s); register the "
				 "endpoint with that region (remora.s3_region for the "
				 "target store)",
				 what, region, code[0] ? code : "x-amz-bucket-region");
	else
		snprintf(err->message, sizeof(err->message),
				 "%s: the bucket is not at this endpoint (%s%s%.200s); "
				 "register the endpoint the store names, in the bucket's "
				 "region",
				 what, code, s3err->endpoint ? ", it names " : "",
				 s3err->endpoint ? s3err->endpoint : "");
	return true;
}

/*
 * Did an S3 request fail?  If so, describe it in err (class s3, network or
 * tls, retryable or not) and return true.
 */
bool
remora_s3_failed(const Request *req, CURLcode rc, RemoraTaskError *err,
				 const char *what)
{
	RemoraS3Error s3err;

	memset(err, 0, sizeof(*err));
	err->retry_after = -1;
	if (rc != CURLE_OK)
	{
		remora_req_transport_error(req, rc, err, what, NULL);
		return true;
	}
	if (req->status >= 200 && req->status < 300)
		return false;

	err->class = REMORA_ERR_S3;
	err->http_status = req->status;
	err->retry_after = req->hdr.retry_after;
	err->retryable = req->status >= 500 || req->status == 429;
	memset(&s3err, 0, sizeof(s3err));
	if (!(req->body && remora_s3xml_error(req->body, req->body_len, &s3err)))
		memset(&s3err, 0, sizeof(s3err));
	if (s3err.code)
		snprintf(err->s3_code, sizeof(err->s3_code), "%s", s3err.code);
	if (region_error(req, &s3err, err, what))
		;
	else if (s3err.code)
	{
		err->retryable = err->retryable || retryable_s3_code(s3err.code);
		/* RGW sends an empty <Message> */
		if (s3err.message && s3err.message[0])
			snprintf(err->message, sizeof(err->message), "%s: %s (%s)", what,
					 s3err.code, s3err.message);
		else
			snprintf(err->message, sizeof(err->message), "%s: %s", what,
					 s3err.code);
	}
	else
		snprintf(err->message, sizeof(err->message),
				 "%s: the store answered HTTP %ld", what, req->status);
	remora_s3xml_error_free(&s3err);
	remora_utf8_scrub(err->message);
	remora_utf8_scrub(err->s3_code);
	return true;
}
