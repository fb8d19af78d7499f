/*-------------------------------------------------------------------------
 *
 * sigv4.c
 *	  AWS Signature Version 4 for S3: canonical requests, the Authorization
 *	  header and presigned (query-string) URLs.
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
 * provides SHA-256 and HMAC; only its non-deprecated OpenSSL 3 entry points
 * are used.
 *
 * The secret key is only ever an HMAC key: it is never copied into an
 * output or an error message, and the derived keys are wiped after use.
 * Error messages do not repeat header names or values either, since
 * x-amz-security-token is a header.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/sigv4.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define SIGV4_ALGORITHM     "AWS4-HMAC-SHA256"
#define SIGV4_TERMINATOR    "aws4_request"
#define SIGV4_UNSIGNED      "UNSIGNED-PAYLOAD"
#define SHA256_LEN          32
#define PRESIGN_MAX_EXPIRES 604800 /* seven days: S3's limit */

/*
 * Upper bound on query parameters and headers.  Far above anything S3
 * accepts; it only keeps the int arithmetic below clear of overflow.
 */
#define MAX_ITEMS 100000

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

/* ----------------------------------------------------------------
 * A growable string.  An allocation failure is remembered, later appends
 * become no-ops, and sb_finish() reports it, so that callers check once.
 * ----------------------------------------------------------------
 */
typedef struct StrBuf
{
	char  *data;
	size_t len;
	size_t cap;
	bool   failed;
} StrBuf;

static void
sb_init(StrBuf *sb)
{
	sb->data = NULL;
	sb->len = 0;
	sb->cap = 0;
	sb->failed = false;
}

static void
sb_free(StrBuf *sb)
{
	free(sb->data);
	sb_init(sb);
}

/* Make room for extra more bytes and the terminating NUL. */
static bool
sb_reserve(StrBuf *sb, size_t extra)
{
	size_t need;
	size_t newcap;
	char  *p;

	if (sb->failed)
		return false;
	if (extra > SIZE_MAX - sb->len - 1)
	{
		sb->failed = true;
		return false;
	}
	need = sb->len + extra + 1;
	if (need <= sb->cap)
		return true;
	newcap = (sb->cap > 0) ? sb->cap : 128;
	while (newcap < need)
		newcap = (newcap > SIZE_MAX / 2) ? need : newcap * 2;
	p = realloc(sb->data, newcap);
	if (p == NULL)
	{
		sb->failed = true;
		return false;
	}
	sb->data = p;
	sb->cap = newcap;
	sb->data[sb->len] = '\0';
	return true;
}

static void
sb_append(StrBuf *sb, const char *s, size_t n)
{
	if (!sb_reserve(sb, n))
		return;
	memcpy(sb->data + sb->len, s, n);
	sb->len += n;
	sb->data[sb->len] = '\0';
}

static void
sb_appends(StrBuf *sb, const char *s)
{
	sb_append(sb, s, strlen(s));
}

static void
sb_appendc(StrBuf *sb, char c)
{
	sb_append(sb, &c, 1);
}

/* Hand the string over to the caller (never NULL unless out of memory). */
static char *
sb_finish(StrBuf *sb)
{
	char *result;

	sb_reserve(sb, 0);
	if (sb->failed)
	{
		sb_free(sb);
		return NULL;
	}
	result = sb->data;
	sb_init(sb);
	return result;
}

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
sb_append_encoded(StrBuf *sb, const char *s, size_t len, bool keep_slash)
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
		sb_append(sb, s + start, i - start);
		esc[0] = '%';
		esc[1] = hexdigits[c >> 4];
		esc[2] = hexdigits[c & 0x0f];
		sb_append(sb, esc, 3);
		start = i + 1;
	}
	sb_append(sb, s + start, len - start);
}

char *
remora_uri_encode(const char *s, size_t len, bool keep_slash)
{
	StrBuf sb;

	if (s == NULL && len > 0)
		return NULL;
	sb_init(&sb);
	if (len > 0)
		sb_append_encoded(&sb, s, len, keep_slash);
	return sb_finish(&sb);
}

static void
hex_encode(const unsigned char *bytes, size_t n, char *out)
{
	static const char hexdigits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++)
	{
		out[2 * i] = hexdigits[bytes[i] >> 4];
		out[2 * i + 1] = hexdigits[bytes[i] & 0x0f];
	}
	out[2 * n] = '\0';
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
	hex_encode(md, SHA256_LEN, out);
	return true;
}

void
remora_sha256_hex(const void *data, size_t len, char out[65])
{
	/* on the (theoretical) failure out is "", which matches no signature */
	(void) sha256_hex(data, len, out);
}

static bool
hmac_sha256(const unsigned char *key, size_t keylen, const char *data,
			unsigned char out[SHA256_LEN])
{
	unsigned int outlen = 0;

	if (keylen > INT_MAX)
		return false;
	if (HMAC(EVP_sha256(), key, (int) keylen, (const unsigned char *) data,
			 strlen(data), out, &outlen) == NULL)
		return false;
	return outlen == SHA256_LEN;
}

/*
 * signature = HMAC(kSigning, string_to_sign), where kSigning is derived by
 * the chain "AWS4"+secret -> date -> region -> service -> "aws4_request".
 * The intermediate keys are as good as the secret for a day, so they are
 * wiped.
 */
static bool
compute_signature(const RemoraSigV4Creds *creds, const char *date8,
				  const char *string_to_sign, char sig[65])
{
	size_t         seclen = strlen(creds->secret_access_key);
	unsigned char *k0;
	unsigned char  ka[SHA256_LEN];
	unsigned char  kb[SHA256_LEN];
	bool           ok;

	if (seclen > SIZE_MAX - 4)
		return false;
	k0 = malloc(seclen + 4);
	if (k0 == NULL)
		return false;
	memcpy(k0, "AWS4", 4);
	memcpy(k0 + 4, creds->secret_access_key, seclen);

	ok = hmac_sha256(k0, seclen + 4, date8, ka) &&
		 hmac_sha256(ka, SHA256_LEN, creds->region, kb) &&
		 hmac_sha256(kb, SHA256_LEN, creds->service, ka) &&
		 hmac_sha256(ka, SHA256_LEN, SIGV4_TERMINATOR, kb) &&
		 hmac_sha256(kb, SHA256_LEN, string_to_sign, ka);
	if (ok)
		hex_encode(ka, SHA256_LEN, sig);

	OPENSSL_cleanse(k0, seclen + 4);
	free(k0);
	OPENSSL_cleanse(ka, sizeof(ka));
	OPENSSL_cleanse(kb, sizeof(kb));
	return ok;
}

/* ----------------------------------------------------------------
 * Validation
 * ----------------------------------------------------------------
 */

/* RFC 9110 token characters: what a method or a header name may use. */
static bool
is_tchar(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		   (c >= '0' && c <= '9') ||
		   (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool
is_token(const char *s)
{
	if (s == NULL || s[0] == '\0')
		return false;
	for (; *s; s++)
		if (!is_tchar((unsigned char) *s))
			return false;
	return true;
}

/*
 * Access key, region and service end up in "ak/date/region/service/..."
 * and in the Authorization header: refuse what would change how those
 * parse ('/', ',', blanks, controls).
 */
static bool
is_scope_part(const char *s)
{
	if (s == NULL || s[0] == '\0')
		return false;
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c <= 0x20 || c >= 0x7f || c == '/' || c == ',')
			return false;
	}
	return true;
}

/* A header value may hold anything but control characters (HTAB aside). */
static bool
is_header_value(const char *s)
{
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return false;
	}
	return true;
}

/* Does the header value contain anything once blanks are trimmed? */
static bool
has_content(const char *s)
{
	for (; *s; s++)
		if (*s != ' ' && *s != '\t')
			return true;
	return false;
}

static bool
validate_scope(const RemoraSigV4Creds *creds, char *errbuf, size_t errlen)
{
	if (creds == NULL)
	{
		seterr(errbuf, errlen, "no credentials given");
		return false;
	}
	if (!is_scope_part(creds->region))
	{
		seterr(errbuf, errlen, "region is missing or malformed");
		return false;
	}
	if (!is_scope_part(creds->service))
	{
		seterr(errbuf, errlen, "service is missing or malformed");
		return false;
	}
	return true;
}

static bool
validate_creds(const RemoraSigV4Creds *creds, char *errbuf, size_t errlen)
{
	if (!validate_scope(creds, errbuf, errlen))
		return false;
	if (!is_scope_part(creds->access_key_id))
	{
		seterr(errbuf, errlen, "access key id is missing or malformed");
		return false;
	}
	/* never describe the secret beyond its absence */
	if (creds->secret_access_key == NULL || creds->secret_access_key[0] == '\0')
	{
		seterr(errbuf, errlen, "secret access key is missing");
		return false;
	}
	return true;
}

static bool
validate_query(const RemoraSigV4Request *req, char *errbuf, size_t errlen)
{
	if (req->nquery < 0 || req->nquery > MAX_ITEMS ||
		(req->nquery > 0 && req->query == NULL))
	{
		seterr(errbuf, errlen, "bad query parameter count");
		return false;
	}
	for (int i = 0; i < req->nquery; i++)
	{
		if (req->query[i].key == NULL || req->query[i].key[0] == '\0')
		{
			seterr(errbuf, errlen, "query parameter %d has no name", i + 1);
			return false;
		}
	}
	return true;
}

/*
 * Header names must be tokens, values free of CR, LF and other controls
 * (one would split the header on the wire), each name given once, and a
 * non-empty host present.
 */
static bool
validate_headers(const RemoraSigV4Request *req, char *errbuf, size_t errlen)
{
	bool have_host = false;

	if (req->nheaders < 0 || req->nheaders > MAX_ITEMS ||
		(req->nheaders > 0 && req->headers == NULL))
	{
		seterr(errbuf, errlen, "bad header count");
		return false;
	}
	for (int i = 0; i < req->nheaders; i++)
	{
		const RemoraKV *h = &req->headers[i];

		if (!is_token(h->key))
		{
			seterr(errbuf, errlen, "header %d has a malformed name", i + 1);
			return false;
		}
		if (h->value == NULL || !is_header_value(h->value))
		{
			seterr(errbuf, errlen,
				   "header %d has a missing value or one with control "
				   "characters",
				   i + 1);
			return false;
		}
		for (int j = 0; j < i; j++)
		{
			if (strcasecmp(h->key, req->headers[j].key) == 0)
			{
				seterr(errbuf, errlen, "header %d repeats header %d", i + 1,
					   j + 1);
				return false;
			}
		}
		if (strcasecmp(h->key, "host") == 0)
			have_host = has_content(h->value);
	}
	if (!have_host)
	{
		seterr(errbuf, errlen, "a non-empty host header is required");
		return false;
	}
	return true;
}

static bool
validate_request(const RemoraSigV4Request *req, bool need_payload, char *errbuf,
				 size_t errlen)
{
	if (req == NULL)
	{
		seterr(errbuf, errlen, "no request given");
		return false;
	}
	if (!is_token(req->method))
	{
		seterr(errbuf, errlen, "HTTP method is missing or malformed");
		return false;
	}
	if (req->path == NULL || (req->path[0] != '\0' && req->path[0] != '/'))
	{
		seterr(errbuf, errlen, "path is missing or does not start with /");
		return false;
	}
	if (need_payload && !is_scope_part(req->payload_hash))
	{
		seterr(errbuf, errlen, "payload hash is missing or malformed");
		return false;
	}
	return validate_query(req, errbuf, errlen) &&
		   validate_headers(req, errbuf, errlen);
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
	int    n = nquery + nextra;
	Pair  *pairs;
	StrBuf sb;
	bool   ok = true;

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
	sb_init(&sb);
	if (ok)
	{
		qsort(pairs, (size_t) n, sizeof(Pair), cmp_pairs);
		for (int i = 0; i < n; i++)
		{
			if (i > 0)
				sb_appendc(&sb, '&');
			sb_appends(&sb, pairs[i].name);
			sb_appendc(&sb, '=');
			sb_appends(&sb, pairs[i].value);
		}
	}
	free_pairs(pairs, n);
	if (!ok)
	{
		sb_free(&sb);
		return NULL;
	}
	return sb_finish(&sb);
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
	Pair  *pairs;
	int    n = 0;
	bool   ok = true;
	StrBuf hb;
	StrBuf sb;

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
	sb_init(&hb);
	sb_init(&sb);
	if (ok)
	{
		/* names are unique (validated), so this sorts by name alone */
		qsort(pairs, (size_t) n, sizeof(Pair), cmp_pairs);
		for (int i = 0; i < n; i++)
		{
			sb_appends(&hb, pairs[i].name);
			sb_appendc(&hb, ':');
			sb_appends(&hb, pairs[i].value);
			sb_appendc(&hb, '\n');
			if (i > 0)
				sb_appendc(&sb, ';');
			sb_appends(&sb, pairs[i].name);
		}
	}
	free_pairs(pairs, n);
	*headers_out = ok ? sb_finish(&hb) : NULL;
	*signed_out = ok ? sb_finish(&sb) : NULL;
	sb_free(&hb);
	sb_free(&sb);
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
typedef struct SignCtx
{
	char  amz_date[17];   /* YYYYMMDDTHHMMSSZ */
	char  date8[9];       /* YYYYMMDD */
	char *scope;          /* date8/region/service/aws4_request */
	char *query;          /* canonical query string */
	char *signed_headers; /* host;x-amz-date;... */
	char *canonical_request;
	char *string_to_sign;
} SignCtx;

static void
ctx_free(SignCtx *ctx)
{
	free(ctx->scope);
	free(ctx->query);
	free(ctx->signed_headers);
	free(ctx->canonical_request);
	free(ctx->string_to_sign);
	memset(ctx, 0, sizeof(*ctx));
}

/* The time stamps and the credential scope. */
static bool
ctx_begin(SignCtx *ctx, const RemoraSigV4Creds *creds, time_t now, char *errbuf,
		  size_t errlen)
{
	struct tm tm;
	size_t    len = 0;
	StrBuf    sb;

	memset(ctx, 0, sizeof(*ctx));
	/* gmtime_r: gmtime's shared static result is not thread-safe */
	if (gmtime_r(&now, &tm) != NULL)
		len = strftime(ctx->amz_date, sizeof(ctx->amz_date), "%Y%m%dT%H%M%SZ",
					   &tm);
	/* exactly 16 characters only for the years 1000 to 9999 */
	if (len != 16)
	{
		seterr(errbuf, errlen, "the signing time is out of range");
		return false;
	}
	memcpy(ctx->date8, ctx->amz_date, 8);
	ctx->date8[8] = '\0';

	sb_init(&sb);
	sb_appends(&sb, ctx->date8);
	sb_appendc(&sb, '/');
	sb_appends(&sb, creds->region);
	sb_appendc(&sb, '/');
	sb_appends(&sb, creds->service);
	sb_appendc(&sb, '/');
	sb_appends(&sb, SIGV4_TERMINATOR);
	ctx->scope = sb_finish(&sb);
	if (ctx->scope == NULL)
	{
		seterr(errbuf, errlen, "out of memory");
		return false;
	}
	return true;
}

/*
 * A signed x-amz-date or x-amz-content-sha256 that disagrees with what is
 * signed would make S3 refuse the request with a bare SignatureDoesNotMatch;
 * say what is wrong here instead.
 */
static bool
check_amz_headers(const RemoraSigV4Request *req, const SignCtx *ctx,
				  char *errbuf, size_t errlen)
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
			seterr(errbuf, errlen, "out of memory");
			return false;
		}
		same = (strcmp(got, want) == 0);
		free(got);
		if (!same)
		{
			seterr(errbuf, errlen, "header %s", what);
			return false;
		}
	}
	return true;
}

/* The canonical request and the string to sign. */
static bool
ctx_canonicalise(SignCtx *ctx, const RemoraSigV4Request *req,
				 const RemoraKV *extra, int nextra, bool host_only,
				 const char *payload_hash, char *errbuf, size_t errlen)
{
	char  *headers = NULL;
	char  *path = NULL;
	char   hash[65];
	StrBuf sb;

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

	sb_init(&sb);
	sb_appends(&sb, req->method);
	sb_appendc(&sb, '\n');
	sb_appends(&sb, path);
	sb_appendc(&sb, '\n');
	sb_appends(&sb, ctx->query);
	sb_appendc(&sb, '\n');
	sb_appends(&sb, headers); /* each line already ends in '\n' */
	sb_appendc(&sb, '\n');
	sb_appends(&sb, ctx->signed_headers);
	sb_appendc(&sb, '\n');
	sb_appends(&sb, payload_hash);
	ctx->canonical_request = sb_finish(&sb);
	free(headers);
	free(path);
	headers = path = NULL;
	if (ctx->canonical_request == NULL)
		goto oom;

	if (!sha256_hex(ctx->canonical_request, strlen(ctx->canonical_request),
					hash))
	{
		seterr(errbuf, errlen, "SHA-256 failed");
		return false;
	}
	sb_init(&sb);
	sb_appends(&sb, SIGV4_ALGORITHM "\n");
	sb_appends(&sb, ctx->amz_date);
	sb_appendc(&sb, '\n');
	sb_appends(&sb, ctx->scope);
	sb_appendc(&sb, '\n');
	sb_appends(&sb, hash);
	ctx->string_to_sign = sb_finish(&sb);
	if (ctx->string_to_sign == NULL)
		goto oom;
	return true;

oom:
	free(headers);
	free(path);
	seterr(errbuf, errlen, "out of memory");
	return false;
}

/*
 * Everything header signing and the debug entry point share: validate,
 * then build the canonical request and the string to sign.
 */
static bool
prepare_header_signing(SignCtx *ctx, const RemoraSigV4Request *req,
					   const RemoraSigV4Creds *creds, time_t now, char *errbuf,
					   size_t errlen)
{
	memset(ctx, 0, sizeof(*ctx));
	if (!validate_request(req, true, errbuf, errlen) ||
		!validate_scope(creds, errbuf, errlen) ||
		!ctx_begin(ctx, creds, now, errbuf, errlen))
		return false;
	return check_amz_headers(req, ctx, errbuf, errlen) &&
		   ctx_canonicalise(ctx, req, NULL, 0, false, req->payload_hash, errbuf,
							errlen);
}

/* ----------------------------------------------------------------
 * Entry points
 * ----------------------------------------------------------------
 */
bool
remora_sigv4_sign(const RemoraSigV4Request *req, const RemoraSigV4Creds *creds,
				  time_t now, RemoraSigV4Result *out, char *errbuf,
				  size_t errlen)
{
	SignCtx ctx;
	char    sig[65];
	int     n;
	bool    ok = false;

	memset(&ctx, 0, sizeof(ctx));
	if (out == NULL)
	{
		seterr(errbuf, errlen, "no result buffer given");
		return false;
	}
	memset(out, 0, sizeof(*out));
	if (!validate_creds(creds, errbuf, errlen) ||
		!prepare_header_signing(&ctx, req, creds, now, errbuf, errlen))
		goto done;
	if (!compute_signature(creds, ctx.date8, ctx.string_to_sign, sig))
	{
		seterr(errbuf, errlen, "HMAC-SHA256 failed");
		goto done;
	}
	n = snprintf(out->authorization, sizeof(out->authorization),
				 SIGV4_ALGORITHM
				 " Credential=%s/%s, SignedHeaders=%s, Signature=%s",
				 creds->access_key_id, ctx.scope, ctx.signed_headers, sig);
	if (n < 0 || (size_t) n >= sizeof(out->authorization))
	{
		memset(out, 0, sizeof(*out));
		seterr(errbuf, errlen, "the Authorization header would be too long");
		goto done;
	}
	memcpy(out->amz_date, ctx.amz_date, sizeof(out->amz_date));
	ok = true;

done:
	ctx_free(&ctx);
	return ok;
}

bool
remora_sigv4_debug(const RemoraSigV4Request *req, const RemoraSigV4Creds *creds,
				   time_t now, char **canonical_request, char **string_to_sign)
{
	SignCtx ctx;

	if (canonical_request == NULL || string_to_sign == NULL)
		return false;
	*canonical_request = NULL;
	*string_to_sign = NULL;
	if (!prepare_header_signing(&ctx, req, creds, now, NULL, 0))
	{
		ctx_free(&ctx);
		return false;
	}
	/* hand the two strings over rather than copying them */
	*canonical_request = ctx.canonical_request;
	*string_to_sign = ctx.string_to_sign;
	ctx.canonical_request = NULL;
	ctx.string_to_sign = NULL;
	ctx_free(&ctx);
	return true;
}

/* The presign parameters must not be given twice, in any case. */
static bool
is_presign_param(const char *key)
{
	static const char *const reserved[] = {
		"X-Amz-Algorithm", "X-Amz-Credential",    "X-Amz-Date",
		"X-Amz-Expires",   "X-Amz-SignedHeaders", "X-Amz-Signature",
	};

	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strcasecmp(key, reserved[i]) == 0)
			return true;
	return false;
}

static bool
validate_presign(const RemoraSigV4Request *req, int expires_seconds,
				 char *errbuf, size_t errlen)
{
	if (expires_seconds < 1 || expires_seconds > PRESIGN_MAX_EXPIRES)
	{
		seterr(errbuf, errlen, "expiry must be 1 to %d seconds, not %d",
			   PRESIGN_MAX_EXPIRES, expires_seconds);
		return false;
	}
	if (!validate_request(req, false, errbuf, errlen))
		return false;
	for (int i = 0; i < req->nquery; i++)
	{
		if (is_presign_param(req->query[i].key))
		{
			seterr(errbuf, errlen,
				   "query parameter %d is one that presigning sets", i + 1);
			return false;
		}
	}
	return true;
}

char *
remora_sigv4_presign(const RemoraSigV4Request *req,
					 const RemoraSigV4Creds *creds, time_t now,
					 int expires_seconds, char *errbuf, size_t errlen)
{
	SignCtx  ctx;
	RemoraKV extra[5];
	char     expires[16];
	char     sig[65];
	char    *credential = NULL;
	char    *result = NULL;
	StrBuf   sb;

	memset(&ctx, 0, sizeof(ctx));
	if (!validate_creds(creds, errbuf, errlen) ||
		!validate_presign(req, expires_seconds, errbuf, errlen) ||
		!ctx_begin(&ctx, creds, now, errbuf, errlen))
		goto done;

	sb_init(&sb);
	sb_appends(&sb, creds->access_key_id);
	sb_appendc(&sb, '/');
	sb_appends(&sb, ctx.scope);
	credential = sb_finish(&sb);
	if (credential == NULL)
	{
		seterr(errbuf, errlen, "out of memory");
		goto done;
	}
	snprintf(expires, sizeof(expires), "%d", expires_seconds);

	/* unencoded here; canonical_query() encodes them ('/' becomes %2F) */
	extra[0] = (RemoraKV){"X-Amz-Algorithm", SIGV4_ALGORITHM};
	extra[1] = (RemoraKV){"X-Amz-Credential", credential};
	extra[2] = (RemoraKV){"X-Amz-Date", ctx.amz_date};
	extra[3] = (RemoraKV){"X-Amz-Expires", expires};
	extra[4] = (RemoraKV){"X-Amz-SignedHeaders", "host"};

	if (!ctx_canonicalise(&ctx, req, extra, 5, true, SIGV4_UNSIGNED, errbuf,
						  errlen))
		goto done;
	if (!compute_signature(creds, ctx.date8, ctx.string_to_sign, sig))
	{
		seterr(errbuf, errlen, "HMAC-SHA256 failed");
		goto done;
	}

	/* the canonical query is already a valid query string; sign it last */
	sb_init(&sb);
	sb_appends(&sb, ctx.query);
	sb_appends(&sb, "&X-Amz-Signature=");
	sb_appends(&sb, sig);
	result = sb_finish(&sb);
	if (result == NULL)
		seterr(errbuf, errlen, "out of memory");

done:
	free(credential);
	ctx_free(&ctx);
	return result;
}
