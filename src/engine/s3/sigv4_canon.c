/*-------------------------------------------------------------------------
 *
 * sigv4_canon.c
 *	  SigV4: URI encoding, the canonical request and the string to sign
 *	  (the signature itself, the Authorization header and presigned URLs
 *	  are sigv4_sign.c's).
 *
 * A signature is HMAC-SHA256 over a "string to sign" whose last line is the
 * hash of a canonical form of the request.  Client and server must build
 * that canonical form byte for byte alike, so the rules below are applied
 * exactly and nothing is guessed:
 *
 *	  METHOD
 *	  canonical URI      the unencoded path URI-encoded once, '/' kept; S3
 *						 does not normalise "." or ".." and does not
 *						 double-encode, unlike the other AWS services
 *	  canonical query    every key and value URI-encoded ('/' too), sorted
 *						 by encoded key then encoded value, "k=v" joined by
 *						 '&'; a valueless key is "k="
 *	  canonical headers  "name:value\n" with lower-case names sorted, values
 *						 trimmed and inner runs of blanks made one space
 *	  signed headers     the lower-case names, ';'-joined
 *	  payload hash       hex SHA-256 of the body, or UNSIGNED-PAYLOAD
 *
 * Everything here is a pure function of its arguments, time included, so
 * the unit tests can check it against AWS's published examples.  OpenSSL
 * provides SHA-256 (EVP_Digest, not deprecated in OpenSSL 3).
 *
 *-------------------------------------------------------------------------
 */
#include "engine/s3/sigv4_int.h"
#include "engine/common/util.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

/* ----------------------------------------------------------------
 * Encoding
 * ----------------------------------------------------------------
 */

/* RFC 3986 unreserved; spelled out because isalnum() follows the locale. */
static bool
is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		   (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
		   c == '~';
}

static void
buf_append_encoded(RemoraBuf *sb, const char *s, size_t len, bool keep_slash)
{
	static const char hexdigits[] = "0123456789ABCDEF";
	size_t            start = 0;

	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];
		char          esc[3];

		if (is_unreserved(c) || (keep_slash && c == '/'))
			continue;
		/* copy the run of bytes that need no escaping in one go */
		remora_buf_append(sb, s + start, i - start);
		esc[0] = '%';
		esc[1] = hexdigits[c >> 4];
		esc[2] = hexdigits[c & 0x0f];
		remora_buf_append(sb, esc, 3);
		start = i + 1;
	}
	remora_buf_append(sb, s + start, len - start);
}

char *
remora_uri_encode(const char *s, size_t len, bool keep_slash)
{
	RemoraBuf sb = {0};

	if (s == NULL && len > 0)
		return NULL;
	if (len > 0)
		buf_append_encoded(&sb, s, len, keep_slash);
	return remora_buf_release(&sb, NULL);
}

/* ----------------------------------------------------------------
 * Hashing
 * ----------------------------------------------------------------
 */
static bool
sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int  mdlen = 0;

	/* EVP_Digest wants a valid pointer even for an empty input */
	if (data == NULL)
		data = "";
	if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 ||
		mdlen != SHA256_LEN)
	{
		out[0] = '\0';
		return false;
	}
	remora_hex_encode(md, SHA256_LEN, out);
	return true;
}

void
remora_sha256_hex(const void *data, size_t len, char out[65])
{
	/* on the (theoretical) failure out is "", which matches no signature */
	(void) sha256_hex(data, len, out);
}

/* ----------------------------------------------------------------
 * Canonical request
 * ----------------------------------------------------------------
 */
typedef struct Pair
{
	char *name;
	char *value;
} Pair;

static void
free_pairs(Pair *pairs, int n)
{
	if (pairs == NULL)
		return;
	for (int i = 0; i < n; i++)
	{
		free(pairs[i].name);
		free(pairs[i].value);
	}
	free(pairs);
}

/* By name, then by value: bytewise, which is what AWS means by sorted. */
static int
cmp_pairs(const void *a, const void *b)
{
	const Pair *x = a;
	const Pair *y = b;
	int         c = strcmp(x->name, y->name);

	return (c != 0) ? c : strcmp(x->value, y->value);
}

static char *
encode_all(const char *s)
{
	return remora_uri_encode(s, strlen(s), false);
}

/*
 * The canonical query string of the request's parameters plus extra ones
 * (the presign parameters).  It is also a correctly encoded query string,
 * which is what presigning returns.  NULL when out of memory.
 */
static char *
canonical_query(const RemoraKV *query, int nquery, const RemoraKV *extra,
				int nextra)
{
	int       n = nquery + nextra;
	Pair     *pairs;
	RemoraBuf sb = {0};
	bool      ok = true;

	pairs = calloc((n > 0) ? (size_t) n : 1, sizeof(Pair));
	if (pairs == NULL)
		return NULL;
	for (int i = 0; i < n && ok; i++)
	{
		const RemoraKV *kv = (i < nquery) ? &query[i] : &extra[i - nquery];

		pairs[i].name = encode_all(kv->key);
		pairs[i].value = encode_all(kv->value ? kv->value : "");
		ok = (pairs[i].name != NULL && pairs[i].value != NULL);
	}
	if (ok)
	{
		qsort(pairs, (size_t) n, sizeof(Pair), cmp_pairs);
		for (int i = 0; i < n; i++)
		{
			if (i > 0)
				remora_buf_putc(&sb, '&');
			remora_buf_puts(&sb, pairs[i].name);
			remora_buf_putc(&sb, '=');
			remora_buf_puts(&sb, pairs[i].value);
		}
	}
	free_pairs(pairs, n);
	if (!ok)
	{
		remora_buf_free(&sb);
		return NULL;
	}
	return remora_buf_release(&sb, NULL);
}

static char *
lower_dup(const char *s)
{
	size_t n = strlen(s);
	char  *r = malloc(n + 1);

	if (r == NULL)
		return NULL;
	for (size_t i = 0; i <= n; i++)
		r[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char) (s[i] - 'A' + 'a') : s[i];
	return r;
}

/*
 * SigV4's Trimall: drop leading and trailing blanks, make every inner run
 * of blanks one space.  Blanks are SP and HTAB, as in HTTP's own
 * whitespace and in the AWS SDKs.
 */
static char *
trim_value(const char *s)
{
	char  *r = malloc(strlen(s) + 1);
	size_t n = 0;
	bool   pending_space = false;

	if (r == NULL)
		return NULL;
	for (; *s; s++)
	{
		if (*s == ' ' || *s == '\t')
		{
			pending_space = (n > 0);
			continue;
		}
		if (pending_space)
			r[n++] = ' ';
		pending_space = false;
		r[n++] = *s;
	}
	r[n] = '\0';
	return r;
}

/*
 * Canonical headers ("name:value\n" each) and the signed-header list.
 * With host_only, just the host header: that is all a presigned URL signs.
 */
static bool
canonical_headers(const RemoraSigV4Request *req, bool host_only,
				  char **headers_out, char **signed_out)
{
	Pair     *pairs;
	int       n = 0;
	bool      ok = true;
	RemoraBuf hb = {0};
	RemoraBuf sb = {0};

	pairs =
		calloc((req->nheaders > 0) ? (size_t) req->nheaders : 1, sizeof(Pair));
	if (pairs == NULL)
		return false;
	for (int i = 0; i < req->nheaders && ok; i++)
	{
		const RemoraKV *h = &req->headers[i];

		if (host_only && strcasecmp(h->key, "host") != 0)
			continue;
		pairs[n].name = lower_dup(h->key);
		pairs[n].value = trim_value(h->value);
		ok = (pairs[n].name != NULL && pairs[n].value != NULL);
		n++;
	}
	if (ok)
	{
		/* names are unique (validated), so this sorts by name alone */
		qsort(pairs, (size_t) n, sizeof(Pair), cmp_pairs);
		for (int i = 0; i < n; i++)
		{
			remora_buf_puts(&hb, pairs[i].name);
			remora_buf_putc(&hb, ':');
			remora_buf_puts(&hb, pairs[i].value);
			remora_buf_putc(&hb, '\n');
			if (i > 0)
				remora_buf_putc(&sb, ';');
			remora_buf_puts(&sb, pairs[i].name);
		}
	}
	free_pairs(pairs, n);
	*headers_out = ok ? remora_buf_release(&hb, NULL) : NULL;
	*signed_out = ok ? remora_buf_release(&sb, NULL) : NULL;
	remora_buf_free(&hb);
	remora_buf_free(&sb);
	if (*headers_out == NULL || *signed_out == NULL)
	{
		free(*headers_out);
		free(*signed_out);
		*headers_out = *signed_out = NULL;
		return false;
	}
	return true;
}

/* ----------------------------------------------------------------
 * One signing operation: its time, scope and canonical forms.
 * ----------------------------------------------------------------
 */
void
remora_sigv4_ctx_free(SignCtx *ctx)
{
	free(ctx->scope);
	free(ctx->query);
	free(ctx->signed_headers);
	free(ctx->canonical_request);
	free(ctx->string_to_sign);
	memset(ctx, 0, sizeof(*ctx));
}

/* The time stamps and the credential scope. */
bool
remora_sigv4_ctx_begin(SignCtx *ctx, const RemoraSigV4Creds *creds, time_t now,
					   char *errbuf, size_t errlen)
{
	struct tm tm;
	size_t    len = 0;
	RemoraBuf sb = {0};

	memset(ctx, 0, sizeof(*ctx));
	/* gmtime_r: gmtime's shared static result is not thread-safe */
	if (gmtime_r(&now, &tm) != NULL)
		len = strftime(ctx->amz_date, sizeof(ctx->amz_date), "%Y%m%dT%H%M%SZ",
					   &tm);
	/* exactly 16 characters only for the years 1000 to 9999 */
	if (len != 16)
	{
		remora_errbuf_set(errbuf, errlen, "the signing time is out of range");
		return false;
	}
	memcpy(ctx->date8, ctx->amz_date, 8);
	ctx->date8[8] = '\0';

	remora_buf_puts(&sb, ctx->date8);
	remora_buf_putc(&sb, '/');
	remora_buf_puts(&sb, creds->region);
	remora_buf_putc(&sb, '/');
	remora_buf_puts(&sb, creds->service);
	remora_buf_putc(&sb, '/');
	remora_buf_puts(&sb, SIGV4_TERMINATOR);
	ctx->scope = remora_buf_release(&sb, NULL);
	if (ctx->scope == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	return true;
}

/*
 * A signed x-amz-date or x-amz-content-sha256 that disagrees with what is
 * signed would make S3 refuse the request with a bare SignatureDoesNotMatch;
 * say what is wrong here instead.
 */
bool
remora_sigv4_check_amz_headers(const RemoraSigV4Request *req,
							   const SignCtx *ctx, char *errbuf, size_t errlen)
{
	for (int i = 0; i < req->nheaders; i++)
	{
		const RemoraKV *h = &req->headers[i];
		const char     *want;
		const char     *what;
		char           *got;
		bool            same;

		if (strcasecmp(h->key, "x-amz-date") == 0)
		{
			want = ctx->amz_date;
			what = "x-amz-date does not match the signing time";
		}
		else if (strcasecmp(h->key, "x-amz-content-sha256") == 0)
		{
			want = req->payload_hash;
			what = "x-amz-content-sha256 does not match the payload hash";
		}
		else
			continue;
		got = trim_value(h->value);
		if (got == NULL)
		{
			remora_errbuf_set(errbuf, errlen, "out of memory");
			return false;
		}
		same = (strcmp(got, want) == 0);
		free(got);
		if (!same)
		{
			remora_errbuf_set(errbuf, errlen, "header %s", what);
			return false;
		}
	}
	return true;
}

/* The canonical request and the string to sign. */
bool
remora_sigv4_canonicalise(SignCtx *ctx, const RemoraSigV4Request *req,
						  const RemoraKV *extra, int nextra, bool host_only,
						  const char *payload_hash, char *errbuf, size_t errlen)
{
	char     *headers = NULL;
	char     *path = NULL;
	char      hash[65];
	RemoraBuf sb = {0};

	ctx->query = canonical_query(req->query, req->nquery, extra, nextra);
	if (ctx->query == NULL ||
		!canonical_headers(req, host_only, &headers, &ctx->signed_headers))
		goto oom;
	/* an empty path is the root; anything else is encoded exactly once */
	path = (req->path[0] == '\0')
			   ? remora_uri_encode("/", 1, true)
			   : remora_uri_encode(req->path, strlen(req->path), true);
	if (path == NULL)
		goto oom;

	remora_buf_puts(&sb, req->method);
	remora_buf_putc(&sb, '\n');
	remora_buf_puts(&sb, path);
	remora_buf_putc(&sb, '\n');
	remora_buf_puts(&sb, ctx->query);
	remora_buf_putc(&sb, '\n');
	remora_buf_puts(&sb, headers); /* each line already ends in '\n' */
	remora_buf_putc(&sb, '\n');
	remora_buf_puts(&sb, ctx->signed_headers);
	remora_buf_putc(&sb, '\n');
	remora_buf_puts(&sb, payload_hash);
	ctx->canonical_request = remora_buf_release(&sb, NULL);
	free(headers);
	free(path);
	headers = path = NULL;
	if (ctx->canonical_request == NULL)
		goto oom;

	if (!sha256_hex(ctx->canonical_request, strlen(ctx->canonical_request),
					hash))
	{
		remora_errbuf_set(errbuf, errlen, "SHA-256 failed");
		return false;
	}
	remora_buf_puts(&sb, SIGV4_ALGORITHM "\n");
	remora_buf_puts(&sb, ctx->amz_date);
	remora_buf_putc(&sb, '\n');
	remora_buf_puts(&sb, ctx->scope);
	remora_buf_putc(&sb, '\n');
	remora_buf_puts(&sb, hash);
	ctx->string_to_sign = remora_buf_release(&sb, NULL);
	if (ctx->string_to_sign == NULL)
		goto oom;
	return true;

oom:
	free(headers);
	free(path);
	remora_errbuf_set(errbuf, errlen, "out of memory");
	return false;
}
