/*-------------------------------------------------------------------------
 *
 * s3xml.h
 *	  Parsing of S3 XML responses with libxml2.
 *
 * Elements are matched by local name (stores differ in namespace).  The
 * parser never touches the network (XML_PARSE_NONET), never substitutes
 * entities, and refuses any document with a DOCTYPE: S3 never sends one,
 * and refusing it closes the door on entity expansion and external
 * entities.  Bodies over REMORA_S3XML_MAX_BODY are refused.
 *
 * Plain C, no PostgreSQL.  All returned strings are malloc'd and owned by
 * the result struct; free with the matching *_free function.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_S3XML_H
#define REMORA_S3XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REMORA_S3XML_MAX_BODY (16 * 1024 * 1024)

/*
 * <Error><Code/><Message/><RequestId/>...</Error>; a region error names
 * the bucket's region (<Region>, AuthorizationHeaderMalformed) or the
 * endpoint to use (<Endpoint>, PermanentRedirect).
 */
typedef struct RemoraS3Error
{
	char *code; /* e.g. "SlowDown"; NULL if absent */
	char *message;
	char *request_id;
	char *region;
	char *endpoint;
} RemoraS3Error;

/*
 * Parse an error document.  Returns true if body is an <Error> document
 * (fields may still be NULL), false if it is not XML, not an Error, or
 * refused (DOCTYPE, too large).
 */
extern bool remora_s3xml_error(const char *body, size_t len,
							   RemoraS3Error *out);
extern void remora_s3xml_error_free(RemoraS3Error *e);

/*
 * The text of the first element with the given local name anywhere in the
 * document, e.g. "UploadId" of InitiateMultipartUploadResult, "ETag" of
 * CompleteMultipartUploadResult or CopyPartResult / CopyObjectResult.
 * Returns a malloc'd string or NULL (not found, not XML, refused).
 * *root_name, if not NULL, receives the malloc'd local name of the root
 * element (so that CompleteMultipartUpload's "200 OK with <Error>" can be
 * told apart), or NULL.
 */
extern char *remora_s3xml_text(const char *body, size_t len,
							   const char *local_name, char **root_name);

/* One <Contents> entry of ListObjectsV2 */
typedef struct RemoraS3Object
{
	char   *key;
	int64_t size;
	char   *etag;          /* as sent, quotes included */
	char   *last_modified; /* as sent, ISO 8601 */
} RemoraS3Object;

typedef struct RemoraS3Listing
{
	RemoraS3Object *objects;
	int             nobjects;
	char          **common_prefixes; /* <CommonPrefixes><Prefix> values */
	int             nprefixes;
	bool            truncated;  /* <IsTruncated>true</IsTruncated> */
	char           *next_token; /* <NextContinuationToken>, or NULL */
} RemoraS3Listing;

/*
 * Parse a ListObjectsV2 result (<ListBucketResult>).  Returns false on
 * anything else (with the listing cleared).  A Contents entry without Key
 * or with a Size that is not a non-negative integer makes the whole
 * listing invalid.
 */
extern bool remora_s3xml_listing(const char *body, size_t len,
								 RemoraS3Listing *out);
extern void remora_s3xml_listing_free(RemoraS3Listing *l);

/* One <Upload> of ListMultipartUploads */
typedef struct RemoraS3Upload
{
	char *key;
	char *upload_id;
} RemoraS3Upload;

typedef struct RemoraS3Uploads
{
	RemoraS3Upload *uploads;
	int             nuploads;
	bool            truncated;
	char           *next_key_marker; /* NULL if absent */
	char           *next_upload_id_marker;
} RemoraS3Uploads;

/*
 * Parse a ListMultipartUploads result (<ListMultipartUploadsResult>).
 * Returns false on anything else, or when an Upload lacks its Key or
 * UploadId, with the result cleared.
 */
extern bool remora_s3xml_uploads(const char *body, size_t len,
								 RemoraS3Uploads *out);
extern void remora_s3xml_uploads_free(RemoraS3Uploads *u);

/* One <Part> of ListParts */
typedef struct RemoraS3Part
{
	int     number; /* 1..10000 */
	int64_t size;
	char   *etag; /* as sent, quotes included */
} RemoraS3Part;

typedef struct RemoraS3Parts
{
	RemoraS3Part *parts; /* ascending part numbers */
	int           nparts;
	bool          truncated;
	int           next_marker; /* <NextPartNumberMarker> when truncated */
} RemoraS3Parts;

/*
 * Parse a ListParts result (<ListPartsResult>).  Returns false on anything
 * else, or when a Part lacks its PartNumber, Size or ETag, the parts are
 * not in ascending order, or a truncated page names no next marker; the
 * result is then cleared.
 */
extern bool remora_s3xml_parts(const char *body, size_t len,
							   RemoraS3Parts *out);
extern void remora_s3xml_parts_free(RemoraS3Parts *p);

/*
 * Build the body of DeleteObjects (<Delete><Quiet>true</Quiet><Object>
 * <Key>...</Key></Object>...</Delete>) with keys XML-escaped.  Returns a
 * malloc'd string (its length in *len), or NULL.  At most 1000 keys.
 */
extern char *remora_s3xml_delete_body(const char *const *keys, int nkeys,
									  size_t *len);

/*
 * Build the body of CompleteMultipartUpload from part ETags (part numbers
 * 1..n in order; a NULL ETag is a number the upload does not hold, left
 * out).  ETags are XML-escaped.  Returns a malloc'd string, or NULL when
 * no part is named or an ETag cannot be XML text.
 */
extern char *remora_s3xml_complete_body(const char *const *etags, int nparts,
										size_t *len);

#endif /* REMORA_S3XML_H */
