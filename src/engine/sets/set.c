/*-------------------------------------------------------------------------
 *
 * set.c
 *	  Jobs of many members: every object under an S3 prefix (or one S3
 *	  object), or a Hugging Face snapshot pinned to a commit.
 *
 * The set lists its source a page at a time into a window of entries kept
 * in listing order, runs up to REMORA_SET_CONCURRENCY of them at once, more
 * of small ones (engine.h; each a member transfer of object.c, or a
 * server-side copy of a member an earlier attempt completed), and pops
 * completed entries from the head of the window: each becomes a line of
 * the manifest and a member for the next checkpoint.  The manifest goes to
 * the store a part at a time (multipart upload) once it outgrows one part,
 * so memory is bounded by the window, the part size and the running
 * members, not by the number of members.
 *
 *	  list page --> lookup (host) --> window (<= REMORA_SET_WINDOW entries)
 *	     ^                              | start: member task / reuse copy
 *	     +------ window has room -------+ pop head when done, in order
 *	                                    v
 *	                manifest lines (SHA-256 of the member lines: the root
 *	                digest) --> parts --> manifest.jsonl --> result
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "engine/s3/creds.h"
#include "engine/sets/set.h"
#include "engine/common/source_uri.h"

/* The next page of the listing, when the window has room for it. */
static void
list_next(RemoraSet *set)
{
	if (set->list_req || set->listed || set->lookup ||
		set->status.state != REMORA_TASK_RUNNING)
		return;
	if (set->list_retry_at > remora_now_ms())
	{
		remora_loop_wake_at(&set->base.engine->loop, set->list_retry_at);
		return;
	}
	if (set->phase != S_RESOLVE &&
		set->nentries + LIST_PAGE > REMORA_SET_WINDOW)
		return;
	set->next_page(set);
}

static void
set_pump(RemoraTask *t)
{
	RemoraSet *set = (RemoraSet *) t;
	int        children = set->children;

	if (set->status.state != REMORA_TASK_RUNNING)
		return;
	/* the member tasks only, not the whole window (REMORA_SET_WINDOW) */
	for (Entry *e = set->head;
		 e && children > 0 && set->status.state == REMORA_TASK_RUNNING;
		 e = e->next)
		if (e->state == E_RUNNING)
		{
			children--;
			remora_set_reap_child(set, e);
		}
	if (set->phase == S_RESOLVE)
	{
		list_next(set);
		return;
	}
	if (set->phase == S_LIST)
	{
		remora_set_pop_done(set);
		list_next(set);
		remora_set_start_entries(set);
		if (set->dry_run)
		{
			/* planned at once: the window empties without a request */
			remora_set_pop_done(set);
			list_next(set);
		}
		if (set->listed && set->head == NULL &&
			set->status.state == REMORA_TASK_RUNNING && set->mreq == NULL)
			remora_set_finish(set);
	}
	remora_set_manifest_flush(set);
}

static char **
copy_list(const char *const *v, int n)
{
	char **out = calloc(n + 1, sizeof(char *));

	for (int i = 0; out && i < n; i++)
		if ((out[i] = strdup(v[i])) == NULL)
			return out; /* checked by the caller */
	return out;
}

static bool
list_ok(char **v, int n)
{
	for (int i = 0; v && i < n; i++)
		if (v[i] == NULL)
			return false;
	return v != NULL;
}

static bool
set_source(RemoraSet *set, const RemoraSetSpec *spec, RemoraEngine *engine,
		   char *errbuf, size_t errlen)
{
	if (spec->kind == REMORA_SET_HF)
	{
		set->hub_url = remora_xstrdup(spec->hub_url);
		if (set->hub_url)
		{
			size_t n = strlen(set->hub_url);

			while (n > 0 && set->hub_url[n - 1] == '/')
				set->hub_url[--n] = '\0';
		}
		set->hub_host = set->hub_url ? remora_url_origin(set->hub_url) : NULL;
		if (set->hub_host == NULL)
		{
			snprintf(errbuf, errlen, "remora.hf_endpoint is not a URL");
			return false;
		}
		set->repo_type = remora_xstrdup(spec->repo_type);
		set->repo = remora_xstrdup(spec->repo);
		set->revision =
			remora_xstrdup(spec->revision ? spec->revision : "main");
		if (spec->token && spec->token[0])
		{
			size_t n = strlen(spec->token) + 32;

			set->auth_header = malloc(n);
			if (set->auth_header)
				snprintf(set->auth_header, n, "Authorization: Bearer %s",
						 spec->token);
		}
		return set->repo_type && set->repo && set->revision;
	}

	set->source_bucket = remora_xstrdup(spec->source_bucket);
	set->source_key = remora_xstrdup(spec->source_key ? spec->source_key : "");
	set->single = spec->single;
	set->file_name = remora_xstrdup(spec->file_name);
	if (spec->source_store)
	{
		bool https;

		if (!remora_s3_target_parse(spec->source_store, &set->src_base_url,
									&set->src_host, &https, errbuf, errlen))
			return false;
		if ((set->src_copy = remora_target_copy(spec->source_store)) == NULL ||
			!remora_target_inherit(set->src_copy, engine->target_cfg))
		{
			snprintf(errbuf, errlen, "out of memory");
			return false;
		}
		set->src_ca_pem = set->src_copy->ca_pem;
		set->source_ep =
			(S3Endpoint){set->src_base_url,
						 set->src_host,
						 https,
						 spec->source_store->path_style,
						 set->src_copy->region,
						 set->src_copy,
						 set->src_ca_pem,
						 "the endpoint's CA (remora.set_source_endpoint_ca) or "
						 "remora.ca_file",
						 spec->source_store->anonymous,
						 NULL /* a source's objects are not Remora's */};
		set->source_cfg = *set->src_copy;
	}
	else
	{
		set->same_store = true;
		set->source_ep = engine->target;
		/* the user's objects there: not read with the target's SSE-C key */
		set->source_ep.sse = NULL;
		set->source_cfg = *engine->target_cfg;
	}
	return set->source_bucket && set->source_key &&
		   (!set->single || set->file_name);
}

static RemoraTaskState
set_state(const RemoraTask *t)
{
	return ((const RemoraSet *) t)->status.state;
}

static void
set_progress(const RemoraTask *t, int64_t *done, int64_t *total)
{
	const RemoraSet *set = (const RemoraSet *) t;
	int64_t          d = set->bytes_done;

	for (const Entry *e = set->head; e; e = e->next)
	{
		if (e->state == E_DONE)
			d += e->size;
		else if (e->state == E_RUNNING && e->child)
		{
			int64_t cd, ct;

			remora_task_progress(e->child, &cd, &ct);
			d += cd;
		}
	}
	*done = d;
	*total = set->listed ? set->listed_bytes : -1;
}

static void
free_members(RemoraSetMember *m, int n)
{
	for (int i = 0; i < n; i++)
	{
		free(m[i].path);
		free(m[i].key);
		free(m[i].etag);
		free(m[i].source_json);
	}
}

/*
 * Hand out the members completed since the last call.  They stay valid
 * until the next call (or the set is freed).
 */
static bool
set_checkpoint(RemoraTask *t, RemoraTaskCheckpoint *out)
{
	RemoraSet *set = (RemoraSet *) t;

	free_members(set->cp_out, set->ncp_out);
	free(set->cp_out);
	set->cp_out = NULL;
	set->ncp_out = 0;
	if (!set->cp_dirty)
		return false;
	set->cp_dirty = false;
	memset(out, 0, sizeof(*out));
	set->cp_out = set->cpq;
	set->ncp_out = set->ncpq;
	set->cpq = NULL;
	set->ncpq = set->cpq_cap = 0;
	out->members = set->cp_out;
	out->nmembers = set->ncp_out;
	out->members_done = set->members_done;
	out->members_total = set->listed ? set->listed_members : -1;
	set_progress(t, &out->bytes_done, &out->bytes_total);
	return true;
}

/* No restart from zero: a set's progress is its completed members. */
static bool
set_restarted(const RemoraTask *t, const char **why)
{
	(void) t;
	*why = "";
	return false;
}

static const RemoraTaskResult *
set_result(const RemoraTask *t)
{
	return &((const RemoraSet *) t)->result;
}

static const RemoraTaskError *
set_error(const RemoraTask *t)
{
	return &((const RemoraSet *) t)->status.error;
}

static void
set_abort(RemoraTask *t, bool delete_staging)
{
	RemoraSet *set = (RemoraSet *) t;

	(void) delete_staging;
	remora_set_drop_lookup(set); /* the engine withdrew it */
	remora_set_stop(set);
}

static void
set_free(RemoraTask *t)
{
	RemoraSet *set = (RemoraSet *) t;

	remora_set_drop_lookup(set); /* the engine withdrew it */
	remora_set_stop(set);
	while (set->head)
	{
		Entry *e = set->head;

		set->head = e->next;
		if (e->child)
			remora_task_free(e->child);
		remora_set_entry_free(e);
	}
	free_members(set->cpq, set->ncpq);
	free(set->cpq);
	free_members(set->cp_out, set->ncp_out);
	free(set->cp_out);
	remora_mpu_forget(&set->mpu);
	for (int i = 0; set->include && i < set->ninclude; i++)
		free(set->include[i]);
	free(set->include);
	for (int i = 0; set->exclude && i < set->nexclude; i++)
		free(set->exclude[i]);
	free(set->exclude);
	remora_sha256_free(set->msha);
	remora_sha256_free(set->lsha);
	free(set->seen_path);
	free(set->seen_content);
	remora_buf_free(&set->mtext);
	free(set->part_body);
	free(set->list_token);
	free(set->next_url);
	free(set->display);
	free(set->source_bucket);
	free(set->source_key);
	free(set->file_name);
	free(set->src_base_url);
	free(set->src_host);
	remora_target_free(set->src_copy);
	free(set->hub_url);
	free(set->hub_host);
	free(set->repo_type);
	free(set->repo);
	free(set->revision);
	free(set->auth_header);
	free(set->bucket);
	free(set->staging);
	free(set->storage_class);
	free(set->attempt_id);
}
static const RemoraTaskKind set_kind = {
	"set",          set_pump,   set_state, set_progress, set_restarted,
	set_checkpoint, set_result, set_error, set_abort,    set_free};

RemoraTask *
remora_set_start(RemoraEngine *engine, const RemoraSetSpec *spec, char *errbuf,
				 size_t errlen)
{
	RemoraSet *set = calloc(1, sizeof(RemoraSet));
	bool       ok;

	if (set == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	snprintf(errbuf, errlen, "out of memory");
	remora_task_register(engine, &set->base, &set_kind);
	set->kind = spec->kind;
	set->status.state = REMORA_TASK_RUNNING;
	set->phase = spec->kind == REMORA_SET_HF ? S_RESOLVE : S_LIST;
	set->display = remora_xstrdup(spec->display);
	set->bucket = remora_xstrdup(spec->bucket);
	set->storage_class = remora_xstrdup(spec->storage_class);
	remora_mpu_init(&set->mpu, set->bucket, set->result.manifest_key);
	set->mpu.storage_class = set->storage_class;
	set->staging = remora_xstrdup(spec->staging_prefix);
	set->attempt_id = remora_xstrdup(spec->attempt_id);
	set->job_id = spec->job_id;
	set->fencing_token = spec->fencing_token;
	set->earlier_attempts = spec->earlier_attempts;
	set->dry_run = spec->dry_run;
	set->member_cap = REMORA_SET_CONCURRENCY;
	set->connections = spec->connections;
	set->host_arg = spec->host_arg;
	set->next_page =
		spec->kind == REMORA_SET_HF ? remora_list_hf_next : remora_list_s3_next;
	set->include = copy_list(spec->include, spec->ninclude);
	set->ninclude = spec->ninclude;
	set->exclude = copy_list(spec->exclude, spec->nexclude);
	set->nexclude = spec->nexclude;
	set->msha = remora_sha256_new();
	set->lsha = remora_sha256_new();
	ok = RAND_bytes(set->seen_key, sizeof(set->seen_key)) == 1 &&
		 set->display && set->bucket && set->staging && set->attempt_id &&
		 list_ok(set->include, set->ninclude) &&
		 list_ok(set->exclude, set->nexclude) && set->msha && set->lsha &&
		 set_source(set, spec, engine, errbuf, errlen);
	if (ok)
		snprintf(set->result.manifest_key, sizeof(set->result.manifest_key),
				 "%smanifest.jsonl", set->staging);
	if (ok && set->kind == REMORA_SET_S3 && !remora_set_manifest_header(set))
		ok = false;
	if (!ok)
	{
		remora_task_free(&set->base);
		return NULL;
	}
	set_pump(&set->base);
	return &set->base;
}
