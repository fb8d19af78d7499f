/*
 * reuse_fixtures.h: an HTTP source and an S3 store on 127.0.0.1, in threads
 * of the test process, for the tests of a member's parts and of a
 * replacement's reuse of the lost attempt's upload (reuse_resume_test.c,
 * reuse_zombie_test.c).
 *
 * The source is /src/obj (OBJ_SIZE bytes, seven parts of PART, ETag "v1",
 * Range and If-Range honoured).  The store keeps real multipart uploads:
 * parts by number with their MD5 ETags, ListParts (pages of max_parts),
 * CompleteMultipartUpload of the parts listed (their ETags checked, the
 * upload gone afterwards: NoSuchUpload; with subset_refused, RGW's refusal
 * of a list of fewer parts than the upload holds), UploadPartCopy of a
 * byte range (with slo_if_match_refused, its condition refused on an
 * upload's object, as Swift does), HEAD, AbortMultipartUpload.  It counts the
 * bytes it is sent, so a test can tell each byte went once.  Tests read and
 * change store under store.mu.
 */
#ifndef REMORA_REUSE_FIXTURES_H
#define REMORA_REUSE_FIXTURES_H

#include <pthread.h>
#include <stdbool.h>

#include "engine/core/engine_int.h"

#define PART     (64 * 1024)
#define OBJ_SIZE (6 * PART + 123) /* seven parts */
#define MAXOBJ   64
#define MAXUP    64
#define MAXPART  16

typedef struct Blob
{
	char  *data;
	size_t len;
	char   etag[40]; /* quoted hex MD5 (or S3's <md5>-<n> of an upload) */
} Blob;

typedef struct Object
{
	char key[512];
	Blob b;
} Object;

typedef struct Upload
{
	char id[32];
	char key[512];
	bool live;
	Blob parts[MAXPART + 1]; /* by part number */
} Upload;

typedef struct Server
{
	int             fd;
	int             port;
	pthread_t       thread;
	int             stop;
	pthread_mutex_t mu;
	char            obj[OBJ_SIZE]; /* the source */
	Object          objects[MAXOBJ];
	Upload          uploads[MAXUP];
	int             nuploads;
	bool            subset_refused; /* complete as RGW: all parts or none */
	int             max_parts;      /* ListParts page size (1000) */
	bool slo_if_match_refused;      /* as Swift: x-amz-copy-source-if-match
									 * refused (412) on an upload's object */
	/* counters, reset by server_reset */
	long source_bytes;   /* bytes of the source sent */
	long part_bytes;     /* UploadPart bodies received */
	long put_bytes;      /* PutObject bodies received */
	int  part_puts;      /* UploadPart requests */
	int  part_copies;    /* UploadPartCopy requests */
	int  completes;      /* CompleteMultipartUpload answered 200 */
	int  no_such_upload; /* requests for an upload that is not there */
	int  heads;
	int  lists;       /* ListParts requests */
	int  source_from; /* the first byte of the last source GET */
	int  source_gets;
	int  active; /* connections being served */
	/*
	 * UploadParts above this part number wait on held until it is 0 again
	 * (until_parts): a task cannot end before its checkpoint was seen
	 */
	int            hold_above;
	pthread_cond_t held;
} Server;

extern Server store;

/* The store's objects: blob_set copies p and gives it its MD5 ETag. */
extern void    md5_etag(const char *p, size_t n, char out[40]);
extern void    blob_set(Blob *b, const char *p, size_t n);
extern Object *object_at(const char *key, bool create);

/*
 * Zero the counters, once the requests of the test before (a cancelled
 * task's, which the store may still be reading) are served: at most 5 s.
 */
extern void server_reset(void);

/*
 * Run tests, in order, against the source and store, with libcurl's global
 * state set up around them.  False if they could not start: nothing ran.
 */
extern bool reuse_run(void (*const tests[])(void), int ntests);

/* An engine for the store, with parts of PART. */
extern RemoraEngine *engine_new(void);

/* A task that transfers the source into attempt's staging, resuming resume
 * if it is not NULL. */
extern RemoraTask *start(RemoraEngine *engine, const char *attempt,
						 const RemoraResume *resume);

/* Drive a task until its checkpoint holds at least nparts parts; the
 * checkpoint as a claim would offer it, or NULL. */
extern RemoraResume *until_parts(RemoraEngine *engine, RemoraTask *task,
								 int nparts);

/* Drive a task to its end (at most 3,000 turns); its state. */
extern RemoraTaskState finish(RemoraEngine *engine, RemoraTask *task);

/* Is the member the task made the source, byte for byte, in the store? */
extern bool member_is_source(RemoraTask *task);

/* How many uploads under attempt's staging are still open. */
extern int live_uploads_of(const char *attempt);

#endif
