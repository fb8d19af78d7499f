/*-------------------------------------------------------------------------
 *
 * sigv4_sign.c
 *	  SigV4's entry points: the Authorization header, its debug view and
 *	  presigned (query-string) URLs, and the HMAC-SHA256 key derivation
 *	  behind them.
 *
 * A request is validated (sigv4_check.c), put into canonical form and a
 * string to sign (sigv4_canon.c), and signed here.  Everything is a pure
 * function of its arguments, time included, so the unit tests can check
 * it against AWS's published examples.  OpenSSL provides HMAC; only its
 * non-deprecated OpenSSL 3 entry points are used.
 *
 * The secret key is only ever an HMAC key: it is never copied into an
 * output or an error message, and the derived keys are wiped after use.
 * Error messages do not repeat header names or values either, since
 * x-amz-security-token is a header.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/s3/sigv4_int.h"
#include "engine/common/util.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define PRESIGN_MAX_EXPIRES 604800 /* seven days: S3's limit */

/* ----------------------------------------------------------------
 * The signature
 * ----------------------------------------------------------------
 */
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
		remora_hex_encode(ka, SHA256_LEN, sig);

	OPENSSL_cleanse(k0, seclen + 4);
	free(k0);
	OPENSSL_cleanse(ka, sizeof(ka));
	OPENSSL_cleanse(kb, sizeof(kb));
	return ok;
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
	if (!remora_sigv4_validate_request(req, true, errbuf, errlen) ||
		!remora_sigv4_validate_scope(creds, errbuf, errlen) ||
		!remora_sigv4_ctx_begin(ctx, creds, now, errbuf, errlen))
		return false;
	return remora_sigv4_check_amz_headers(req, ctx, errbuf, errlen) &&
		   remora_sigv4_canonicalise(ctx, req, NULL, 0, false,
									 req->payload_hash, errbuf, errlen);
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
		remora_errbuf_set(errbuf, errlen, "no result buffer given");
		return false;
	}
	memset(out, 0, sizeof(*out));
	if (!remora_sigv4_validate_creds(creds, errbuf, errlen) ||
		!prepare_header_signing(&ctx, req, creds, now, errbuf, errlen))
		goto done;
	if (!compute_signature(creds, ctx.date8, ctx.string_to_sign, sig))
	{
		remora_errbuf_set(errbuf, errlen, "HMAC-SHA256 failed");
		goto done;
	}
	n = snprintf(out->authorization, sizeof(out->authorization),
				 SIGV4_ALGORITHM
				 " Credential=%s/%s, SignedHeaders=%s, Signature=%s",
				 creds->access_key_id, ctx.scope, ctx.signed_headers, sig);
	if (n < 0 || (size_t) n >= sizeof(out->authorization))
	{
		memset(out, 0, sizeof(*out));
		remora_errbuf_set(errbuf, errlen,
						  "the Authorization header would be too long");
		goto done;
	}
	memcpy(out->amz_date, ctx.amz_date, sizeof(out->amz_date));
	ok = true;

done:
	remora_sigv4_ctx_free(&ctx);
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
		remora_sigv4_ctx_free(&ctx);
		return false;
	}
	/* hand the two strings over rather than copying them */
	*canonical_request = ctx.canonical_request;
	*string_to_sign = ctx.string_to_sign;
	ctx.canonical_request = NULL;
	ctx.string_to_sign = NULL;
	remora_sigv4_ctx_free(&ctx);
	return true;
}

/* The presign parameters must not be given twice, in any case. */
static bool
is_presign_param(const char *key)
{
	static const char *const reserved[] = {
		"X-Amz-Algorithm",      "X-Amz-Credential",    "X-Amz-Date",
		"X-Amz-Expires",        "X-Amz-SignedHeaders", "X-Amz-Signature",
		"X-Amz-Security-Token",
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
		remora_errbuf_set(errbuf, errlen,
						  "expiry must be 1 to %d seconds, not %d",
						  PRESIGN_MAX_EXPIRES, expires_seconds);
		return false;
	}
	if (!remora_sigv4_validate_request(req, false, errbuf, errlen))
		return false;
	for (int i = 0; i < req->nquery; i++)
	{
		if (is_presign_param(req->query[i].key))
		{
			remora_errbuf_set(errbuf, errlen,
							  "query parameter %d is one that presigning sets",
							  i + 1);
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
	SignCtx   ctx;
	RemoraKV  extra[6];
	int       nextra = 5;
	char      expires[16];
	char      sig[65];
	char     *credential = NULL;
	char     *result = NULL;
	RemoraBuf sb = {0};

	memset(&ctx, 0, sizeof(ctx));
	if (!remora_sigv4_validate_creds(creds, errbuf, errlen) ||
		!validate_presign(req, expires_seconds, errbuf, errlen) ||
		!remora_sigv4_ctx_begin(&ctx, creds, now, errbuf, errlen))
		goto done;

	remora_buf_puts(&sb, creds->access_key_id);
	remora_buf_putc(&sb, '/');
	remora_buf_puts(&sb, ctx.scope);
	credential = remora_buf_release(&sb, NULL);
	if (credential == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		goto done;
	}
	snprintf(expires, sizeof(expires), "%d", expires_seconds);

	/* unencoded here; canonical_query() encodes them ('/' becomes %2F) */
	extra[0] = (RemoraKV){"X-Amz-Algorithm", SIGV4_ALGORITHM};
	extra[1] = (RemoraKV){"X-Amz-Credential", credential};
	extra[2] = (RemoraKV){"X-Amz-Date", ctx.amz_date};
	extra[3] = (RemoraKV){"X-Amz-Expires", expires};
	extra[4] = (RemoraKV){"X-Amz-SignedHeaders", "host"};
	/* temporary credentials: S3 signs the token with the rest */
	if (creds->session_token && creds->session_token[0])
		extra[nextra++] =
			(RemoraKV){"X-Amz-Security-Token", creds->session_token};

	if (!remora_sigv4_canonicalise(&ctx, req, extra, nextra, true,
								   SIGV4_UNSIGNED, errbuf, errlen))
		goto done;
	if (!compute_signature(creds, ctx.date8, ctx.string_to_sign, sig))
	{
		remora_errbuf_set(errbuf, errlen, "HMAC-SHA256 failed");
		goto done;
	}

	/* the canonical query is already a valid query string; sign it last */
	remora_buf_puts(&sb, ctx.query);
	remora_buf_puts(&sb, "&X-Amz-Signature=");
	remora_buf_puts(&sb, sig);
	result = remora_buf_release(&sb, NULL);
	if (result == NULL)
		remora_errbuf_set(errbuf, errlen, "out of memory");

done:
	free(credential);
	remora_sigv4_ctx_free(&ctx);
	return result;
}
