/*-------------------------------------------------------------------------
 *
 * parts.c
 *	  A member transfer's parts: the buffers the source fills, the
 *	  attempt's own multipart upload of the member and its UploadParts, an
 *	  earlier attempt's parts adopted for a resume (reuse.c checks them),
 *	  and the checkpoints of validated progress.
 *
 * Each byte goes to the store once, as part of the upload that becomes
 * the member.  A part's payload is signed with its SHA-256, taken while
 * the bytes come in, so the store checks what it received (no MD5 pass).
 * Validated progress is the longest run of parts, from the first, that the
 * store has acknowledged; with it go the upload, the source validators and
 * the SHA-256 state after those parts.  That is what checkpoints record and
 * what a replacement may reuse, after completing that upload and checking
 * each part it copies from it, and the source still has the same
 * validators (the server answers If-Range with 206, not 200).  Memory is
 * bounded by REMORA_PARTS_IN_FLIGHT + 1 buffers of the part size, or, with
 * ranged GETs in parallel, REMORA_PARTS_IN_FLIGHT more than the ranges in
 * flight (ranges.c).
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/transfer/transfer.h"

static Part *
part_at(Transfer *task, int partno)
{
	if (partno > task->parts_cap)
	{
		int   cap = task->parts_cap ? task->parts_cap * 2 : 64;
		Part *grown;

		while (cap < partno)
			cap *= 2;
		grown = realloc(task->parts, cap * sizeof(Part));
		if (grown == NULL)
			return NULL;
		memset(grown + task->parts_cap, 0,
			   (cap - task->parts_cap) * sizeof(Part));
		task->parts = grown;
		task->parts_cap = cap;
	}
	if (partno > task->nparts)
		task->nparts = partno;
	return &task->parts[partno - 1];
}

void
remora_xfer_drop_parts(Transfer *task)
{
	for (int i = 0; i < task->nparts; i++)
		free(task->parts[i].sha_after);
	if (task->parts)
		memset(task->parts, 0, task->parts_cap * sizeof(Part));
	task->nparts = 0;
	task->validated = 0;
}

/* Forget the resume: this attempt starts from the first byte. */
void
remora_xfer_restart(Transfer *task, const char *why)
{
	task->restarted = true;
	snprintf(task->restart_reason, sizeof(task->restart_reason), "%s", why);
	remora_xfer_drop_parts(task);
	remora_sha256_reset(task->sha);
	task->offset = 0;
	task->received = 0;
	task->skip = 0;
	task->cp_dirty = true;
}

/* A buffer for the one GET to fill next (of the first few only). */
Buffer *
remora_xfer_free_buffer(Transfer *task)
{
	for (int i = 0; i <= REMORA_PARTS_IN_FLIGHT; i++)
		if (!task->bufs[i].busy && !task->bufs[i].sealed &&
			!task->bufs[i].ranging && &task->bufs[i] != task->fill)
			return &task->bufs[i];
	return NULL;
}

static void
create_done(Request *req, CURLcode rc)
{
	Transfer       *task = req->owner;
	RemoraTaskError err;

	if (!remora_mpu_created(&task->mpu, req, rc, &err,
							"starting the multipart upload"))
	{
		remora_fail_with(&task->status, &err);
		remora_xfer_settle(task);
		return;
	}
	/* sealed parts start in the next pump */
}

/*
 * Ask the store for the attempt's multipart upload of the member, once.
 * Parts sealed before its id is known wait in their buffers.
 */
void
remora_xfer_create_upload(Transfer *task)
{
	MpuCall c;

	if (task->upload_asked)
		return;
	task->upload_asked = true;
	task->upload_done = false;
	remora_mpu_create(&task->mpu, &c);
	remora_xfer_start_s3(task, &c.call, create_done, K_INIT, 0);
}

/*
 * An upload nobody will complete would keep its parts, invisible to a
 * listing: ask the store to drop it (best effort: stores without
 * AbortMultipartUpload refuse; the staging cleanup lists and aborts what is
 * left).  The task forgets it, so that it can start another.
 */
void
remora_xfer_abort_upload(Transfer *task)
{
	if (task->mpu.upload_id != NULL && !task->upload_done)
	{
		MpuCall  c;
		char     err[256];
		Request *req;

		remora_mpu_abort(&task->mpu, &c);
		req = remora_target_request(task->base.engine, NULL, &c.call, NULL, err,
									sizeof(err));
		if (req && !remora_req_start(req))
			remora_req_cancel(req);
	}
	remora_mpu_forget(&task->mpu);
	task->upload_asked = false;
	task->upload_done = true;
}

/*
 * The store refused a part for load (503, SlowDown, 429): when the task
 * adapts, fewer part uploads at once from now on, and this one again after
 * the pause (remora_xfer_pump).  False: fail the attempt.
 */
static bool
part_again(Transfer *task, Buffer *buf, const RemoraTaskError *err)
{
	char what[160];

	if (err->http_status != 503 && err->http_status != 429 &&
		strcmp(err->s3_code, "SlowDown") != 0)
		return false;
	snprintf(what, sizeof(what), "the store answered a part with HTTP %ld%s%s",
			 err->http_status, err->s3_code[0] ? " " : "", err->s3_code);
	if (!remora_xfer_throttled(task, what, err->retry_after))
		return false;
	/* never again as many part uploads at once as the store refused */
	task->upload_cap = task->uploads > 1 ? task->uploads : 1;
	buf->sealed = true;
	buf->hashing = false; /* its digest was taken: the next PUT hashes again */
	return true;
}

static void
part_done(Request *req, CURLcode rc)
{
	Transfer       *task = req->owner;
	Buffer         *buf = req->data;
	Part           *part = &task->parts[req->index - 1];
	RemoraTaskError err;

	task->uploads--;
	buf->busy = false;
	if (!remora_mpu_part_etag(req, rc, part->etag, sizeof(part->etag), &err,
							  "uploading a part"))
	{
		if (!part_again(task, buf, &err))
			remora_fail_with(&task->status, &err);
		remora_xfer_settle(task);
		return;
	}
	buf->len = 0;
	part->done = true;
	while (task->validated < task->nparts && task->parts[task->validated].done)
	{
		task->validated++;
		task->cp_dirty = true;
	}

	if (task->paused && task->src)
	{
		task->paused = false;
		curl_easy_pause(task->src->easy, CURLPAUSE_CONT);
	}
	if (task->src_ended && task->uploads == 0 &&
		task->validated == task->nparts &&
		task->status.state == REMORA_TASK_RUNNING)
		remora_xfer_start_assembly(task);
	remora_xfer_settle(task);
}

/*
 * A full (or the last) buffer becomes the next part: record it, with the
 * hash state after it.  Its upload starts in remora_xfer_pump(), because
 * this may run inside a curl callback, where no transfer may be started.
 * A part above the store's limit is never sent: with the size known the
 * parts were sized to fit (remora_xfer_fit_parts), so only a source that
 * did not say its size gets here.
 */
bool
remora_xfer_seal_part(Transfer *task, Buffer *buf)
{
	int   partno = task->nparts + 1;
	Part *part;
	char  sha_state[128];

	if (partno > task->base.engine->max_parts)
	{
		remora_fail(&task->status, REMORA_ERR_SIZE, false, 0,
					"the object needs more than %d parts of %zu bytes, the "
					"store's limit (remora.max_upload_parts), and the source "
					"did not say its size in advance; raise remora.part_size",
					task->base.engine->max_parts, task->part_size);
		return false;
	}
	if ((part = part_at(task, partno)) == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"out of memory");
		return false;
	}
	part->size = (int64_t) buf->len;
	if (remora_sha256_save(task->sha, sha_state, sizeof(sha_state)))
		part->sha_after = strdup(sha_state);
	buf->partno = partno;
	buf->sealed = true;
	return true;
}

/*
 * Parts (and buffers) of ps bytes from now on: the buffers allocated so
 * far are allocated again at that size, and an adaptive count's buffers
 * beyond its bound at that size are given up (remora_xfer_adapt_part_size),
 * so that the memory it plans holds for the parts it makes.  Only while no
 * buffer holds a byte, a GET or an upload (before the source's first
 * byte).  False: the task failed.
 */
static bool
set_part_size(Transfer *task, int64_t ps)
{
	int keep;

	if ((size_t) ps == task->part_size)
		return true;
	for (int i = 0; i < task->nbufs; i++)
	{
		Buffer *b = &task->bufs[i];

		if (b->busy || b->sealed || b->ranging || b->len > 0)
		{
			remora_fail(&task->status, REMORA_ERR_INTERNAL, false, 0,
						"the part size cannot change while parts are on "
						"their way");
			return false;
		}
	}
	task->part_size = (size_t) ps;
	/* the first REMORA_PARTS_IN_FLIGHT + 1 stay: the bound is never below */
	keep = remora_xfer_adapt_part_size(task);
	while (task->nbufs > keep)
	{
		Buffer *b = &task->bufs[--task->nbufs];

		free(b->data);
		b->data = NULL;
		EVP_MD_CTX_free(b->sha);
		b->sha = NULL;
	}
	for (int i = 0; i < task->nbufs; i++)
		if (task->bufs[i].data != NULL)
		{
			free(task->bufs[i].data);
			if ((task->bufs[i].data = malloc(task->part_size)) == NULL)
			{
				remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
							"out of memory");
				return false;
			}
		}
	return true;
}

/*
 * The object is size bytes and none of it is in a part yet: parts of
 * remora.part_size, or larger so that the store's limit holds it.  False:
 * no part size does (the task failed).
 */
bool
remora_xfer_fit_parts(Transfer *task, int64_t size)
{
	RemoraEngine *e = task->base.engine;
	int64_t       ps =
		remora_part_size_fit(size, (int64_t) e->part_size, e->max_parts);

	if (ps < 0)
	{
		remora_fail(&task->status, REMORA_ERR_SIZE, false, 0,
					"the object of %" PRId64 " bytes needs more than %d parts "
					"of at most 5 GiB; raise remora.max_upload_parts if the "
					"store takes more",
					size, e->max_parts);
		return false;
	}
	return set_part_size(task, ps);
}

/*
 * A resume goes on with the part size its checkpoint's parts were cut to
 * (a checkpoint from before parts were sized to the store's limit too),
 * or larger parts for the rest when the limit would not hold it so.
 * False: it cannot (the attempt restarts, or failed).
 */
static bool
resume_part_size(Transfer *task, const RemoraResume *r, int64_t offset)
{
	RemoraEngine *e = task->base.engine;
	int64_t       base = r->nparts > 1 || offset < r->size ? r->parts[0].size
														   : (int64_t) e->part_size;
	int64_t       ps =
		remora_part_size_fit(r->size - offset, base, e->max_parts - r->nparts);

	if (ps < 0)
	{
		remora_xfer_restart(task, "the checkpoint's parts leave too few of "
								  "remora.max_upload_parts for the rest");
		return false;
	}
	return set_part_size(task, ps);
}

/*
 * PUT a sealed buffer as its part of the upload (once the upload exists),
 * its payload signed with its own SHA-256.
 */
void
remora_xfer_upload_part(Transfer *task, Buffer *buf)
{
	char     sha_hex[65];
	MpuCall  c;
	Request *req;
	char     err[256];

	if (task->mpu.upload_id == NULL)
	{
		remora_xfer_create_upload(task);
		return; /* stays sealed until the upload's id is known */
	}
	if (task->uploads >= task->upload_cap || !remora_xfer_calm(task))
		return; /* stays sealed: the store asked for less */
	if (buf->hashing)
	{
		unsigned char digest[EVP_MAX_MD_SIZE];

		EVP_DigestFinal_ex(buf->sha, digest, NULL);
		remora_hex_encode(digest, 32, sha_hex);
	}
	else
		remora_sha256_hex(buf->data, buf->len, sha_hex); /* a part again */
	remora_mpu_part(&task->mpu, buf->partno, buf->data, buf->len, sha_hex, &c);
	req = remora_target_request(task->base.engine, task, &c.call, part_done,
								err, sizeof(err));
	if (req == NULL)
	{
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0, "%s", err);
		return;
	}
	curl_easy_setopt(req->easy, CURLOPT_UPLOAD_BUFFERSIZE, XFER_SEND_BUFFER);
	req->kind = K_PART;
	req->index = buf->partno;
	req->data = buf;
	buf->sealed = false;
	buf->busy = true;
	task->uploads++;
	if (!remora_req_start(req))
	{
		task->uploads--;
		buf->busy = false;
		remora_req_cancel(req);
		remora_fail(&task->status, REMORA_ERR_INTERNAL, true, 0,
					"could not start an upload");
	}
}

/* Start what the last callbacks could not: uploads of sealed buffers. */
void
remora_xfer_pump(Transfer *task)
{
	for (int i = 0; i < task->nbufs; i++)
		if (task->bufs[i].sealed && task->status.state == REMORA_TASK_RUNNING)
			remora_xfer_upload_part(task, &task->bufs[i]);
	remora_xfer_settle(task);
}

/* Take bytes into the filling buffer, hashing them on the way. */
void
remora_xfer_take(Transfer *task, const char *p, size_t n)
{
	Buffer *b = task->fill;

	memcpy(b->data + b->len, p, n);
	b->len += n;
	task->src_bytes += (int64_t) n;
	remora_sha256_update(task->sha, p, n);
	if (b->hashing)
		EVP_DigestUpdate(b->sha, p, n);
	task->received += (int64_t) n;
}

/*
 * Start filling b.  Its own SHA-256 (the part's payload hash) is taken
 * only when the object may be a multipart upload: one known to fit in one
 * buffer is one PUT, signed with the object's SHA-256, and a set of small
 * members would hash every byte twice for nothing.
 */
void
remora_xfer_begin_buffer(Transfer *task, Buffer *b)
{
	int64_t size = task->total >= 0 ? task->total : task->expected_size;

	b->len = 0;
	b->hashing = size < 0 || size > (int64_t) task->part_size;
	if (b->hashing)
		EVP_DigestInit_ex(b->sha, EVP_sha256(), NULL);
	task->fill = b;
}

/*
 * Every byte of the source is here and hashed: check the size and the
 * SHA-256, then write the member (one PUT, or the upload completed once
 * its parts are in).
 */
void
remora_xfer_source_ended(Transfer *task)
{
	if (task->total >= 0 && task->received != task->total)
	{
		remora_fail(&task->status, REMORA_ERR_SIZE, false, 0,
					"the source ended before the size it announced");
		return;
	}
	task->total = task->received;
	task->src_ended = true;
	if (task->expected_size >= 0 && task->total != task->expected_size)
	{
		/* the listing said otherwise: list again in a new attempt */
		remora_fail(&task->status, REMORA_ERR_SIZE, true, 0,
					"the source's size changed since it was listed");
		return;
	}

	remora_sha256_final_hex(task->sha, task->sha_hex);
	if (task->expected_sha256 &&
		strcmp(task->expected_sha256, task->sha_hex) != 0)
	{
		remora_fail(&task->status, REMORA_ERR_CHECKSUM, false, 0,
					"the SHA-256 of the source is %s, not the expected one",
					task->sha_hex);
		return;
	}

	if (task->nparts == 0)
	{
		/* it fits in one buffer: the member is one PUT */
		task->phase = P_SINGLE;
		remora_xfer_start_assembly(task);
		return;
	}
	if (task->fill && task->fill->len > 0 &&
		remora_xfer_seal_part(task, task->fill))
		remora_xfer_upload_part(task, task->fill);
	task->fill = NULL;
	remora_xfer_pump(task); /* a buffer sealed in the last callback */
	if (task->uploads == 0 && task->validated == task->nparts &&
		task->status.state == REMORA_TASK_RUNNING)
		remora_xfer_start_assembly(task);
}

/* Take over the resume offered at claim (a copy of it). */
void
remora_xfer_adopt_resume(Transfer *task, const RemoraResume *r)
{
	int64_t offset = 0;

	if (r == NULL)
		return;
	if (r->upload_key == NULL || r->upload_id == NULL || r->nparts == 0 ||
		r->size < 0 ||
		(!remora_etag_is_strong(r->etag ? r->etag : "") &&
		 (r->last_modified == NULL || r->last_modified[0] == '\0')))
	{
		remora_xfer_restart(task, "the checkpoint has no parts of an upload "
								  "or no validators to check them by");
		return;
	}
	if (r->sha256_state == NULL ||
		!remora_sha256_restore(task->sha, r->sha256_state))
	{
		remora_xfer_restart(task,
							"the checkpoint's hash state cannot be restored");
		return;
	}
	for (int i = 0; i < r->nparts; i++)
	{
		Part *part = part_at(task, i + 1);

		if (part == NULL || r->parts[i].size <= 0)
		{
			remora_xfer_restart(task, "the checkpoint could not be loaded");
			return;
		}
		part->size = r->parts[i].size;
		snprintf(part->etag, sizeof(part->etag), "%s", r->parts[i].etag);
		offset += part->size;
	}
	if (remora_sha256_bytes(task->sha) != offset || offset > r->size)
	{
		remora_xfer_restart(
			task, "the checkpoint's hash state does not match its parts");
		return;
	}
	if (!resume_part_size(task, r, offset))
		return;
	task->reuse_key = remora_xstrdup(r->upload_key);
	task->lost.key = task->reuse_key;
	task->lost.upload_id = remora_xstrdup(r->upload_id);
	if (task->reuse_key == NULL || task->lost.upload_id == NULL)
	{
		remora_xfer_restart(task, "the checkpoint could not be loaded");
		return;
	}
	task->offset = offset;
	task->received = offset;
	task->total = r->size;
	snprintf(task->etag, sizeof(task->etag), "%s", r->etag ? r->etag : "");
	snprintf(task->last_modified, sizeof(task->last_modified), "%s",
			 r->last_modified ? r->last_modified : "");
}

/*
 * New validated progress since the last call?  The pointers in *out stay
 * valid until the next call on this task.
 */
bool
remora_xfer_checkpoint(Transfer *task, RemoraTaskCheckpoint *out)
{
	RemoraPart *parts;

	if (!task->cp_dirty)
		return false;
	task->cp_dirty = false;
	memset(out, 0, sizeof(*out));
	out->bytes_total = task->total;
	out->etag = task->etag;
	out->last_modified = task->last_modified;
	/* only a source that can be checked again can be resumed */
	if (task->validated == 0 || task->mpu.upload_id == NULL ||
		task->total < 0 ||
		(!remora_etag_is_strong(task->etag) &&
		 task->last_modified[0] == '\0') ||
		task->parts[task->validated - 1].sha_after == NULL)
		return true;

	parts = realloc(task->cp_parts, task->validated * sizeof(RemoraPart));
	if (parts == NULL)
		return false;
	task->cp_parts = parts;
	for (int i = 0; i < task->validated; i++)
	{
		parts[i].size = task->parts[i].size;
		memcpy(parts[i].etag, task->parts[i].etag, sizeof(parts[i].etag));
		out->bytes_done += task->parts[i].size;
	}
	out->upload_key = task->result.member_key;
	out->upload_id = task->mpu.upload_id;
	out->parts = parts;
	out->nparts = task->validated;
	out->sha256_state = task->parts[task->validated - 1].sha_after;
	return true;
}
