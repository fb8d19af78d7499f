/*-------------------------------------------------------------------------
 *
 * transfer.h
 *	  One member's transfer (a job of kind "transfer"), shared by the three
 *	  files that drive it:
 *
 *	  object.c    the job: the spec, verification of a resume, the source
 *	              GET, redirects, validators
 *	  ranges.c    source requests; the rest of a large object as ranged
 *	              GETs in parallel, hashed in order
 *	  segments.c  buffers, segment PUTs, resumes adopted, checkpoints
 *	  assemble.c  the member object (one PUT or a multipart upload of the
 *	              segments) and, for a job of one member, its manifest
 *
 * Calls go one way: object.c -> ranges.c -> segments.c -> assemble.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_TRANSFER_H
#define REMORA_TRANSFER_H

#include <openssl/evp.h>

#include "engine/engine_int.h"

#define COPIES_IN_FLIGHT 4

typedef enum Phase
{
	P_VERIFY,
	P_SOURCE,
	P_SINGLE,
	P_ASSEMBLE,
	P_MANIFEST,
	P_DONE
} Phase;

typedef struct Buffer
{
	char       *data;
	size_t      len;
	bool        sealed; /* full: waiting for its upload to start */
	bool        busy;   /* being uploaded */
	int         segno;  /* segment number once sealed */
	EVP_MD_CTX *md5;

	/* a segment fetched by a ranged GET (ranges.c) */
	bool    ranging;  /* its GET is running */
	bool    complete; /* all its bytes are here, not yet hashed */
	bool    checked;  /* the answer's status and range looked at */
	bool    discard;  /* the body of an error answer */
	int64_t want;     /* the range's length */
} Buffer;

typedef struct Segment
{
	char   *key;
	int64_t size;
	char    etag[256];
	char   *sha_after; /* SHA-256 state after this segment */
	bool    done;      /* acknowledged by the store */
	bool    reused;    /* an earlier attempt's */
} Segment;

typedef struct Transfer
{
	RemoraTask      base; /* kind: remora_transfer_kind */
	RemoraJobStatus status;
	Phase           phase;

	/* the spec, copied */
	char   *url;      /* current URL: changes with redirects */
	char   *orig_url; /* as submitted: what the manifest records */
	char   *file_name;
	char   *bucket;
	char   *staging;
	char   *expected_sha256;
	char   *attempt_id;
	int64_t job_id;
	int64_t fencing_token;
	int     redirects;

	/* as a member of a larger job (see RemoraTaskSpec) */
	char   *member_key_spec;
	char   *segment_prefix;
	bool    no_manifest;
	bool    trusted_source;
	char   *ca_pem; /* a trusted source's own CAs, or NULL */
	char   *auth_header;
	char   *auth_host;
	char   *if_match;
	int64_t expected_size; /* -1: unknown */

	/* the source */
	Request *src;
	bool     src_checked; /* status and validators looked at */
	bool     src_discard; /* body of a redirect or error */
	bool     src_ended;
	bool     rerequest; /* ask the source again, from the start */
	bool     paused;
	int64_t  skip;     /* bytes to drop (the resume overlap byte) */
	int64_t  offset;   /* where this attempt's GET starts */
	int64_t  received; /* bytes of the object hashed so far */
	int64_t  total;    /* object size, -1 if unknown */
	char     etag[256];
	char     last_modified[64];

	/* parallel ranges (ranges.c) */
	int     connections;   /* ranged GETs in flight at most; 1: one GET */
	bool    no_ranges;     /* the source gave no way to check a range */
	int64_t probe_end;     /* last byte the first GET asks for; -1: all */
	bool    ranged;        /* the rest of the object comes in ranges */
	int64_t range_base;    /* first byte of the first GET's segment */
	int     range_seg;     /* segments before it (a resume's) */
	int     range_next;    /* next segment to ask for */
	int     range_last;    /* the object's last segment */
	int     ranges;        /* ranged GETs running */
	int64_t range_pending; /* bytes received in ranges, not yet hashed */

	/* resume */
	bool restarted;
	char restart_reason[256];
	int  verify_next;

	/* segments and buffers */
	Segment      *segs;
	int           nsegs;
	int           segs_cap;
	int           validated; /* segments 1..validated are acknowledged */
	bool          cp_dirty;
	Buffer       *bufs; /* the first REMORA_SEGMENTS_IN_FLIGHT + 1 always */
	int           nbufs;
	Buffer       *fill;
	int           uploads; /* segment PUTs in flight */
	RemoraSha256 *sha;
	char          sha_hex[65];

	/* assembly */
	char  *upload_id;
	bool   upload_done; /* CompleteMultipartUpload succeeded */
	int    copy_next;
	int    copies; /* in flight */
	int    copied;
	char **part_etags;

	/* the body of the request in flight (part list, manifest) */
	char  *manifest;
	size_t manifest_len;

	RemoraSegment   *cp_segments; /* the last checkpoint's view */
	RemoraTaskResult result;
} Transfer;

enum
{
	K_SOURCE = 1,
	K_HEAD,
	K_SEGMENT,
	K_SINGLE,
	K_INIT,
	K_COPY,
	K_COMPLETE,
	K_MANIFEST,
	K_RANGE
};

/* Stop every request of the task (on failure or abort). */
static inline void
remora_xfer_cancel_requests(Transfer *task)
{
	remora_req_cancel_owner(&task->base.engine->loop, task);
	task->src = NULL;
	task->uploads = 0;
	task->copies = 0;
	task->ranges = 0;
}

/* After any completion: if the task failed, stop what is still running. */
static inline void
remora_xfer_settle(Transfer *task)
{
	if (task->status.state == REMORA_TASK_FAILED)
		remora_xfer_cancel_requests(task);
}

/* A strong ETag validates a byte range; a weak one (W/"...") does not. */
static inline bool
remora_etag_is_strong(const char *etag)
{
	return etag[0] == '"';
}

/* ranges.c */
extern Request *remora_xfer_source_request(Transfer *task, RequestDone done);
extern void     remora_xfer_source_http_failed(Transfer *task, Request *req);
extern int64_t  remora_xfer_probe_end(const Transfer *task);
extern bool     remora_xfer_range_fits(Transfer *task, Request *req);
extern bool     remora_xfer_ranges_begin(Transfer *task, Request *req);
extern void     remora_xfer_probe_done(Transfer *task);
extern void     remora_xfer_ranges_pump(Transfer *task);

/* segments.c */
extern void    remora_xfer_restart(Transfer *task, const char *why);
extern void    remora_xfer_drop_segments(Transfer *task);
extern Buffer *remora_xfer_free_buffer(Transfer *task);
extern bool    remora_xfer_seal_segment(Transfer *task, Buffer *buf);
extern void    remora_xfer_upload_segment(Transfer *task, Buffer *buf);
extern void    remora_xfer_pump(Transfer *task);
extern void    remora_xfer_take(Transfer *task, const char *p, size_t n);
extern void    remora_xfer_begin_buffer(Transfer *task, Buffer *b);
extern void    remora_xfer_adopt_resume(Transfer *task, const RemoraResume *r);
extern void    remora_xfer_source_ended(Transfer *task);
extern bool remora_xfer_checkpoint(Transfer *task, RemoraTaskCheckpoint *out);

/* assemble.c */
extern void remora_xfer_start_assembly(Transfer *task);
extern void remora_xfer_abort_upload(Transfer *task);

#endif /* REMORA_TRANSFER_H */
