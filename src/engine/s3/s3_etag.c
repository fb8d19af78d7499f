/*-------------------------------------------------------------------------
 *
 * s3_etag.c
 *	  ETag dialects: the forms stores write an ETag in, compared, the
 *	  ETag a multipart upload's parts make, and the ETag of an answer.
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "engine/s3/s3.h"
#include "engine/s3/s3xml.h"
#include "engine/common/util.h"

/* The value inside quotes: "v", &quot;v&quot; or v, whitespace trimmed. */
static void
etag_inner(const char *src, const char **start, size_t *len)
{
	const char *s = src ? src : "";
	size_t      n;

	while (*s == ' ' || *s == '\t')
		s++;
	n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (n >= 2 && s[0] == '"' && s[n - 1] == '"')
		s++, n -= 2;
	else if (n >= 12 && strncmp(s, "&quot;", 6) == 0 &&
			 strncmp(s + n - 6, "&quot;", 6) == 0)
		s += 6, n -= 12;
	*start = s;
	*len = n;
}

/*
 * Write src in canonical form ("value") to dst.  An empty or absent ETag
 * stays empty, so that callers can tell "no ETag" apart.
 */
void
remora_etag_canon(const char *src, char *dst, size_t dstlen)
{
	const char *s;
	size_t      n;

	etag_inner(src, &s, &n);
	if (n == 0 || n + 3 > dstlen)
	{
		/* an ETag that does not fit is no ETag: callers then refuse it */
		if (dstlen > 0)
			dst[0] = '\0';
		return;
	}
	dst[0] = '"';
	memcpy(dst + 1, s, n);
	dst[n + 1] = '"';
	dst[n + 2] = '\0';
}

/* Same content?  Two empty ETags are never equal: nothing proves anything. */
bool
remora_etag_equal(const char *a, const char *b)
{
	const char *sa, *sb;
	size_t      na, nb;

	etag_inner(a, &sa, &na);
	etag_inner(b, &sb, &nb);
	return na > 0 && na == nb && strncasecmp(sa, sb, na) == 0;
}

/* Is this the ETag of a single PUT (or CopyObject): the content's MD5? */
bool
remora_etag_is_md5(const char *etag)
{
	const char *s;
	size_t      n;

	etag_inner(etag, &s, &n);
	if (n != 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char) s[i]))
			return false;
	return true;
}

/*
 * Has etag the shape S3 gives an object completed from nparts parts
 * ("<32 hex digits>-<nparts>")?  Only then is it compared with the one
 * computed from the parts: no store documents the formula (AWS says only
 * that it is not an MD5), so another shape proves nothing either way.
 */
bool
remora_etag_is_multipart(const char *etag, int nparts)
{
	const char *s;
	size_t      n;
	char        tail[16];

	etag_inner(etag, &s, &n);
	snprintf(tail, sizeof(tail), "-%d", nparts);
	if (n != 32 + strlen(tail) || strncmp(s + 32, tail, strlen(tail)) != 0)
		return false;
	for (int i = 0; i < 32; i++)
		if (!isxdigit((unsigned char) s[i]))
			return false;
	return true;
}

/*
 * The ETag S3 gives an object completed from parts whose ETags are the
 * parts' MD5s: the MD5 of the concatenated binary MD5s, "-" and the count.
 * False when a part's ETag is not an MD5 (nothing to compute from).
 */
bool
remora_etag_of_parts(const char *const *part_etags, int nparts, char *dst,
					 size_t dstlen)
{
	EVP_MD_CTX   *ctx;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int  mdlen = 0;
	bool          ok = nparts > 0 && dstlen >= 48;

	ctx = ok ? EVP_MD_CTX_new() : NULL;
	ok = ctx && EVP_DigestInit_ex(ctx, EVP_md5(), NULL);
	for (int i = 0; ok && i < nparts; i++)
	{
		const char   *s;
		size_t        n;
		unsigned char bin[16];

		ok = remora_etag_is_md5(part_etags[i]);
		if (!ok)
			break;
		etag_inner(part_etags[i], &s, &n);
		for (int j = 0; j < 16; j++)
			bin[j] = (unsigned char) (remora_hex_value(s[2 * j]) << 4 |
									  remora_hex_value(s[2 * j + 1]));
		ok = EVP_DigestUpdate(ctx, bin, sizeof(bin));
	}
	ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == 16;
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return false;
	dst[0] = '"';
	for (int j = 0; j < 16; j++)
		sprintf(dst + 1 + 2 * j, "%02x", md[j]);
	snprintf(dst + 33, dstlen - 33, "-%d\"", nparts);
	return true;
}

/*
 * May etag be that of an object completed from these parts?  Only an ETag
 * of S3's shape with our part count is compared with the one computed from
 * the parts; any other (the test server gives the whole object's MD5) is
 * not judged by it.
 */
bool
remora_etag_fits_parts(const char *etag, const char *const *part_etags,
					   int nparts)
{
	char want[REMORA_ETAG_MAX];

	if (!remora_etag_is_multipart(etag, nparts) ||
		!remora_etag_of_parts(part_etags, nparts, want, sizeof(want)))
		return true;
	return remora_etag_equal(etag, want);
}

/*
 * The ETag a PUT answered: true with the canonical ETag in etag; false with
 * err set when the PUT failed or the store named no ETag (retryable).
 */
bool
remora_s3_put_etag(const Request *req, CURLcode rc, char *etag, size_t etaglen,
				   RemoraTaskError *err, const char *what)
{
	if (remora_s3_failed(req, rc, err, what))
		return false;
	remora_etag_canon(req->hdr.etag, etag, etaglen);
	if (etag[0] != '\0')
		return true;
	remora_error_set(err, REMORA_ERR_S3, true, req->status,
					 "%s: the store answered no ETag", what);
	return false;
}

/*
 * The ETag of a completed object from the HEAD asked for when the
 * completion's answer named none (RGW): true with the canonical ETag in
 * etag when the object has size bytes and an ETag; false with err set.
 */
bool
remora_s3_head_etag(const Request *req, CURLcode rc, int64_t size, char *etag,
					size_t etaglen, RemoraTaskError *err, const char *what)
{
	if (remora_s3_failed(req, rc, err, what))
		return false;
	remora_etag_canon(req->hdr.etag, etag, etaglen);
	if (etag[0] != '\0' && req->hdr.content_length == size)
		return true;
	remora_error_set(err, REMORA_ERR_S3, true, req->status,
					 "%s: the object has %" PRId64
					 " bytes and ETag '%s', not %" PRId64 " bytes",
					 what, req->hdr.content_length, etag, size);
	return false;
}

/*
 * The ETag in the XML answer of a request that S3 may fail after its
 * status line (CompleteMultipartUpload, CopyObject, UploadPartCopy answer
 * 200 and can still put an <Error> in the body).  Returns the canonical
 * ETag, malloc'd; "" when the answer is the expected one but has no ETag
 * (RGW's CompleteMultipartUploadResult): the caller must find it out by
 * HEAD.  NULL, with err set, when the answer is an <Error> (retryable as
 * its code says, and always for InternalError) or is not understood.
 */
char *
remora_s3_answer_etag(const Request *req, const char *root,
					  RemoraTaskError *err, const char *what)
{
	char *got_root = NULL;
	char *etag = NULL;
	char *out = NULL;

	if (req->body)
		etag = remora_s3xml_text(req->body, req->body_len, "ETag", &got_root);
	if (got_root && strcmp(got_root, root) == 0)
	{
		out = malloc(REMORA_ETAG_MAX);
		if (out)
			remora_etag_canon(etag, out, REMORA_ETAG_MAX);
	}
	if (out == NULL)
	{
		Request copy = *req;

		/* judged as the failure it is: a server error */
		copy.status = 500;
		remora_s3_failed(&copy, CURLE_OK, err, what);
		err->http_status = req->status;
		if (got_root == NULL || strcmp(got_root, "Error") != 0)
			snprintf(err->message, sizeof(err->message),
					 "%s: the store's answer was not a %s", what, root);
	}
	free(etag);
	free(got_root);
	return out;
}
