/*-------------------------------------------------------------------------
 *
 * set.h
 *	  A job of many members (a job of kind "set"), shared by the files that
 *	  drive it:
 *
 *	  set.c           the job: spec, scheduling of the listing, the kind
 *	  set_window.c    the window: what enters it (path checks, patterns,
 *	                  duplicates), the lookup of each listed page, and
 *	                  failing the set (which stops everything in it)
 *	  list_s3.c       listing an S3 prefix, a page at a time
 *	  list_hf.c       resolving a Hub revision and listing its tree
 *	  set_members.c   running members: transfers, reuse, server-side copies
 *	  set_manifest.c  the manifest as members complete, uploaded in parts
 *
 * set.c calls the others; they call set_window.c (and list_hf.c calls
 * set_manifest.c for the header once the commit is known), never set.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_SET_H
#define REMORA_SET_H

#include "engine/core/engine_int.h"
#include "engine/s3/multipart.h"

#define CHECKPOINT_QUEUE_MAX 4096 /* completed members not yet handed out */
#define LIST_PAGE            1000
/*
 * The first page of an S3 listing: members start once it is listed, and a
 * store reads metadata for every key it lists (s3rver took seconds for a
 * page of 1000 on a busy machine), so a short first page starts them
 * sooner; the next pages are listed while they run.
 */
#define LIST_FIRST_PAGE "100"
#define RETRY_BASE_MS   500
#define PRESIGN_SECONDS (24 * 3600)

typedef enum EntryState
{
	E_WAITING,
	E_RUNNING, /* a member task */
	E_COPYING, /* reusing an earlier attempt's member */
	E_HASHING, /* same store: reading to hash, then a server-side copy */
	E_BACKOFF, /* waiting to try again */
	E_DONE
} EntryState;

typedef struct Entry Entry;
struct Entry
{
	Entry        *next;
	EntryState    state;
	char         *path;     /* the member path */
	char         *src_key;  /* s3: the source object's key */
	char         *src_etag; /* s3: as listed */
	char         *src_lm;   /* s3: Last-Modified as listed */
	char         *oid;      /* hf: the git object id */
	char         *lfs_sha;  /* hf, LFS: the content's SHA-256 */
	int64_t       size;     /* as listed */
	int           tries;
	int64_t       retry_at;
	RemoraTask   *child;
	Request      *copy;
	Request      *hash_req;
	RemoraSha256 *hsha;
	int64_t       hbytes;
	RemoraPrior  *prior; /* reusable from an earlier attempt, or NULL */
	bool          large; /* running, and counted in set->running_large */

	/* the completed member */
	char   *key;
	char   *etag;
	char    sha256[65];
	bool    reused;
	int64_t reused_from_job; /* the earlier job it was copied from; 0: none */
};

typedef enum SetPhase
{
	S_RESOLVE, /* hf: the revision to a commit */
	S_LIST,
	S_FINISH, /* the manifest's last part and completion */
	S_DONE
} SetPhase;

typedef struct RemoraSet RemoraSet;

struct RemoraSet
{
	RemoraTask       base; /* kind: set_kind (set.c) */
	RemoraJobStatus  status;
	RemoraSetKind    kind;
	SetPhase         phase;
	RemoraTaskResult result;

	/* the spec, copied */
	char               *display;
	char               *source_bucket;
	char               *source_key;
	bool                single;
	bool                same_store; /* the source is the target store */
	char               *file_name;
	RemoraTargetConfig  source_cfg; /* the presigning view of the source */
	S3Endpoint          source_ep;
	char               *src_base_url, *src_host;
	RemoraTargetConfig *src_copy; /* a source endpoint's, owned; NULL: the
								   * target's */
	const char *src_ca_pem;       /* src_copy's */
	char       *hub_url;
	char       *hub_host;
	char       *repo_type;
	char       *repo;
	char       *revision;
	char       *auth_header; /* "Authorization: Bearer …", to the hub only */
	char      **include;
	int         ninclude;
	char      **exclude;
	int         nexclude;
	char       *bucket;
	char       *staging;
	char       *storage_class; /* of what it writes; NULL: the engine's */
	int64_t     job_id;
	char       *attempt_id;
	int64_t     fencing_token;
	bool        earlier_attempts; /* ask lookups of listed pages */
	bool        dry_run;          /* plan every entry, write no member */
	int         connections;      /* ranged GETs of each large member */
	void       *host_arg;

	/* the lookup of the last page listed, while the host has it */
	RemoraLookup *lookup;
	Entry        *lookup_first; /* the page's first entry: held until then */
	Entry       **lookup_entries;
	const char  **lookup_paths;

	/* listing (list_s3.c, list_hf.c) */
	void (*next_page)(RemoraSet *set); /* ask for the next page */
	Request *list_req;
	char    *list_token; /* s3: continuation token */
	char    *next_url;   /* hf: the next page */
	bool     listed;     /* the listing ended */
	int      list_tries;
	int64_t  list_retry_at;
	char     commit[41];
	int64_t  listed_members;
	int64_t  listed_bytes;

	/* the window */
	Entry *head;
	Entry *tail;
	int    nentries;
	int    running;
	int    children; /* of them member tasks (E_RUNNING), to reap */

	/*
	 * Members in flight (set_members.c): at most member_cap, of them at
	 * most REMORA_SET_CONCURRENCY of REMORA_SET_SMALL_MEMBER or more
	 * (running_large); the cap grows with each member completed, from
	 * REMORA_SET_CONCURRENCY to REMORA_SET_SMALL_CONCURRENCY, and is halved
	 * by a throttle answer, after which it holds until cap_hold_until.
	 */
	int     member_cap;
	int     running_large;
	int64_t cap_hold_until;

	/*
	 * Duplicates: 64-bit hashes of member paths and their contents, keyed
	 * with a random key of this set's, so that a source cannot name two
	 * members whose hashes collide (one would be taken for the other).
	 */
	unsigned char seen_key[16];
	uint64_t     *seen_path;
	uint64_t     *seen_content;
	size_t        seen_cap; /* power of two */
	size_t        seen_n;

	/* completed members */
	RemoraSetMember *cpq;
	int              ncpq;
	int              cpq_cap;
	RemoraSetMember *cp_out; /* handed out by the last checkpoint */
	int              ncp_out;
	bool             cp_dirty;
	int64_t          members_done;
	int64_t          bytes_done;
	int64_t          members_reused;
	int64_t          duplicates;

	/* the manifest */
	RemoraBuf     mtext;  /* not yet uploaded */
	RemoraSha256 *msha;   /* the whole manifest */
	RemoraSha256 *lsha;   /* the member lines: the root digest */
	Multipart     mpu;    /* once it outgrows one part */
	int64_t       msent;  /* bytes sent in parts of it */
	int           mparts; /* parts of it sent */
	Request      *mreq;
	char         *part_body; /* the part (or the whole) in flight */
};

/* set.c, set_window.c */
extern void remora_set_fail(RemoraSet *set, const char *class, bool retryable,
							long http_status, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
extern void remora_set_fail_with(RemoraSet *set, const RemoraTaskError *err,
								 const char *path);
extern bool remora_set_retry_at(RemoraSet *set, const RemoraTaskError *err,
								int *tries, int64_t *at);
extern void remora_set_shown(char *out, size_t outlen, const char *s);
extern void remora_set_entry_free(Entry *e);
extern bool remora_set_add_entry(RemoraSet *set, Entry *e);
extern bool remora_set_take_listed(RemoraSet *set, Entry *e, bool complete,
								   Entry **first);
extern void remora_set_listed_page(RemoraSet *set, Entry *first);
extern void remora_set_drop_lookup(RemoraSet *set);
extern void remora_set_stop(RemoraSet *set);

/* list_s3.c, list_hf.c: the next page (next_page) */
extern void remora_list_s3_next(RemoraSet *set);
extern void remora_list_hf_next(RemoraSet *set);

/* set_members.c */
extern void remora_set_start_entries(RemoraSet *set);
extern void remora_set_reap_child(RemoraSet *set, Entry *e);

/* set_manifest.c */
extern bool remora_set_manifest_header(RemoraSet *set);
extern void remora_set_pop_done(RemoraSet *set);
extern void remora_set_manifest_flush(RemoraSet *set);
extern void remora_set_finish(RemoraSet *set);

#endif /* REMORA_SET_H */
