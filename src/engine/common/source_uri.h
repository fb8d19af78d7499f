/*-------------------------------------------------------------------------
 *
 * source_uri.h
 *	  Parsing and validation of source locations, target bucket names and
 *	  target prefixes.
 *
 * This is part of the transfer engine: plain C with malloc/free, no
 * PostgreSQL.  Every function reports a problem by filling a caller-supplied
 * error buffer with one sentence that names what is wrong and never echoes
 * a credential (URL userinfo is reported, not repeated).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_SOURCE_URI_H
#define REMORA_SOURCE_URI_H

#include <stdbool.h>
#include <stddef.h>

#define REMORA_MAX_URL_LEN    8192
#define REMORA_MAX_PREFIX_LEN 512
#define REMORA_MAX_S3_KEY_LEN 1024
#define REMORA_ERRBUF_LEN     256

typedef enum RemoraSourceKind
{
	REMORA_SOURCE_HTTP,      /* http:// or https:// object */
	REMORA_SOURCE_S3_OBJECT, /* s3://bucket/key */
	REMORA_SOURCE_S3_PREFIX, /* s3://bucket/prefix/ (every object under) */
	REMORA_SOURCE_HF         /* hf://[datasets/]owner/name[@revision] */
} RemoraSourceKind;

/*
 * A parsed source.  All strings are malloc'd and owned by the struct; free
 * with remora_source_uri_free().  Fields that do not apply to a kind are
 * NULL.
 */
typedef struct RemoraSourceUri
{
	RemoraSourceKind kind;
	char            *canonical; /* normalised form: what the worker fetches */
	char            *display;   /* canonical without a query string: what
								 * users see (a query may hold a signature) */
	char *file_name;            /* member path of a single-object source */
	char *host;                 /* http(s): host (ASCII) or address literal */
	int   port;                 /* http(s): explicit or default port */
	char *bucket;               /* s3: source bucket */
	char *key;                  /* s3: object key, or prefix (may be "") */
	char *repo_type;            /* hf: "model" or "dataset" */
	char *repo;                 /* hf: "owner/name" */
	char *revision;             /* hf: branch, tag or commit; "main" default */
} RemoraSourceUri;

extern bool remora_source_uri_parse(const char *text, RemoraSourceUri *out,
									char *errbuf, size_t errlen);
extern void remora_source_uri_free(RemoraSourceUri *uri);
extern bool remora_http_url_parse(const char *text, RemoraSourceUri *out,
								  char *errbuf, size_t errlen);
extern const char *remora_source_kind_name(RemoraSourceKind kind);

extern bool  remora_bucket_name_valid(const char *name, char *errbuf,
									  size_t errlen);
extern char *remora_prefix_normalize(const char *prefix, char *errbuf,
									 size_t errlen);

/*
 * Is path a safe member path: relative, UTF-8, no empty, "." or ".."
 * segment, no backslash or control character, at most 1024 bytes?
 */
extern bool remora_member_path_valid(const char *path);

#endif /* REMORA_SOURCE_URI_H */
