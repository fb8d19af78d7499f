/*-------------------------------------------------------------------------
 *
 * transfer.h
 *	  One member's transfer (a job of kind "transfer"), shared by the files
 *	  that drive it:
 *
 *	  object.c    the job: the spec, the source GET, redirects, validators
 *	  reuse.c     a replacement's reuse of the parts of the lost attempt's
 *	              upload (complete it, copy its parts into this one's)
 *	  ranges.c    source requests; the rest of a large object as ranged
 *	              GETs of sub-ranges in parallel (subranges.h), hashed in
 *	              order
 *	  parts.c     buffers, the attempt's multipart upload and its parts,
 *	              resumes adopted, checkpoints
 *	  assemble.c  the member object (one PUT, or the upload completed) and,
 *	              for a job of one member, its manifest; the task's
 *	              requests to the target store (remora_xfer_start_s3)
 *
 * Calls go one way: object.c -> reuse.c, ranges.c -> parts.c ->
 * assemble.c.  What a lower file has set in motion, a higher one sees in
 * its pump (object.c's xfer_pump), never by a call upwards.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_TRANSFER_H
#define REMORA_TRANSFER_H

#include <openssl/evp.h>

#include "engine/transfer/adapt.h"
#include "engine/core/engine_int.h"
#include "engine/s3/multipart.h"
#include "engine/s3/partsize.h"
#include "engine/transfer/subranges.h"

#define COPIES_IN_FLIGHT 4
#define LIST_TRIES       3 /* reuse.c: lists of the lost upload at most */

/*
 * libcurl's buffers for a member's bytes: larger than its defaults (16 KiB
 * in, 64 KiB out), so that a part moves in fewer system calls and copies.
 * Only the source GETs and the part uploads get them.
 */
#define XFER_RECV_BUFFER (256L * 1024)
#define XFER_SEND_BUFFER (1024L * 1024)

typedef enum Phase
{
	P_REUSE,
	P_SOURCE,
	P_SINGLE,
	P_COMPLETE,
	P_MANIFEST,
	P_DONE
} Phase;

typedef struct Buffer
{
	char       *data;
	size_t      len;
	bool        sealed;  /* full: waiting for its upload to start */
	bool        busy;    /* being uploaded */
	int         partno;  /* part number once sealed */
	EVP_MD_CTX *sha;     /* SHA-256 of its bytes: the part's payload hash */
	bool        hashing; /* sha is being taken (see remora_xfer_begin_buffer) */

	/* a part fetched in sub-ranges (ranges.c, subranges.h) */
	bool    ranging; /* its sub-ranges are being asked for or hashed */
	int64_t want;    /* the part's length */
	int64_t asked;   /* bytes from its start that sub-ranges were asked for */
	int64_t hashed;  /* bytes from its start hashed, in order */
} Buffer;

typedef struct Part
{
	int64_t size;
	char    etag[256];
	char   *sha_after; /* SHA-256 state of the object after this part */
	bool    done;      /* acknowledged by the store */
} Part;

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
	char   *storage_class; /* of what it writes; NULL: the engine's */
	char   *expected_sha256;
	char   *attempt_id;
	int64_t job_id;
	int64_t fencing_token;
	int     redirects;

	/* as a member of a larger job (see RemoraTaskSpec) */
	bool         no_manifest;
	bool         dry_run; /* a HEAD decides; only the manifest is written */
	bool         trusted_source;
	char        *ca_pem; /* a trusted source's own CAs, or NULL */
	char        *auth_header;
	char        *auth_host;
	char        *if_match;
	RemoraPrior *unchanged;     /* an earlier job's copy (see RemoraTaskSpec) */
	int64_t      expected_size; /* -1: unknown */
	size_t part_size; /* of this upload's parts and buffers (partsize.h) */

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
	int      connections;   /* ranged GETs in flight at most; 1: one GET */
	bool     no_ranges;     /* the source gave no way to check a range */
	int64_t  probe_end;     /* last byte the first GET asks for; -1: all */
	bool     ranged;        /* the rest of the object comes in ranges */
	int64_t  range_base;    /* first byte of the first GET's part */
	int      range_seg;     /* parts before it (a resume's) */
	int      range_next;    /* the part sub-ranges are asked for of */
	Buffer  *range_buf;     /* its buffer, once it has one */
	int      range_last;    /* the object's last part */
	int      ranges;        /* ranged GETs running */
	int64_t  range_pending; /* bytes received in ranges, not yet hashed */
	SubTable subs;          /* sub-ranges asked for, not yet hashed */

	/* the count of ranges, when options.connections does not pin it */
	bool        adaptive;
	RemoraAdapt adapt;
	int64_t     src_bytes;  /* from the source, all GETs: what it measures */
	int64_t     started_ms; /* when the attempt began, for the log */
	int         throttles;  /* answers backed off from, this attempt */
	int64_t     calm_at;    /* ms: nothing asked again before */
	int         upload_cap; /* part PUTs in flight at most */

	/* resume: the lost attempt's upload (reuse.c) */
	bool      restarted;
	char      restart_reason[256];
	char     *reuse_key;        /* its key, NULL when not reusing */
	Multipart lost;             /* its upload (at reuse_key), completed by this
								 * attempt */
	char       reuse_etag[256]; /* the completed object's ETag */
	CopyGuard *guards;          /* a copy's guard per part (multipart.h) */
	int        nguards;
	bool       reuse_ready; /* parts copied (or restarted): the source next */
	int        list_tries;  /* lists of the lost upload made */
	int        copy_next;
	int        copies; /* in flight */
	int        copied;

	/* parts and buffers */
	Part         *parts;
	int           nparts;
	int           parts_cap;
	int           validated; /* parts 1..validated are acknowledged */
	bool          cp_dirty;
	Buffer       *bufs; /* the first REMORA_PARTS_IN_FLIGHT + 1 always */
	int           nbufs;
	Buffer       *fill;
	int           uploads; /* part PUTs in flight */
	RemoraSha256 *sha;
	char          sha_hex[65];

	/* the attempt's own multipart upload of the member */
	Multipart mpu;
	bool      upload_asked; /* CreateMultipartUpload sent */
	bool      upload_done;  /* completed (or aborted): nothing left open */

	/* the manifest, while its PUT runs */
	char  *manifest;
	size_t manifest_len;

	RemoraPart      *cp_parts; /* the last checkpoint's view */
	RemoraTaskResult result;
} Transfer;

enum
{
	K_SOURCE = 1,
	K_HEAD,
	K_PART,
	K_SINGLE,
	K_INIT,
	K_COPY,
	K_COMPLETE,
	K_MANIFEST,
	K_RANGE,
	K_REUSE
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
	for (int i = 0; i < task->nbufs; i++)
		task->bufs[i].busy = false;
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

/*
 * The ETags of the task's parts, in order, as the multipart module takes
 * them (malloc'd; NULL: out of memory).
 */
static inline const char **
remora_xfer_part_etags(const Transfer *task)
{
	const char **etags = malloc((task->nparts + 1) * sizeof(char *));

	for (int i = 0; etags && i < task->nparts; i++)
		etags[i] = task->parts[i].etag;
	return etags;
}

/* ranges.c */
extern Request *remora_xfer_source_request(Transfer *task, RequestDone done);
extern void     remora_xfer_source_http_failed(Transfer *task, Request *req);
extern int64_t  remora_xfer_probe_end(const Transfer *task);
extern bool     remora_xfer_range_fits(Transfer *task, Request *req);
extern bool     remora_xfer_ranges_begin(Transfer *task, Request *req);
extern void     remora_xfer_probe_done(Transfer *task);
extern void     remora_xfer_ranges_pump(Transfer *task);

/* ranges_adapt.c */
extern void remora_xfer_adapt_init(Transfer *task, int connections);
extern int  remora_xfer_adapt_part_size(Transfer *task);
extern void remora_xfer_adapt_begin(Transfer *task);
extern void remora_xfer_adapt_tick(Transfer *task);
extern bool remora_xfer_throttled(Transfer *task, const char *what,
								  int64_t retry_after);
extern bool remora_xfer_calm(const Transfer *task);

/* reuse.c */
extern void remora_xfer_reuse_start(Transfer *task);
extern void remora_xfer_reuse_pump(Transfer *task);
extern void remora_xfer_reuse_free(Transfer *task);

/* parts.c */
extern void    remora_xfer_restart(Transfer *task, const char *why);
extern void    remora_xfer_drop_parts(Transfer *task);
extern Buffer *remora_xfer_free_buffer(Transfer *task);
extern bool    remora_xfer_seal_part(Transfer *task, Buffer *buf);
extern bool    remora_xfer_fit_parts(Transfer *task, int64_t size);
extern void    remora_xfer_upload_part(Transfer *task, Buffer *buf);
extern void    remora_xfer_pump(Transfer *task);
extern void    remora_xfer_take(Transfer *task, const char *p, size_t n);
extern void    remora_xfer_begin_buffer(Transfer *task, Buffer *b);
extern void    remora_xfer_adopt_resume(Transfer *task, const RemoraResume *r);
extern void    remora_xfer_source_ended(Transfer *task);
extern bool remora_xfer_checkpoint(Transfer *task, RemoraTaskCheckpoint *out);
extern void remora_xfer_create_upload(Transfer *task);
extern void remora_xfer_abort_upload(Transfer *task);

/* assemble.c */
extern bool remora_xfer_start_s3(Transfer *task, const S3Call *call,
								 RequestDone done, int kind, int index);
extern void remora_xfer_start_assembly(Transfer *task);
extern void remora_xfer_member_written(Transfer *task);

#endif /* REMORA_TRANSFER_H */
