/*-------------------------------------------------------------------------
 *
 * set_manifest.c
 *	  A set's manifest, written as members complete in listing order (the
 *	  lines come from manifest.c): completed entries are popped from the
 *	  head of the window into manifest lines and checkpoint members; the
 *	  text goes to the store a part at a time (multipart upload) once it
 *	  outgrows one part, or in one PUT when it never does.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/transfer/manifest.h"
#include "engine/s3/partsize.h"
#include "engine/sets/set.h"

/*
 * The manifest goes up in parts of S3's smallest size (or the engine's part
 * size when that is smaller, as in tests): its unsent text is what a set
 * holds in memory, whatever remora.part_size is.  No member is emitted
 * while a whole part waits for the one being sent (or for the upload's
 * creation), so a set holds at most two parts of it: one in flight, one
 * filling.
 *
 * Its size is known only at its end, so the store's part limit
 * (remora.max_upload_parts) is kept part by part: once half the part
 * numbers are used, the next part is as large as the part numbers left
 * need to hold as much again as has been sent (remora_part_size_next), and
 * the last part number is kept for the rest.  At S3's 10,000 parts that is
 * 5 MiB up to 24 GiB of manifest; at Swift's 1,000, up to 2.4 GiB, then
 * larger (22 MiB parts at 5.5 GB).
 */
#define MANIFEST_PART_MAX ((size_t) 5 * 1024 * 1024)

/* The next part's size; SIZE_MAX: none before the last, which takes all. */
static size_t
manifest_part(const RemoraSet *set)
{
	const RemoraEngine *e = set->base.engine;
	size_t              base =
        e->part_size < MANIFEST_PART_MAX ? e->part_size : MANIFEST_PART_MAX;
	int64_t part = remora_part_size_next(set->msent, (int64_t) base,
										 set->mparts, e->max_parts);

	return part > 0 ? (size_t) part : SIZE_MAX;
}

static bool
mappend(RemoraSet *set, const char *s, size_t n)
{
	if (!remora_buf_append(&set->mtext, s, n))
		return false;
	remora_sha256_update(set->msha, s, n);
	return true;
}

/* The validators of an entry's source, as a JSON object (malloc'd). */
static char *
source_json(RemoraSet *set, const Entry *e)
{
	RemoraBuf b = {0};

	if (set->kind == REMORA_SET_S3)
		remora_manifest_source_s3(&b, e->src_key, e->src_etag, e->src_lm,
								  e->size);
	else
		remora_manifest_source_hf(&b, set->commit, e->oid, e->size,
								  e->lfs_sha != NULL);
	return remora_buf_release(&b, NULL);
}

/* The completed head entry: a manifest line and a member to checkpoint. */
static bool
emit_member(RemoraSet *set, Entry *e)
{
	RemoraSetMember *m;
	RemoraSetMember *grown;
	char            *src = source_json(set, e);
	RemoraBuf        line = {0};
	bool             ok = false;

	grown = remora_array_grow(set->cpq, set->ncpq, &set->cpq_cap,
							  sizeof(*set->cpq));
	if (grown == NULL)
		goto done;
	set->cpq = grown;
	if (src == NULL ||
		!remora_manifest_member(&line, e->path, e->key, e->size, e->sha256,
								e->etag, src, e->reused, e->reused_from_job) ||
		!mappend(set, line.data, line.len))
		goto done;
	remora_sha256_update(set->lsha, line.data, line.len);
	m = &set->cpq[set->ncpq];
	memset(m, 0, sizeof(*m));
	m->path = e->path;
	m->key = e->key;
	m->etag = e->etag;
	memcpy(m->sha256, e->sha256, sizeof(m->sha256));
	m->size = e->size;
	m->source_json = src;
	m->reused = e->reused;
	m->reused_from_job = e->reused_from_job;
	e->path = e->key = e->etag = NULL; /* the member owns them now */
	src = NULL;
	set->ncpq++;
	set->cp_dirty = true;
	set->members_done++;
	set->bytes_done += m->size;
	set->members_reused += m->reused;
	ok = true;
done:
	free(src);
	remora_buf_free(&line);
	return ok;
}

/*
 * Only the last part number is left, and the rest of the manifest is more
 * than a part (or one PUT) can be: the store's limit does not hold it.
 * True: the set failed.
 */
static bool
manifest_too_large(RemoraSet *set)
{
	if (set->mtext.len <= (size_t) REMORA_PART_SIZE_MAX ||
		manifest_part(set) != SIZE_MAX)
		return false;
	remora_set_fail(set, REMORA_ERR_SIZE, false, 0,
					"the manifest needs more than %d parts of at most 5 GiB, "
					"the store's limit (remora.max_upload_parts)",
					set->base.engine->max_parts);
	return true;
}

void
remora_set_pop_done(RemoraSet *set)
{
	while (set->head && set->status.state == REMORA_TASK_RUNNING &&
		   set->ncpq < CHECKPOINT_QUEUE_MAX &&
		   set->mtext.len < manifest_part(set) && set->head->state == E_DONE)
	{
		Entry *e = set->head;

		if (!emit_member(set, e))
		{
			remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		set->head = e->next;
		if (set->head == NULL)
			set->tail = NULL;
		set->nentries--;
		remora_set_entry_free(e);
		if (manifest_too_large(set))
			return;
	}
}

static void
mpart_done(Request *req, CURLcode rc)
{
	RemoraSet      *set = req->owner;
	RemoraTaskError err;
	char            etag[REMORA_ETAG_MAX];

	set->mreq = NULL;
	free(set->part_body);
	set->part_body = NULL;
	if (!remora_mpu_part_etag(req, rc, etag, sizeof(etag), &err,
							  "writing the manifest"))
		remora_set_fail_with(set, &err, NULL);
	else if (!remora_mpu_record(&set->mpu, set->mpu.nparts + 1, etag))
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
}

static void
minit_done(Request *req, CURLcode rc)
{
	RemoraSet      *set = req->owner;
	RemoraTaskError err;

	set->mreq = NULL;
	if (!remora_mpu_created(&set->mpu, req, rc, &err,
							"starting the manifest upload"))
		remora_set_fail_with(set, &err, NULL);
}

/* The manifest object is complete in the store, with this ETag. */
static void
manifest_written(RemoraSet *set, const char *etag)
{
	RemoraTaskError err;

	if (set->mpu.upload_id &&
		!remora_mpu_fits(etag, (const char *const *) set->mpu.etags,
						 set->mpu.nparts, &err,
						 "completing the manifest upload"))
	{
		remora_set_fail_with(set, &err, NULL);
		return;
	}
	snprintf(set->result.manifest_etag, sizeof(set->result.manifest_etag), "%s",
			 etag);
	set->phase = S_DONE;
	set->status.state = REMORA_TASK_SUCCEEDED;
}

/* The completion named no ETag (RGW): the object's HEAD does. */
static void
mhead_done(Request *req, CURLcode rc)
{
	RemoraSet      *set = req->owner;
	RemoraTaskError err;
	char            etag[REMORA_ETAG_MAX];

	set->mreq = NULL;
	if (remora_s3_head_etag(req, rc, remora_sha256_bytes(set->msha), etag,
							sizeof(etag), &err,
							"completing the manifest upload"))
		manifest_written(set, etag);
	else
		remora_set_fail_with(set, &err, NULL);
}

static void
mfinal_done(Request *req, CURLcode rc)
{
	RemoraSet      *set = req->owner;
	RemoraTaskError err;
	char           *etag;
	char            errbuf[256];

	set->mreq = NULL;
	free(set->part_body);
	set->part_body = NULL;
	if (set->mpu.upload_id == NULL)
	{
		char canon[REMORA_ETAG_MAX];

		if (remora_s3_put_etag(req, rc, canon, sizeof(canon), &err,
							   "writing the manifest"))
			manifest_written(set, canon);
		else
			remora_set_fail_with(set, &err, NULL);
		return;
	}
	etag =
		remora_mpu_completed(req, rc, &err, "completing the manifest upload");
	if (etag == NULL)
		remora_set_fail_with(set, &err, NULL);
	else if (etag[0] != '\0')
		manifest_written(set, etag);
	else
	{
		MpuCall c;

		remora_mpu_head(&set->mpu, &c);
		set->mreq =
			remora_s3_start(&set->base.engine->loop, &set->base.engine->target,
							set, &c.call, mhead_done, errbuf, sizeof(errbuf));
		if (set->mreq == NULL)
			remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0,
							"reading the manifest object: %s", errbuf);
	}
	free(etag);
}

/* Send a full part of the manifest, or when finishing, the rest. */
void
remora_set_manifest_flush(RemoraSet *set)
{
	S3Call  call;
	MpuCall c;
	char    errbuf[256];
	bool    last = set->phase == S_FINISH;
	size_t  n;

	if (set->mreq || set->status.state != REMORA_TASK_RUNNING)
		return;
	if (!last && set->mtext.len < manifest_part(set))
		return;
	if (manifest_too_large(set))
		return;
	if (last && set->mpu.upload_id == NULL &&
		set->mtext.len <= (size_t) REMORA_PART_SIZE_MAX)
	{
		/* the whole manifest fits one PUT */
		set->part_body = remora_buf_release(&set->mtext, &n);
		if (set->part_body == NULL)
		{
			remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		call = (S3Call){"PUT",
						set->bucket,
						set->result.manifest_key,
						NULL,
						0,
						NULL,
						0,
						set->part_body,
						n,
						NULL,
						false,
						set->storage_class,
						false};
		set->mreq =
			remora_s3_start(&set->base.engine->loop, &set->base.engine->target,
							set, &call, mfinal_done, errbuf, sizeof(errbuf));
	}
	else if (set->mpu.upload_id == NULL)
	{
		remora_mpu_create(&set->mpu, &c);
		set->mreq =
			remora_s3_start(&set->base.engine->loop, &set->base.engine->target,
							set, &c.call, minit_done, errbuf, sizeof(errbuf));
	}
	else if (set->mtext.len > 0 &&
			 (set->mtext.len >= manifest_part(set) || last))
	{
		/* the rest as the last part, if a part holds it */
		n = last && set->mtext.len <= (size_t) REMORA_PART_SIZE_MAX
				? set->mtext.len
				: manifest_part(set);
		set->part_body = malloc(n);
		if (set->part_body == NULL)
		{
			remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		memcpy(set->part_body, set->mtext.data, n);
		remora_buf_consume(&set->mtext, n);
		set->msent += (int64_t) n;
		set->mparts++;
		remora_mpu_part(&set->mpu, set->mpu.nparts + 1, set->part_body, n, NULL,
						&c);
		set->mreq =
			remora_s3_start(&set->base.engine->loop, &set->base.engine->target,
							set, &c.call, mpart_done, errbuf, sizeof(errbuf));
	}
	else if (last)
	{
		if (!remora_mpu_complete(&set->mpu, NULL, 0, &c))
		{
			remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		set->mreq =
			remora_s3_start(&set->base.engine->loop, &set->base.engine->target,
							set, &c.call, mfinal_done, errbuf, sizeof(errbuf));
	}
	else
		return;
	if (set->mreq == NULL)
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0,
						"writing the manifest: %s", errbuf);
}

bool
remora_set_manifest_header(RemoraSet *set)
{
	RemoraBuf line = {0};
	bool      ok;

	ok = remora_manifest_header(&line, set->job_id, set->attempt_id,
								set->fencing_token, set->display, set->bucket,
								set->kind == REMORA_SET_HF ? set->commit
														   : NULL) &&
		 mappend(set, line.data, line.len);
	remora_buf_free(&line);
	return ok;
}

/* Everything listed is in: the totals line, then the manifest's end. */
void
remora_set_finish(RemoraSet *set)
{
	RemoraBuf line = {0};
	bool      ok;

	if (set->members_done == 0)
	{
		remora_set_fail(
			set, REMORA_ERR_SOURCE, false, 0, "%s",
			set->listed_members == 0 && set->duplicates == 0
				? "the source has no member to copy (nothing listed, or "
				  "nothing the include and exclude patterns select)"
				: "the source has no member to copy");
		return;
	}
	remora_sha256_final_hex(set->lsha, set->result.members_sha256);
	ok = remora_manifest_totals(&line, set->members_done, set->bytes_done,
								set->result.members_sha256) &&
		 mappend(set, line.data, line.len);
	remora_buf_free(&line);
	if (!ok)
	{
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return;
	}
	remora_sha256_final_hex(set->msha, set->result.manifest_sha256);
	set->result.members = set->members_done;
	set->result.bytes = set->bytes_done;
	set->result.members_reused = set->members_reused;
	set->phase = S_FINISH;
}
