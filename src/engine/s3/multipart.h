/*-------------------------------------------------------------------------
 *
 * multipart.h
 *	  One S3 multipart upload at the target store, for every job that makes
 *	  one: a member's upload (parts.c, assemble.c), a replacement's copy of
 *	  the lost attempt's parts (reuse.c), a set's manifest in parts
 *	  (set_manifest.c) and an export's part copies (export_parts.c).
 *
 * The module builds each request of an upload (create, upload a part,
 * copy a part, complete, abort, the HEAD after a completion that named
 * no ETag) and reads each answer, with the checks S3's answers need; its
 * callers start the requests in their own way (their own bookkeeping of
 * what is in flight) and decide what a failure means to them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_MULTIPART_H
#define REMORA_MULTIPART_H

#include "engine/s3/s3.h"
#include "engine/s3/s3xml.h"

/* An upload of one object: its key, its id, the ETags of its parts. */
typedef struct Multipart
{
	const char *bucket; /* borrowed from the owner, as is key */
	const char *key;
	char       *upload_id; /* NULL until CreateMultipartUpload answered */
	char      **etags;     /* etags[n - 1]: part n's canonical ETag */
	int         nparts;    /* slots in etags (recorded parts) */
	char       *body;      /* CompleteMultipartUpload's part list, alive
							* while that request runs */
	size_t      body_len;
	const char *storage_class; /* of the object; NULL: the engine's
								* (borrowed; set after init) */
} Multipart;

/*
 * One request of an upload, built: the S3Call and the strings it points
 * to.  Start call.call where it was built (it points into itself), then
 * remora_mpu_call_free.
 */
typedef struct MpuCall
{
	S3Call   call;
	RemoraKV query[2];
	RemoraKV headers[3];
	char     partno[16];
	char     range[64];
	char    *source; /* x-amz-copy-source, malloc'd */
} MpuCall;

extern void remora_mpu_init(Multipart *mp, const char *bucket, const char *key);
extern void remora_mpu_forget(Multipart *mp);
extern void remora_mpu_call_free(MpuCall *c);

/* CreateMultipartUpload, and its answer: mp->upload_id set, or err. */
extern void remora_mpu_create(const Multipart *mp, MpuCall *c);
extern bool remora_mpu_created(Multipart *mp, const Request *req, CURLcode rc,
							   RemoraTaskError *err, const char *what);

/* UploadPart, its payload signed with sha_hex (NULL: hashed when signed). */
extern void remora_mpu_part(const Multipart *mp, int partno, const char *data,
							size_t len, const char *sha_hex, MpuCall *c);
extern bool remora_mpu_part_etag(const Request *req, CURLcode rc, char *etag,
								 size_t etaglen, RemoraTaskError *err,
								 const char *what);
extern bool remora_mpu_record(Multipart *mp, int partno, const char *etag);

/*
 * UploadPartCopy of bytes first..last of an object with ETag if_match
 * (NULL: without the condition; see CopyGuard).
 */
extern bool  remora_mpu_copy(const Multipart *mp, int partno,
							 const char *src_bucket, const char *src_key,
							 const char *if_match, int64_t first, int64_t last,
							 MpuCall *c);
extern char *remora_mpu_copied(const Request *req, CURLcode rc,
							   RemoraTaskError *err, const char *what);
extern bool  remora_mpu_copy_is(const char *etag, const char *want);

/*
 * A server-side copy guarded by x-amz-copy-source-if-match (CopyObject or
 * UploadPartCopy), through a store that may refuse the condition itself:
 * remora_copy_guard reads each answer and says what to do next.  The
 * caller keeps one CopyGuard per copy (zeroed: the conditional copy
 * first), starts what it is told with the same callback, and frees it
 * with remora_copy_guard_reset.
 */
typedef enum CopyStep
{
	COPY_ANSWER,   /* req is the copy's own answer: read it as ever */
	COPY_HEAD,     /* start remora_copy_guard_head: the source's HEAD */
	COPY_BARE,     /* start the copy again, without its condition */
	COPY_VERIFIED, /* the copy without condition stands: g->etag */
	COPY_CHANGED,  /* the source is not the object recorded (or gone) */
	COPY_FAILED    /* a HEAD failed: req is its answer (remora_s3_failed) */
} CopyStep;

typedef struct CopyGuard
{
	int   stage;      /* what the next answer is to */
	char *etag;       /* the copy without condition: its answer's ETag */
	char *version_id; /* and its x-amz-version-id ("" if none) */
} CopyGuard;

extern CopyStep remora_copy_guard(CopyGuard *g, const Request *req, CURLcode rc,
								  const char *root, const char *etag,
								  int64_t size);
extern void     remora_copy_guard_head(const char *bucket, const char *key,
									   MpuCall *c);
extern void     remora_copy_guard_reset(CopyGuard *g);

/* CompleteMultipartUpload with etags (NULL: the ones recorded in mp). */
extern bool  remora_mpu_complete(Multipart *mp, const char *const *etags,
								 int nparts, MpuCall *c);
extern char *remora_mpu_completed(const Request *req, CURLcode rc,
								  RemoraTaskError *err, const char *what);
extern void  remora_mpu_head(const Multipart *mp, MpuCall *c);
extern bool  remora_mpu_fits(const char *etag, const char *const *etags,
							 int nparts, RemoraTaskError *err, const char *what);

/* ListParts, a page from after part number marker, and its answer. */
extern void remora_mpu_list_parts(const Multipart *mp, int marker, MpuCall *c);
extern bool remora_mpu_listed(const Request *req, CURLcode rc,
							  RemoraS3Parts *out, RemoraTaskError *err,
							  const char *what);

/* AbortMultipartUpload. */
extern void remora_mpu_abort(const Multipart *mp, MpuCall *c);

#endif /* REMORA_MULTIPART_H */
