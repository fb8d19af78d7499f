/*-------------------------------------------------------------------------
 *
 * engine.c
 *	  The engine as its host sees it: configuration, the loop, the jobs it
 *	  runs and the lookups they wait on.
 *
 * The public remora_task_* calls dispatch through each job's kind (see
 * engine_int.h); the engine pumps every job after each run of the loop,
 * through a hook the loop calls.  Lookups are queued by jobs and taken by
 * the host between runs (engine.h): the engine never calls its host.
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/s3/creds.h"
#include "engine/core/engine_int.h"
#include "engine/common/source_uri.h"

struct PendingLookup
{
	RemoraLookup         pub;
	RemoraTask          *task;
	RemoraLookupAnswered answered;
	bool                 taken; /* handed to the host */
	PendingLookup       *next;
	RemoraExportMember  *members; /* an export page: what the host added */
	int                  nmembers;
};

static void lookup_free(PendingLookup *l);

static void
pump_jobs(void *arg)
{
	RemoraEngine *engine = arg;

	/*
	 * A job's pump may start jobs (at the head: not visited now) or free
	 * jobs after itself (the list stays linked through the job pumping).
	 */
	for (RemoraTask *t = engine->tasks; t; t = t->next_task)
		if (t->kind->pump)
			t->kind->pump(t);
}

RemoraEngine *
remora_engine_new(const RemoraEngineConfig *cfg, char *errbuf, size_t errlen)
{
	RemoraEngine *engine = calloc(1, sizeof(RemoraEngine));
	bool          https;

	if (engine == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	engine->loop.epfd = -1;
	if (!remora_s3_target_parse(&cfg->target, &engine->base_url, &engine->host,
								&https, errbuf, errlen))
	{
		remora_engine_free(engine);
		return NULL;
	}
	engine->region = remora_xstrdup(cfg->target.region);
	engine->target_cfg = remora_target_copy(&cfg->target);
	engine->sse = remora_s3_sse_new(&cfg->sse, errbuf, errlen);
	if (engine->target_cfg == NULL || engine->sse == NULL)
	{
		if (engine->target_cfg == NULL)
			snprintf(errbuf, errlen, "out of memory");
		remora_engine_free(engine);
		return NULL;
	}
	engine->target_cfg->anonymous = false; /* the target is always signed */
	engine->target = (S3Endpoint){engine->base_url,
								  engine->host,
								  https,
								  cfg->target.path_style,
								  engine->region,
								  engine->target_cfg,
								  NULL,
								  "remora.ca_file",
								  false,
								  engine->sse};
	remora_creds_set_tls(cfg->ca_file, cfg->ca_path);
	engine->part_size = cfg->part_size;
	engine->max_parts =
		cfg->max_upload_parts == 0 ? REMORA_MAX_PARTS : cfg->max_upload_parts;
	engine->export_copy_cutoff =
		cfg->export_copy_cutoff > 0 &&
				cfg->export_copy_cutoff < REMORA_COPY_OBJECT_MAX
			? cfg->export_copy_cutoff
			: REMORA_COPY_OBJECT_MAX;
	if (cfg->part_size < 64 * 1024 || cfg->part_size % 1024 != 0)
	{
		/* a chunk from curl must never span more than one buffer boundary */
		snprintf(errbuf, errlen,
				 "the part size must be a multiple of 1 kB, at least 64 kB");
		remora_engine_free(engine);
		return NULL;
	}
	if (engine->max_parts < 1 || engine->max_parts > REMORA_MAX_PARTS)
	{
		snprintf(errbuf, errlen, "the part limit must be 1 to %d",
				 REMORA_MAX_PARTS);
		remora_engine_free(engine);
		return NULL;
	}
	engine->policy =
		remora_netpolicy_new(cfg->allow_networks, cfg->deny_networks,
							 cfg->allow_ports, errbuf, errlen);
	if (engine->policy == NULL ||
		!remora_netpolicy_block(engine->policy, cfg->blocked_origins, errbuf,
								errlen))
	{
		remora_engine_free(engine);
		return NULL;
	}
	if (!remora_loop_init(&engine->loop, cfg->user_agent,
						  cfg->connect_timeout_ms, cfg->stall_timeout_ms,
						  engine->policy) ||
		!remora_loop_set_egress(&engine->loop, cfg->ca_file, cfg->ca_path,
								cfg->http_proxy, cfg->https_proxy,
								cfg->no_proxy) ||
		!remora_loop_add_hook(&engine->loop, pump_jobs, engine) ||
		engine->region == NULL)
	{
		snprintf(errbuf, errlen, "could not set up the transfer engine");
		remora_engine_free(engine);
		return NULL;
	}
	remora_loop_set_host_cap(&engine->loop, cfg->max_connections_per_host);
	engine->max_per_host = cfg->max_connections_per_host;
	engine->log = cfg->log;
	engine->log_arg = cfg->log_arg;
	return engine;
}

void
remora_engine_log(const RemoraEngine *engine, const char *fmt, ...)
{
	char    line[512];
	va_list ap;

	if (engine->log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	engine->log(engine->log_arg, line);
}

/*
 * A source request the outbound-source policy refused: the host's log says
 * which address (the task's error, which users read, names only the
 * rule).  Returns the rule, for that error.
 */
const char *
remora_engine_refused(const RemoraEngine *engine, const Request *req)
{
	if (req->policy_addr[0])
		remora_engine_log(engine,
						  "the outbound-source policy refused the address %s "
						  "(%s)",
						  req->policy_addr, req->policy_why);
	return req->policy_why;
}

/*
 * Free the engine.  Jobs not yet freed lose their requests with it and
 * may then only be freed.
 */
void
remora_engine_free(RemoraEngine *engine)
{
	if (engine == NULL)
		return;
	remora_loop_destroy(&engine->loop);
	while (engine->lookups)
	{
		PendingLookup *l = engine->lookups;

		engine->lookups = l->next;
		lookup_free(l);
	}
	remora_netpolicy_free(engine->policy);
	free(engine->base_url);
	free(engine->host);
	free(engine->region);
	remora_target_free(engine->target_cfg);
	remora_s3_sse_free(engine->sse);
	free(engine);
}

bool
remora_engine_credentials(RemoraEngine *engine, char *source, size_t len,
						  time_t *expires)
{
	RemoraCreds c;

	*expires = 0;
	if (!remora_creds_get(engine->target_cfg, remora_engine_wall_time(), &c,
						  source, len))
		return false;
	snprintf(source, len, "%s", c.source);
	*expires = c.expires;
	return true;
}

int
remora_engine_fd(const RemoraEngine *engine)
{
	return engine->loop.epfd;
}

/* 0 while a lookup waits for the host: it must not sleep on it. */
long
remora_engine_timeout_ms(const RemoraEngine *engine)
{
	for (const PendingLookup *l = engine->lookups; l; l = l->next)
		if (!l->taken)
			return 0;
	return remora_loop_timeout_ms(&engine->loop);
}

void
remora_engine_run(RemoraEngine *engine)
{
	remora_loop_run(&engine->loop);
}

Request *
remora_target_request(RemoraEngine *engine, void *owner, const S3Call *call,
					  RequestDone done, char *errbuf, size_t errlen)
{
	return remora_s3_request(&engine->loop, &engine->target, owner, call, done,
							 errbuf, errlen);
}

/* ---------------------------------------------------------------- jobs */

void
remora_task_register(RemoraEngine *engine, RemoraTask *task,
					 const RemoraTaskKind *kind)
{
	task->kind = kind;
	task->engine = engine;
	task->next_task = engine->tasks;
	engine->tasks = task;
	memset(&task->rate, 0, sizeof(task->rate));
	task->rate_parent = NULL;
}

void
remora_task_set_max_rate(RemoraTask *task, int64_t bytes_per_second)
{
	remora_rate_set(&task->rate, bytes_per_second);
}

RemoraTaskState
remora_task_state(const RemoraTask *task)
{
	return task->kind->state(task);
}

/* (a kind that moves no bytes has no progress, restart or checkpoint) */
void
remora_task_progress(const RemoraTask *task, int64_t *done, int64_t *total)
{
	if (task->kind->progress)
		task->kind->progress(task, done, total);
	else
		*done = *total = 0;
}

bool
remora_task_restarted(const RemoraTask *task, const char **why)
{
	if (task->kind->restarted)
		return task->kind->restarted(task, why);
	*why = "";
	return false;
}

/*
 * New validated progress since the last call?  The pointers in *out stay
 * valid until the next call on this task.
 */
bool
remora_task_checkpoint(RemoraTask *task, RemoraTaskCheckpoint *out)
{
	return task->kind->checkpoint && task->kind->checkpoint(task, out);
}

const RemoraTaskResult *
remora_task_result(const RemoraTask *task)
{
	return task->kind->result(task);
}

const RemoraTaskError *
remora_task_error(const RemoraTask *task)
{
	return task->kind->error(task);
}

/*
 * Stop the job.  Its staging objects stay for the cleanup of attempts that
 * can no longer commit (they may also serve a replacement).  Its lookups
 * are withdrawn.
 */
void
remora_task_abort(RemoraTask *task, bool delete_staging)
{
	remora_lookup_cancel_all(task->engine, task);
	task->kind->abort(task, delete_staging);
}

void
remora_task_free(RemoraTask *task)
{
	RemoraTask **p;

	if (task == NULL)
		return;
	remora_lookup_cancel_all(task->engine, task);
	/* the kind frees its own jobs (a set's members) while still linked */
	task->kind->free(task);
	for (p = &task->engine->tasks; *p; p = &(*p)->next_task)
		if (*p == task)
		{
			*p = task->next_task;
			break;
		}
	free(task);
}

void
remora_resume_free(RemoraResume *resume)
{
	if (resume == NULL)
		return;
	free(resume->upload_key);
	free(resume->upload_id);
	free(resume->parts);
	free(resume->etag);
	free(resume->last_modified);
	free(resume->sha256_state);
	free(resume);
}

/* ------------------------------------------------------------- lookups */

static PendingLookup *
lookup_append(RemoraEngine *engine, RemoraTask *task, void *host_arg,
			  RemoraLookupKind kind, RemoraLookupAnswered answered)
{
	PendingLookup  *l = calloc(1, sizeof(PendingLookup));
	PendingLookup **tail;

	if (l == NULL)
		return NULL;
	l->pub.kind = kind;
	l->pub.host_arg = host_arg;
	l->task = task;
	l->answered = answered;
	for (tail = &engine->lookups; *tail; tail = &(*tail)->next)
		;
	*tail = l;
	return l;
}

/*
 * Queue a lookup of paths (not copied: they must stay valid until the
 * lookup is answered or cancelled).  NULL when out of memory.
 */
RemoraLookup *
remora_lookup_queue(RemoraEngine *engine, RemoraTask *task, void *host_arg,
					const char *const *paths, int n,
					RemoraLookupAnswered answered)
{
	RemoraPrior   *out = calloc(n > 0 ? n : 1, sizeof(RemoraPrior));
	PendingLookup *l = out ? lookup_append(engine, task, host_arg,
										   REMORA_LOOKUP_PRIOR, answered)
						   : NULL;

	if (l == NULL)
	{
		free(out);
		return NULL;
	}
	l->pub.paths = paths;
	l->pub.n = n;
	l->pub.out = out;
	return &l->pub;
}

/* Queue a lookup of the next page of an export's members. */
RemoraLookup *
remora_lookup_queue_page(RemoraEngine *engine, RemoraTask *task, void *host_arg,
						 const char *after, int max,
						 RemoraLookupAnswered answered)
{
	RemoraExportMember *members =
		calloc(max > 0 ? max : 1, sizeof(RemoraExportMember));
	PendingLookup *l = members
						   ? lookup_append(engine, task, host_arg,
										   REMORA_LOOKUP_EXPORT_PAGE, answered)
						   : NULL;

	if (l == NULL)
	{
		free(members);
		return NULL;
	}
	l->pub.after = after;
	l->pub.max = max;
	l->members = members;
	return &l->pub;
}

/* Queue a lookup of which objects of a sweep's page to delete. */
RemoraLookup *
remora_lookup_queue_sweep(RemoraEngine *engine, RemoraTask *task,
						  void *host_arg, const RemoraSweepObject *objects,
						  int n, RemoraLookupAnswered answered)
{
	bool          *doomed = calloc(n > 0 ? n : 1, sizeof(bool));
	PendingLookup *l = doomed
						   ? lookup_append(engine, task, host_arg,
										   REMORA_LOOKUP_SWEEP_PAGE, answered)
						   : NULL;

	if (l == NULL)
	{
		free(doomed);
		return NULL;
	}
	l->pub.objects = objects;
	l->pub.n = n;
	l->pub.doomed = doomed;
	return &l->pub;
}

void
remora_export_member_free(RemoraExportMember *m)
{
	free((char *) m->path);
	free((char *) m->bucket);
	free((char *) m->key);
	free((char *) m->etag);
	free((char *) m->sha256);
	free((char *) m->ref_etag);
	memset(m, 0, sizeof(*m));
}

static PendingLookup *
pending_of(RemoraLookup *lookup)
{
	return (PendingLookup *) ((char *) lookup - offsetof(PendingLookup, pub));
}

bool
remora_lookup_add_member(RemoraLookup *lookup, const RemoraExportMember *src,
						 char *errbuf, size_t errlen)
{
	PendingLookup      *l = pending_of(lookup);
	RemoraExportMember *m;

	if (lookup->kind != REMORA_LOOKUP_EXPORT_PAGE || l->nmembers >= lookup->max)
	{
		snprintf(errbuf, errlen, "the page holds %d members at most",
				 lookup->max);
		return false;
	}
	if (src->path == NULL || !remora_member_path_valid(src->path))
	{
		snprintf(errbuf, errlen, "a member's path is not valid");
		return false;
	}
	if (src->bucket == NULL || src->key == NULL || src->etag == NULL ||
		src->size < 0 || src->sha256 == NULL || strlen(src->sha256) != 64 ||
		strspn(src->sha256, "0123456789abcdef") != 64)
	{
		snprintf(errbuf, errlen,
				 "the member \"%.200s\" has no valid bucket, key, ETag, size "
				 "or SHA-256",
				 src->path);
		return false;
	}
	m = &l->members[l->nmembers];
	m->path = strdup(src->path);
	m->bucket = strdup(src->bucket);
	m->key = strdup(src->key);
	m->etag = strdup(src->etag);
	m->sha256 = strdup(src->sha256);
	m->ref_etag = src->ref_etag ? strdup(src->ref_etag) : NULL;
	m->size = src->size;
	m->may_overwrite = src->may_overwrite;
	if (m->path == NULL || m->bucket == NULL || m->key == NULL ||
		m->etag == NULL || m->sha256 == NULL ||
		(src->ref_etag != NULL && m->ref_etag == NULL))
	{
		remora_export_member_free(m);
		snprintf(errbuf, errlen, "out of memory");
		return false;
	}
	l->nmembers++;
	return true;
}

RemoraExportMember *
remora_lookup_take_members(RemoraLookup *lookup, int *n)
{
	PendingLookup      *l = pending_of(lookup);
	RemoraExportMember *members = l->members;

	*n = l->nmembers;
	l->members = NULL;
	l->nmembers = 0;
	return members;
}

static void
lookup_drop_members(PendingLookup *l)
{
	for (int i = 0; i < l->nmembers; i++)
		remora_export_member_free(&l->members[i]);
	l->nmembers = 0;
}

static void
lookup_free(PendingLookup *l)
{
	lookup_drop_members(l);
	free(l->members);
	free(l->pub.out);
	free(l->pub.doomed);
	free(l);
}

/* The job goes away or stops: its lookups are withdrawn, answered or not. */
void
remora_lookup_cancel_all(RemoraEngine *engine, const RemoraTask *task)
{
	PendingLookup **p = &engine->lookups;

	while (*p)
	{
		PendingLookup *l = *p;

		if (l->task == task)
		{
			*p = l->next;
			lookup_free(l);
		}
		else
			p = &l->next;
	}
}

/* The next lookup the host has not taken yet, or NULL. */
RemoraLookup *
remora_engine_lookup_next(RemoraEngine *engine)
{
	for (PendingLookup *l = engine->lookups; l; l = l->next)
		if (!l->taken)
		{
			l->taken = true;
			return &l->pub;
		}
	return NULL;
}

/*
 * The host hands a lookup back.  Its job sees the answer at once and acts
 * on it at the next run, which the host should not delay.
 */
void
/* cppcheck-suppress constParameter */
remora_engine_lookup_done(RemoraEngine *engine, RemoraLookup *lookup, bool ok)
{
	PendingLookup **p;

	for (p = &engine->lookups; *p; p = &(*p)->next)
		if (&(*p)->pub == lookup)
		{
			PendingLookup *l = *p;

			*p = l->next;
			if (!ok && l->pub.out)
				memset(l->pub.out, 0, l->pub.n * sizeof(RemoraPrior));
			if (!ok && l->pub.doomed)
				memset(l->pub.doomed, 0, l->pub.n * sizeof(bool));
			if (!ok)
				lookup_drop_members(l);
			l->answered(l->task, &l->pub, ok);
			lookup_free(l);
			remora_loop_wake_at(&engine->loop, remora_now_ms());
			return;
		}
	/* not one of ours (its job went away): nothing to do */
}
