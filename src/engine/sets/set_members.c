/*-------------------------------------------------------------------------
 *
 * set_members.c
 *	  Running a set's members, up to REMORA_SET_CONCURRENCY at once in
 *	  listing order: a member transfer (object.c) from a presigned GET or
 *	  the Hub, a copy of what an earlier attempt completed (reuse), or,
 *	  inside the target store, a read to hash then a server-side copy.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/sets/set.h"
#include "engine/common/source_uri.h"

/*
 * A member of the target store itself, copied inside the store
 * (CopyObject): the bytes are read once to hash them, and never sent back.
 * Only for objects whose ETag is the MD5 of their content (not multipart
 * uploads), so that the copy's ETag proves the copy is what was hashed,
 * also on a store that ignores x-amz-copy-source-if-match; and only from
 * one part size up.  A smaller member is streamed like any other (its GET
 * hashed on the way into one PUT): the same two requests, but the store
 * reads it once instead of twice.  bench/many_members.sh, 2,000 x 64 KiB:
 * streamed in 0.52x the wall time of hash-then-copy on RGW, 0.66x on s3rver.
 */
#define COPY_OBJECT_MAX ((int64_t) 5 * 1024 * 1024 * 1024)

/* after a throttle answer, the cap of members in flight holds this long */
#define CAP_HOLD_MS 5000

static void member_retry(RemoraSet *set, Entry *e, const RemoraTaskError *err);
static void changed(RemoraSet *set, Entry *e);

/* Of a size (or of none known) that counts against REMORA_SET_CONCURRENCY */
static bool
large_member(const Entry *e)
{
	return e->size < 0 || e->size >= REMORA_SET_SMALL_MEMBER;
}

/*
 * A member starts: counted against the caps of remora_set_start_entries.
 * A reuse copy moves no byte through the worker (the store copies it), so
 * it counts as small, whatever its size.
 */
static void
member_started(RemoraSet *set, Entry *e)
{
	set->running++;
	e->large = large_member(e) && e->state != E_COPYING;
	if (e->large)
		set->running_large++;
}

/* A member's request or task ended, whatever its outcome. */
static void
member_ended(RemoraSet *set, Entry *e)
{
	set->running--;
	if (e->large)
		set->running_large--;
	e->large = false;
}

/*
 * A member completed: one more may run at once, unless a throttle answer
 * came lately.  Grows by completions, not by time, so that a store that
 * answers slowly is not asked faster than it answers.
 */
static void
member_paid(RemoraSet *set)
{
	if (set->member_cap < REMORA_SET_SMALL_CONCURRENCY &&
		remora_now_ms() >= set->cap_hold_until)
		set->member_cap++;
}

/*
 * The store or the source said "slow down" (503, 429, SlowDown): halve the
 * members in flight (never below one) and hold there for a while.
 */
static void
member_throttled(RemoraSet *set, const RemoraTaskError *err)
{
	int was = set->member_cap;

	if (err->http_status != 503 && err->http_status != 429 &&
		strcmp(err->s3_code, "SlowDown") != 0)
		return;
	set->member_cap = was > 1 ? was / 2 : 1;
	set->cap_hold_until = remora_now_ms() + CAP_HOLD_MS;
	remora_engine_log(set->base.engine,
					  "job %lld: members in flight %d -> %d (HTTP %ld %s)",
					  (long long) set->job_id, was, set->member_cap,
					  err->http_status, err->s3_code);
}

static char *
target_key(RemoraSet *set, const char *path)
{
	size_t n = strlen(set->staging) + strlen(path) + 8;
	char  *k = malloc(n);

	if (k)
		snprintf(k, n, "%sdata/%s", set->staging, path);
	return k;
}

/* A member task for the entry: a presigned GET (s3) or the Hub's URL. */
static void
start_child(RemoraSet *set, Entry *e)
{
	RemoraTaskSpec spec;
	char          *url = NULL;
	char          *key = target_key(set, e->path);
	char           errbuf[256];

	memset(&spec, 0, sizeof(spec));
	if (set->kind == REMORA_SET_S3)
	{
		url = remora_s3_presign_get(&set->source_cfg, set->source_bucket,
									e->src_key, remora_engine_wall_time(),
									PRESIGN_SECONDS, errbuf, sizeof(errbuf));
		spec.trusted_source = true;
		spec.ca_pem = set->src_ca_pem;
		spec.if_match = e->src_etag && e->src_etag[0] ? e->src_etag : NULL;
	}
	else
	{
		char  *p = remora_uri_encode(e->path, strlen(e->path), true);
		size_t n =
			strlen(set->hub_url) + strlen(set->repo) + (p ? strlen(p) : 0) + 80;

		url = p ? malloc(n) : NULL;
		if (url)
			snprintf(url, n, "%s/%s%s/resolve/%s/%s", set->hub_url,
					 strcmp(set->repo_type, "dataset") == 0 ? "datasets/" : "",
					 set->repo, set->commit, p);
		free(p);
		snprintf(errbuf, sizeof(errbuf), "out of memory");
		spec.auth_header = set->auth_header;
		spec.auth_host = set->hub_host;
		spec.expected_sha256 = e->lfs_sha;
	}
	if (url == NULL || key == NULL)
	{
		free(url);
		free(key);
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0,
						"starting a member: %s", errbuf);
		return;
	}
	spec.source_url = url;
	spec.file_name = e->path;
	spec.bucket = set->bucket;
	spec.staging_prefix = set->staging;
	spec.job_id = set->job_id;
	spec.attempt_id = set->attempt_id;
	spec.fencing_token = set->fencing_token;
	spec.member_key = key;
	spec.no_manifest = true;
	spec.expected_size = e->size;
	spec.size_known = true;
	spec.connections = set->connections;
	spec.storage_class = set->storage_class;
	e->child =
		remora_task_start(set->base.engine, &spec, errbuf, sizeof(errbuf));
	free(url);
	free(key);
	if (e->child == NULL)
	{
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0,
						"starting a member: %s", errbuf);
		return;
	}
	/* the set's cap, all members together; set_free frees them first */
	e->child->rate_parent = &set->base;
	e->state = E_RUNNING;
	member_started(set, e);
	set->children++;
}

static void
reuse_done(Request *req, CURLcode rc)
{
	Entry          *e = req->data;
	RemoraSet      *set = req->owner;
	RemoraTaskError err;
	char           *etag;

	e->copy = NULL;
	member_ended(set, e);
	if (remora_s3_failed(req, rc, &err, "reusing an earlier attempt's copy"))
	{
		/* gone or changed: transfer it again */
		free(e->prior);
		e->prior = NULL;
		e->state = E_WAITING;
		return;
	}
	etag = remora_s3_answer_etag(req, "CopyObjectResult", &err,
								 "reusing an earlier attempt's copy");

	/*
	 * The earlier copy is immutable, but say so by its ETag where that is
	 * the content's MD5 (a copy of a multipart object gets a new one).
	 */
	if (etag == NULL || etag[0] == '\0' ||
		(remora_etag_is_md5(e->prior->etag) &&
		 !remora_etag_equal(etag, e->prior->etag)))
	{
		free(etag);
		free(e->prior);
		e->prior = NULL;
		e->state = E_WAITING;
		return;
	}
	e->etag = etag;
	memcpy(e->sha256, e->prior->sha256, sizeof(e->sha256));
	e->reused = true;
	e->reused_from_job = e->prior->from_job;
	e->state = E_DONE;
	member_paid(set);
}

/* Copy the member an earlier attempt completed into this attempt's prefix. */
static void
start_reuse(RemoraSet *set, Entry *e)
{
	char    *src = remora_s3_copy_source(set->bucket, e->prior->key);
	Request *req = NULL;

	free(e->key);
	e->key = target_key(set, e->path);
	if (src && e->key)
	{
		RemoraKV h[2];
		S3Call   call;
		char     errbuf[256];

		h[0] = (RemoraKV){"x-amz-copy-source", src};
		h[1] = (RemoraKV){"x-amz-copy-source-if-match", e->prior->etag};
		/* the earlier attempt's member: Remora's own object */
		call = (S3Call){
			"PUT", set->bucket,        e->key, NULL, 0, h, 2, NULL, 0, NULL,
			false, set->storage_class, true};
		req =
			remora_s3_start(&set->base.engine->loop, &set->base.engine->target,
							set, &call, reuse_done, errbuf, sizeof(errbuf));
	}
	free(src);
	if (req == NULL)
	{
		/* transfer it instead */
		free(e->prior);
		e->prior = NULL;
		return;
	}
	req->data = e;
	e->copy = req;
	e->state = E_COPYING;
	member_started(set, e);
}

/* A member task ended: take its result, or try again, or fail the set. */
void
remora_set_reap_child(RemoraSet *set, Entry *e)
{
	RemoraTaskState st = remora_task_state(e->child);

	if (st == REMORA_TASK_RUNNING)
		return;
	member_ended(set, e);
	set->children--;
	if (st == REMORA_TASK_SUCCEEDED)
	{
		const RemoraTaskResult *r = remora_task_result(e->child);

		free(e->key);
		free(e->etag);
		e->key = e->etag = NULL;

		/*
		 * What was read must be what was listed (a store may ignore
		 * If-Match): otherwise the next attempt lists again.
		 */
		if (e->src_etag && e->src_etag[0] &&
			!remora_etag_equal(r->source_etag, e->src_etag))
		{
			char shown[300];

			remora_task_free(e->child);
			e->child = NULL;
			remora_set_shown(shown, sizeof(shown), e->path);
			remora_set_fail(
				set, REMORA_ERR_SOURCE, true, 412,
				"member \"%s\": the source object changed since it was "
				"listed",
				shown);
			return;
		}
		e->key = strdup(r->member_key);
		e->etag = strdup(r->member_etag);
		memcpy(e->sha256, r->member_sha256, sizeof(e->sha256));
		remora_task_free(e->child);
		e->child = NULL;
		if (e->key == NULL || e->etag == NULL)
		{
			remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		e->state = E_DONE;
		member_paid(set);
		return;
	}
	{
		RemoraTaskError err = *remora_task_error(e->child);

		remora_task_free(e->child);
		e->child = NULL;
		/* a changed source is listed again by the next attempt, not here */
		if (err.http_status == 412)
			changed(set, e);
		else
			member_retry(set, e, &err);
	}
}

static bool
server_copy_fits(const RemoraSet *set, const Entry *e)
{
	return set->kind == REMORA_SET_S3 && set->same_store &&
		   !remora_engine_copies_in_parts(set->base.engine) &&
		   e->size >= (int64_t) set->base.engine->part_size &&
		   e->size <= COPY_OBJECT_MAX && remora_etag_is_md5(e->src_etag);
}

/* The member changed since it was listed: the next attempt lists again. */
static void
changed(RemoraSet *set, Entry *e)
{
	char shown[300];

	remora_set_shown(shown, sizeof(shown), e->path);
	remora_set_fail(
		set, REMORA_ERR_SOURCE, true, 412,
		"member \"%s\": the source object changed since it was listed", shown);
}

/* A failed request of a member: back off and try again, or fail the set. */
static void
member_retry(RemoraSet *set, Entry *e, const RemoraTaskError *err)
{
	member_throttled(set, err);
	if (remora_set_retry_at(set, err, &e->tries, &e->retry_at))
	{
		e->state = E_BACKOFF;
		return;
	}
	remora_set_fail_with(set, err, e->path);
}

static void
server_copy_done(Request *req, CURLcode rc)
{
	RemoraSet      *set = req->owner;
	Entry          *e = req->data;
	RemoraTaskError err;
	char           *etag;

	e->copy = NULL;
	member_ended(set, e);
	if (remora_s3_failed(req, rc, &err, "copying inside the store"))
	{
		if (req->status == 412 || req->status == 404)
			changed(set, e);
		else
			member_retry(set, e, &err);
		return;
	}
	etag = remora_s3_answer_etag(req, "CopyObjectResult", &err,
								 "copying inside the store");
	if (etag == NULL)
	{
		member_retry(set, e, &err);
		return;
	}

	/*
	 * The copy's ETag is its content's MD5: it proves that what was copied
	 * is what was hashed, also where the store ignores
	 * x-amz-copy-source-if-match (RGW does).
	 */
	if (!remora_etag_equal(etag, e->src_etag))
	{
		free(etag);
		changed(set, e);
		return;
	}
	free(e->key);
	e->key = target_key(set, e->path);
	e->etag = etag;
	if (e->key == NULL)
	{
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return;
	}
	e->state = E_DONE;
	member_paid(set);
}

static size_t
hash_data(Request *req, char *ptr, size_t len)
{
	Entry *e = req->data;
	long   status = 0;

	/* (req->status is set when the exchange ends) */
	curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status == 200)
	{
		remora_sha256_update(e->hsha, ptr, len);
		e->hbytes += (int64_t) len;
	}
	return len;
}

static void
hash_done(Request *req, CURLcode rc)
{
	RemoraSet      *set = req->owner;
	Entry          *e = req->data;
	RemoraTaskError err;
	char           *src, *key;

	e->hash_req = NULL;
	if (remora_s3_failed(req, rc, &err, "reading the source"))
	{
		member_ended(set, e);
		if (req->status == 404 || req->status == 412)
			changed(set, e);
		else
			member_retry(set, e, &err);
		return;
	}
	if (!remora_etag_equal(req->hdr.etag, e->src_etag) || e->hbytes != e->size)
	{
		member_ended(set, e);
		changed(set, e);
		return;
	}
	remora_sha256_final_hex(e->hsha, e->sha256);
	src = remora_s3_copy_source(set->source_bucket, e->src_key);
	key = target_key(set, e->path);
	if (src && key)
	{
		RemoraKV h[2];
		S3Call   call;
		char     errbuf[256];

		h[0] = (RemoraKV){"x-amz-copy-source", src};
		h[1] = (RemoraKV){"x-amz-copy-source-if-match", e->src_etag};
		/* the user's object in the same store: not Remora's */
		call = (S3Call){
			"PUT", set->bucket,        key,  NULL, 0, h, 2, NULL, 0, NULL,
			false, set->storage_class, false};
		e->copy = remora_s3_start(&set->base.engine->loop,
								  &set->base.engine->target, set, &call,
								  server_copy_done, errbuf, sizeof(errbuf));
	}
	free(src);
	free(key);
	if (e->copy == NULL)
	{
		member_ended(set, e);
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0,
						"could not start a copy inside the store");
		return;
	}
	e->copy->data = e;
}

static void
start_server_copy(RemoraSet *set, Entry *e)
{
	char     errbuf[256];
	char    *url = remora_s3_presign_get(&set->source_cfg, set->source_bucket,
										 e->src_key, remora_engine_wall_time(),
										 PRESIGN_SECONDS, errbuf, sizeof(errbuf));
	Request *req =
		url ? remora_req_new(&set->base.engine->loop, set, hash_done) : NULL;

	remora_sha256_free(e->hsha);
	e->hsha = remora_sha256_new();
	e->hbytes = 0;
	if (req == NULL || e->hsha == NULL)
	{
		free(url);
		if (req)
			remora_req_cancel(req);
		return; /* streamed instead */
	}
	curl_easy_setopt(req->easy, CURLOPT_PROXY, "");
	remora_req_set_ca_pem(req, set->src_ca_pem);
	req->region = set->source_ep.region; /* its errors judged as S3's */
	curl_easy_setopt(req->easy, CURLOPT_URL, url);
	free(url);
	req->rate = &set->base.rate;
	req->on_data = hash_data;
	req->data = e;
	if (!remora_req_start(req))
	{
		remora_req_cancel(req);
		return;
	}
	e->hash_req = req;
	e->state = E_HASHING;
	member_started(set, e);
}

/*
 * A dry run's entry: what the attempt would do with it, decided at once.
 * No member is written: the manifest line has no key, ETag or SHA-256.
 */
static void
plan_entry(RemoraSet *set, Entry *e)
{
	free(e->key);
	free(e->etag);
	e->key = e->etag = NULL;
	e->sha256[0] = '\0';
	e->reused = false;
	/* as remora_set_start_entries would: a CopyObject, unless encrypted */
	e->reused_from_job =
		e->prior && !remora_engine_copies_in_parts(set->base.engine)
			? e->prior->from_job
			: 0;
	e->state = E_DONE;
}

/*
 * Start what the caps allow (member_cap in all, REMORA_SET_CONCURRENCY of
 * large members), in listing order, up to the page whose lookup the host
 * has not answered yet; a large member waiting for room lets small ones
 * after it start.
 */
void
remora_set_start_entries(RemoraSet *set)
{
	int64_t now = remora_now_ms();

	for (Entry *e = set->head; e && set->running < set->member_cap &&
							   set->status.state == REMORA_TASK_RUNNING;
		 e = e->next)
	{
		/* the page the host is asked about waits for the answer */
		if (set->lookup && e == set->lookup_first)
			break;
		if (e->state == E_BACKOFF)
		{
			if (e->retry_at > now)
			{
				remora_loop_wake_at(&set->base.engine->loop, e->retry_at);
				continue;
			}
			e->state = E_WAITING;
		}
		if (e->state != E_WAITING)
			continue;
		if (set->dry_run)
		{
			plan_entry(set, e);
			continue;
		}
		/* a CopyObject, which encryption rules out: downloaded again */
		if (e->prior && !remora_engine_copies_in_parts(set->base.engine))
			start_reuse(set, e);
		if (e->state == E_WAITING && large_member(e) &&
			set->running_large >= REMORA_SET_CONCURRENCY)
			continue;
		if (e->state == E_WAITING && server_copy_fits(set, e))
			start_server_copy(set, e);
		if (e->state == E_WAITING)
			start_child(set, e);
	}
}
