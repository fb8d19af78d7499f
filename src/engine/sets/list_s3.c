/*-------------------------------------------------------------------------
 *
 * list_s3.c
 *	  The listing of a set whose source is an S3 prefix (or one object):
 *	  ListObjectsV2 a page at a time, on the source store.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/s3/s3xml.h"
#include "engine/sets/set.h"

static void
s3_list_done(Request *req, CURLcode rc)
{
	RemoraSet      *set = req->owner;
	RemoraTaskError err;
	RemoraS3Listing l;
	Entry          *first = NULL;
	size_t          plen = strlen(set->source_key);

	set->list_req = NULL;
	if (remora_s3_failed(req, rc, &err, "listing the source"))
	{
		if (remora_set_retry_at(set, &err, &set->list_tries,
								&set->list_retry_at))
			return;
		if (req->status == 404 || req->status == 403)
			err.retryable = false;
		if (req->status == 403 && set->source_ep.anonymous)
		{
			size_t n = strlen(err.message);

			snprintf(err.message + n, sizeof(err.message) - n, "%s",
					 "; the endpoint has no credentials: only a public "
					 "bucket can be read through it");
		}
		remora_set_fail_with(set, &err, NULL);
		return;
	}
	set->list_tries = 0;
	memset(&l, 0, sizeof(l));
	if (!req->body || !remora_s3xml_listing(req->body, req->body_len, &l))
	{
		remora_set_fail(
			set, REMORA_ERR_S3, true, req->status,
			"listing the source: the store's answer is not a listing");
		return;
	}
	for (int i = 0; i < l.nobjects && set->status.state == REMORA_TASK_RUNNING;
		 i++)
	{
		RemoraS3Object *o = &l.objects[i];
		Entry          *e;

		if (set->single ? strcmp(o->key, set->source_key) != 0
						: strncmp(o->key, set->source_key, plen) != 0)
			continue;
		/* a folder marker ("dir/", empty) is not a member */
		if (!set->single && o->key[strlen(o->key) - 1] == '/' && o->size == 0)
			continue;
		e = calloc(1, sizeof(Entry));
		if (e == NULL)
		{
			remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			break;
		}
		e->path = strdup(set->single ? set->file_name : o->key + plen);
		e->src_key = strdup(o->key);
		e->src_etag = malloc(REMORA_ETAG_MAX);
		if (e->src_etag)
			remora_etag_canon(o->etag, e->src_etag, REMORA_ETAG_MAX);
		e->src_lm = remora_xstrdup(o->last_modified ? o->last_modified : "");
		e->size = o->size;
		if (!remora_set_take_listed(
				set, e, e->path && e->src_key && e->src_etag && e->src_lm,
				&first))
			break;
	}
	free(set->list_token);
	set->list_token = NULL;
	if (set->single || !l.truncated)
		set->listed = true;
	else if (l.next_token == NULL)
		remora_set_fail(set, REMORA_ERR_S3, true, req->status,
						"listing the source: a truncated listing had no "
						"continuation token");
	else
		set->list_token = strdup(l.next_token);
	remora_s3xml_listing_free(&l);
	if (set->status.state != REMORA_TASK_RUNNING)
		return;
	if (set->single && set->listed_members == 0)
	{
		remora_set_fail(set, REMORA_ERR_SOURCE, false, 404,
						"the source object s3://%.200s/%.600s does not exist",
						set->source_bucket, set->source_key);
		return;
	}
	remora_set_listed_page(set, first);
}

void
remora_list_s3_next(RemoraSet *set)
{
	RemoraKV q[4];
	int      nq = 0;
	S3Call   call;
	char     errbuf[256];

	q[nq++] = (RemoraKV){"list-type", "2"};
	q[nq++] = (RemoraKV){"max-keys", set->single       ? "1"
									 : set->list_token ? "1000"
													   : LIST_FIRST_PAGE};
	q[nq++] = (RemoraKV){"prefix", set->source_key};
	if (set->list_token)
		q[nq++] = (RemoraKV){"continuation-token", set->list_token};
	call = (S3Call){"GET", set->source_bucket,
					NULL,  q,
					nq,    NULL,
					0,     NULL,
					0,     NULL,
					false, NULL,
					false};
	set->list_req =
		remora_s3_start(&set->base.engine->loop, &set->source_ep, set, &call,
						s3_list_done, errbuf, sizeof(errbuf));
	if (set->list_req == NULL)
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0,
						"listing the source: %s", errbuf);
}
