/*-------------------------------------------------------------------------
 *
 * source_uri.c
 *	  Parsing and validation of source locations (http(s)://, s3://,
 *	  hf://).  The names a copy is stored under (bucket names, target
 *	  prefixes, member paths) are checked in names.c.
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
#include "engine/common/source_uri.h"
#include "engine/common/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#define HF_NAME_MAX 96
#define HF_REV_MAX  255

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
	return !remora_has_ctrl(name, true);
}

/* ---------------------------------------------------------------- http(s) */

/*
 * An http(s) URL; a source's (named_file) must end in the file name of
 * its member, a webhook's need not.
 */
static bool
parse_http(const char *text, bool named_file, RemoraSourceUri *out,
		   char *errbuf, size_t errlen)
{
	CURLU    *u = curl_url();
	CURLUcode rc;
	char     *scheme = NULL, *user = NULL, *password = NULL, *host = NULL,
		 *path = NULL, *url = NULL;
	bool ok = false;

	if (u == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	rc = curl_url_set(u, CURLUPART_URL, text, 0);
	if (rc != CURLUE_OK)
	{
		remora_errbuf_set(errbuf, errlen, "the URL is malformed (%s)",
						  curl_url_strerror(rc));
		goto done;
	}
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
		(strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
	{
		remora_errbuf_set(errbuf, errlen,
						  "the URL scheme must be http or https");
		goto done;
	}
	if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
		curl_url_get(u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK)
	{
		remora_errbuf_set(
			errbuf, errlen,
			"the URL must not contain credentials (user information before "
			"'@')");
		goto done;
	}
	if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
		host[0] == '\0')
	{
		remora_errbuf_set(errbuf, errlen, "the URL has no host");
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
			remora_errbuf_set(errbuf, errlen,
							  "the URL host is not a valid host name");
			goto done;
		}
		curl_free(host);
		host = ascii;
	}
	for (char *h = host; *h; h++)
		*h = tolower((unsigned char) *h);
	if (curl_url_set(u, CURLUPART_HOST, host, 0) != CURLUE_OK)
	{
		remora_errbuf_set(errbuf, errlen, "the URL host is invalid");
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
		remora_errbuf_set(errbuf, errlen, "the URL cannot be normalised");
		goto done;
	}

	/* The member path is the last path segment, percent-decoded. */
	if (named_file)
	{
		const char *last = path ? strrchr(path, '/') : NULL;
		char       *decoded;
		int         dlen = 0;

		last = last ? last + 1 : (path ? path : "");
		decoded = curl_easy_unescape(NULL, last, 0, &dlen);
		if (decoded == NULL)
		{
			remora_errbuf_set(errbuf, errlen, "out of memory");
			goto done;
		}
		if ((size_t) dlen != strlen(decoded) || !file_name_ok(decoded) ||
			!remora_utf8_valid(decoded, dlen))
		{
			curl_free(decoded);
			remora_errbuf_set(
				errbuf, errlen,
				"the URL path must end in a file name (its last segment "
				"names the result member)");
			goto done;
		}
		out->file_name = remora_xstrndup(decoded, dlen);
		curl_free(decoded);
	}

	out->kind = REMORA_SOURCE_HTTP;
	out->canonical = remora_xstrndup(url, strlen(url));
	out->display = remora_xstrndup(url, strcspn(url, "?"));
	out->host = remora_xstrndup(host, strlen(host));
	ok = out->canonical && out->display && out->host &&
		 (out->file_name || !named_file);
	if (!ok)
		remora_errbuf_set(errbuf, errlen, "out of memory");

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
parse_http_stable(const char *text, bool named_file, RemoraSourceUri *out,
				  char *errbuf, size_t errlen)
{
	if (!parse_http(text, named_file, out, errbuf, errlen))
		return false;
	for (int round = 0; round < 3; round++)
	{
		RemoraSourceUri again;

		memset(&again, 0, sizeof(again));
		if (!parse_http(out->canonical, named_file, &again, errbuf, errlen))
			return false;
		if (strcmp(again.canonical, out->canonical) == 0)
		{
			remora_source_uri_free(&again);
			return true;
		}
		remora_source_uri_free(out);
		*out = again;
	}
	remora_errbuf_set(errbuf, errlen, "the URL has no stable normal form");
	return false;
}

/* ------------------------------------------------------------------- s3 */

/*
 * Does a key (or prefix) have a segment that a store or a proxy might
 * resolve: "." or ".." anywhere, or an empty one (a leading '/', "//")?
 * Source grants are matched against the key as written, so the key must
 * mean one object to every party that reads it: a store that keeps its
 * objects as files (s3rver, MinIO in file mode), a proxy that normalises
 * paths or a later change to the engine's URL building would otherwise
 * read "pub/../private/x" under a grant for everything below "pub/".  A
 * prefix's trailing '/' ends it and is no empty segment.
 */
static bool
s3_key_segments_ok(const char *key, size_t len, bool prefix)
{
	const char *seg = key;
	const char *end = key + len;

	if (prefix && len > 0)
		end--; /* the trailing '/' */
	if (len == 0)
		return true;
	for (;;)
	{
		const char *slash = memchr(seg, '/', end - seg);
		size_t      n = (slash ? slash : end) - seg;

		if (n == 0 || (n == 1 && seg[0] == '.') ||
			(n == 2 && seg[0] == '.' && seg[1] == '.'))
			return false;
		if (slash == NULL)
			return true;
		seg = slash + 1;
	}
}

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
		remora_errbuf_set(
			errbuf, errlen,
			"an s3:// source must name an object (s3://bucket/key) or a "
			"prefix ending in '/' (s3://bucket/prefix/)");
		return false;
	}
	bucket = remora_xstrndup(rest, slash - rest);
	if (bucket == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	if (!remora_bucket_name_valid(bucket, berr, sizeof(berr)))
	{
		remora_errbuf_set(errbuf, errlen, "the source bucket is invalid: %s",
						  berr);
		free(bucket);
		return false;
	}
	key = slash + 1;
	klen = strlen(key);
	if (klen > REMORA_MAX_S3_KEY_LEN || !remora_utf8_valid(key, klen) ||
		remora_has_ctrl(key, true))
	{
		remora_errbuf_set(
			errbuf, errlen,
			"the source key must be valid UTF-8 of at most %d bytes without "
			"control characters",
			REMORA_MAX_S3_KEY_LEN);
		free(bucket);
		return false;
	}

	out->bucket = bucket;
	out->key = remora_xstrndup(key, klen);
	if (klen > 0 && key[0] == '/')
	{
		remora_errbuf_set(errbuf, errlen,
						  "the source key or prefix must not begin with '/'");
		return false;
	}
	if (!s3_key_segments_ok(key, klen, klen == 0 || key[klen - 1] == '/'))
	{
		remora_errbuf_set(
			errbuf, errlen,
			"the source key or prefix must not contain \".\" or \"..\" "
			"segments or empty segments (\"//\")");
		return false;
	}
	if (klen == 0 || key[klen - 1] == '/')
		out->kind = REMORA_SOURCE_S3_PREFIX;
	else
	{
		const char *last = strrchr(key, '/');

		out->kind = REMORA_SOURCE_S3_OBJECT;
		out->file_name = remora_xstrndup(last ? last + 1 : key,
										 strlen(last ? last + 1 : key));
		if (out->file_name == NULL || !file_name_ok(out->file_name))
		{
			remora_errbuf_set(
				errbuf, errlen,
				"the last segment of the source key must be a usable file "
				"name");
			return false;
		}
	}
	out->canonical = malloc(strlen(bucket) + klen + 7);
	if (out->canonical == NULL || out->key == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	sprintf(out->canonical, "s3://%s/%s", bucket, key);
	out->display = remora_xstrndup(out->canonical, strlen(out->canonical));
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
	/* nor a "." segment, which a URL parser would drop */
	if (strcmp(s, ".") == 0 || strncmp(s, "./", 2) == 0 ||
		strstr(s, "/./") != NULL ||
		(len >= 2 && strcmp(s + len - 2, "/.") == 0))
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
		remora_errbuf_set(errbuf, errlen,
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
		remora_errbuf_set(
			errbuf, errlen,
			"\"datasets\", \"models\" and \"spaces\" are not owner names on "
			"the Hugging Face Hub");
		return false;
	}
	if (slash == NULL || !hf_name_ok(rest, slash - rest) ||
		!hf_name_ok(slash + 1, repolen - (slash + 1 - rest)))
	{
		remora_errbuf_set(
			errbuf, errlen,
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
			remora_errbuf_set(
				errbuf, errlen,
				"the Hugging Face revision must be a branch, tag or commit "
				"of letters, digits, '_', '.', '-' and '/'");
			return false;
		}
	}

	out->kind = REMORA_SOURCE_HF;
	out->repo_type = remora_xstrndup(type, strlen(type));
	out->repo = remora_xstrndup(rest, repolen);
	out->revision = remora_xstrndup(rev, strlen(rev));
	out->canonical = malloc(repolen + strlen(rev) + 32);
	if (!out->repo_type || !out->repo || !out->revision || !out->canonical)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	sprintf(out->canonical, "hf://%s%s@%s",
			strcmp(type, "dataset") == 0 ? "datasets/" : "", out->repo, rev);
	out->display = remora_xstrndup(out->canonical, strlen(out->canonical));
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
		remora_errbuf_set(errbuf, errlen, "the source is empty");
		return false;
	}
	if (len > REMORA_MAX_URL_LEN)
	{
		remora_errbuf_set(errbuf, errlen, "the source is longer than %d bytes",
						  REMORA_MAX_URL_LEN);
		return false;
	}
	if (remora_has_ctrl(text, false))
	{
		remora_errbuf_set(
			errbuf, errlen,
			"the source must not contain spaces or control characters");
		return false;
	}
	if (!remora_utf8_valid(text, len))
	{
		remora_errbuf_set(errbuf, errlen, "the source must be valid UTF-8");
		return false;
	}

	if (strncmp(text, "s3://", 5) == 0)
		ok = parse_s3(text + 5, out, errbuf, errlen);
	else if (strncmp(text, "hf://", 5) == 0)
		ok = parse_hf(text + 5, out, errbuf, errlen);
	else if (strncasecmp(text, "http://", 7) == 0 ||
			 strncasecmp(text, "https://", 8) == 0)
		ok = parse_http_stable(text, true, out, errbuf, errlen);
	else
	{
		remora_errbuf_set(
			errbuf, errlen,
			"the source must be an http://, https://, s3:// or hf:// location");
		ok = false;
	}
	if (!ok)
		remora_source_uri_free(out);
	return ok;
}

/*
 * An http(s) URL that need not name a file (a webhook's endpoint), with
 * the checks and the canonical form of an http(s) source: out->kind is
 * REMORA_SOURCE_HTTP, out->file_name NULL.  Free with
 * remora_source_uri_free.
 */
bool
remora_http_url_parse(const char *text, RemoraSourceUri *out, char *errbuf,
					  size_t errlen)
{
	bool ok;

	memset(out, 0, sizeof(*out));
	if (text == NULL || text[0] == '\0' || strlen(text) > REMORA_MAX_URL_LEN ||
		remora_has_ctrl(text, false) || !remora_utf8_valid(text, strlen(text)))
	{
		remora_errbuf_set(errbuf, errlen,
						  "the URL must be 1 to %d bytes of UTF-8 without "
						  "spaces or control characters",
						  REMORA_MAX_URL_LEN);
		return false;
	}
	ok = parse_http_stable(text, false, out, errbuf, errlen);
	if (!ok)
		remora_source_uri_free(out);
	return ok;
}
