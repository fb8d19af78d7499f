/*-------------------------------------------------------------------------
 *
 * source_uri.c
 *	  Parsing and validation of source locations, bucket names and prefixes.
 *
 * http(s) URLs are parsed by libcurl's URL API, the same parser that later
 * connects, so that what is validated here is what is fetched.  The s3://
 * and hf:// forms are Remora's own and are parsed here with strict rules:
 * anything unusual is refused rather than guessed at.
 *
 * Error messages never repeat the URL's userinfo or query string: those are
 * where credentials live.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/source_uri.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#define HF_NAME_MAX 96
#define HF_REV_MAX  255

static void seterr(char *errbuf, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
seterr(char *errbuf, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (errbuf == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(errbuf, errlen, fmt, ap);
	va_end(ap);
}

static char *
xstrndup(const char *s, size_t n)
{
	char *r = malloc(n + 1);

	if (r == NULL)
		return NULL;
	memcpy(r, s, n);
	r[n] = '\0';
	return r;
}

/* Does s contain a C0 control character, DEL, or a space? */
static bool
has_ctrl_or_space(const char *s, bool space_allowed)
{
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c < 0x20 || c == 0x7f || (!space_allowed && c == ' '))
			return true;
	}
	return false;
}

/*
 * Length of the UTF-8 sequence at p (before end) if it is valid, else 0.
 * Strict: no overlong forms, no surrogates, nothing past U+10FFFF.
 */
static int
utf8_sequence(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = *p;
	int           n;
	unsigned int  cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 1, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 2, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 3, cp = c & 0x07;
	else
		return 0;
	if (end - p <= n)
		return 0;
	for (int i = 1; i <= n; i++)
	{
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		(cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n + 1;
}

bool
remora_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;
	const unsigned char *end = p + len;

	while (p < end)
	{
		int n = utf8_sequence(p, end);

		if (n == 0)
			return false;
		p += n;
	}
	return true;
}

/*
 * Make s, in place, valid UTF-8 without control characters: each byte of
 * an invalid sequence and each control character becomes '?'.  For text a
 * server chose (headers, error messages) on its way into jsonb and logs.
 */
void
remora_utf8_scrub(char *s)
{
	unsigned char *p = (unsigned char *) s;
	unsigned char *end = p + strlen(s);

	while (p < end)
	{
		int n = utf8_sequence(p, end);

		if (n == 0 || *p < 0x20 || *p == 0x7f)
		{
			*p++ = '?';
			continue;
		}
		p += n;
	}
}

const char *
remora_source_kind_name(RemoraSourceKind kind)
{
	switch (kind)
	{
		case REMORA_SOURCE_HTTP:
			return "http";
		case REMORA_SOURCE_S3_OBJECT:
			return "s3_object";
		case REMORA_SOURCE_S3_PREFIX:
			return "s3_prefix";
		case REMORA_SOURCE_HF:
			return "hf";
	}
	return "unknown";
}

void
remora_source_uri_free(RemoraSourceUri *uri)
{
	if (uri == NULL)
		return;
	free(uri->canonical);
	free(uri->display);
	free(uri->file_name);
	free(uri->host);
	free(uri->bucket);
	free(uri->key);
	free(uri->repo_type);
	free(uri->repo);
	free(uri->revision);
	memset(uri, 0, sizeof(*uri));
}

/*
 * A member file name must be usable as one path segment: not empty, not
 * "." or "..", no separators, no control characters.
 */
static bool
file_name_ok(const char *name)
{
	if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	if (strchr(name, '/') != NULL || strchr(name, '\\') != NULL)
		return false;
	return !has_ctrl_or_space(name, true);
}

/*
 * S3 general-purpose bucket naming rules: 3-63 characters of lower-case
 * letters, digits, '.' and '-'; starts and ends with a letter or digit; no
 * "..", not an IPv4 address, none of the reserved prefixes and suffixes.
 */
bool
remora_bucket_name_valid(const char *name, char *errbuf, size_t errlen)
{
	size_t                   len;
	static const char *const bad_prefix[] = {"xn--", "sthree-",
											 "amzn-s3-demo-"};
	static const char *const bad_suffix[] = {"-s3alias", "--ol-s3", ".mrap",
											 "--x-s3", "--table-s3"};
	int                      dots = 0;
	bool                     all_digits_dots = true;

	if (name == NULL || (len = strlen(name)) < 3 || len > 63)
	{
		seterr(errbuf, errlen, "a bucket name must be 3 to 63 characters long");
		return false;
	}
	for (size_t i = 0; i < len; i++)
	{
		char c = name[i];

		if (!(islower((unsigned char) c) || isdigit((unsigned char) c) ||
			  c == '.' || c == '-') ||
			(c & 0x80))
		{
			seterr(errbuf, errlen,
				   "a bucket name may contain only lower-case letters, digits, "
				   "'.' and '-'");
			return false;
		}
		if (c == '.')
		{
			dots++;
			if (i > 0 && name[i - 1] == '.')
			{
				seterr(errbuf, errlen,
					   "a bucket name must not contain two adjacent periods");
				return false;
			}
		}
		else if (!isdigit((unsigned char) c))
			all_digits_dots = false;
	}
	if (!isalnum((unsigned char) name[0]) ||
		!isalnum((unsigned char) name[len - 1]))
	{
		seterr(errbuf, errlen,
			   "a bucket name must begin and end with a letter or digit");
		return false;
	}
	if (all_digits_dots && dots == 3)
	{
		seterr(errbuf, errlen,
			   "a bucket name must not look like an IP address");
		return false;
	}
	for (size_t i = 0; i < sizeof(bad_prefix) / sizeof(bad_prefix[0]); i++)
		if (strncmp(name, bad_prefix[i], strlen(bad_prefix[i])) == 0)
		{
			seterr(errbuf, errlen, "a bucket name must not begin with \"%s\"",
				   bad_prefix[i]);
			return false;
		}
	for (size_t i = 0; i < sizeof(bad_suffix) / sizeof(bad_suffix[0]); i++)
	{
		size_t sl = strlen(bad_suffix[i]);

		if (len > sl && strcmp(name + len - sl, bad_suffix[i]) == 0)
		{
			seterr(errbuf, errlen, "a bucket name must not end with \"%s\"",
				   bad_suffix[i]);
			return false;
		}
	}
	return true;
}

/*
 * Normalise a target prefix: trailing slashes are dropped; a leading slash,
 * empty, "." or ".." segments, control characters and backslashes are
 * refused.  Returns a malloc'd string (possibly "") or NULL with errbuf set.
 */
char *
remora_prefix_normalize(const char *prefix, char *errbuf, size_t errlen)
{
	size_t      len = strlen(prefix);
	const char *seg;

	if (len > REMORA_MAX_PREFIX_LEN)
	{
		seterr(errbuf, errlen, "a prefix must be at most %d bytes long",
			   REMORA_MAX_PREFIX_LEN);
		return NULL;
	}
	if (!remora_utf8_valid(prefix, len))
	{
		seterr(errbuf, errlen, "a prefix must be valid UTF-8");
		return NULL;
	}
	if (has_ctrl_or_space(prefix, true))
	{
		seterr(errbuf, errlen, "a prefix must not contain control characters");
		return NULL;
	}
	if (strchr(prefix, '\\') != NULL)
	{
		seterr(errbuf, errlen, "a prefix must not contain backslashes");
		return NULL;
	}
	if (prefix[0] == '/')
	{
		seterr(errbuf, errlen, "a prefix must not begin with '/'");
		return NULL;
	}
	while (len > 0 && prefix[len - 1] == '/')
		len--;

	seg = prefix;
	while (seg < prefix + len)
	{
		const char *slash = memchr(seg, '/', prefix + len - seg);
		size_t      sl = (slash ? slash : prefix + len) - seg;

		/* cppcheck-suppress knownConditionTrueFalse ; "//" gives sl == 0 */
		if (sl == 0)
		{
			seterr(errbuf, errlen,
				   "a prefix must not contain empty segments (\"//\")");
			return NULL;
		}
		if ((sl == 1 && seg[0] == '.') ||
			(sl == 2 && seg[0] == '.' && seg[1] == '.'))
		{
			seterr(errbuf, errlen,
				   "a prefix must not contain \".\" or \"..\" segments");
			return NULL;
		}
		seg += sl + 1;
	}
	return xstrndup(prefix, len);
}

/* ---------------------------------------------------------------- http(s) */

static bool
parse_http(const char *text, RemoraSourceUri *out, char *errbuf, size_t errlen)
{
	CURLU    *u = curl_url();
	CURLUcode rc;
	char     *scheme = NULL, *user = NULL, *password = NULL, *host = NULL,
		 *path = NULL, *url = NULL;
	bool ok = false;

	if (u == NULL)
	{
		seterr(errbuf, errlen, "out of memory");
		return false;
	}
	rc = curl_url_set(u, CURLUPART_URL, text, 0);
	if (rc != CURLUE_OK)
	{
		seterr(errbuf, errlen, "the URL is malformed (%s)",
			   curl_url_strerror(rc));
		goto done;
	}
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
		(strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
	{
		seterr(errbuf, errlen, "the URL scheme must be http or https");
		goto done;
	}
	if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
		curl_url_get(u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK)
	{
		seterr(errbuf, errlen,
			   "the URL must not contain credentials (user information before "
			   "'@')");
		goto done;
	}
	if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
		host[0] == '\0')
	{
		seterr(errbuf, errlen, "the URL has no host");
		goto done;
	}
	if (curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
		path = NULL;

	/*
	 * The canonical host is ASCII (an international name in punycode) and
	 * lower case: host names are case-insensitive.
	 */
	{
		char *ascii = NULL;

		if (curl_url_get(u, CURLUPART_HOST, &ascii, CURLU_PUNYCODE) !=
				CURLUE_OK ||
			ascii == NULL)
		{
			curl_free(ascii);
			seterr(errbuf, errlen, "the URL host is not a valid host name");
			goto done;
		}
		curl_free(host);
		host = ascii;
	}
	for (char *h = host; *h; h++)
		*h = tolower((unsigned char) *h);
	if (curl_url_set(u, CURLUPART_HOST, host, 0) != CURLUE_OK)
	{
		seterr(errbuf, errlen, "the URL host is invalid");
		goto done;
	}
	{
		char *port = NULL;

		if (curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) ==
			CURLUE_OK)
			out->port = atoi(port);
		curl_free(port);
	}

	/* The fragment is never sent; drop it from the canonical form. */
	curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
	if (curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK)
	{
		seterr(errbuf, errlen, "the URL cannot be normalised");
		goto done;
	}

	/* The member path is the last path segment, percent-decoded. */
	{
		const char *last = path ? strrchr(path, '/') : NULL;
		char       *decoded;
		int         dlen = 0;

		last = last ? last + 1 : (path ? path : "");
		decoded = curl_easy_unescape(NULL, last, 0, &dlen);
		if (decoded == NULL)
		{
			seterr(errbuf, errlen, "out of memory");
			goto done;
		}
		if ((size_t) dlen != strlen(decoded) || !file_name_ok(decoded) ||
			!remora_utf8_valid(decoded, dlen))
		{
			curl_free(decoded);
			seterr(errbuf, errlen,
				   "the URL path must end in a file name (its last segment "
				   "names the result member)");
			goto done;
		}
		out->file_name = xstrndup(decoded, dlen);
		curl_free(decoded);
	}

	out->kind = REMORA_SOURCE_HTTP;
	out->canonical = xstrndup(url, strlen(url));
	out->display = xstrndup(url, strcspn(url, "?"));
	out->host = xstrndup(host, strlen(host));
	ok = out->canonical && out->display && out->host && out->file_name;
	if (!ok)
		seterr(errbuf, errlen, "out of memory");

done:
	curl_free(scheme);
	curl_free(user);
	curl_free(password);
	curl_free(host);
	curl_free(path);
	curl_free(url);
	curl_url_cleanup(u);
	return ok;
}

/*
 * The canonical form must be a fixed point: what is stored, checked and
 * fetched is one URL.  One normalisation may enable another (a host
 * percent-encoded into a number, decoded and only then read as an IPv4
 * address), so parse the canonical form again until it no longer changes.
 */
static bool
parse_http_stable(const char *text, RemoraSourceUri *out, char *errbuf,
				  size_t errlen)
{
	if (!parse_http(text, out, errbuf, errlen))
		return false;
	for (int round = 0; round < 3; round++)
	{
		RemoraSourceUri again;

		memset(&again, 0, sizeof(again));
		if (!parse_http(out->canonical, &again, errbuf, errlen))
			return false;
		if (strcmp(again.canonical, out->canonical) == 0)
		{
			remora_source_uri_free(&again);
			return true;
		}
		remora_source_uri_free(out);
		*out = again;
	}
	seterr(errbuf, errlen, "the URL has no stable normal form");
	return false;
}

/* ------------------------------------------------------------------- s3 */

static bool
parse_s3(const char *rest, RemoraSourceUri *out, char *errbuf, size_t errlen)
{
	const char *slash = strchr(rest, '/');
	char        berr[REMORA_ERRBUF_LEN];
	char       *bucket;
	const char *key;
	size_t      klen;

	if (slash == NULL)
	{
		seterr(errbuf, errlen,
			   "an s3:// source must name an object (s3://bucket/key) or a "
			   "prefix ending in '/' (s3://bucket/prefix/)");
		return false;
	}
	bucket = xstrndup(rest, slash - rest);
	if (bucket == NULL)
	{
		seterr(errbuf, errlen, "out of memory");
		return false;
	}
	if (!remora_bucket_name_valid(bucket, berr, sizeof(berr)))
	{
		seterr(errbuf, errlen, "the source bucket is invalid: %s", berr);
		free(bucket);
		return false;
	}
	key = slash + 1;
	klen = strlen(key);
	if (klen > REMORA_MAX_S3_KEY_LEN || !remora_utf8_valid(key, klen) ||
		has_ctrl_or_space(key, true))
	{
		seterr(errbuf, errlen,
			   "the source key must be valid UTF-8 of at most %d bytes without "
			   "control characters",
			   REMORA_MAX_S3_KEY_LEN);
		free(bucket);
		return false;
	}

	out->bucket = bucket;
	out->key = xstrndup(key, klen);
	if (klen == 0 || key[klen - 1] == '/')
	{
		if (klen > 0 && key[0] == '/')
		{
			seterr(errbuf, errlen, "the source prefix must not begin with '/'");
			return false;
		}
		out->kind = REMORA_SOURCE_S3_PREFIX;
	}
	else
	{
		const char *last = strrchr(key, '/');

		out->kind = REMORA_SOURCE_S3_OBJECT;
		out->file_name =
			xstrndup(last ? last + 1 : key, strlen(last ? last + 1 : key));
		if (out->file_name == NULL || !file_name_ok(out->file_name))
		{
			seterr(errbuf, errlen,
				   "the last segment of the source key must be a usable file "
				   "name");
			return false;
		}
	}
	out->canonical = malloc(strlen(bucket) + klen + 7);
	if (out->canonical == NULL || out->key == NULL)
	{
		seterr(errbuf, errlen, "out of memory");
		return false;
	}
	sprintf(out->canonical, "s3://%s/%s", bucket, key);
	out->display = xstrndup(out->canonical, strlen(out->canonical));
	return out->display != NULL;
}

/* ------------------------------------------------------------------- hf */

/*
 * Hub owner and repository names: 1-96 of [A-Za-z0-9_.-], not beginning or
 * ending with '.' or '-', no "--" or "..".
 */
static bool
hf_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > HF_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		char c = s[i];

		if (!(isalnum((unsigned char) c) || c == '_' || c == '.' || c == '-') ||
			(c & 0x80))
			return false;
		if (i > 0 && (c == '-' || c == '.') && s[i - 1] == c)
			return false;
	}
	if (s[0] == '.' || s[0] == '-' || s[len - 1] == '.' || s[len - 1] == '-')
		return false;
	return true;
}

/* Revisions: branch, tag or commit; may contain '/' (e.g. refs/pr/1). */
static bool
hf_revision_ok(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > HF_REV_MAX || s[0] == '/' || s[len - 1] == '/')
		return false;
	if (strstr(s, "..") != NULL || strstr(s, "//") != NULL)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		char c = s[i];

		if (!(isalnum((unsigned char) c) || c == '_' || c == '.' || c == '-' ||
			  c == '/') ||
			(c & 0x80))
			return false;
	}
	return true;
}

static bool
parse_hf(const char *rest, RemoraSourceUri *out, char *errbuf, size_t errlen)
{
	const char *type = "model";
	const char *at;
	const char *slash;
	const char *rev = "main";
	size_t      repolen;

	if (strncmp(rest, "datasets/", 9) == 0)
	{
		type = "dataset";
		rest += 9;
	}
	else if (strncmp(rest, "models/", 7) == 0)
		rest += 7;
	else if (strncmp(rest, "spaces/", 7) == 0)
	{
		seterr(errbuf, errlen,
			   "Hugging Face spaces are not a supported source");
		return false;
	}

	at = strchr(rest, '@');
	repolen = at ? (size_t) (at - rest) : strlen(rest);
	slash = memchr(rest, '/', repolen);
	/* the Hub's namespace words are no owner's name: refuse the ambiguity */
	if (slash && ((slash - rest == 8 && strncmp(rest, "datasets", 8) == 0) ||
				  (slash - rest == 6 && strncmp(rest, "models", 6) == 0) ||
				  (slash - rest == 6 && strncmp(rest, "spaces", 6) == 0)))
	{
		seterr(errbuf, errlen,
			   "\"datasets\", \"models\" and \"spaces\" are not owner names on "
			   "the Hugging Face Hub");
		return false;
	}
	if (slash == NULL || !hf_name_ok(rest, slash - rest) ||
		!hf_name_ok(slash + 1, repolen - (slash + 1 - rest)))
	{
		seterr(errbuf, errlen,
			   "an hf:// source must be hf://owner/name[@revision] or "
			   "hf://datasets/owner/name[@revision] with names of letters, "
			   "digits, '_', '.' and '-'");
		return false;
	}
	if (at != NULL)
	{
		rev = at + 1;
		if (!hf_revision_ok(rev))
		{
			seterr(errbuf, errlen,
				   "the Hugging Face revision must be a branch, tag or commit "
				   "of letters, digits, '_', '.', '-' and '/'");
			return false;
		}
	}

	out->kind = REMORA_SOURCE_HF;
	out->repo_type = xstrndup(type, strlen(type));
	out->repo = xstrndup(rest, repolen);
	out->revision = xstrndup(rev, strlen(rev));
	out->canonical = malloc(repolen + strlen(rev) + 32);
	if (!out->repo_type || !out->repo || !out->revision || !out->canonical)
	{
		seterr(errbuf, errlen, "out of memory");
		return false;
	}
	sprintf(out->canonical, "hf://%s%s@%s",
			strcmp(type, "dataset") == 0 ? "datasets/" : "", out->repo, rev);
	out->display = xstrndup(out->canonical, strlen(out->canonical));
	return out->display != NULL;
}

/*
 * Parse a source location.  On success *out holds malloc'd strings; on
 * failure errbuf says what is wrong and *out is cleared.
 */
bool
remora_source_uri_parse(const char *text, RemoraSourceUri *out, char *errbuf,
						size_t errlen)
{
	size_t len;
	bool   ok;

	memset(out, 0, sizeof(*out));
	if (text == NULL || (len = strlen(text)) == 0)
	{
		seterr(errbuf, errlen, "the source is empty");
		return false;
	}
	if (len > REMORA_MAX_URL_LEN)
	{
		seterr(errbuf, errlen, "the source is longer than %d bytes",
			   REMORA_MAX_URL_LEN);
		return false;
	}
	if (has_ctrl_or_space(text, false))
	{
		seterr(errbuf, errlen,
			   "the source must not contain spaces or control characters");
		return false;
	}
	if (!remora_utf8_valid(text, len))
	{
		seterr(errbuf, errlen, "the source must be valid UTF-8");
		return false;
	}

	if (strncmp(text, "s3://", 5) == 0)
		ok = parse_s3(text + 5, out, errbuf, errlen);
	else if (strncmp(text, "hf://", 5) == 0)
		ok = parse_hf(text + 5, out, errbuf, errlen);
	else if (strncasecmp(text, "http://", 7) == 0 ||
			 strncasecmp(text, "https://", 8) == 0)
		ok = parse_http_stable(text, out, errbuf, errlen);
	else
	{
		seterr(
			errbuf, errlen,
			"the source must be an http://, https://, s3:// or hf:// location");
		ok = false;
	}
	if (!ok)
		remora_source_uri_free(out);
	return ok;
}

/*
 * A member path from a listing (an S3 key below a prefix, a Hub file): is
 * it safe to place under a staging prefix?
 */
bool
remora_member_path_valid(const char *path)
{
	size_t      len = strlen(path);
	const char *seg = path;

	if (len == 0 || len > 1024 || !remora_utf8_valid(path, len))
		return false;
	for (const char *p = path;; p++)
	{
		if (*p == '/' || *p == '\0')
		{
			size_t slen = p - seg;

			if (slen == 0 || (slen == 1 && seg[0] == '.') ||
				(slen == 2 && seg[0] == '.' && seg[1] == '.'))
				return false;
			if (*p == '\0')
				return true;
			seg = p + 1;
		}
		else if (*p == '\\' || (unsigned char) *p < 0x20 || *p == 0x7f)
			return false;
	}
}
