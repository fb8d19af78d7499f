/*-------------------------------------------------------------------------
 *
 * http_headers.c
 *	  The HTTP the engine reads: response headers (ETag, Last-Modified,
 *	  Content-Range, Content-Length, Retry-After, Link rel="next"), byte
 *	  ranges, and the origin and user information of URLs.
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "engine/common/http_headers.h"
#include "engine/common/util.h"

void
remora_http_headers_init(RemoraHttpHeaders *h)
{
	memset(h, 0, sizeof(*h));
	h->content_length = -1;
	h->retry_after = -1;
}

void
remora_http_headers_free(RemoraHttpHeaders *h)
{
	free(h->link_next);
	h->link_next = NULL;
}

/* A header value that is a non-negative decimal number. */
static bool
header_number(const char *v, size_t vlen, long long *out)
{
	char  tmp[32];
	char *end;

	if (vlen == 0 || vlen >= sizeof(tmp) || v[0] < '0' || v[0] > '9')
		return false;
	memcpy(tmp, v, vlen);
	tmp[vlen] = '\0';
	*out = strtoll(tmp, &end, 10);
	return *end == '\0' && *out >= 0;
}

/*
 * The target of a Link header's rel="next" (RFC 8288), as the Hugging Face
 * Hub paginates: <https://…?cursor=…>; rel="next".  Only the first link
 * with that relation counts.
 */
static void
link_next(RemoraHttpHeaders *h, const char *v, size_t vlen)
{
	const char *end = v + vlen;

	while (v < end && h->link_next == NULL)
	{
		const char *lt = memchr(v, '<', end - v);
		const char *gt = lt ? memchr(lt, '>', end - lt) : NULL;
		const char *next_lt;
		size_t      plen;

		if (gt == NULL)
			return;
		next_lt = memchr(gt, '<', end - gt);
		plen = (next_lt ? next_lt : end) - gt;
		/* the parameters between '>' and the next link */
		for (const char *p = gt; p + 8 <= gt + plen; p++)
			if ((p + 10 <= gt + plen &&
				 strncasecmp(p, "rel=\"next\"", 10) == 0) ||
				strncasecmp(p, "rel=next", 8) == 0)
			{
				h->link_next = strndup(lt + 1, gt - lt - 1);
				break;
			}
		v = gt + plen;
	}
}

void
remora_http_header_line(RemoraHttpHeaders *h, const char *buf, size_t len)
{
	const char *colon = memchr(buf, ':', len);
	size_t      nlen;
	const char *v;
	size_t      vlen;
	char       *dst = NULL;
	size_t      dstlen = 0;

	/* a new response (redirect, 100 Continue): forget the previous one */
	if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0)
	{
		h->etag[0] = h->last_modified[0] = h->content_range[0] = '\0';
		h->version_id[0] = h->bucket_region[0] = '\0';
		h->content_length = -1;
		h->retry_after = -1;
		return;
	}
	if (colon == NULL)
		return;
	nlen = colon - buf;
	v = colon + 1;
	vlen = len - nlen - 1;
	while (vlen > 0 && (*v == ' ' || *v == '\t'))
		v++, vlen--;
	while (vlen > 0 &&
		   (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
		vlen--;

	if (nlen == 4 && strncasecmp(buf, "etag", 4) == 0)
		dst = h->etag, dstlen = sizeof(h->etag);
	else if (nlen == 13 && strncasecmp(buf, "last-modified", 13) == 0)
		dst = h->last_modified, dstlen = sizeof(h->last_modified);
	else if (nlen == 13 && strncasecmp(buf, "content-range", 13) == 0)
		dst = h->content_range, dstlen = sizeof(h->content_range);
	else if (nlen == 16 && strncasecmp(buf, "x-amz-version-id", 16) == 0)
		dst = h->version_id, dstlen = sizeof(h->version_id);
	else if (nlen == 19 && strncasecmp(buf, "x-amz-bucket-region", 19) == 0)
		dst = h->bucket_region, dstlen = sizeof(h->bucket_region);
	else if (nlen == 14 && strncasecmp(buf, "content-length", 14) == 0)
	{
		long long cl;

		if (header_number(v, vlen, &cl))
			h->content_length = cl;
	}
	else if (nlen == 4 && strncasecmp(buf, "link", 4) == 0)
		link_next(h, v, vlen);
	else if (nlen == 11 && strncasecmp(buf, "retry-after", 11) == 0)
	{
		/* delta-seconds only; an HTTP-date is treated as absent */
		long long ra;

		if (header_number(v, vlen, &ra))
			h->retry_after = ra > 86400 ? 86400 : (long) ra;
	}
	if (dst && vlen < dstlen)
	{
		/* these travel into checkpoints (jsonb) and messages */
		memcpy(dst, v, vlen);
		dst[vlen] = '\0';
		remora_utf8_scrub(dst);
	}
}

/* Content-Range: bytes START-END/TOTAL */
bool
remora_http_content_range(const char *v, int64_t *start, int64_t *end,
						  int64_t *total)
{
	long long s, e, t;

	if (sscanf(v, "bytes %lld-%lld/%lld", &s, &e, &t) == 3 && s >= 0 &&
		e >= s && t > e)
	{
		*start = s;
		*end = e;
		*total = t;
		return true;
	}
	return false;
}

/* Does a URL carry user information (credentials) before its host? */
bool
remora_url_has_userinfo(const char *url)
{
	CURLU *u = curl_url();
	char  *user = NULL;
	bool   found;

	if (u == NULL || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
	{
		curl_url_cleanup(u);
		return true; /* unparseable: refuse it as well */
	}
	found = curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK;
	curl_free(user);
	curl_url_cleanup(u);
	return found;
}

/*
 * The origin of a URL, "scheme://host:port" (malloc'd), or NULL.  A
 * credential meant for one origin is never sent to another, such as a CDN
 * the first redirects to.
 */
char *
remora_url_origin(const char *url)
{
	CURLU *u = curl_url();
	char  *scheme = NULL, *host = NULL, *port = NULL;
	char  *out = NULL;

	if (u && url && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
	{
		size_t n = strlen(scheme) + strlen(host) + strlen(port) + 8;

		out = malloc(n);
		if (out)
		{
			snprintf(out, n, "%s://%s:%s", scheme, host, port);
			for (char *c = out; *c; c++)
				*c = (char) tolower((unsigned char) *c);
		}
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return out;
}

bool
remora_url_origin_is(const char *url, const char *origin)
{
	char *o = remora_url_origin(url);
	bool  same = o && origin && strcmp(o, origin) == 0;

	free(o);
	return same;
}
