/*-------------------------------------------------------------------------
 *
 * http_headers.h
 *	  What the engine reads of HTTP: the response headers it needs, the
 *	  Content-Range of a partial answer, a Link header's next page, the
 *	  origin of a URL.
 *
 * Pure parsing, a leaf: the loop feeds header lines in, the transfers and
 * listings read the fields out.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_HTTP_HEADERS_H
#define REMORA_HTTP_HEADERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The headers of the last response of an exchange (redirects reset them). */
typedef struct RemoraHttpHeaders
{
	char    etag[256];
	char    last_modified[64];
	char    content_range[128];
	char    version_id[256];   /* x-amz-version-id, "" if none */
	char    bucket_region[64]; /* x-amz-bucket-region, "" if none */
	char   *link_next;      /* a Link header's rel="next" target (malloc'd) */
	int64_t content_length; /* -1 if none */
	long    retry_after;    /* seconds, -1 if none */
} RemoraHttpHeaders;

extern void remora_http_headers_init(RemoraHttpHeaders *h);
extern void remora_http_headers_free(RemoraHttpHeaders *h);

/* One header line as curl hands it over (a status line starts afresh). */
extern void remora_http_header_line(RemoraHttpHeaders *h, const char *buf,
									size_t len);

/* Content-Range: bytes START-END/TOTAL */
extern bool remora_http_content_range(const char *v, int64_t *start,
									  int64_t *end, int64_t *total);

/* "scheme://host:port" of a URL (malloc'd), or NULL */
extern char *remora_url_origin(const char *url);
extern bool  remora_url_origin_is(const char *url, const char *origin);

/* Does a URL carry user information (credentials)?  Unparseable: true. */
extern bool remora_url_has_userinfo(const char *url);

#endif /* REMORA_HTTP_HEADERS_H */
