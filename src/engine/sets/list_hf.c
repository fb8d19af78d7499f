/*-------------------------------------------------------------------------
 *
 * list_hf.c
 *	  The listing of a set whose source is a Hugging Face snapshot: the
 *	  revision resolved to a commit, then the tree of that commit, a page at
 *	  a time (the Hub paginates with a Link header).
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/json.h"
#include "engine/sets/set.h"
#include "engine/common/source_uri.h"

/* A GET of the Hub's API, with the token (the hub is the admin's). */
static Request *
hub_get(RemoraSet *set, const char *url, RequestDone done)
{
	Request *req = remora_req_new(&set->base.engine->loop, set, done);

	if (req == NULL)
		return NULL;
	/* the egress proxy, unless remora.no_proxy names the Hub */
	remora_req_set_proxy(req, url);
	curl_easy_setopt(req->easy, CURLOPT_URL, url);
	if (set->auth_header)
		req->headers = curl_slist_append(NULL, set->auth_header);
	if (!remora_req_start(req))
	{
		remora_req_cancel(req);
		return NULL;
	}
	return req;
}

/*
 * A Hub API answer that is not 200: the message says what a DBA can do.
 * Returns true when the call may be repeated later.
 */
static bool
hub_failed(RemoraSet *set, Request *req, CURLcode rc, const char *what)
{
	RemoraTaskError err;

	memset(&err, 0, sizeof(err));
	err.retry_after = req->hdr.retry_after;
	if (rc != CURLE_OK)
	{
		/* a certificate or protocol failure is class tls: not retried */
		remora_req_transport_error(req, rc, &err, what, NULL);
		err.retry_after = req->hdr.retry_after;
	}
	else
	{
		err.class = REMORA_ERR_HTTP;
		err.http_status = req->status;
		err.retryable = req->status == 429 || req->status >= 500;
		if (req->status == 401 || req->status == 403)
			snprintf(err.message, sizeof(err.message),
					 "%s: the Hub refused access to %.200s (HTTP %ld); a "
					 "gated or private repository needs remora.hf_token",
					 what, set->repo, req->status);
		else if (req->status == 404)
			snprintf(err.message, sizeof(err.message),
					 "%s: the Hub has no %.20s %.200s at revision %.200s "
					 "(HTTP 404)",
					 what, set->repo_type, set->repo, set->revision);
		else
			snprintf(err.message, sizeof(err.message),
					 "%s: the Hub answered HTTP %ld", what, req->status);
	}
	if (remora_set_retry_at(set, &err, &set->list_tries, &set->list_retry_at))
		return true;
	remora_set_fail_with(set, &err, NULL);
	return false;
}

/*
 * The JSON document of a Hub API answer, or NULL: the call failed (and is
 * repeated later, or the set failed), or *bad when the answer is not JSON.
 */
static RemoraJson *
hub_answer(RemoraSet *set, Request *req, CURLcode rc, const char *what,
		   bool *bad)
{
	char errbuf[200];

	set->list_req = NULL;
	*bad = false;
	if (rc != CURLE_OK || req->status != 200)
	{
		hub_failed(set, req, rc, what);
		return NULL;
	}
	set->list_tries = 0;
	*bad = true;
	return req->body ? remora_json_parse(req->body, req->body_len, errbuf,
										 sizeof(errbuf))
					 : NULL;
}

static void
resolve_done(Request *req, CURLcode rc)
{
	RemoraSet  *set = req->owner;
	bool        bad;
	RemoraJson *doc = hub_answer(set, req, rc, "resolving the revision", &bad);
	const char *sha;

	if (doc == NULL && !bad)
		return;
	sha = doc ? remora_json_string(doc, "sha") : NULL;
	if (sha == NULL || strlen(sha) != 40 ||
		strspn(sha, "0123456789abcdef") != 40)
	{
		remora_json_free(doc);
		remora_set_fail(
			set, REMORA_ERR_SOURCE, true, req->status,
			"resolving the revision: the Hub's answer has no commit sha");
		return;
	}
	memcpy(set->commit, sha, 41);
	remora_json_free(doc);
	snprintf(set->result.source_commit, sizeof(set->result.source_commit), "%s",
			 set->commit);
	{
		size_t n = strlen(set->hub_url) + strlen(set->repo) + 120;

		set->next_url = malloc(n);
		if (set->next_url == NULL)
		{
			remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		snprintf(set->next_url, n, "%s/api/%ss/%s/tree/%s?recursive=true",
				 set->hub_url, set->repo_type, set->repo, set->commit);
	}
	if (!remora_set_manifest_header(set))
	{
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return;
	}
	set->phase = S_LIST;
}

/* Is url on the hub's own origin (scheme, host and port)? */
static bool
same_origin(const char *url, const char *base)
{
	size_t n = strlen(base);

	return strncmp(url, base, n) == 0 && (url[n] == '/' || url[n] == '\0');
}

static Entry *
tree_entry(const RemoraJson *f, bool *bad)
{
	const char       *type = remora_json_string(f, "type");
	const char       *path = remora_json_string(f, "path");
	const char       *oid = remora_json_string(f, "oid");
	int64_t           size = remora_json_int(f, "size");
	const RemoraJson *lfs = remora_json_get(f, "lfs");
	Entry            *e;

	*bad = false;
	if (type && strcmp(type, "file") != 0)
		return NULL; /* a directory: its files are listed too */
	if (type == NULL || path == NULL || oid == NULL || size < 0)
	{
		*bad = true;
		return NULL;
	}
	e = calloc(1, sizeof(Entry));
	if (e == NULL)
		return NULL;
	e->path = strdup(path);
	e->oid = strdup(oid);
	e->size = size;
	if (lfs && lfs->type == RJ_OBJECT)
	{
		const char *lsha = remora_json_string(lfs, "oid");
		int64_t     lsize = remora_json_int(lfs, "size");

		if (lsha == NULL || strlen(lsha) != 64 ||
			strspn(lsha, "0123456789abcdef") != 64 || lsize < 0)
		{
			*bad = true;
			remora_set_entry_free(e);
			return NULL;
		}
		e->lfs_sha = strdup(lsha);
		e->size = lsize;
		free(e->oid);
		e->oid = strdup(lsha);
	}
	return e;
}

static void
tree_done(Request *req, CURLcode rc)
{
	RemoraSet  *set = req->owner;
	bool        bad;
	RemoraJson *doc = hub_answer(set, req, rc, "listing the repository", &bad);
	Entry      *first = NULL;

	if (doc == NULL && !bad)
		return;
	if (doc == NULL || doc->type != RJ_ARRAY)
	{
		remora_json_free(doc);
		remora_set_fail(
			set, REMORA_ERR_SOURCE, true, req->status,
			"listing the repository: the Hub's answer is not a list");
		return;
	}
	for (const RemoraJson *f = doc->child;
		 f && set->status.state == REMORA_TASK_RUNNING; f = f->next)
	{
		bool   malformed = true;
		bool   lfs_lost;
		Entry *e = f->type == RJ_OBJECT ? tree_entry(f, &malformed) : NULL;

		if (malformed)
		{
			remora_set_fail(
				set, REMORA_ERR_SOURCE, true, 0,
				"listing the repository: an entry has no path, type, "
				"oid or size, or a malformed lfs object");
			break;
		}
		if (e == NULL)
			continue;
		/* an lfs object's sha256 could not be copied */
		lfs_lost = e->lfs_sha == NULL && remora_json_get(f, "lfs") &&
				   remora_json_get(f, "lfs")->type == RJ_OBJECT;
		if (!remora_set_take_listed(set, e, e->path && e->oid && !lfs_lost,
									&first))
			break;
	}
	remora_json_free(doc);
	free(set->next_url);
	set->next_url = NULL;
	if (set->status.state != REMORA_TASK_RUNNING)
		return;
	if (req->hdr.link_next == NULL)
		set->listed = true;
	else if (!same_origin(req->hdr.link_next, set->hub_url))
	{
		remora_set_fail(
			set, REMORA_ERR_SOURCE, false, 0,
			"listing the repository: the next page is on another host");
		return;
	}
	else
		set->next_url = strdup(req->hdr.link_next);
	remora_set_listed_page(set, first);
}

/*
 * The next request of the listing: the revision to a commit first, then
 * the tree a page at a time (the Link header names the next page).
 */
void
remora_list_hf_next(RemoraSet *set)
{
	if (set->phase == S_RESOLVE)
	{
		char *rev =
			remora_uri_encode(set->revision, strlen(set->revision), false);
		size_t n = strlen(set->hub_url) + strlen(set->repo) +
				   (rev ? strlen(rev) : 0) + 40;
		char *url = malloc(n);

		if (rev && url)
		{
			snprintf(url, n, "%s/api/%ss/%s/revision/%s", set->hub_url,
					 set->repo_type, set->repo, rev);
			set->list_req = hub_get(set, url, resolve_done);
		}
		free(rev);
		free(url);
		if (set->list_req == NULL)
			remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0,
							"could not ask the Hub for the revision");
		return;
	}
	set->list_req = hub_get(set, set->next_url, tree_done);
	if (set->list_req == NULL)
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0,
						"could not ask the Hub for the file list");
}
