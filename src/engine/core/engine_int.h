/*-------------------------------------------------------------------------
 *
 * engine_int.h
 *	  The engine itself, between the S3 layer and the kinds of job: its
 *	  configuration, the jobs it runs, the lookups they wait on, and the
 *	  interface every kind of job implements.
 *
 * A job (the public RemoraTask) is a kind and the state of that kind: a
 * member transfer (object.c), a set (set.c) or a prefix cleanup
 * (cleanup.c).  Each kind's struct begins with a RemoraTask; the public
 * remora_task_* calls dispatch through the kind (engine.c).  The engine
 * knows no kind: it pumps every job through its kind after each run of the
 * loop.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_ENGINE_INT_H
#define REMORA_ENGINE_INT_H

#include "engine/engine.h"
#include "engine/common/hash.h"
#include "engine/net/loop.h"
#include "engine/common/netpolicy.h"
#include "engine/s3/s3.h"
#include "engine/common/util.h"

/*
 * What a kind of job does.  pump, progress, restarted and checkpoint may
 * be NULL (a kind that moves no bytes: nothing, none, no restart, no
 * checkpoint); every other entry is required.
 */
typedef struct RemoraTaskKind
{
	const char *name;
	void (*pump)(RemoraTask *task); /* after each run of the loop, or NULL */
	RemoraTaskState (*state)(const RemoraTask *task);
	void (*progress)(const RemoraTask *task, int64_t *done, int64_t *total);
	bool (*restarted)(const RemoraTask *task, const char **why);
	bool (*checkpoint)(RemoraTask *task, RemoraTaskCheckpoint *out);
	const RemoraTaskResult *(*result)(const RemoraTask *task);
	const RemoraTaskError *(*error)(const RemoraTask *task);
	void (*abort)(RemoraTask *task, bool delete_staging);
	void (*free)(RemoraTask *task); /* everything but the engine's links */
} RemoraTaskKind;

/* The head of every kind's struct. */
struct RemoraTask
{
	const RemoraTaskKind *kind;
	RemoraEngine         *engine;
	RemoraTask           *next_task; /* the engine's list */

	/*
	 * The cap on the bytes it downloads from its sources, all its requests
	 * together (remora_task_set_max_rate).  A set's member transfer takes
	 * its set's (rate_parent): the cap is the set's, all members together.
	 */
	RemoraRate  rate;
	RemoraTask *rate_parent; /* outlives the task; NULL: none */
};

/* The cap a job's source requests share (their req->rate). */
static inline RemoraRate *
remora_task_rate(RemoraTask *task)
{
	return task->rate_parent ? &task->rate_parent->rate : &task->rate;
}

typedef struct PendingLookup PendingLookup;

struct RemoraEngine
{
	RemoraLoop loop;

	/* the target store */
	S3Endpoint          target;
	char               *base_url; /* scheme://host[:port] of the target */
	char               *host;     /* host[:port] as sent and signed */
	char               *region;
	RemoraTargetConfig *target_cfg; /* the engine's copy: credentials */
	S3Sse              *sse;        /* of what it writes there */

	size_t  part_size;
	int     max_parts; /* the store's part limit, 1..REMORA_MAX_PARTS */
	int64_t export_copy_cutoff; /* > 0, <= REMORA_COPY_OBJECT_MAX */
	RemoraNetPolicy *policy;

	int max_per_host; /* remora.max_connections_per_host; 0: no cap */
	void (*log)(void *arg, const char *line); /* or NULL */
	void *log_arg;

	RemoraTask    *tasks;   /* every job not yet freed */
	PendingLookup *lookups; /* queued for the host, in order */
};

/*
 * Are copies inside the target made in parts (UploadPartCopy), never with
 * CopyObject?  With server-side encryption: Ceph RGW refuses CopyObject of
 * an encrypted object (501) and, worse, copies a plain one into an
 * encrypted object unencrypted, with 200; UploadPartCopy encrypts as
 * asked on every store.  So an export copies in parts, and a set
 * downloads what it would have copied with CopyObject (an earlier
 * attempt's member, a source in the same store).
 */
static inline bool
remora_engine_copies_in_parts(const RemoraEngine *engine)
{
	return engine->sse && engine->sse->sse;
}

/* A line for the host's log (printf-style), if it takes one. */
extern void remora_engine_log(const RemoraEngine *engine, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Link a new job into the engine (its kind's struct begins with task). */
extern void remora_task_register(RemoraEngine *engine, RemoraTask *task,
								 const RemoraTaskKind *kind);

/* A source request the policy refused: logged with its address; the rule */
extern const char *remora_engine_refused(const RemoraEngine *engine,
										 const Request      *req);

/* A signed request to the target store, not started. */
extern Request *remora_target_request(RemoraEngine *engine, void *owner,
									  const S3Call *call, RequestDone done,
									  char *errbuf, size_t errlen);

/*
 * Lookups (see engine.h).  A job queues one and is told, through answered,
 * when the host hands it back (ok false when the host could not answer;
 * a prior lookup's out is then zeroed, an export page's members dropped);
 * the lookup is freed after answered returns.  A job that goes away first
 * cancels its lookups.
 */
typedef void (*RemoraLookupAnswered)(RemoraTask *task, RemoraLookup *lookup,
									 bool ok);

extern RemoraLookup *remora_lookup_queue(RemoraEngine *engine, RemoraTask *task,
										 void              *host_arg,
										 const char *const *paths, int n,
										 RemoraLookupAnswered answered);
/* an export page: after is not copied (valid until answered or cancelled) */
extern RemoraLookup *remora_lookup_queue_page(RemoraEngine *engine,
											  RemoraTask *task, void *host_arg,
											  const char *after, int max,
											  RemoraLookupAnswered answered);
/* a sweep's page: objects are not copied (valid until answered or
 * cancelled) */
extern RemoraLookup *remora_lookup_queue_sweep(RemoraEngine *engine,
											   RemoraTask *task, void *host_arg,
											   const RemoraSweepObject *objects,
											   int                      n,
											   RemoraLookupAnswered answered);
/*
 * The members the host added to an export page, in order; the caller owns
 * the array and their strings from then on (free each field, then the
 * array).  NULL with *n = 0 when there are none.
 */
extern RemoraExportMember *remora_lookup_take_members(RemoraLookup *lookup,
													  int          *n);
extern void                remora_export_member_free(RemoraExportMember *m);
extern void                remora_lookup_cancel_all(RemoraEngine     *engine,
													const RemoraTask *task);

#endif /* REMORA_ENGINE_INT_H */
