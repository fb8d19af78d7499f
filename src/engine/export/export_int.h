/*-------------------------------------------------------------------------
 *
 * export_int.h
 *	  What export.c (the kind "export"), export_pages.c (its members, a
 *	  page at a time), export_parts.c (a member's multipart copy) and
 *	  export_answers.c (each member's answer recorded) share: the
 *	  export's and its members' state.  Nothing outside the four files
 *	  includes this.  Calls go one way: export.c -> export_pages.c,
 *	  export_parts.c -> export_answers.c; a multipart copy's answer starts
 *	  the next members through the kind's pump, not a call upwards.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_EXPORT_INT_H
#define REMORA_EXPORT_INT_H

#include "engine/core/engine_int.h"
#include "engine/s3/multipart.h"

typedef enum
{
	M_WAIT,
	M_HEAD,
	M_COPY,
	M_HASH,
	M_MPU, /* a multipart copy: create, parts, complete, abort */
	M_DONE
} MemberState;

typedef struct Member
{
	RemoraExportMember m; /* strings owned */
	char              *target;
	MemberState        state;
	Request           *req;
	RemoraSha256      *hsha;
	int64_t            hbytes;
	char               head_etag[REMORA_ETAG_MAX];
	char               head_version[256];
	CopyGuard guard; /* the copy (or the part's) where the store refuses
					  * its condition (multipart.h) */
	/* a multipart copy */
	Multipart mpu;
	int       nparts;    /* the parts it takes */
	int       part_next; /* the part being copied, from 1 */
	int64_t   part_size;
} Member;

/*
 * A page of members, as the host handed it out (REMORA_LOOKUP_EXPORT_PAGE).
 * Members are started in order; a member started whose request has ended
 * (req NULL) is done for good, so a page whose members are all started
 * and idle is freed.
 */
typedef struct Page
{
	Member      *members;
	int          n;
	int          next;  /* the next member to start */
	int          idle;  /* members [0, idle) are started and idle */
	struct Page *newer; /* the page after this one */
} Page;

typedef struct Export
{
	RemoraTask      base; /* kind: export_kind */
	RemoraJobStatus status;
	char           *bucket;
	char           *prefix;
	RemoraIfExists  if_exists;
	bool            verify;
	char            output_digest[65];
	void           *host_arg;
	/* the members: at most two pages held, the next asked for in time */
	Page            *oldest;
	Page            *newest;
	int              npages;
	RemoraLookup    *lookup;   /* the page the host has been asked for */
	char            *after;    /* the last path received (the lookup's) */
	int64_t          total;    /* members of the exported result */
	int64_t          received; /* members handed out by the host so far */
	int              held_max; /* most members held at once (for tests) */
	int              running;  /* requests in flight */
	int64_t          finished; /* members concluded */
	int64_t          bytes_done;
	int64_t          bytes_total;
	bool             stopping;  /* a failure: start nothing new */
	bool             ambiguous; /* a copy without a conclusive answer */
	RemoraTaskError  first;     /* the first failure */
	bool             has_first;
	int64_t          mismatches; /* verify */
	RemoraBuf        mismatch_text;
	RemoraExportRef *refs; /* conclusive answers not yet handed out */
	int              nrefs;
	RemoraExportRef *handed; /* the last batch handed out */
	int              nhanded;
	RemoraTaskResult result;
} Export;

/*
 * Conclusive answers waiting for a checkpoint: no new member starts at
 * this many (those in flight may add REMORA_EXPORT_CONCURRENCY - 1 more),
 * so that a host that checkpoints once a second bounds
 * them too.
 */
#define EXPORT_REFS_MAX (2 * REMORA_EXPORT_PAGE)

/* export.c: the pump that starts the next members */
extern void remora_export_pump(Export *x);

/* export_answers.c: the answers of a member */
extern void remora_export_note_failure(Export *x, const RemoraTaskError *err);
extern void remora_export_note_failuref(Export *x, const char *class,
										bool retryable, long status,
										const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
extern void remora_export_note_ambiguous(Export *x, const Member *mb,
										 RemoraTaskError *err);
extern void remora_export_conclude(Export *x, Member *mb, const char *etag,
								   const char *version, const char *outcome);
extern bool remora_export_never_sent(CURLcode rc);

/* export_pages.c: the members, a page at a time from the host */
extern Member *remora_export_next_member(Export *x);
extern void    remora_export_pages_ask(Export *x);
extern void    remora_export_pages_release(Export *x);
extern void    remora_export_page_free(Page *pg);

/* export_parts.c: copy a member above the cutoff as a multipart upload */
extern void remora_export_start_multipart(Export *x, Member *mb);

#endif /* REMORA_EXPORT_INT_H */
