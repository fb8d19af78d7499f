/*-------------------------------------------------------------------------
 *
 * creds_fetch.c
 *	  The requests that fetch credentials: one blocking HTTP exchange, and
 *	  STS's AssumeRole and AssumeRoleWithWebIdentity on top of it.
 *
 * These run outside the engine's loop, with an easy handle of their own:
 * a fetch is rare (creds.h) and nothing can be signed until it ends.
 * They go direct (never through remora.https_proxy, which is for
 * sources), follow no redirect, and verify TLS peers against
 * remora.ca_file/ca_path like every other connection.  The outbound
 * policy does not apply: the endpoints (STS, the instance metadata
 * service, the container's) are the administrator's or the platform's.
 *
 * STS answers in XML (s3xml.c reads it).  Errors name STS's code and
 * message, which carry no secret; a token or a key never reaches an error.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/s3/creds_int.h"
#include "engine/s3/s3xml.h"
#include "engine/s3/sigv4.h"
#include "engine/common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#define ANSWER_LIMIT (64 * 1024)

void
remora_cred_clear(Cred *c)
{
	if (c->secret_access_key)
		OPENSSL_cleanse(c->secret_access_key, strlen(c->secret_access_key));
	if (c->session_token)
		OPENSSL_cleanse(c->session_token, strlen(c->session_token));
	free(c->access_key_id);
	free(c->secret_access_key);
	free(c->session_token);
	memset(c, 0, sizeof(*c));
}

bool
remora_cred_set(Cred *c, const char *akid, const char *secret,
				const char *token, time_t expires, time_t now)
{
	char source[sizeof(c->source)];

	memcpy(source, c->source, sizeof(source));
	remora_cred_clear(c);
	memcpy(c->source, source, sizeof(source));
	c->access_key_id = remora_xstrdup(akid);
	c->secret_access_key = remora_xstrdup(secret);
	c->session_token = token && token[0] ? remora_xstrdup(token) : NULL;
	c->expires = expires;
	c->fetched = now;
	if (!c->access_key_id || !c->secret_access_key ||
		(token && token[0] && !c->session_token))
	{
		remora_cred_clear(c);
		return false;
	}
	return true;
}

static char *tls_ca_file;
static char *tls_ca_path;

void
remora_creds_set_tls(const char *ca_file, const char *ca_path)
{
	free(tls_ca_file);
	free(tls_ca_path);
	tls_ca_file = ca_file && ca_file[0] ? remora_xstrdup(ca_file) : NULL;
	tls_ca_path = ca_path && ca_path[0] ? remora_xstrdup(ca_path) : NULL;
}

static size_t
collect(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	RemoraBuf *b = userdata;
	size_t     len = size * nmemb;

	if (b->len + len > ANSWER_LIMIT || !remora_buf_append(b, ptr, len))
		return 0; /* too long: the request fails */
	return len;
}

bool
remora_creds_request(const char *method, const char *url,
					 struct curl_slist *headers, const char *body,
					 long timeout_ms, CredsAnswer *out, char *errbuf,
					 size_t errlen)
{
	CURL     *easy = curl_easy_init();
	RemoraBuf b = {0};
	char      cerr[CURL_ERROR_SIZE] = "";
	CURLcode  rc;

	memset(out, 0, sizeof(*out));
	if (easy == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	curl_easy_setopt(easy, CURLOPT_URL, url);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(easy, CURLOPT_PROXY, "");
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
	curl_easy_setopt(easy, CURLOPT_SSLVERSION, (long) CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(easy, CURLOPT_USERAGENT, "remora");
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, cerr);
	if (tls_ca_file)
		curl_easy_setopt(easy, CURLOPT_CAINFO, tls_ca_file);
	if (tls_ca_path)
		curl_easy_setopt(easy, CURLOPT_CAPATH, tls_ca_path);
	if (headers)
		curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
	else if (strcmp(method, "PUT") == 0)
		curl_easy_setopt(easy, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, &b);
	rc = curl_easy_perform(easy);
	if (rc == CURLE_OK)
		curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &out->status);
	curl_easy_cleanup(easy);
	if (rc != CURLE_OK)
	{
		remora_buf_free(&b);
		remora_errbuf_set(errbuf, errlen, "%s",
						  cerr[0] ? cerr : curl_easy_strerror(rc));
		return false;
	}
	if (!remora_buf_putc(&b, '\0'))
	{
		remora_buf_free(&b);
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	out->body = remora_buf_release(&b, &out->len);
	out->len--; /* not the NUL */
	return true;
}

bool
remora_creds_parse_time(const char *s, time_t *out)
{
	struct tm tm;
	int       n = 0;

	memset(&tm, 0, sizeof(tm));
	if (s == NULL ||
		sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
			   &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
		n != 19)
		return false;
	s += n;
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++)
			;
	if (!(strcmp(s, "Z") == 0 || strcmp(s, "+00:00") == 0 || *s == '\0'))
		return false;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*out = timegm(&tm);
	return *out > 0;
}

/* ----------------------------------------------------------------
 * STS
 * ----------------------------------------------------------------
 */
char *
remora_sts_url(const RemoraTargetConfig *cfg)
{
	RemoraBuf b = {0};

	if (cfg->sts_endpoint && cfg->sts_endpoint[0])
		remora_buf_puts(&b, cfg->sts_endpoint);
	else
		remora_buf_printf(&b, "https://sts.%s.amazonaws.com",
						  cfg->region && cfg->region[0] ? cfg->region
														: "us-east-1");
	return remora_buf_release(&b, NULL);
}

/* "&name=value", the value form-encoded. */
static void
form_field(RemoraBuf *b, const char *name, const char *value)
{
	char *enc;

	if (value == NULL || value[0] == '\0')
		return;
	enc = remora_uri_encode(value, strlen(value), false);
	remora_buf_printf(b, "&%s=%s", name, enc ? enc : "");
	free(enc);
}

/*
 * STS's answer as credentials: <Credentials> with AccessKeyId,
 * SecretAccessKey, SessionToken and Expiration; any other answer is an
 * error that names STS's code and message.
 */
static bool
sts_answer(const CredsAnswer *a, const char *what, time_t now, Cred *out,
		   char *errbuf, size_t errlen)
{
	char  *akid = NULL, *secret = NULL, *token = NULL, *exp = NULL;
	time_t expires = 0;
	bool   ok = false;

	if (a->status != 200)
	{
		char *code = remora_s3xml_text(a->body, a->len, "Code", NULL);
		char *msg = remora_s3xml_text(a->body, a->len, "Message", NULL);

		if (msg)
			remora_utf8_scrub(msg);
		remora_errbuf_set(errbuf, errlen, "%s refused: HTTP %ld%s%s%s%.200s",
						  what, a->status, code ? " " : "", code ? code : "",
						  msg ? ": " : "", msg ? msg : "");
		free(code);
		free(msg);
		return false;
	}
	akid = remora_s3xml_text(a->body, a->len, "AccessKeyId", NULL);
	secret = remora_s3xml_text(a->body, a->len, "SecretAccessKey", NULL);
	token = remora_s3xml_text(a->body, a->len, "SessionToken", NULL);
	exp = remora_s3xml_text(a->body, a->len, "Expiration", NULL);
	if (!akid || !secret || !token || !remora_creds_parse_time(exp, &expires))
		remora_errbuf_set(errbuf, errlen,
						  "%s answered without credentials and their "
						  "expiry",
						  what);
	else if (!(ok = remora_cred_set(out, akid, secret, token, expires, now)))
		remora_errbuf_set(errbuf, errlen, "out of memory");
	free(akid);
	free(exp);
	if (secret)
		OPENSSL_cleanse(secret, strlen(secret));
	free(secret);
	if (token)
		OPENSSL_cleanse(token, strlen(token));
	free(token);
	return ok;
}

/* url's host[:port] and its root "scheme://host[:port]/", malloc'd. */
static bool
sts_host(const char *url, char **host, char **root)
{
	size_t    scheme = strncmp(url, "https://", 8) == 0  ? 8
					   : strncmp(url, "http://", 7) == 0 ? 7
														 : 0;
	size_t    n = scheme ? strcspn(url + scheme, "/?#") : 0;
	RemoraBuf b = {0};

	if (n == 0)
		return false;
	*host = remora_xstrndup(url + scheme, n);
	remora_buf_printf(&b, "%.*s/", (int) (scheme + n), url);
	*root = remora_buf_release(&b, NULL);
	return *host && *root;
}

/* POST body to STS, signed with base (NULL: unsigned), into a. */
static bool
sts_post(const RemoraTargetConfig *cfg, const Cred *base, const char *body,
		 CredsAnswer *a, char *errbuf, size_t errlen)
{
	char              *url = remora_sts_url(cfg);
	char              *host = NULL, *full = NULL;
	struct curl_slist *h = NULL;
	bool               ok = false;

	/* POST to the root of scheme://host[:port], which is what is signed */
	if (url == NULL || !sts_host(url, &host, &full))
	{
		remora_errbuf_set(errbuf, errlen,
						  url ? "the STS endpoint must be an http:// or "
								"https:// URL with a host"
							  : "out of memory");
		goto done;
	}
	h = curl_slist_append(
		h, "Content-Type: application/x-www-form-urlencoded; charset=utf-8");
	h = h ? curl_slist_append(h, "Expect:") : NULL;
	if (base && h)
	{
		char               hash[65], date[17];
		struct tm          tm;
		time_t             now = remora_engine_wall_time();
		RemoraKV           sh[4];
		int                nh = 0;
		RemoraSigV4Creds   sc = {base->access_key_id, base->secret_access_key,
                               cfg->region && cfg->region[0] ? cfg->region
															   : "us-east-1",
								 "sts", NULL /* a header, below */};
		RemoraSigV4Request sr;
		RemoraSigV4Result  sig;
		char               line[4096];

		remora_sha256_hex(body, strlen(body), hash);
		gmtime_r(&now, &tm);
		strftime(date, sizeof(date), "%Y%m%dT%H%M%SZ", &tm);
		sh[nh++] = (RemoraKV){"host", host};
		sh[nh++] = (RemoraKV){"x-amz-content-sha256", hash};
		sh[nh++] = (RemoraKV){"x-amz-date", date};
		if (base->session_token)
			sh[nh++] = (RemoraKV){"x-amz-security-token", base->session_token};
		sr = (RemoraSigV4Request){"POST", "/", NULL, 0, sh, nh, hash};
		if (!remora_sigv4_sign(&sr, &sc, now, &sig, errbuf, errlen))
			goto done;
		for (int i = 1; i < nh && h; i++)
		{
			if (snprintf(line, sizeof(line), "%s: %s", sh[i].key,
						 sh[i].value) >= (int) sizeof(line))
			{
				remora_errbuf_set(errbuf, errlen,
								  "the session token is too long");
				goto done;
			}
			h = curl_slist_append(h, line);
		}
		snprintf(line, sizeof(line), "Authorization: %s", sig.authorization);
		h = h ? curl_slist_append(h, line) : NULL;
		OPENSSL_cleanse(line, sizeof(line));
	}
	if (h == NULL || full == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		goto done;
	}
	ok = remora_creds_request("POST", full, h, body, CREDS_TIMEOUT_MS, a,
							  errbuf, errlen);
done:
	if (h)
	{
		/* the token was copied into a header line */
		for (struct curl_slist *l = h; l; l = l->next)
			OPENSSL_cleanse(l->data, strlen(l->data));
		curl_slist_free_all(h);
	}
	free(url);
	free(host);
	free(full);
	return ok;
}

static const char *
session_name(const RemoraTargetConfig *cfg)
{
	return cfg->role_session_name && cfg->role_session_name[0]
			   ? cfg->role_session_name
			   : "remora";
}

bool
remora_sts_assume_role(const RemoraTargetConfig *cfg, const Cred *base,
					   time_t now, Cred *out, char *errbuf, size_t errlen)
{
	RemoraBuf   b = {0};
	char       *body;
	CredsAnswer a;
	char        err[200];
	bool        ok = false;

	remora_buf_puts(&b, "Action=AssumeRole&Version=2011-06-15");
	form_field(&b, "RoleArn", cfg->role_arn);
	form_field(&b, "RoleSessionName", session_name(cfg));
	form_field(&b, "ExternalId", cfg->external_id);
	if ((body = remora_buf_release(&b, NULL)) == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	if (!sts_post(cfg, base, body, &a, err, sizeof(err)))
		remora_errbuf_set(errbuf, errlen, "STS AssumeRole of %s (with %s): %s",
						  cfg->role_arn, base->source, err);
	else
	{
		ok = sts_answer(&a, "STS AssumeRole", now, out, err, sizeof(err));
		if (ok)
			snprintf(out->source, sizeof(out->source),
					 "role %.120s (with %.60s)", cfg->role_arn, base->source);
		else
			remora_errbuf_set(errbuf, errlen, "%s (role %s, with %s)", err,
							  cfg->role_arn, base->source);
		free(a.body);
	}
	free(body);
	return ok;
}

bool
remora_sts_web_identity(const RemoraTargetConfig *cfg, const char *role_arn,
						const char *name, const char *token, time_t now,
						Cred *out, char *errbuf, size_t errlen)
{
	RemoraBuf   b = {0};
	char       *body;
	size_t      len;
	CredsAnswer a;
	char        err[200];
	bool        ok = false;

	remora_buf_puts(&b, "Action=AssumeRoleWithWebIdentity&Version=2011-06-15");
	form_field(&b, "RoleArn", role_arn);
	form_field(&b, "RoleSessionName", name && name[0] ? name : "remora");
	form_field(&b, "WebIdentityToken", token);
	if ((body = remora_buf_release(&b, &len)) == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	if (!sts_post(cfg, NULL, body, &a, err, sizeof(err)))
		remora_errbuf_set(errbuf, errlen,
						  "STS AssumeRoleWithWebIdentity of %s: %s", role_arn,
						  err);
	else
	{
		ok = sts_answer(&a, "STS AssumeRoleWithWebIdentity", now, out, errbuf,
						errlen);
		if (ok)
			snprintf(out->source, sizeof(out->source), "web identity, role %s",
					 role_arn);
		free(a.body);
	}
	OPENSSL_cleanse(body, len);
	free(body);
	return ok;
}
