/*-------------------------------------------------------------------------
 *
 * multipart.c
 *	  One S3 multipart upload at the target store: its requests built and
 *	  its answers read, for every job that makes one (multipart.h).
 *
 *	  CREATE	POST ?uploads --> <UploadId>
 *	  PART		PUT ?partNumber&uploadId, the payload signed with its
 *				SHA-256 --> the part's ETag (a header)
 *	  COPY		PUT ?partNumber&uploadId with x-amz-copy-source, a range and
 *				x-amz-copy-source-if-match --> <CopyPartResult><ETag>
 *	  COMPLETE	POST ?uploadId with the part list --> the object's ETag
 *				in <CompleteMultipartUploadResult>; RGW answers it empty,
 *				and the object's HEAD tells
 *	  ABORT		DELETE ?uploadId
 *	  LIST		GET ?uploadId&part-number-marker --> <ListPartsResult>, a page
 *				of the parts the upload holds (reuse.c)
 *
 * A store may answer 200 and still put an <Error> in the body of COPY
 * and COMPLETE; those answers are read as the XML they must be.  A
 * completed object's ETag is checked against its parts' (the MD5 of their
 * MD5s, with their count) where the store's dialect allows.
 *
 *-------------------------------------------------------------------------
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strcasestr */
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/s3/multipart.h"
#include "engine/s3/s3xml.h"
#include "engine/s3/sigv4.h"
#include "engine/common/util.h"

void
remora_mpu_init(Multipart *mp, const char *bucket, const char *key)
{
	memset(mp, 0, sizeof(*mp));
	mp->bucket = bucket;
	mp->key = key;
}

/* Forget the upload (its id, parts and body); the key stays. */
void
remora_mpu_forget(Multipart *mp)
{
	const char *storage_class = mp->storage_class;

	for (int i = 0; i < mp->nparts; i++)
		free(mp->etags[i]);
	free(mp->etags);
	free(mp->upload_id);
	free(mp->body);
	remora_mpu_init(mp, mp->bucket, mp->key);
	mp->storage_class = storage_class;
}

void
remora_mpu_call_free(MpuCall *c)
{
	free(c->source);
	c->source = NULL;
}

static void
mpu_call(const Multipart *mp, const char *method, int nquery, MpuCall *c)
{
	c->call = (S3Call){
		method, mp->bucket, mp->key, c->query,          nquery, NULL, 0, NULL,
		0,      NULL,       false,   mp->storage_class, false};
}

/* partNumber and uploadId, the query of PART and COPY */
static void
part_query(const Multipart *mp, int partno, MpuCall *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->partno, sizeof(c->partno), "%d", partno);
	c->query[0] = (RemoraKV){"partNumber", c->partno};
	c->query[1] = (RemoraKV){"uploadId", mp->upload_id};
	mpu_call(mp, "PUT", 2, c);
}

void
remora_mpu_create(const Multipart *mp, MpuCall *c)
{
	memset(c, 0, sizeof(*c));
	c->query[0] = (RemoraKV){"uploads", ""};
	mpu_call(mp, "POST", 1, c);
}

/* The answer to CREATE: false, err set, when it names no upload. */
bool
remora_mpu_created(Multipart *mp, const Request *req, CURLcode rc,
				   RemoraTaskError *err, const char *what)
{
	if (remora_s3_failed(req, rc, err, what))
		return false;
	free(mp->upload_id);
	mp->upload_id = req->body ? remora_s3xml_text(req->body, req->body_len,
												  "UploadId", NULL)
							  : NULL;
	if (mp->upload_id != NULL && mp->upload_id[0] != '\0')
		return true;
	free(mp->upload_id);
	mp->upload_id = NULL;
	remora_error_set(err, REMORA_ERR_S3, true, req->status,
					 "%s: the store answered no UploadId", what);
	return false;
}

void
remora_mpu_part(const Multipart *mp, int partno, const char *data, size_t len,
				const char *sha_hex, MpuCall *c)
{
	part_query(mp, partno, c);
	c->call.body = data;
	c->call.body_len = len;
	c->call.payload_sha256 = sha_hex;
}

/*
 * A store whose part limit is below S3's 10,000 refuses a part number
 * above it with 400 InvalidArgument naming partNumber (Swift's S3 API:
 * 1,000).  Nothing is gained by another attempt, and the store's own
 * words do not say what to change: say it, and fail at once.
 */
static void
part_limit_refused(const Request *req, RemoraTaskError *err, const char *what)
{
	char *name;
	char *value;
	bool  part;

	if (req->status != 400 || strcmp(err->s3_code, "InvalidArgument") != 0 ||
		req->body == NULL)
		return;
	name = remora_s3xml_text(req->body, req->body_len, "ArgumentName", NULL);
	part = name != NULL ? strcasecmp(name, "partNumber") == 0
						: strcasestr(err->message, "part number") != NULL;
	free(name);
	if (!part)
		return;
	value = remora_s3xml_text(req->body, req->body_len, "ArgumentValue", NULL);
	remora_error_set(err, REMORA_ERR_S3, false, req->status,
					 "%s: the store refused part number %.20s: its part limit "
					 "was reached; set remora.max_upload_parts to the most "
					 "parts the store takes in one upload",
					 what, value && value[0] ? value : "(not given)");
	snprintf(err->s3_code, sizeof(err->s3_code), "InvalidArgument");
	free(value);
}

/* The answer to PART: its canonical ETag, or false with err set. */
bool
remora_mpu_part_etag(const Request *req, CURLcode rc, char *etag,
					 size_t etaglen, RemoraTaskError *err, const char *what)
{
	if (remora_s3_put_etag(req, rc, etag, etaglen, err, what))
		return true;
	part_limit_refused(req, err, what);
	return false;
}

/* Keep part partno's ETag for COMPLETE; false: out of memory. */
bool
remora_mpu_record(Multipart *mp, int partno, const char *etag)
{
	char *copy;

	if (partno > mp->nparts)
	{
		char **grown = realloc(mp->etags, (size_t) partno * sizeof(char *));

		if (grown == NULL)
			return false;
		memset(grown + mp->nparts, 0,
			   (size_t) (partno - mp->nparts) * sizeof(char *));
		mp->etags = grown;
		mp->nparts = partno;
	}
	copy = malloc(REMORA_ETAG_MAX);
	if (copy == NULL)
		return false;
	remora_etag_canon(etag, copy, REMORA_ETAG_MAX);
	free(mp->etags[partno - 1]);
	mp->etags[partno - 1] = copy;
	return true;
}

/*
 * COPY: part partno from bytes first..last of src_bucket/src_key, only
 * while that object has the ETag if_match (a store may ignore the
 * condition: remora_mpu_copy_is checks the part that came).  False: out
 * of memory.
 */
bool
remora_mpu_copy(const Multipart *mp, int partno, const char *src_bucket,
				const char *src_key, const char *if_match, int64_t first,
				int64_t last, MpuCall *c)
{
	part_query(mp, partno, c);
	c->source = remora_s3_copy_source(src_bucket, src_key);
	if (c->source == NULL)
		return false;
	snprintf(c->range, sizeof(c->range), "bytes=%" PRId64 "-%" PRId64, first,
			 last);
	c->headers[0] = (RemoraKV){"x-amz-copy-source", c->source};
	c->headers[1] = (RemoraKV){"x-amz-copy-source-range", c->range};
	c->headers[2] = (RemoraKV){"x-amz-copy-source-if-match", if_match};
	c->call.headers = c->headers;
	c->call.nheaders = if_match != NULL ? 3 : 2;
	c->call.copy_source_ours = true; /* an attempt's part, or a member */
	return true;
}

/*
 * The answer to COPY: the part's canonical ETag, malloc'd ("" when the
 * answer has none); NULL with err set when the store refused or its 200
 * carries an <Error>.
 */
char *
remora_mpu_copied(const Request *req, CURLcode rc, RemoraTaskError *err,
				  const char *what)
{
	if (remora_s3_failed(req, rc, err, what))
	{
		part_limit_refused(req, err, what);
		return NULL;
	}
	return remora_s3_answer_etag(req, "CopyPartResult", err, what);
}

/* Is the part a copy answered the one wanted (its ETag, known)? */
bool
remora_mpu_copy_is(const char *etag, const char *want)
{
	return etag != NULL && etag[0] != '\0' && remora_etag_equal(etag, want);
}

/* ---------------------------------------------------------------------
 * A copy whose condition the store refuses
 *
 * Swift's S3 API refuses x-amz-copy-source-if-match with 412 for every
 * object a multipart upload made, even with the ETag its HEAD shows: it
 * compares the condition with the SLO manifest's own ETag.  Read as "the
 * source changed", that made every export of a multipart member fail and
 * every reuse of a checkpoint restart from zero.  So after a 412, and
 * only then, the source is checked another way:
 *
 *	  COPY with the condition	412 --> HEAD; anything else is the answer
 *	  HEAD	the recorded ETag (and size) --> COPY without the condition;
 *			other, or 404 --> changed; no answer --> failed
 *	  COPY without it	2xx with an ETag --> HEAD again; else the answer
 *	  HEAD	still the recorded ETag and size --> verified; else changed
 *
 * Safe enough: the condition's purpose is that the bytes copied are the
 * object recorded.  The source shows the recorded ETag just before the
 * copy and again just after it; to copy other bytes, the object would
 * have to be replaced inside that window and replaced back by an object
 * with the same ETag, which for a multipart ETag (the MD5 of its parts'
 * MD5s) means the same bytes in the same parts.  Remora never rewrites a
 * committed member or a lost attempt's object, so that window is only
 * open to another writer of the same key.  A store that honours the
 * condition never takes this path: its 412 is checked by the HEAD and
 * stands.
 * ---------------------------------------------------------------------
 */

enum
{
	GUARD_COPY = 0,
	GUARD_HEAD_BEFORE,
	GUARD_BARE,
	GUARD_HEAD_AFTER
};

/* The HEAD's answer about the source: 1 the one recorded, 0 not, -1 none. */
static int
same_source(const Request *req, CURLcode rc, const char *etag, int64_t size)
{
	if (rc == CURLE_OK && req->status == 404)
		return 0;
	if (rc != CURLE_OK || req->status != 200)
		return -1;
	return req->hdr.etag[0] != '\0' && remora_etag_equal(req->hdr.etag, etag) &&
		   (size < 0 || req->hdr.content_length == size);
}

/* The answer to the copy without its condition: kept, HEAD next. */
static CopyStep
bare_answered(CopyGuard *g, const Request *req, CURLcode rc, const char *root)
{
	RemoraTaskError err;
	char           *etag;

	if (rc != CURLE_OK || req->status < 200 || req->status >= 300)
		return COPY_ANSWER;
	etag = remora_s3_answer_etag(req, root, &err, "copying");
	if (etag == NULL || etag[0] == '\0')
	{
		free(etag);
		return COPY_ANSWER; /* read as ever: an error in a 200, say */
	}
	remora_copy_guard_reset(g);
	g->etag = etag;
	g->version_id = remora_xstrdup(req->hdr.version_id);
	if (g->version_id == NULL)
		return COPY_ANSWER;
	g->stage = GUARD_HEAD_AFTER;
	return COPY_HEAD;
}

/*
 * What the answer req to the guard's current request means, and what to
 * start next.  root names the copy's answer (CopyObjectResult or
 * CopyPartResult); etag and size are the source as recorded (size -1: not
 * known).
 */
CopyStep
remora_copy_guard(CopyGuard *g, const Request *req, CURLcode rc,
				  const char *root, const char *etag, int64_t size)
{
	int same;

	switch (g->stage)
	{
		case GUARD_COPY:
			if (rc != CURLE_OK || req->status != 412)
				return COPY_ANSWER;
			g->stage = GUARD_HEAD_BEFORE;
			return COPY_HEAD;
		case GUARD_BARE:
			return bare_answered(g, req, rc, root);
		default:
			same = same_source(req, rc, etag, size);
			if (same < 0)
				return COPY_FAILED;
			if (same == 0)
				return COPY_CHANGED;
			if (g->stage == GUARD_HEAD_AFTER)
				return COPY_VERIFIED;
			g->stage = GUARD_BARE;
			return COPY_BARE;
	}
}

/* HEAD of a copy's source. */
void
remora_copy_guard_head(const char *bucket, const char *key, MpuCall *c)
{
	memset(c, 0, sizeof(*c));
	c->call = (S3Call){"HEAD", bucket, key,  NULL, 0,    NULL, 0,
					   NULL,   0,      NULL, true, NULL, false};
}

/* Free what the guard holds; it starts again from the conditional copy. */
void
remora_copy_guard_reset(CopyGuard *g)
{
	free(g->etag);
	free(g->version_id);
	memset(g, 0, sizeof(*g));
}

/*
 * COMPLETE with these parts, in order (NULL: the ETags recorded in mp).
 * The part list lives in mp->body until the next COMPLETE or
 * remora_mpu_forget.  False: out of memory.
 */
bool
remora_mpu_complete(Multipart *mp, const char *const *etags, int nparts,
					MpuCall *c)
{
	memset(c, 0, sizeof(*c));
	if (etags == NULL)
	{
		etags = (const char *const *) mp->etags;
		nparts = mp->nparts;
	}
	free(mp->body);
	mp->body = remora_s3xml_complete_body(etags, nparts, &mp->body_len);
	if (mp->body == NULL)
		return false;
	c->query[0] = (RemoraKV){"uploadId", mp->upload_id};
	mpu_call(mp, "POST", 1, c);
	c->call.body = mp->body;
	c->call.body_len = mp->body_len;
	return true;
}

/*
 * The answer to COMPLETE: the object's canonical ETag, malloc'd; "" when
 * the answer names none (RGW: remora_mpu_head asks); NULL with err set
 * when the store refused or its 200 carries an <Error>.
 */
char *
remora_mpu_completed(const Request *req, CURLcode rc, RemoraTaskError *err,
					 const char *what)
{
	if (remora_s3_failed(req, rc, err, what))
		return NULL;
	return remora_s3_answer_etag(req, "CompleteMultipartUploadResult", err,
								 what);
}

/* HEAD of the completed object, when COMPLETE named no ETag. */
void
remora_mpu_head(const Multipart *mp, MpuCall *c)
{
	memset(c, 0, sizeof(*c));
	mpu_call(mp, "HEAD", 0, c);
	c->call.query = NULL;
	c->call.head = true;
}

/* Is the completed object's ETag what its parts make?  False: err set. */
bool
remora_mpu_fits(const char *etag, const char *const *etags, int nparts,
				RemoraTaskError *err, const char *what)
{
	if (remora_etag_fits_parts(etag, etags, nparts))
		return true;
	remora_error_set(err, REMORA_ERR_S3, true, 0,
					 "%s: the object's ETag %s is not that of the parts "
					 "uploaded",
					 what, etag);
	return false;
}

/* LIST: the parts the upload holds, from after part number marker. */
void
remora_mpu_list_parts(const Multipart *mp, int marker, MpuCall *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->partno, sizeof(c->partno), "%d", marker);
	c->query[0] = (RemoraKV){"part-number-marker", c->partno};
	c->query[1] = (RemoraKV){"uploadId", mp->upload_id};
	mpu_call(mp, "GET", 2, c);
}

/*
 * The answer to LIST: true with the page in out; false with err set when
 * the store refused (NoSuchUpload among others) or the page cannot be
 * read.
 */
bool
remora_mpu_listed(const Request *req, CURLcode rc, RemoraS3Parts *out,
				  RemoraTaskError *err, const char *what)
{
	memset(out, 0, sizeof(*out));
	if (remora_s3_failed(req, rc, err, what))
		return false;
	if (req->body != NULL && remora_s3xml_parts(req->body, req->body_len, out))
		return true;
	remora_error_set(err, REMORA_ERR_S3, true, req->status,
					 "%s: the store's list of parts could not be read", what);
	return false;
}

void
remora_mpu_abort(const Multipart *mp, MpuCall *c)
{
	memset(c, 0, sizeof(*c));
	c->query[0] = (RemoraKV){"uploadId", mp->upload_id};
	mpu_call(mp, "DELETE", 1, c);
}
