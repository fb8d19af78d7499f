/*-------------------------------------------------------------------------
 *
 * sigv4_check.c
 *	  SigV4: validation of credentials and requests before anything is
 *	  signed.
 *
 * What is signed must parse on the server exactly as it was signed:
 * methods and header names are RFC 9110 tokens, header values hold no
 * control character that would split them on the wire, each header is
 * given once and a host is present, and the parts of the credential scope
 * hold nothing that changes how "ak/date/region/service/..." parses.
 * Messages never describe the secret beyond its absence and never repeat
 * a header's name or value (x-amz-security-token is a header).
 *
 *-------------------------------------------------------------------------
 */
#include "engine/s3/sigv4_int.h"
#include "engine/common/util.h"

#include <string.h>
#include <strings.h>

/*
 * Upper bound on query parameters and headers.  Far above anything S3
 * accepts; it only keeps the int arithmetic of the canonical forms clear
 * of overflow.
 */
#define MAX_ITEMS 100000

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

bool
remora_sigv4_validate_scope(const RemoraSigV4Creds *creds, char *errbuf,
							size_t errlen)
{
	if (creds == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "no credentials given");
		return false;
	}
	if (!is_scope_part(creds->region))
	{
		remora_errbuf_set(errbuf, errlen, "region is missing or malformed");
		return false;
	}
	if (!is_scope_part(creds->service))
	{
		remora_errbuf_set(errbuf, errlen, "service is missing or malformed");
		return false;
	}
	return true;
}

bool
remora_sigv4_validate_creds(const RemoraSigV4Creds *creds, char *errbuf,
							size_t errlen)
{
	if (!remora_sigv4_validate_scope(creds, errbuf, errlen))
		return false;
	if (!is_scope_part(creds->access_key_id))
	{
		remora_errbuf_set(errbuf, errlen,
						  "access key id is missing or malformed");
		return false;
	}
	/* never describe the secret beyond its absence */
	if (creds->secret_access_key == NULL || creds->secret_access_key[0] == '\0')
	{
		remora_errbuf_set(errbuf, errlen, "secret access key is missing");
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
		remora_errbuf_set(errbuf, errlen, "bad query parameter count");
		return false;
	}
	for (int i = 0; i < req->nquery; i++)
	{
		if (req->query[i].key == NULL || req->query[i].key[0] == '\0')
		{
			remora_errbuf_set(errbuf, errlen, "query parameter %d has no name",
							  i + 1);
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
		remora_errbuf_set(errbuf, errlen, "bad header count");
		return false;
	}
	for (int i = 0; i < req->nheaders; i++)
	{
		const RemoraKV *h = &req->headers[i];

		if (!is_token(h->key))
		{
			remora_errbuf_set(errbuf, errlen, "header %d has a malformed name",
							  i + 1);
			return false;
		}
		if (h->value == NULL || !is_header_value(h->value))
		{
			remora_errbuf_set(
				errbuf, errlen,
				"header %d has a missing value or one with control "
				"characters",
				i + 1);
			return false;
		}
		for (int j = 0; j < i; j++)
		{
			if (strcasecmp(h->key, req->headers[j].key) == 0)
			{
				remora_errbuf_set(errbuf, errlen, "header %d repeats header %d",
								  i + 1, j + 1);
				return false;
			}
		}
		if (strcasecmp(h->key, "host") == 0)
			have_host = has_content(h->value);
	}
	if (!have_host)
	{
		remora_errbuf_set(errbuf, errlen,
						  "a non-empty host header is required");
		return false;
	}
	return true;
}

bool
remora_sigv4_validate_request(const RemoraSigV4Request *req, bool need_payload,
							  char *errbuf, size_t errlen)
{
	if (req == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "no request given");
		return false;
	}
	if (!is_token(req->method))
	{
		remora_errbuf_set(errbuf, errlen,
						  "HTTP method is missing or malformed");
		return false;
	}
	if (req->path == NULL || (req->path[0] != '\0' && req->path[0] != '/'))
	{
		remora_errbuf_set(errbuf, errlen,
						  "path is missing or does not start with /");
		return false;
	}
	if (need_payload && !is_scope_part(req->payload_hash))
	{
		remora_errbuf_set(errbuf, errlen,
						  "payload hash is missing or malformed");
		return false;
	}
	return validate_query(req, errbuf, errlen) &&
		   validate_headers(req, errbuf, errlen);
}
