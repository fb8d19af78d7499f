/*-------------------------------------------------------------------------
 *
 * engine.h
 *	  The transfer engine: many transfers at once in one libcurl multi
 *	  handle, driven by its host's event loop.
 *
 * The engine knows nothing of PostgreSQL and never calls its host.  Its
 * host (the remora worker, or a unit test) waits until remora_engine_fd()
 * is readable or remora_engine_timeout_ms() passes, then calls
 * remora_engine_run(), which never blocks, and then answers the lookups
 * the run queued (remora_engine_lookup_next).  The fd is an epoll set of
 * curl's sockets, so the host can wait on it together with its own events
 * (a latch).
 *
 * A task (a job) is of one of four kinds, behind the same remora_task_*
 * calls: a member transfer (remora_task_start), a set of members
 * (remora_set_start), a prefix cleanup (remora_cleanup_start) or an
 * export to stable keys (remora_export_start).  Which
 * file owns what, and the state machines: src/engine/README.md.
 *
 * A member transfer moves one source object into the target store under
 * its staging prefix:
 *
 *	  source GET --> part buffers --> parts of the attempt's own multipart
 *	                 (SHA-256 of all,  upload of the member (UploadPart,
 *	                  and of each part  payload signed with the part's
 *	                  for its payload)  SHA-256), completed at the end
 *	  an object that fits in one buffer: one PUT of the member
 *	  --> manifest object --> result: the manifest descriptor
 *
 * Each byte is sent to the store once.  Checkpoints record the validated
 * parts of the upload, so a replacement attempt can complete the lost
 * attempt's upload with them (at that attempt's own key) and copy them into
 * its own, checking every copied part's ETag (reuse.c).  Memory per task
 * is bounded by (REMORA_PARTS_IN_FLIGHT + 1) part buffers, whatever the
 * object size, or connections + REMORA_PARTS_IN_FLIGHT with ranged GETs in
 * parallel (one per part in flight, shared by the part's sub-ranges).
 *
 * All memory is malloc'd; every function that can fail says so and fills
 * an error buffer that never contains a secret.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_ENGINE_H
#define REMORA_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define REMORA_PARTS_IN_FLIGHT 2
#define REMORA_MAX_REDIRECTS   10
#define REMORA_MAX_PARTS       10000 /* S3's part limit; a store's may be lower */

typedef struct RemoraEngine RemoraEngine;
typedef struct RemoraTask   RemoraTask;

/* Where results go.  Strings are copied by remora_engine_new(). */
typedef struct RemoraTargetConfig
{
	const char *endpoint; /* "http://127.0.0.1:9000"; "" = AWS */
	const char *region;
	bool        path_style;
	const char *access_key_id;
	const char *secret_access_key;
	const char *ca_pem; /* PEM of CAs trusted for this store besides
						 * remora.ca_file (a source endpoint's), or NULL */
	bool anonymous;     /* a source endpoint without credentials: its
						 * requests go unsigned (never the target) */

	/*
	 * Where the credentials come from (creds.h): NULL, "" or "static", the
	 * keys above, with session_token when they are temporary; "chain", the
	 * AWS credential chain of this process.  With role_arn, that role is
	 * assumed on top of them (STS AssumeRole, external_id when given).
	 * NULL or "" strings are unset: the session's name is then "remora",
	 * STS is https://sts.<region>.amazonaws.com, IMDS
	 * http://169.254.169.254.
	 */
	const char *session_token;
	const char *credentials;
	const char *role_arn;
	const char *external_id;
	const char *role_session_name;
	const char *sts_endpoint;
	const char *imds_endpoint;
} RemoraTargetConfig;

/*
 * How the target store encrypts what Remora writes and in which storage
 * class (NULL or "": the store's default).  sse: "AES256", "aws:kms"
 * (with kms_key_id, or the store's default key) or "customer" (SSE-C:
 * customer_key, the base64 of 32 bytes, sent with every request that
 * writes or reads an object's data, never logged).
 */
typedef struct RemoraSseConfig
{
	const char *sse;
	const char *kms_key_id;
	const char *customer_key;
	const char *storage_class;
} RemoraSseConfig;

/*
 * Where the engine's target credentials come from now ("static",
 * "environment", "instance role r (IMDSv2)", ...; never a secret) and when
 * they expire (0: they do not), fetched if need be; false, with the
 * reason in source, when there are none.
 */
extern bool remora_engine_credentials(RemoraEngine *engine, char *source,
									  size_t len, time_t *expires);

/* Is name a storage class S3 names ("STANDARD", "GLACIER_IR", ...)? */
extern bool remora_storage_class_valid(const char *name);

typedef struct RemoraEngineConfig
{
	RemoraTargetConfig target;
	RemoraSseConfig    sse; /* of every object written to the target */
	size_t part_size;       /* multipart part size, >= 5 MiB except in tests */

	/*
	 * The most parts the target store takes in one multipart upload
	 * (remora.max_upload_parts, 1..REMORA_MAX_PARTS; 0: REMORA_MAX_PARTS).
	 * An object that part_size would cut into more gets larger parts
	 * (partsize.h).
	 */
	int         max_upload_parts;
	const char *allow_networks; /* outbound policy for sources */
	const char *deny_networks;
	const char *allow_ports; /* NULL or "": REMORA_DEFAULT_PORTS */

	/*
	 * Origins ("host:port", comma-separated) no source request may reach,
	 * whatever the networks allowed: the target store, the registered
	 * endpoints, Remora's own listeners.  NULL or "": none.
	 */
	const char *blocked_origins;
	long        connect_timeout_ms;
	long        stall_timeout_ms; /* no byte for this long: the source failed */
	const char *user_agent;

	/*
	 * TLS trust: a CA bundle file and/or a directory of hashed CA files for
	 * every connection (NULL or "": the system's bundle).  TLS 1.2 at least.
	 */
	const char *ca_file;
	const char *ca_path;

	/*
	 * Egress proxies for sources and the Hub, by the URL's scheme
	 * ("http://[user:password@]host:port"; NULL or "": none), and the
	 * hosts reached directly ("host,.domain,address"; "*": all).  A
	 * proxied source is judged by the outbound policy on the addresses its
	 * host resolves to here, before the request is sent.
	 */
	const char *http_proxy;
	const char *https_proxy;
	const char *no_proxy;

	/*
	 * Connections to one host (name and port) at once, across every job of
	 * the engine (remora.max_connections_per_host); 0: no cap.  Requests
	 * above it wait for a connection.
	 */
	int max_connections_per_host;

	/*
	 * An export copies a member larger than this with a multipart upload
	 * of UploadPartCopy ranges instead of one CopyObject (0: the most
	 * CopyObject takes, REMORA_COPY_OBJECT_MAX; larger is lowered to it).
	 */
	int64_t export_copy_cutoff;

	/*
	 * Where the engine says what it decided on its own (an object's
	 * connection count, adapt.h): one line, no newline; NULL: nowhere.
	 */
	void (*log)(void *arg, const char *line);
	void *log_arg;
} RemoraEngineConfig;

/* One validated part of an attempt's multipart upload of a member. */
typedef struct RemoraPart
{
	int64_t size;
	char    etag[256]; /* as the store returned it */
} RemoraPart;

/*
 * Validated progress a replacement attempt may resume from: the first
 * parts of an earlier attempt's multipart upload, which is at that
 * attempt's key for the member and not completed.
 */
typedef struct RemoraResume
{
	char       *etag; /* source validators when they were written */
	char       *last_modified;
	int64_t     size;       /* -1 if unknown */
	char       *upload_key; /* NULL: nothing to resume from (say why) */
	char       *upload_id;
	RemoraPart *parts;
	int         nparts;
	char       *sha256_state; /* hex state after the parts */
} RemoraResume;

/*
 * A member an earlier attempt of the job completed, or an earlier job's
 * result (see RemoraLookup, RemoraTaskSpec.unchanged).
 */
typedef struct RemoraPrior
{
	bool    found;
	char    key[1200];
	char    etag[256];
	char    sha256[65];
	int64_t size;
	char    source_etag[256];         /* s3: the source's ETag then */
	char    source_oid[80];           /* hf: the git object id then */
	char    source_last_modified[64]; /* http: Last-Modified then */
	int64_t from_job; /* the earlier job whose result it is a copy
					   * of (options.reuse_from); 0: this job's */
} RemoraPrior;

typedef struct RemoraTaskSpec
{
	const char         *source_url;      /* http(s) */
	const char         *file_name;       /* member path */
	const char         *bucket;          /* target bucket */
	const char         *staging_prefix;  /* "<prefix>/<job>/<attempt>/" */
	const char         *expected_sha256; /* lower-case hex, or NULL */
	const RemoraResume *resume;          /* NULL: start from zero */
	int64_t             job_id;
	const char         *attempt_id;
	int64_t             fencing_token;

	/*
	 * A member of a larger job (remora_set_start sets these): where the
	 * member goes, and no manifest of its own.
	 */
	const char *member_key; /* NULL: staging + "data/" + file_name */
	bool        no_manifest;
	int64_t     expected_size; /* -1 (or 0 with no other field set): unknown */
	bool        size_known;

	/* How the source is fetched, when not a plain user-supplied URL. */
	bool trusted_source;     /* an administrator's endpoint: no outbound
							  * policy (the target store, a registered
							  * source endpoint) */
	const char *auth_header; /* "Authorization: Bearer …", sent only */
	const char *auth_host;   /* to this origin, "scheme://host:port" */
	const char *if_match;    /* the source's ETag when it was listed: a
							  * changed source answers 412 */
	const char *ca_pem;      /* a trusted source's own CAs (PEM), or NULL */

	/*
	 * An earlier job's copy of the member (options.reuse_from), or NULL:
	 * the first GET asks whether the source changed since (If-None-Match
	 * with a strong ETag, else If-Modified-Since), and a 304 copies that
	 * object server-side instead of downloading.
	 */
	const RemoraPrior *unchanged;

	/*
	 * Ranged GETs of the source in flight at once for a large object
	 * (options.connections pins it); 0 or 1: one GET;
	 * REMORA_CONNECTIONS_ADAPT(n): from n (remora.object_connections), as
	 * many as pay (adapt.h), up to max_connections_per_host and
	 * REMORA_ADAPT_MEMORY of part buffers.
	 */
	int connections;

	/* The storage class of what it writes (NULL: the engine's). */
	const char *storage_class;

	/*
	 * A dry run (options.dry_run): a HEAD, with the validators of
	 * `unchanged` if any, decides whether the member would be downloaded
	 * or reused; no content is read and only the manifest is written.
	 */
	bool dry_run;
} RemoraTaskSpec;

#define REMORA_CONNECTIONS_ADAPT(start) (-(start))

/*
 * A job of many members: every object under an S3 prefix (or one S3
 * object), or a Hugging Face snapshot.  The set lists its source a page at
 * a time, runs up to REMORA_SET_CONCURRENCY members at once (each a task
 * of its own, or a server-side copy), and writes the manifest as members
 * complete, in listing order: memory is bounded by the window of listed
 * members, not by their number.
 */
#define REMORA_SET_CONCURRENCY 8
/*
 * Members below REMORA_SET_SMALL_MEMBER are latency-bound (a GET and a PUT
 * each, a few milliseconds of the store's work): more of them run at once,
 * from REMORA_SET_CONCURRENCY up to REMORA_SET_SMALL_CONCURRENCY, one more
 * for each one completed, halved by a throttle answer (503, 429, SlowDown).
 * Each fills at most its own size of its part buffer, so the extra ones
 * add at most REMORA_SET_SMALL_CONCURRENCY MiB to a set's memory.
 */
#define REMORA_SET_SMALL_CONCURRENCY 16
#define REMORA_SET_SMALL_MEMBER      ((int64_t) 1024 * 1024)
#define REMORA_SET_WINDOW            2048 /* listed members held at most */
#define REMORA_SET_TRIES             4    /* per member, within one attempt */

typedef enum RemoraSetKind
{
	REMORA_SET_S3,
	REMORA_SET_HF
} RemoraSetKind;

typedef struct RemoraSetSpec
{
	RemoraSetKind kind;
	const char   *display; /* the source as the manifest records it */

	/* s3 */
	const RemoraTargetConfig *source_store; /* NULL: the target store */
	const char               *source_bucket;
	const char               *source_key; /* a prefix ("" or ending in '/'),
										   * or a key when single */
	bool        single;
	const char *file_name; /* single: the member path */

	/* hf */
	const char *hub_url;   /* "https://huggingface.co" */
	const char *repo_type; /* "model" or "dataset" */
	const char *repo;      /* "owner/name" */
	const char *revision;
	const char *token; /* NULL: anonymous */

	/* both */
	const char *const *include; /* fnmatch(3) globs on the member path */
	int                ninclude;
	const char *const *exclude;
	int                nexclude;
	const char        *bucket;
	const char        *staging_prefix;
	int64_t            job_id;
	const char        *attempt_id;
	int64_t            fencing_token;
	bool               earlier_attempts; /* false: never ask lookups */
	bool               dry_run; /* list and decide; write only the manifest */
	int connections; /* per large member, as RemoraTaskSpec.connections */
	const char *storage_class; /* of what it writes; NULL: the engine's */
	void       *host_arg;      /* handed back in each RemoraLookup */
} RemoraSetSpec;

/*
 * An export (remora_export): server-side copies of a committed result's
 * members to <prefix>/<path> of a target bucket, or, to verify an export
 * whose outcome is unknown, HEADs (and a GET to hash where the ETag cannot
 * tell) of those keys.  A member is copied with CopyObject, or, above
 * the engine's export_copy_cutoff (at most 5 GiB, REMORA_COPY_OBJECT_MAX,
 * the most CopyObject takes), with a multipart upload of UploadPartCopy
 * ranges of part_size (larger when max_upload_parts would not hold it).
 */
#define REMORA_EXPORT_CONCURRENCY 8
#define REMORA_COPY_OBJECT_MAX    ((int64_t) 5 * 1024 * 1024 * 1024)

typedef enum RemoraIfExists
{
	REMORA_IF_EXISTS_FAIL,
	REMORA_IF_EXISTS_OVERWRITE,
	REMORA_IF_EXISTS_SKIP_IDENTICAL
} RemoraIfExists;

typedef struct RemoraExportMember
{
	const char *path;   /* member path: the target key is <prefix>/<path> */
	const char *bucket; /* where the committed member is */
	const char *key;
	const char *etag;
	const char *sha256;
	int64_t     size;
	const char *ref_etag; /* an earlier attempt's conclusive answer, or NULL */
	bool        may_overwrite; /* may replace other content at its key */
} RemoraExportMember;

/*
 * The export's members are not in its spec: the export asks its host for
 * them a page at a time (a lookup of kind REMORA_LOOKUP_EXPORT_PAGE, at
 * most REMORA_EXPORT_PAGE members) and holds at most two pages, so that
 * its memory does not grow with the member count.  The pages must add up
 * to members_total.
 */
#define REMORA_EXPORT_PAGE 1000

typedef struct RemoraExportSpec
{
	const char    *bucket; /* target */
	const char    *prefix; /* "" or without a trailing '/' */
	RemoraIfExists if_exists;
	bool           verify;        /* observe only, write nothing */
	int64_t        members_total; /* members of the exported result */
	int64_t        bytes_total;   /* their bytes */
	const char    *output_digest; /* the result's manifest SHA-256 */
	void          *host_arg;      /* handed back in each RemoraLookup */
} RemoraExportSpec;

/* A conclusive answer for one member, for remora.checkpoint/commit. */
typedef struct RemoraExportRef
{
	char       *path;
	char       *key;
	char        etag[256];
	char        version_id[256];
	int64_t     size;
	const char *outcome; /* "copied", "present" (already there), "verified" */
} RemoraExportRef;

/* A completed member, for remora.checkpoint and remora.commit. */
typedef struct RemoraSetMember
{
	char   *path;
	char   *key;
	char   *etag;
	char    sha256[65];
	int64_t size;
	char   *source_json;     /* the validators, a JSON object */
	bool    reused;          /* copied from an earlier attempt */
	int64_t reused_from_job; /* ...of that job (options.reuse_from); 0: none */
} RemoraSetMember;

typedef enum RemoraTaskState
{
	REMORA_TASK_RUNNING,
	REMORA_TASK_SUCCEEDED,
	REMORA_TASK_FAILED,
	REMORA_TASK_ABORTED /* abort requested and finished */
} RemoraTaskState;

/* Error classes, as recorded in the job's error history. */
#define REMORA_ERR_NETWORK  "network"
#define REMORA_ERR_TLS      "tls" /* certificate or protocol: not retried */
#define REMORA_ERR_HTTP     "http"
#define REMORA_ERR_S3       "s3"
#define REMORA_ERR_CHECKSUM "checksum"
#define REMORA_ERR_SIZE     "size"
#define REMORA_ERR_POLICY   "policy"
#define REMORA_ERR_SOURCE   "source"
#define REMORA_ERR_INTERNAL "internal"
/* an export's write may have been sent without a conclusive answer */
#define REMORA_ERR_OUTCOME_UNKNOWN "outcome_unknown"
#define REMORA_ERR_EXISTS          "exists"          /* if_exists = fail */
#define REMORA_ERR_VERIFY          "verify_mismatch" /* a target differs */

typedef struct RemoraTaskError
{
	const char *class; /* one of REMORA_ERR_* */
	char message[512];
	long http_status; /* 0 if none */
	int  curl_code;   /* 0 if none */
	char s3_code[64]; /* "" if none */
	long retry_after; /* seconds, -1 if none */
	bool retryable;
} RemoraTaskError;

/* The committed member and its manifest, for remora.commit. */
typedef struct RemoraTaskResult
{
	char    member_key[1200];
	char    member_etag[256];
	char    member_sha256[65];
	int64_t member_size;
	char    source_etag[256];
	char    source_last_modified[64];
	char    manifest_key[1200];
	char    manifest_etag[256];
	char    manifest_sha256[65];
	char    members_sha256[65]; /* the root digest (doc/manifest.md) */
	int64_t members;
	int64_t bytes;
	int64_t members_reused;    /* copied from an earlier attempt */
	char    source_commit[41]; /* hf: the pinned commit */
	int64_t reused_from_job;   /* one member copied from that job's result
								* (a 304 to RemoraTaskSpec.unchanged); 0 */
} RemoraTaskResult;

/*
 * What a checkpoint records: the validated parts of the attempt's upload
 * and the hash after them.
 */
typedef struct RemoraTaskCheckpoint
{
	int64_t           bytes_done;  /* bytes in validated parts */
	int64_t           bytes_total; /* -1 if unknown */
	const char       *etag;
	const char       *last_modified;
	const char       *upload_key;
	const char       *upload_id;
	const RemoraPart *parts;
	int               nparts;
	const char       *sha256_state;

	/* a set: members completed since the last checkpoint */
	const RemoraSetMember *members;
	int                    nmembers;
	int64_t                members_done;  /* in all */
	int64_t                members_total; /* -1 until the listing ended */

	/* an export: conclusive answers since the last checkpoint */
	const RemoraExportRef *refs;
	int                    nrefs;
} RemoraTaskCheckpoint;

extern RemoraEngine *remora_engine_new(const RemoraEngineConfig *cfg,
									   char *errbuf, size_t errlen);
extern void          remora_engine_free(RemoraEngine *engine);
extern int           remora_engine_fd(const RemoraEngine *engine);
extern long          remora_engine_timeout_ms(const RemoraEngine *engine);

/*
 * The wall clock requests are signed with (SigV4's X-Amz-Date, presigned
 * URLs, webhook timestamps): this machine's, moved by the offset the
 * runner last measured against the database server's clock.
 */
extern void   remora_engine_set_clock_offset(int64_t seconds);
extern time_t remora_engine_wall_time(void);
extern void   remora_engine_run(RemoraEngine *engine);

/*
 * Lookups: what a job needs from its host's database.  The engine never
 * calls its host: a job queues a lookup and waits.  Between two runs of
 * the engine the host takes each pending lookup, answers it inside its own
 * transaction and error boundary, and hands it back.  A lookup is valid
 * until it is handed back, or until its task is aborted or freed.
 *
 * REMORA_LOOKUP_PRIOR (a set that listed a page): which of paths an
 * earlier attempt of the job completed, out[i] for paths[i].  One handed
 * back with ok = false (the host could not answer) counts as "found in no
 * earlier attempt": those members are transferred again.
 *
 * REMORA_LOOKUP_EXPORT_PAGE (an export): the next page of the exported
 * result's members, in the database's path order: exactly max members
 * (fewer only at the end of the result) whose path sorts after `after`
 * (NULL: from the first), each with the reference an earlier attempt
 * recorded for it, handed over one by one with remora_lookup_add_member
 * (which copies it).  One handed back with ok = false, or with fewer
 * members than the export still has, fails the export (retryable).
 *
 * REMORA_LOOKUP_SWEEP_PAGE (a sweep): a page of the objects under the
 * sweep's prefix; the host sets doomed[i] for each of objects[i] that is
 * to be deleted.  One handed back with ok = false deletes nothing and
 * fails the sweep.
 */
typedef enum RemoraLookupKind
{
	REMORA_LOOKUP_PRIOR,
	REMORA_LOOKUP_EXPORT_PAGE,
	REMORA_LOOKUP_SWEEP_PAGE
} RemoraLookupKind;

/* An object a sweep listed (see RemoraLookup): as the listing says it */
typedef struct RemoraSweepObject
{
	const char *key;
	int64_t     size;
	const char *last_modified; /* ISO 8601, as sent; "" if none */
} RemoraSweepObject;

typedef struct RemoraLookup
{
	RemoraLookupKind kind;
	void            *host_arg; /* the asking job's spec's host_arg */

	/* REMORA_LOOKUP_PRIOR */
	const char *const *paths; /* member paths */
	int                n;
	RemoraPrior       *out; /* out[i] for paths[i]; zeroed on entry */

	/* REMORA_LOOKUP_EXPORT_PAGE */
	const char *after; /* NULL: the first page */
	int         max;   /* members asked for, <= REMORA_EXPORT_PAGE */

	/* REMORA_LOOKUP_SWEEP_PAGE (n objects) */
	const RemoraSweepObject *objects;
	bool                    *doomed; /* doomed[i] for objects[i]; false on
									  * entry */
} RemoraLookup;

extern RemoraLookup *remora_engine_lookup_next(RemoraEngine *engine);
extern void          remora_engine_lookup_done(RemoraEngine *engine,
											   RemoraLookup *lookup, bool ok);

/*
 * Add one member to an export page's answer (copied).  False, with the
 * reason in errbuf, for a member that is not valid (its path, size,
 * SHA-256 or ETag) or one more than max; the host then hands the lookup
 * back with ok = false.
 */
extern bool remora_lookup_add_member(RemoraLookup             *lookup,
									 const RemoraExportMember *member,
									 char *errbuf, size_t errlen);

extern RemoraTask     *remora_task_start(RemoraEngine         *engine,
										 const RemoraTaskSpec *spec, char *errbuf,
										 size_t errlen);
extern RemoraTaskState remora_task_state(const RemoraTask *task);
extern void remora_task_progress(const RemoraTask *task, int64_t *done,
								 int64_t *total);
extern bool remora_task_restarted(const RemoraTask *task, const char **why);
extern bool remora_task_checkpoint(RemoraTask *task, RemoraTaskCheckpoint *out);
extern const RemoraTaskResult *remora_task_result(const RemoraTask *task);
extern const RemoraTaskError  *remora_task_error(const RemoraTask *task);
extern void remora_task_abort(RemoraTask *task, bool delete_staging);
extern void remora_task_free(RemoraTask *task);

/*
 * Cap the bytes a job downloads from its sources (all its connections and,
 * for a set, all its members together) at bytes_per_second; 0 lifts the
 * cap.  It may change at any time: the next chunk received obeys it.
 */
extern void remora_task_set_max_rate(RemoraTask *task,
									 int64_t     bytes_per_second);

/*
 * List every object under a prefix of the target bucket and delete those
 * its host dooms, a page at a time (lookups of kind
 * REMORA_LOOKUP_SWEEP_PAGE, each with host_arg): sweep.c.
 */
extern RemoraTask *remora_sweep_start(RemoraEngine *engine, const char *bucket,
									  const char *prefix, void *host_arg,
									  char *errbuf, size_t errlen);

/* Delete every object under a prefix of the target bucket (cleanup). */
extern RemoraTask *remora_cleanup_start(RemoraEngine *engine,
										const char *bucket, const char *prefix,
										char *errbuf, size_t errlen);

extern void remora_resume_free(RemoraResume *resume);

/*
 * One try of a webhook (webhook.c): a POST of body to url with the
 * Standard Webhooks headers, signed with key, the URL judged by the
 * outbound-source policy on the address connected to.  Poll it with
 * remora_webhook_ended after each run; free it either way.
 */
typedef struct RemoraWebhook RemoraWebhook;
extern RemoraWebhook *remora_webhook_post(RemoraEngine *engine, const char *url,
										  const char          *id,
										  const unsigned char *key,
										  size_t keylen, long long timestamp,
										  const char *body, long timeout_ms,
										  char *errbuf, size_t errlen);
extern bool           remora_webhook_ended(const RemoraWebhook *w, long *status,
										   bool *retry, const char **error);
extern void           remora_webhook_free(RemoraWebhook *w);
extern bool remora_webhook_signature(const unsigned char *key, size_t keylen,
									 const char *id, long long timestamp,
									 const char *body, char *out,
									 size_t outlen);

/*
 * Start an export (see RemoraExportSpec).  It asks for its members a page
 * at a time (lookups of kind REMORA_LOOKUP_EXPORT_PAGE).  Its checkpoints
 * carry the conclusive answers (refs) since the last one, which the host
 * makes durable; after it ended, one more call hands out the rest.  It fails
 * with class REMORA_ERR_OUTCOME_UNKNOWN (not retryable) when a copy was
 * sent without a conclusive answer, after the copies in flight ended.
 */
extern RemoraTask *remora_export_start(RemoraEngine           *engine,
									   const RemoraExportSpec *spec,
									   char *errbuf, size_t errlen);

/*
 * Start a set (see RemoraSetSpec).  It is a task to its host: the same
 * state, progress, checkpoint, result and abort calls apply; its
 * checkpoints carry completed members, which the host must make durable
 * before the commit (the result's members not yet handed out by a
 * checkpoint come with the last call of remora_task_checkpoint).
 */
extern RemoraTask *remora_set_start(RemoraEngine        *engine,
									const RemoraSetSpec *spec, char *errbuf,
									size_t errlen);

/* A presigned GET URL (malloc'd) for bucket/key, valid expires seconds. */
extern char *remora_s3_presign_get(const RemoraTargetConfig *target,
								   const char *bucket, const char *key,
								   time_t now, int expires, char *errbuf,
								   size_t errlen);

#endif /* REMORA_ENGINE_H */
