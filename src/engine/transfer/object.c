/*-------------------------------------------------------------------------
 *
 * object.c
 *	  One member's transfer from an http(s) source into the target store:
 *	  the job of kind "transfer", its source GET, redirects and validators.
 *
 * Phases, each driven by the completion of the requests of the one before:
 *
 *	  REUSE		a replacement completes the lost attempt's upload with the
 *				parts its checkpoint validated and copies them into its own
 *				(reuse.c); anything amiss: start from zero
 *	  SOURCE	GET the source (from the resume offset, with If-Range);
 *				bytes fill part buffers; full buffers are uploaded as parts
 *				of the attempt's multipart upload of the member while the
 *				next one fills (the source is paused when every buffer is
 *				busy)
 *	  SINGLE,	the member object and, for a job of one member, its
 *	  COMPLETE,	manifest (assemble.c)
 *	  MANIFEST
 *
 * The task writes only keys under its own staging prefix, but for the one
 * completion of the lost attempt's own upload in REUSE.
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/common/source_uri.h"
#include "engine/transfer/transfer.h"

static void start_source(Transfer *task);
static void copy_unchanged(Transfer *task);

/*
 * First body bytes of a source response: decide what the response is.
 * Returns false when the body is not the object's (discard it).
 */
static bool
check_source_response(Transfer *task, Request *req)
{
	long status = 0;

	curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
	task->src_checked = true;
	if (status >= 300 || status < 200)
		return false;
	if (status == 206 && (task->offset > 0 || task->probe_end >= 0))
	{
		if (remora_xfer_range_fits(task, req))
		{
			snprintf(task->etag, sizeof(task->etag), "%s", req->hdr.etag);
			snprintf(task->last_modified, sizeof(task->last_modified), "%s",
					 req->hdr.last_modified);
			return remora_xfer_ranges_begin(task, req);
		}
		if (task->offset > 0)
		{
			/* stop this answer; source_done asks again from the start */
			remora_xfer_restart(task, "the source changed since the checkpoint "
									  "(its validators, size or range differ)");
			task->rerequest = true;
			return false;
		}
		remora_fail(&task->status, REMORA_ERR_SOURCE, true, status,
					"the source answered a range request with another range");
		return false;
	}
	if (status == 206)
	{
		/* a range we did not ask for */
		remora_fail(
			&task->status, REMORA_ERR_SOURCE, true, status,
			"the source answered a plain request with a partial response");
		return false;
	}
	/* 200: the whole object, in this one answer */
	if (task->offset > 0)
	{
		remora_xfer_restart(task, "the source changed since the checkpoint "
								  "(or no longer serves ranges)");
		if (task->connections > 1)
		{
			/* a changed object may still serve ranges: ask again */
			task->rerequest = true;
			return false;
		}
	}
	task->probe_end = -1;
	task->total = req->hdr.content_length;
	/* the size is known now: parts the store's limit holds */
	if (task->total >= 0 && task->nparts == 0 &&
		!remora_xfer_fit_parts(task, task->total))
		return false;
	if (task->fill && task->fill->len == 0)
		remora_xfer_begin_buffer(task, task->fill); /* the size is known now */
	snprintf(task->etag, sizeof(task->etag), "%s", req->hdr.etag);
	snprintf(task->last_modified, sizeof(task->last_modified), "%s",
			 req->hdr.last_modified);
	return true;
}

static size_t
source_data(Request *req, char *ptr, size_t len)
{
	Transfer *task = req->owner;
	size_t    used = 0;

	if (!task->src_checked)
		task->src_discard = !check_source_response(task, req);
	if (task->status.state != REMORA_TASK_RUNNING || task->rerequest)
		return 0; /* stops the transfer */
	if (task->src_discard)
		return len; /* the body of a redirect or an error */

	/*
	 * Would this chunk overflow the buffer with no other to go on in?  Wait.
	 * (A buffer that is exactly full is sealed only when more bytes come,
	 * so that an object of exactly one part size is one PUT.)
	 */
	if (task->fill->len + len - (size_t) task->skip > task->part_size &&
		remora_xfer_free_buffer(task) == NULL)
	{
		task->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	if (task->skip > 0)
	{
		used = (size_t) task->skip < len ? (size_t) task->skip : len;
		task->skip -= (int64_t) used;
	}
	while (used < len)
	{
		size_t room;
		size_t n;

		if (task->fill->len == task->part_size)
		{
			Buffer *full = task->fill;
			Buffer *next = remora_xfer_free_buffer(task);

			if (next == NULL || !remora_xfer_seal_part(task, full))
				return 0;
			remora_xfer_begin_buffer(task, next);
		}
		room = task->part_size - task->fill->len;
		n = len - used < room ? len - used : room;
		remora_xfer_take(task, ptr + used, n);
		used += n;
	}
	if (task->total >= 0 && task->received > task->total)
	{
		remora_fail(&task->status, REMORA_ERR_SIZE, false, 0,
					"the source sent more bytes than it announced");
		return 0;
	}
	return len;
}

/*
 * The checkpoint does not fit the source any more, or the source cannot be
 * fetched in checked ranges: ask again, from the start.
 */
static void
ask_again(Transfer *task)
{
	task->rerequest = false;
	task->src_checked = false;
	task->src_discard = false;
	start_source(task);
	remora_xfer_settle(task);
}

/*
 * A dry run's answer (a HEAD, or its 304 to the earlier job's
 * validators): the plan, with no key, ETag or SHA-256, then the manifest.
 * A source that does not say its length is planned with size 0.
 */
static void
planned(Transfer *task, const Request *req, bool reuse)
{
	RemoraTaskResult  *r = &task->result;
	const RemoraPrior *u = task->unchanged;
	const char        *etag = req->hdr.etag;
	const char        *last_modified = req->hdr.last_modified;

	r->member_key[0] = r->member_etag[0] = r->member_sha256[0] = '\0';
	r->member_size = req->hdr.content_length > 0 ? req->hdr.content_length : 0;
	r->reused_from_job = 0;
	if (reuse)
	{
		r->member_size = u->size;
		r->reused_from_job = u->from_job;
		etag = u->source_etag;
		last_modified = u->source_last_modified;
	}
	snprintf(task->etag, sizeof(task->etag), "%s", etag);
	snprintf(task->last_modified, sizeof(task->last_modified), "%s",
			 last_modified);
	task->received = task->total = r->member_size;
	remora_xfer_member_written(task);
}

static void
source_done(Request *req, CURLcode rc)
{
	Transfer *task = req->owner;
	char     *location = NULL;

	task->src = NULL;
	if (task->status.state != REMORA_TASK_RUNNING)
	{
		remora_xfer_settle(task);
		return;
	}
	if (task->rerequest || (req->status == 416 && rc == CURLE_OK &&
							(task->offset > 0 || task->probe_end >= 0)))
	{
		if (task->offset == 0 && !task->rerequest)
			task->no_ranges = true; /* 416 to the first range: one GET */
		if (task->offset > 0 && !task->restarted)
			remora_xfer_restart(
				task, "the source no longer has the checkpoint's range");
		ask_again(task);
		return;
	}
	if (remora_req_policy_refused(req, rc))
	{
		remora_fail(&task->status, REMORA_ERR_POLICY, false, 0,
					"the outbound-source policy refused the connection: %s",
					remora_engine_refused(task->base.engine, req));
		remora_xfer_settle(task);
		return;
	}
	if (rc != CURLE_OK)
	{
		RemoraTaskError err;

		/* a certificate or protocol failure is class tls: not retried */
		remora_req_transport_error(req, rc, &err, "reading the source", NULL);
		remora_fail_with(&task->status, &err);
		remora_xfer_settle(task);
		return;
	}
	if (req->status == 304 && task->unchanged)
	{
		if (task->dry_run)
			planned(task, req, true);
		else
			copy_unchanged(task);
		remora_xfer_settle(task);
		return;
	}
	if (req->status >= 300 && req->status < 400)
	{
		curl_easy_getinfo(req->easy, CURLINFO_REDIRECT_URL, &location);
		if (location == NULL || (strncmp(location, "http://", 7) != 0 &&
								 strncmp(location, "https://", 8) != 0))
			remora_fail(
				&task->status, REMORA_ERR_SOURCE, false, req->status,
				"the source redirected to a location that is not http(s)");
		else if (remora_url_has_userinfo(location))
			remora_fail(&task->status, REMORA_ERR_SOURCE, false, req->status,
						"the source redirected to a location with credentials");
		else if (++task->redirects > REMORA_MAX_REDIRECTS)
			remora_fail(&task->status, REMORA_ERR_SOURCE, false, req->status,
						"the source redirected more than %d times",
						REMORA_MAX_REDIRECTS);
		else
		{
			char *next = strdup(location);

			if (next == NULL)
				remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
							"out of memory");
			else
			{
				free(task->url);
				task->url = next;
				/*
				 * Trust was for the administrator's endpoint; where it sends
				 * the request is judged like any source.
				 */
				task->trusted_source = false;
				task->src_checked = false;
				task->src_discard = false;
				start_source(task);
			}
		}
		remora_xfer_settle(task);
		return;
	}
	if (req->status == 412 && task->if_match)
	{
		/* a source object replaced since it was listed: list it again */
		remora_fail(&task->status, REMORA_ERR_SOURCE, true, req->status,
					"the source object changed since it was listed");
		remora_xfer_settle(task);
		return;
	}
	if (req->status < 200 || req->status >= 300)
	{
		remora_xfer_source_http_failed(task, req);
		remora_xfer_settle(task);
		return;
	}
	if (task->dry_run)
	{
		planned(task, req, false);
		remora_xfer_settle(task);
		return;
	}
	if (!task->src_checked)
		check_source_response(task, req); /* an empty body */
	if (task->rerequest)
	{
		ask_again(task);
		return;
	}
	if (task->status.state == REMORA_TASK_RUNNING)
	{
		if (task->ranged)
			remora_xfer_probe_done(task); /* ranges bring the rest */
		else
			remora_xfer_source_ended(task);
	}
	remora_xfer_settle(task);
}

/*
 * The earlier job's copy is in the store, or not: a copy that failed (the
 * object gone, deleted with its job, or changed) is downloaded instead.
 */
static void
unchanged_copied(Request *req, CURLcode rc)
{
	Transfer         *task = req->owner;
	RemoraTaskResult *r = &task->result;
	RemoraTaskError   err;
	char             *etag = NULL;

	if (task->status.state != REMORA_TASK_RUNNING)
	{
		remora_xfer_settle(task);
		return;
	}
	if (!remora_s3_failed(req, rc, &err, "copying an earlier job's member"))
		etag = remora_s3_answer_etag(req, "CopyObjectResult", &err,
									 "copying an earlier job's member");
	if (etag == NULL || etag[0] == '\0' ||
		(remora_etag_is_md5(task->unchanged->etag) &&
		 !remora_etag_equal(etag, task->unchanged->etag)))
	{
		free(etag);
		free(task->unchanged);
		task->unchanged = NULL;
		start_source(task);
		remora_xfer_settle(task);
		return;
	}
	snprintf(r->member_etag, sizeof(r->member_etag), "%s", etag);
	free(etag);
	memcpy(r->member_sha256, task->unchanged->sha256, sizeof(r->member_sha256));
	r->member_size = task->unchanged->size;
	r->reused_from_job = task->unchanged->from_job;
	task->received = task->total = r->member_size;
	snprintf(task->etag, sizeof(task->etag), "%s",
			 task->unchanged->source_etag);
	snprintf(task->last_modified, sizeof(task->last_modified), "%s",
			 task->unchanged->source_last_modified);
	remora_xfer_member_written(task);
	remora_xfer_settle(task);
}

/*
 * The source answered 304 to the earlier job's validators: its member is
 * copied inside the store (CopyObject, guarded by its ETag) instead of
 * downloaded, with the SHA-256 that job verified.
 */
static void
copy_unchanged(Transfer *task)
{
	const RemoraPrior *u = task->unchanged;
	char              *src;
	RemoraKV           h[2];
	S3Call             call;

	if (task->expected_sha256 && strcmp(task->expected_sha256, u->sha256) != 0)
	{
		remora_fail(&task->status, REMORA_ERR_CHECKSUM, false, 0,
					"the source is unchanged since job %" PRId64
					", whose copy does not have the expected SHA-256",
					u->from_job);
		return;
	}
	src = remora_s3_copy_source(task->bucket, u->key);
	if (src == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
		return;
	}
	h[0] = (RemoraKV){"x-amz-copy-source", src};
	h[1] = (RemoraKV){"x-amz-copy-source-if-match", u->etag};
	task->phase = P_SINGLE;
	/* the earlier job's member: Remora's own object */
	call = (S3Call){
		"PUT", task->bucket, task->result.member_key, NULL, 0, h, 2, NULL, 0,
		NULL,  false,        task->storage_class,     true};
	remora_xfer_start_s3(task, &call, unchanged_copied, K_SINGLE, 0);
	free(src);
}

static void
start_source(Transfer *task)
{
	Request *req;
	char     line[400];

	task->phase = P_SOURCE;
	req = remora_xfer_source_request(task, source_done);
	if (req == NULL)
		return;
	req->kind = K_SOURCE;
	req->on_data = source_data;
	if (task->dry_run)
		curl_easy_setopt(req->easy, CURLOPT_NOBODY, 1L); /* HEAD */
	/* a large object in parallel: the first GET is its first part */
	task->probe_end = remora_xfer_probe_end(task);
	if (task->offset > 0)
	{
		/*
		 * Ask from one byte before the resume point, so that the range is
		 * never empty (the checkpoint may end at the last byte); that byte
		 * is dropped.
		 */
		if (task->probe_end >= 0)
			snprintf(line, sizeof(line), "Range: bytes=%" PRId64 "-%" PRId64,
					 task->offset - 1, task->probe_end);
		else
			snprintf(line, sizeof(line), "Range: bytes=%" PRId64 "-",
					 task->offset - 1);
		req->headers = curl_slist_append(req->headers, line);
		snprintf(line, sizeof(line), "If-Range: %s",
				 remora_etag_is_strong(task->etag) ? task->etag
												   : task->last_modified);
		req->headers = curl_slist_append(req->headers, line);
		task->skip = 1;
	}
	else if (task->probe_end >= 0)
	{
		snprintf(line, sizeof(line), "Range: bytes=0-%" PRId64,
				 task->probe_end);
		req->headers = curl_slist_append(req->headers, line);
	}
	if (task->if_match && task->offset == 0)
	{
		snprintf(line, sizeof(line), "If-Match: %s", task->if_match);
		req->headers = curl_slist_append(req->headers, line);
	}
	if (task->unchanged && task->offset == 0)
	{
		/* a strong ETag, else the date; never a weak ETag (RFC 9110) */
		if (remora_etag_is_strong(task->unchanged->source_etag))
			snprintf(line, sizeof(line), "If-None-Match: %s",
					 task->unchanged->source_etag);
		else
			snprintf(line, sizeof(line), "If-Modified-Since: %s",
					 task->unchanged->source_last_modified);
		req->headers = curl_slist_append(req->headers, line);
	}
	task->src = req;
	if (!remora_req_start(req))
	{
		task->src = NULL;
		remora_req_cancel(req);
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"could not start the download");
	}
}

/* ------------------------------------------------------------ the kind */

/*
 * The member's key: a set's, or <staging>data/<file name>, apart from the
 * attempt's control object (<staging>manifest.jsonl), so that no file name
 * can collide with it.  False: too long (never cut).
 */
static bool
member_key(Transfer *task, const char *given)
{
	char *k = task->result.member_key;
	int   n;

	if (given)
		n = snprintf(k, sizeof(task->result.member_key), "%s", given);
	else
		n = snprintf(k, sizeof(task->result.member_key), "%sdata/%s",
					 task->staging, task->file_name);
	return n >= 0 && n <= REMORA_MAX_S3_KEY_LEN &&
		   (size_t) n < sizeof(task->result.member_key);
}

static RemoraTaskState
xfer_state(const RemoraTask *t)
{
	return ((const Transfer *) t)->status.state;
}

static void
xfer_progress(const RemoraTask *t, int64_t *done, int64_t *total)
{
	const Transfer *task = (const Transfer *) t;

	*done = task->received + task->range_pending;
	*total = task->total;
}

static bool
xfer_restarted(const RemoraTask *t, const char **why)
{
	const Transfer *task = (const Transfer *) t;

	*why = task->restart_reason;
	return task->restarted;
}

static bool
xfer_checkpoint(RemoraTask *t, RemoraTaskCheckpoint *out)
{
	return remora_xfer_checkpoint((Transfer *) t, out);
}

static const RemoraTaskResult *
xfer_result(const RemoraTask *t)
{
	const Transfer *task = (const Transfer *) t;

	return task->status.state == REMORA_TASK_SUCCEEDED ? &task->result : NULL;
}

static const RemoraTaskError *
xfer_error(const RemoraTask *t)
{
	const Transfer *task = (const Transfer *) t;

	return task->status.state == REMORA_TASK_FAILED ? &task->status.error
													: NULL;
}

/*
 * Stop.  The upload stays for a replacement to reuse (a worker handing its
 * attempts back, a lost lease) unless the staging is to go too; the
 * staging cleanup aborts what is left once the job has ended.
 */
static void
xfer_abort(RemoraTask *t, bool delete_staging)
{
	Transfer *task = (Transfer *) t;

	remora_xfer_cancel_requests(task);
	if (delete_staging || task->no_manifest)
		remora_xfer_abort_upload(task);
	if (task->status.state == REMORA_TASK_RUNNING)
		task->status.state = REMORA_TASK_ABORTED;
}

/*
 * Start what the last callbacks could not: the source once a reuse is
 * settled, uploads of sealed buffers, ranges.
 */
static void
xfer_pump(RemoraTask *t)
{
	Transfer *task = (Transfer *) t;

	if (task->status.state == REMORA_TASK_RUNNING && task->phase == P_REUSE)
	{
		remora_xfer_reuse_pump(task);
		if (task->reuse_ready && task->status.state == REMORA_TASK_RUNNING)
			start_source(task);
	}
	if (task->status.state == REMORA_TASK_RUNNING)
		remora_xfer_pump(task);
	if (task->status.state == REMORA_TASK_RUNNING)
		remora_xfer_ranges_pump(task);
}

static void
xfer_free(RemoraTask *t)
{
	Transfer *task = (Transfer *) t;

	remora_xfer_cancel_requests(task);
	/* a set's member is never resumed: its upload goes with it */
	if (task->no_manifest && task->status.state != REMORA_TASK_SUCCEEDED)
		remora_xfer_abort_upload(task);
	remora_xfer_drop_parts(task);
	free(task->parts);
	free(task->cp_parts);
	for (int i = 0; i < task->nbufs; i++)
	{
		free(task->bufs[i].data);
		EVP_MD_CTX_free(task->bufs[i].sha);
	}
	free(task->bufs);
	remora_subs_free(&task->subs);
	remora_sha256_free(task->sha);
	free(task->url);
	free(task->orig_url);
	free(task->file_name);
	free(task->bucket);
	free(task->staging);
	free(task->expected_sha256);
	free(task->storage_class);
	free(task->attempt_id);
	free(task->auth_header);
	free(task->auth_host);
	free(task->ca_pem);
	free(task->if_match);
	free(task->unchanged);
	remora_mpu_forget(&task->mpu);
	remora_mpu_forget(&task->lost);
	remora_xfer_reuse_free(task);
	free(task->reuse_key);
	free(task->manifest);
}

static const RemoraTaskKind transfer_kind = {
	"transfer",      xfer_pump,   xfer_state, xfer_progress, xfer_restarted,
	xfer_checkpoint, xfer_result, xfer_error, xfer_abort,    xfer_free};

RemoraTask *
remora_task_start(RemoraEngine *engine, const RemoraTaskSpec *spec,
				  char *errbuf, size_t errlen)
{
	Transfer *task = calloc(1, sizeof(Transfer));
	bool      ok;

	if (task == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	remora_task_register(engine, &task->base, &transfer_kind);
	task->status.state = REMORA_TASK_RUNNING;
	task->url = remora_xstrdup(spec->source_url);
	task->orig_url = remora_xstrdup(spec->source_url);
	task->file_name = remora_xstrdup(spec->file_name);
	task->bucket = remora_xstrdup(spec->bucket);
	task->staging = remora_xstrdup(spec->staging_prefix);
	task->storage_class = remora_xstrdup(spec->storage_class);
	remora_mpu_init(&task->mpu, task->bucket, task->result.member_key);
	task->mpu.storage_class = task->storage_class;
	remora_mpu_init(&task->lost, task->bucket, NULL);
	task->expected_sha256 = remora_xstrdup(spec->expected_sha256);
	task->attempt_id = remora_xstrdup(spec->attempt_id);
	task->no_manifest = spec->no_manifest;
	task->dry_run = spec->dry_run;
	task->trusted_source = spec->trusted_source;
	task->ca_pem = remora_xstrdup(spec->ca_pem);
	task->auth_header = remora_xstrdup(spec->auth_header);
	task->auth_host = remora_xstrdup(spec->auth_host);
	task->if_match = remora_xstrdup(spec->if_match);
	task->expected_size = spec->size_known ? spec->expected_size : -1;
	task->job_id = spec->job_id;
	task->fencing_token = spec->fencing_token;
	task->total = -1;
	task->probe_end = -1;
	task->part_size = engine->part_size;
	remora_xfer_adapt_init(task, spec->dry_run ? 1 : spec->connections);
	/* ranges: a buffer each (at most), and a few for uploads and waiting parts
	 */
	task->nbufs = task->adaptive ? task->adapt.max + REMORA_PARTS_IN_FLIGHT
				  : task->connections > 1
					  ? task->connections + REMORA_PARTS_IN_FLIGHT
					  : REMORA_PARTS_IN_FLIGHT + 1;
	task->bufs = calloc(task->nbufs, sizeof(Buffer));
	if (task->bufs == NULL)
		task->nbufs = 0;
	task->sha = remora_sha256_new();
	ok = task->url && task->orig_url && task->file_name && task->bucket &&
		 task->staging && task->attempt_id && task->sha && task->bufs &&
		 (spec->expected_sha256 == NULL || task->expected_sha256);
	for (int i = 0; ok && i < task->nbufs; i++)
	{
		/* the ranges' own buffers are allocated when first used */
		if (i <= REMORA_PARTS_IN_FLIGHT)
			task->bufs[i].data = malloc(task->part_size);
		task->bufs[i].sha = EVP_MD_CTX_new();
		ok = ok && task->bufs[i].sha &&
			 (task->bufs[i].data || i > REMORA_PARTS_IN_FLIGHT);
	}
	if (!ok)
	{
		snprintf(errbuf, errlen, "out of memory");
		remora_task_free(&task->base);
		return NULL;
	}
	remora_xfer_begin_buffer(task, &task->bufs[0]);
	if (!member_key(task, spec->member_key))
	{
		/* never a truncated key: fail the task, as the source's fault */
		remora_fail(
			&task->status, REMORA_ERR_SOURCE, false, 0,
			"the file name is too long: its key in the target store would "
			"be longer than %d bytes",
			REMORA_MAX_S3_KEY_LEN);
		return &task->base;
	}
	/* a listed member's size is known: parts the store's limit holds */
	if (task->expected_size >= 0 &&
		!remora_xfer_fit_parts(task, task->expected_size))
		return &task->base;

	remora_xfer_adopt_resume(task, spec->resume);
	if (task->status.state != REMORA_TASK_RUNNING)
		return &task->base;
	/*
	 * An earlier job's copy, for a GET from the start only (at most 5 GiB:
	 * one CopyObject), never beside a resume, and not where the store
	 * encrypts (a CopyObject there is refused, or drops the encryption)
	 */
	if (spec->unchanged && spec->unchanged->found && task->offset == 0 &&
		!remora_engine_copies_in_parts(engine) && task->reuse_key == NULL &&
		spec->unchanged->size <= REMORA_COPY_OBJECT_MAX &&
		(remora_etag_is_strong(spec->unchanged->source_etag) ||
		 spec->unchanged->source_last_modified[0]))
	{
		task->unchanged = malloc(sizeof(RemoraPrior));
		if (task->unchanged)
			*task->unchanged = *spec->unchanged;
	}
	if (task->reuse_key != NULL)
		remora_xfer_reuse_start(task);
	else
		start_source(task);
	return &task->base;
}
