/*-------------------------------------------------------------------------
 *
 * set.c
 *	  Jobs of many members: every object under an S3 prefix (or one S3
 *	  object), or a Hugging Face snapshot pinned to a commit.
 *
 * The set lists its source a page at a time into a window of entries kept
 * in listing order, runs up to REMORA_SET_CONCURRENCY of them at once (each
 * a member task of task.c, or a server-side copy of a member an earlier
 * attempt completed), and pops completed entries from the head of the
 * window: each becomes a line of the manifest and a member for the next
 * checkpoint.  The manifest goes to the store a part at a time (multipart
 * upload) once it outgrows one part, so memory is bounded by the window,
 * the part size and the running members, not by the number of members.
 *
 *	  list page --> prior lookup --> window (<= REMORA_SET_WINDOW entries)
 *	     ^                              | start: member task / reuse copy
 *	     +------ window has room -------+ pop head when done, in order
 *	                                    v
 *	                manifest lines (SHA-256 of the member lines: the root
 *	                digest) --> parts --> manifest.jsonl --> result
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "engine/engine_int.h"
#include "engine/json.h"
#include "engine/manifest.h"
#include "engine/s3xml.h"
#include "engine/source_uri.h"

#define CHECKPOINT_QUEUE_MAX 4096 /* completed members not yet handed out */
#define LIST_PAGE            1000
#define RETRY_BASE_MS        500
#define PRESIGN_SECONDS      (24 * 3600)

typedef enum EntryState
{
	E_WAITING,
	E_RUNNING, /* a member task */
	E_COPYING, /* reusing an earlier attempt's member */
	E_HASHING, /* same store: reading to hash, then a server-side copy */
	E_BACKOFF, /* waiting to try again */
	E_DONE
} EntryState;

typedef struct Entry Entry;
struct Entry
{
	Entry        *next;
	EntryState    state;
	char         *path;     /* the member path */
	char         *src_key;  /* s3: the source object's key */
	char         *src_etag; /* s3: as listed */
	char         *src_lm;   /* s3: Last-Modified as listed */
	char         *oid;      /* hf: the git object id */
	char         *lfs_sha;  /* hf, LFS: the content's SHA-256 */
	int64_t       size;     /* as listed */
	int           tries;
	int64_t       retry_at;
	RemoraTask   *child;
	Request      *copy;
	Request      *hash_req;
	RemoraSha256 *hsha;
	int64_t       hbytes;
	RemoraPrior  *prior; /* reusable from an earlier attempt, or NULL */

	/* the completed member */
	char *key;
	char *etag;
	char  sha256[65];
	bool  reused;
};

typedef enum SetPhase
{
	S_RESOLVE, /* hf: the revision to a commit */
	S_LIST,
	S_FINISH, /* the manifest's last part and completion */
	S_DONE
} SetPhase;

struct RemoraSet
{
	RemoraEngine    *engine;
	RemoraTask      *shell;
	RemoraSetKind    kind;
	SetPhase         phase;
	RemoraTaskState  state;
	RemoraTaskError  error;
	RemoraTaskResult result;

	/* the spec, copied */
	char              *display;
	char              *source_bucket;
	char              *source_key;
	bool               single;
	bool               same_store; /* the source is the target store */
	char              *file_name;
	RemoraTargetConfig source_cfg; /* the presigning view of the source */
	S3Endpoint         source_ep;
	char *src_base_url, *src_host, *src_endpoint, *src_region, *src_akid,
		*src_secret;
	char   *hub_url;
	char   *hub_host;
	char   *repo_type;
	char   *repo;
	char   *revision;
	char   *auth_header; /* "Authorization: Bearer …", to the hub only */
	char  **include;
	int     ninclude;
	char  **exclude;
	int     nexclude;
	char   *bucket;
	char   *staging;
	int64_t job_id;
	char   *attempt_id;
	int64_t fencing_token;
	RemoraPriorLookup prior;
	void             *prior_arg;

	/* listing */
	Request *list_req;
	char    *list_token; /* s3: continuation token */
	char    *next_url;   /* hf: the next page */
	bool     listed;     /* the listing ended */
	int      list_tries;
	int64_t  list_retry_at;
	char     commit[41];
	int64_t  listed_members;
	int64_t  listed_bytes;

	/* the window */
	Entry  *head;
	Entry  *tail;
	int     nentries;
	int     running;
	int64_t seq; /* members started, for segment prefixes */

	/*
	 * Duplicates: 64-bit hashes of member paths and their contents, keyed
	 * with a random key of this set's, so that a source cannot name two
	 * members whose hashes collide (one would be taken for the other).
	 */
	unsigned char seen_key[16];
	uint64_t     *seen_path;
	uint64_t     *seen_content;
	size_t        seen_cap; /* power of two */
	size_t        seen_n;

	/* completed members */
	RemoraSetMember *cpq;
	int              ncpq;
	int              cpq_cap;
	RemoraSetMember *cp_out; /* handed out by the last checkpoint */
	int              ncp_out;
	bool             cp_dirty;
	int64_t          members_done;
	int64_t          bytes_done;
	int64_t          members_reused;
	int64_t          duplicates;

	/* the manifest */
	char         *mbuf;
	size_t        mlen;
	size_t        mcap;
	RemoraSha256 *msha; /* the whole manifest */
	RemoraSha256 *lsha; /* the member lines: the root digest */
	char         *upload_id;
	Request      *mreq;
	char         *part_body; /* the part in flight */
	char        **part_etags;
	int           nparts;
};

static void list_next(RemoraSet *set);
static void start_entries(RemoraSet *set);
static void pop_done(RemoraSet *set);
static void manifest_flush(RemoraSet *set);
static bool manifest_header(RemoraSet *set);
static void sanitized(char *out, size_t outlen, const char *s);
static void member_retry(RemoraSet *set, Entry *e, const RemoraTaskError *err);
static void changed(RemoraSet *set, Entry *e);

static void set_fail(RemoraSet *set, const char *class, bool retryable,
					 long http_status, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void
set_fail(RemoraSet *set, const char *class, bool retryable, long http_status,
		 const char *fmt, ...)
{
	va_list ap;

	if (set->state != REMORA_TASK_RUNNING)
		return;
	va_start(ap, fmt);
	remora_error_vset(&set->error, class, retryable, http_status, fmt, ap);
	va_end(ap);
	set->state = REMORA_TASK_FAILED;
	remora_set_abort(set); /* stops the rest; the state stays failed */
}

/*
 * A retryable failure with tries left: when to try again (at least the
 * answer's Retry-After), and a wake-up then.  False when it is final.
 */
static bool
schedule_retry(RemoraSet *set, const RemoraTaskError *err, int *tries,
			   int64_t *at)
{
	int64_t wait;

	if (!err->retryable || ++*tries >= REMORA_SET_TRIES)
		return false;
	wait = RETRY_BASE_MS << *tries;
	if (err->retry_after > 0 && err->retry_after * 1000 > wait)
		wait = err->retry_after * 1000;
	*at = remora_now_ms() + wait;
	remora_engine_wake_at(set->engine, *at);
	return true;
}

static void
set_fail_with(RemoraSet *set, const RemoraTaskError *err, const char *path)
{
	char msg[sizeof(err->message)];

	if (set->state != REMORA_TASK_RUNNING)
		return;
	if (path)
	{
		char shown[300];

		sanitized(shown, sizeof(shown), path);
		snprintf(msg, sizeof(msg), "member \"%.150s\": %.340s", shown,
				 err->message);
	}
	else
		snprintf(msg, sizeof(msg), "%s", err->message);
	set_fail(set, err->class, err->retryable, err->http_status, "%s", msg);
	set->error.curl_code = err->curl_code;
	set->error.retry_after = err->retry_after;
	snprintf(set->error.s3_code, sizeof(set->error.s3_code), "%s",
			 err->s3_code);
	remora_utf8_scrub(set->error.s3_code);
}

/* A member path as an error message may show it: printable ASCII only. */
static void
sanitized(char *out, size_t outlen, const char *s)
{
	size_t n = 0;

	for (; *s && n + 5 < outlen; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[n++] = c;
		else
			n += snprintf(out + n, outlen - n, "\\x%02x", c);
	}
	out[n] = '\0';
}

/* Does include/exclude select this path?  Exclusion wins. */
static bool
selected(const RemoraSet *set, const char *path)
{
	bool in = set->ninclude == 0;

	for (int i = 0; i < set->ninclude && !in; i++)
		in = fnmatch(set->include[i], path, 0) == 0;
	for (int i = 0; i < set->nexclude && in; i++)
		in = fnmatch(set->exclude[i], path, 0) != 0;
	return in;
}

/* ------------------------------------------------------------ duplicates */

/* The first 64 bits of HMAC-SHA256(the set's key, s); false on failure. */
static bool
keyed_hash(const RemoraSet *set, const char *s, uint64_t *out)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int  len = 0;

	if (HMAC(EVP_sha256(), set->seen_key, sizeof(set->seen_key),
			 (const unsigned char *) s, strlen(s), mac, &len) == NULL ||
		len < sizeof(uint64_t))
		return false;
	memcpy(out, mac, sizeof(uint64_t));
	return true;
}

/*
 * Record a member path with its content's identity.  Returns 0 for a new
 * path, 1 for a path seen with the same content (a duplicate), -1 for a
 * path seen with other content (a conflict).
 */
static int
seen_add(RemoraSet *set, const char *path, const char *content)
{
	uint64_t ph;
	uint64_t ch;
	size_t   i;

	if (!keyed_hash(set, path, &ph) || !keyed_hash(set, content, &ch))
		return -2;
	ph |= 1; /* 0 marks a free slot */

	if ((set->seen_n + 1) * 2 > set->seen_cap)
	{
		size_t    cap = set->seen_cap ? set->seen_cap * 2 : 1024;
		uint64_t *np = calloc(cap, sizeof(uint64_t));
		uint64_t *nc = calloc(cap, sizeof(uint64_t));

		if (np == NULL || nc == NULL)
		{
			free(np);
			free(nc);
			return -2;
		}
		for (size_t j = 0; j < set->seen_cap; j++)
			if (set->seen_path[j])
			{
				size_t k = set->seen_path[j] & (cap - 1);

				while (np[k])
					k = (k + 1) & (cap - 1);
				np[k] = set->seen_path[j];
				nc[k] = set->seen_content[j];
			}
		free(set->seen_path);
		free(set->seen_content);
		set->seen_path = np;
		set->seen_content = nc;
		set->seen_cap = cap;
	}
	for (i = ph & (set->seen_cap - 1); set->seen_path[i];
		 i = (i + 1) & (set->seen_cap - 1))
		if (set->seen_path[i] == ph)
			return set->seen_content[i] == ch ? 1 : -1;
	set->seen_path[i] = ph;
	set->seen_content[i] = ch;
	set->seen_n++;
	return 0;
}

/* ------------------------------------------------------------ entries */

static void
entry_free(Entry *e)
{
	free(e->path);
	free(e->src_key);
	free(e->src_etag);
	free(e->src_lm);
	free(e->oid);
	free(e->lfs_sha);
	free(e->prior);
	remora_sha256_free(e->hsha);
	free(e->key);
	free(e->etag);
	free(e);
}

/*
 * Add a listed member to the window.  Returns false when the set failed
 * (a bad path, a conflict).
 */
static bool
add_entry(RemoraSet *set, Entry *e)
{
	char content[400];
	int  dup;

	if (!remora_member_path_valid(e->path))
	{
		char shown[300];

		sanitized(shown, sizeof(shown), e->path);
		entry_free(e);
		set_fail(set, REMORA_ERR_SOURCE, false, 0,
				 "the source lists a member path that cannot be used safely: "
				 "\"%s\" (absolute, empty, \".\" or \"..\" segments, "
				 "backslashes and control characters are refused)",
				 shown);
		return false;
	}
	if (!selected(set, e->path))
	{
		entry_free(e);
		return true;
	}
	if (strlen(set->staging) + strlen("data/") + strlen(e->path) >
		REMORA_MAX_S3_KEY_LEN)
	{
		char shown[300];

		sanitized(shown, sizeof(shown), e->path);
		entry_free(e);
		set_fail(set, REMORA_ERR_SOURCE, false, 0,
				 "the member path \"%s\" is too long: its key in the target "
				 "store would be longer than %d bytes",
				 shown, REMORA_MAX_S3_KEY_LEN);
		return false;
	}
	snprintf(content, sizeof(content), "%" PRId64 "/%s/%s", e->size,
			 e->src_etag ? e->src_etag : "", e->oid ? e->oid : "");
	dup = seen_add(set, e->path, content);
	if (dup == -2)
	{
		entry_free(e);
		set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return false;
	}
	if (dup == -1)
	{
		char shown[300];

		sanitized(shown, sizeof(shown), e->path);
		entry_free(e);
		set_fail(set, REMORA_ERR_SOURCE, false, 0,
				 "two source objects with different content map to the "
				 "member path \"%s\"",
				 shown);
		return false;
	}
	if (dup == 1)
	{
		set->duplicates++;
		entry_free(e);
		return true;
	}
	e->state = E_WAITING;
	if (set->tail)
		set->tail->next = e;
	else
		set->head = e;
	set->tail = e;
	set->nentries++;
	set->listed_members++;
	set->listed_bytes += e->size;
	return true;
}

/*
 * Ask the host which of the entries listed since `from` an earlier attempt
 * completed; keep those whose validators still match.
 */
static void
lookup_priors(RemoraSet *set, Entry *from)
{
	const char **paths;
	RemoraPrior *out;
	Entry      **es;
	int          n = 0;

	if (set->prior == NULL || from == NULL)
		return;
	for (Entry *e = from; e; e = e->next)
		n++;
	paths = calloc(n, sizeof(char *));
	out = calloc(n, sizeof(RemoraPrior));
	es = calloc(n, sizeof(Entry *));
	if (paths == NULL || out == NULL || es == NULL)
	{
		free(paths);
		free(out);
		free(es);
		return; /* nothing reused: still correct */
	}
	es[0] = from;
	for (int i = 1; i < n; i++)
		es[i] = es[i - 1]->next;
	for (int i = 0; i < n; i++)
		paths[i] = es[i]->path;
	set->prior(set->prior_arg, paths, n, out);
	for (int i = 0; i < n; i++)
	{
		Entry       *e = es[i];
		RemoraPrior *p = &out[i];
		bool         same;

		if (!p->found || p->size != e->size)
			continue;
		if (set->kind == REMORA_SET_S3)
			same = remora_etag_equal(p->source_etag, e->src_etag);
		else
			same = e->oid && p->source_oid[0] &&
				   strcmp(p->source_oid, e->oid) == 0;
		if (!same)
			continue;
		e->prior = malloc(sizeof(RemoraPrior));
		if (e->prior)
			*e->prior = *p;
	}
	free(paths);
	free(out);
	free(es);
}

/* A signed request to ep (NULL: the target), started; NULL on failure. */
static Request *
s3_start(RemoraSet *set, const S3Endpoint *ep, const S3Call *call,
		 RequestDone done, char *errbuf, size_t errlen)
{
	Request *req =
		ep ? remora_s3_request_to(set->engine, ep, set, call, done, errbuf,
								  errlen)
		   : remora_s3_request(set->engine, set, call, done, errbuf, errlen);

	if (req && !remora_req_start(req))
	{
		remora_req_cancel(req);
		snprintf(errbuf, errlen, "could not start a request");
		req = NULL;
	}
	return req;
}

/* --------------------------------------------------------- S3 listing */

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
		if (schedule_retry(set, &err, &set->list_tries, &set->list_retry_at))
			return;
		if (req->status == 404 || req->status == 403)
			err.retryable = false;
		set_fail_with(set, &err, NULL);
		return;
	}
	set->list_tries = 0;
	memset(&l, 0, sizeof(l));
	if (!req->body || !remora_s3xml_listing(req->body, req->body_len, &l))
	{
		set_fail(set, REMORA_ERR_S3, true, req->status,
				 "listing the source: the store's answer is not a listing");
		return;
	}
	for (int i = 0; i < l.nobjects && set->state == REMORA_TASK_RUNNING; i++)
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
			set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			break;
		}
		e->path = strdup(set->single ? set->file_name : o->key + plen);
		e->src_key = strdup(o->key);
		e->src_etag = malloc(REMORA_ETAG_MAX);
		if (e->src_etag)
			remora_etag_canon(o->etag, e->src_etag, REMORA_ETAG_MAX);
		e->src_lm = remora_xstrdup(o->last_modified ? o->last_modified : "");
		e->size = o->size;
		if (!e->path || !e->src_key || !e->src_etag || !e->src_lm)
		{
			entry_free(e);
			set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			break;
		}
		if (!add_entry(set, e))
			break;
		if (first == NULL && set->tail == e)
			first = e;
	}
	free(set->list_token);
	set->list_token = NULL;
	if (set->single || !l.truncated)
		set->listed = true;
	else if (l.next_token == NULL)
		set_fail(set, REMORA_ERR_S3, true, req->status,
				 "listing the source: a truncated listing had no "
				 "continuation token");
	else
		set->list_token = strdup(l.next_token);
	remora_s3xml_listing_free(&l);
	if (set->state != REMORA_TASK_RUNNING)
		return;
	if (set->single && set->listed_members == 0)
	{
		set_fail(set, REMORA_ERR_SOURCE, false, 404,
				 "the source object s3://%.200s/%.600s does not exist",
				 set->source_bucket, set->source_key);
		return;
	}
	lookup_priors(set, first);
}

static void
s3_list(RemoraSet *set)
{
	RemoraKV q[4];
	int      nq = 0;
	S3Call   call;
	char     errbuf[256];

	q[nq++] = (RemoraKV){"list-type", "2"};
	q[nq++] = (RemoraKV){"max-keys", set->single ? "1" : "1000"};
	q[nq++] = (RemoraKV){"prefix", set->source_key};
	if (set->list_token)
		q[nq++] = (RemoraKV){"continuation-token", set->list_token};
	call = (S3Call){
		"GET", set->source_bucket, NULL, q, nq, NULL, 0, NULL, 0, false, false};
	set->list_req = s3_start(set, &set->source_ep, &call, s3_list_done, errbuf,
							 sizeof(errbuf));
	if (set->list_req == NULL)
		set_fail(set, REMORA_ERR_INTERNAL, true, 0, "listing the source: %s",
				 errbuf);
}

/* ------------------------------------------------------- Hub requests */

/* A GET of the Hub's API, with the token (the hub is the admin's). */
static Request *
hub_get(RemoraSet *set, const char *url, RequestDone done)
{
	Request *req = remora_req_new(set->engine, set, done);

	if (req == NULL)
		return NULL;
	curl_easy_setopt(req->easy, CURLOPT_PROXY, "");
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
	err.retry_after = req->retry_after;
	if (rc != CURLE_OK)
	{
		err.class = REMORA_ERR_NETWORK;
		err.curl_code = rc;
		err.retryable = true;
		snprintf(err.message, sizeof(err.message), "%s: %s", what,
				 curl_easy_strerror(rc));
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
	if (schedule_retry(set, &err, &set->list_tries, &set->list_retry_at))
		return true;
	set_fail_with(set, &err, NULL);
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
		set_fail(set, REMORA_ERR_SOURCE, true, req->status,
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
			set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		snprintf(set->next_url, n, "%s/api/%ss/%s/tree/%s?recursive=true",
				 set->hub_url, set->repo_type, set->repo, set->commit);
	}
	if (!manifest_header(set))
	{
		set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
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
			entry_free(e);
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
		set_fail(set, REMORA_ERR_SOURCE, true, req->status,
				 "listing the repository: the Hub's answer is not a list");
		return;
	}
	for (const RemoraJson *f = doc->child;
		 f && set->state == REMORA_TASK_RUNNING; f = f->next)
	{
		bool   malformed = true;
		Entry *e = f->type == RJ_OBJECT ? tree_entry(f, &malformed) : NULL;

		if (malformed)
		{
			set_fail(set, REMORA_ERR_SOURCE, true, 0,
					 "listing the repository: an entry has no path, type, "
					 "oid or size, or a malformed lfs object");
			break;
		}
		if (e == NULL)
			continue;
		if (e->path == NULL || e->oid == NULL ||
			(e->lfs_sha == NULL && remora_json_get(f, "lfs") &&
			 remora_json_get(f, "lfs")->type == RJ_OBJECT))
		{
			entry_free(e);
			set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			break;
		}
		if (!add_entry(set, e))
			break;
		if (first == NULL && set->tail == e)
			first = e;
	}
	remora_json_free(doc);
	free(set->next_url);
	set->next_url = NULL;
	if (set->state != REMORA_TASK_RUNNING)
		return;
	if (req->link_next == NULL)
		set->listed = true;
	else if (!same_origin(req->link_next, set->hub_url))
	{
		set_fail(set, REMORA_ERR_SOURCE, false, 0,
				 "listing the repository: the next page is on another host");
		return;
	}
	else
		set->next_url = strdup(req->link_next);
	lookup_priors(set, first);
}

/* The next page of the listing, when the window has room for it. */
static void
list_next(RemoraSet *set)
{
	if (set->list_req || set->listed || set->state != REMORA_TASK_RUNNING)
		return;
	if (set->list_retry_at > remora_now_ms())
	{
		remora_engine_wake_at(set->engine, set->list_retry_at);
		return;
	}
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
			set_fail(set, REMORA_ERR_INTERNAL, true, 0,
					 "could not ask the Hub for the revision");
		return;
	}
	if (set->nentries + LIST_PAGE > REMORA_SET_WINDOW)
		return;
	if (set->kind == REMORA_SET_S3)
		s3_list(set);
	else
	{
		set->list_req = hub_get(set, set->next_url, tree_done);
		if (set->list_req == NULL)
			set_fail(set, REMORA_ERR_INTERNAL, true, 0,
					 "could not ask the Hub for the file list");
	}
}

/* ------------------------------------------------------------ members */

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
	char           segprefix[1200];
	char           errbuf[256];

	memset(&spec, 0, sizeof(spec));
	if (set->kind == REMORA_SET_S3)
	{
		url = remora_s3_presign_get(&set->source_cfg, set->source_bucket,
									e->src_key, time(NULL), PRESIGN_SECONDS,
									errbuf, sizeof(errbuf));
		spec.trusted_source = true;
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
		set_fail(set, REMORA_ERR_INTERNAL, true, 0, "starting a member: %s",
				 errbuf);
		return;
	}
	snprintf(segprefix, sizeof(segprefix), "%ssegments/m%06" PRId64 "-",
			 set->staging, ++set->seq);
	spec.source_url = url;
	spec.file_name = e->path;
	spec.bucket = set->bucket;
	spec.staging_prefix = set->staging;
	spec.job_id = set->job_id;
	spec.attempt_id = set->attempt_id;
	spec.fencing_token = set->fencing_token;
	spec.member_key = key;
	spec.segment_prefix = segprefix;
	spec.no_manifest = true;
	spec.expected_size = e->size;
	spec.size_known = true;
	e->child = remora_task_start(set->engine, &spec, errbuf, sizeof(errbuf));
	free(url);
	free(key);
	if (e->child == NULL)
	{
		set_fail(set, REMORA_ERR_INTERNAL, true, 0, "starting a member: %s",
				 errbuf);
		return;
	}
	e->state = E_RUNNING;
	set->running++;
}

static void
reuse_done(Request *req, CURLcode rc)
{
	Entry          *e = req->data;
	RemoraSet      *set = req->owner;
	RemoraTaskError err;
	char           *etag;

	e->copy = NULL;
	set->running--;
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
	e->state = E_DONE;
}

/* Copy the member an earlier attempt completed into this attempt's prefix. */
static void
start_reuse(RemoraSet *set, Entry *e)
{
	char  *enc = remora_uri_encode(e->prior->key, strlen(e->prior->key), true);
	size_t n = strlen(set->bucket) + (enc ? strlen(enc) : 0) + 4;
	char  *src = enc ? malloc(n) : NULL;
	Request *req = NULL;

	free(e->key);
	e->key = target_key(set, e->path);
	if (src && e->key)
	{
		RemoraKV h[2];
		S3Call   call;
		char     errbuf[256];

		snprintf(src, n, "/%s/%s", set->bucket, enc);
		h[0] = (RemoraKV){"x-amz-copy-source", src};
		h[1] = (RemoraKV){"x-amz-copy-source-if-match", e->prior->etag};
		call = (S3Call){"PUT", set->bucket, e->key, NULL,  0,    h,
						2,     NULL,        0,      false, false};
		req = s3_start(set, NULL, &call, reuse_done, errbuf, sizeof(errbuf));
	}
	free(enc);
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
	set->running++;
}

/* A member task ended: take its result, or try again, or fail the set. */
static void
reap_child(RemoraSet *set, Entry *e)
{
	RemoraTaskState st = remora_task_state(e->child);

	if (st == REMORA_TASK_RUNNING)
		return;
	set->running--;
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
			sanitized(shown, sizeof(shown), e->path);
			set_fail(set, REMORA_ERR_SOURCE, true, 412,
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
			set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		e->state = E_DONE;
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

/*
 * A member of the target store itself, copied inside the store
 * (CopyObject): the bytes are read once to hash them, and never sent back.
 * Only for objects whose ETag is the MD5 of their content (not multipart
 * uploads), so that the copy's ETag proves the copy is what was hashed,
 * also on a store that ignores x-amz-copy-source-if-match.
 */
#define COPY_OBJECT_MAX ((int64_t) 5 * 1024 * 1024 * 1024)

static bool
server_copy_fits(const RemoraSet *set, const Entry *e)
{
	return set->kind == REMORA_SET_S3 && set->same_store &&
		   e->size <= COPY_OBJECT_MAX && remora_etag_is_md5(e->src_etag);
}

/* The member changed since it was listed: the next attempt lists again. */
static void
changed(RemoraSet *set, Entry *e)
{
	char shown[300];

	sanitized(shown, sizeof(shown), e->path);
	set_fail(set, REMORA_ERR_SOURCE, true, 412,
			 "member \"%s\": the source object changed since it was listed",
			 shown);
}

/* A failed request of a member: back off and try again, or fail the set. */
static void
member_retry(RemoraSet *set, Entry *e, const RemoraTaskError *err)
{
	if (schedule_retry(set, err, &e->tries, &e->retry_at))
	{
		e->state = E_BACKOFF;
		return;
	}
	set_fail_with(set, err, e->path);
}

static void
server_copy_done(Request *req, CURLcode rc)
{
	RemoraSet      *set = req->owner;
	Entry          *e = req->data;
	RemoraTaskError err;
	char           *etag;

	e->copy = NULL;
	set->running--;
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
		set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return;
	}
	e->state = E_DONE;
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
	char           *enc, *src, *key;
	size_t          n;

	e->hash_req = NULL;
	if (remora_s3_failed(req, rc, &err, "reading the source"))
	{
		set->running--;
		if (req->status == 404 || req->status == 412)
			changed(set, e);
		else
			member_retry(set, e, &err);
		return;
	}
	if (!remora_etag_equal(req->etag, e->src_etag) || e->hbytes != e->size)
	{
		set->running--;
		changed(set, e);
		return;
	}
	remora_sha256_final_hex(e->hsha, e->sha256);
	enc = remora_uri_encode(e->src_key, strlen(e->src_key), true);
	n = strlen(set->source_bucket) + (enc ? strlen(enc) : 0) + 4;
	src = enc ? malloc(n) : NULL;
	key = target_key(set, e->path);
	if (src && key)
	{
		RemoraKV h[2];
		S3Call   call;
		char     errbuf[256];

		snprintf(src, n, "/%s/%s", set->source_bucket, enc);
		h[0] = (RemoraKV){"x-amz-copy-source", src};
		h[1] = (RemoraKV){"x-amz-copy-source-if-match", e->src_etag};
		call = (S3Call){"PUT", set->bucket, key, NULL,  0,    h,
						2,     NULL,        0,   false, false};
		e->copy = s3_start(set, NULL, &call, server_copy_done, errbuf,
						   sizeof(errbuf));
	}
	free(enc);
	free(src);
	free(key);
	if (e->copy == NULL)
	{
		set->running--;
		set_fail(set, REMORA_ERR_INTERNAL, true, 0,
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
										 e->src_key, time(NULL), PRESIGN_SECONDS,
										 errbuf, sizeof(errbuf));
	Request *req = url ? remora_req_new(set->engine, set, hash_done) : NULL;

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
	curl_easy_setopt(req->easy, CURLOPT_URL, url);
	free(url);
	req->on_data = hash_data;
	req->data = e;
	if (!remora_req_start(req))
	{
		remora_req_cancel(req);
		return;
	}
	e->hash_req = req;
	e->state = E_HASHING;
	set->running++;
}

/* Start what the concurrency cap allows, in listing order. */
static void
start_entries(RemoraSet *set)
{
	int64_t now = remora_now_ms();

	for (Entry *e = set->head; e && set->running < REMORA_SET_CONCURRENCY &&
							   set->state == REMORA_TASK_RUNNING;
		 e = e->next)
	{
		if (e->state == E_BACKOFF)
		{
			if (e->retry_at > now)
			{
				remora_engine_wake_at(set->engine, e->retry_at);
				continue;
			}
			e->state = E_WAITING;
		}
		if (e->state != E_WAITING)
			continue;
		if (e->prior)
			start_reuse(set, e);
		if (e->state == E_WAITING && server_copy_fits(set, e))
			start_server_copy(set, e);
		if (e->state == E_WAITING)
			start_child(set, e);
	}
}

/* ----------------------------------------------------------- manifest */

/*
 * The manifest goes up in parts of S3's smallest size (or the engine's part
 * size when that is smaller, as in tests): its unsent text is what a set
 * holds in memory, whatever remora.part_size is.
 */
#define MANIFEST_PART_MAX ((size_t) 5 * 1024 * 1024)

static size_t
manifest_part(const RemoraSet *set)
{
	return set->engine->part_size < MANIFEST_PART_MAX ? set->engine->part_size
													  : MANIFEST_PART_MAX;
}

static bool
mappend(RemoraSet *set, const char *s, size_t n)
{
	if (set->mlen + n + 1 > set->mcap)
	{
		size_t cap = set->mcap ? set->mcap : 65536;
		char  *nb;

		while (set->mlen + n + 1 > cap)
			cap *= 2;
		nb = realloc(set->mbuf, cap);
		if (nb == NULL)
			return false;
		set->mbuf = nb;
		set->mcap = cap;
	}
	memcpy(set->mbuf + set->mlen, s, n);
	set->mlen += n;
	set->mbuf[set->mlen] = '\0';
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
	char            *src = source_json(set, e);
	RemoraBuf        line = {0};
	bool             ok = false;

	if (set->ncpq == set->cpq_cap)
	{
		int              cap = set->cpq_cap ? set->cpq_cap * 2 : 64;
		RemoraSetMember *nq = realloc(set->cpq, cap * sizeof(*nq));

		if (nq == NULL)
			goto done;
		set->cpq = nq;
		set->cpq_cap = cap;
	}
	if (src == NULL ||
		!remora_manifest_member(&line, e->path, e->key, e->size, e->sha256,
								e->etag, src, e->reused) ||
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

static void
pop_done(RemoraSet *set)
{
	while (set->head && set->state == REMORA_TASK_RUNNING &&
		   set->ncpq < CHECKPOINT_QUEUE_MAX &&
		   set->mlen < 2 * manifest_part(set) && set->head->state == E_DONE)
	{
		Entry *e = set->head;

		if (!emit_member(set, e))
		{
			set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		set->head = e->next;
		if (set->head == NULL)
			set->tail = NULL;
		set->nentries--;
		entry_free(e);
	}
}

static void
mpart_done(Request *req, CURLcode rc)
{
	RemoraSet      *set = req->owner;
	RemoraTaskError err;
	char          **pe;

	set->mreq = NULL;
	free(set->part_body);
	set->part_body = NULL;
	if (remora_s3_failed(req, rc, &err, "writing the manifest"))
	{
		set_fail_with(set, &err, NULL);
		return;
	}
	pe = realloc(set->part_etags, (set->nparts + 1) * sizeof(char *));
	if (pe == NULL || req->etag[0] == '\0')
	{
		if (pe)
			set->part_etags = pe;
		set_fail(set, REMORA_ERR_S3, true, req->status,
				 "writing the manifest: no ETag for a part");
		return;
	}
	set->part_etags = pe;
	set->part_etags[set->nparts] = malloc(REMORA_ETAG_MAX);
	if (set->part_etags[set->nparts] == NULL)
	{
		set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return;
	}
	remora_etag_canon(req->etag, set->part_etags[set->nparts++],
					  REMORA_ETAG_MAX);
}

static void
minit_done(Request *req, CURLcode rc)
{
	RemoraSet      *set = req->owner;
	RemoraTaskError err;

	set->mreq = NULL;
	if (remora_s3_failed(req, rc, &err, "starting the manifest upload"))
	{
		set_fail_with(set, &err, NULL);
		return;
	}
	set->upload_id = req->body ? remora_s3xml_text(req->body, req->body_len,
												   "UploadId", NULL)
							   : NULL;
	if (set->upload_id == NULL)
		set_fail(set, REMORA_ERR_S3, true, req->status,
				 "starting the manifest upload: no UploadId");
}

/* The manifest object is complete in the store, with this ETag. */
static void
manifest_written(RemoraSet *set, const char *etag)
{
	if (set->upload_id &&
		!remora_etag_fits_parts(etag, (const char *const *) set->part_etags,
								set->nparts))
	{
		set_fail(set, REMORA_ERR_S3, true, 0,
				 "completing the manifest upload: its ETag %s is not that of "
				 "the parts sent",
				 etag);
		return;
	}
	snprintf(set->result.manifest_etag, sizeof(set->result.manifest_etag), "%s",
			 etag);
	set->phase = S_DONE;
	set->state = REMORA_TASK_SUCCEEDED;
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
		set_fail_with(set, &err, NULL);
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
	if (remora_s3_failed(req, rc, &err, "writing the manifest"))
	{
		set_fail_with(set, &err, NULL);
		return;
	}
	if (set->upload_id == NULL)
	{
		char canon[REMORA_ETAG_MAX];

		remora_etag_canon(req->etag, canon, sizeof(canon));
		if (canon[0] == '\0')
			set_fail(set, REMORA_ERR_S3, true, req->status,
					 "writing the manifest: the store answered no ETag");
		else
			manifest_written(set, canon);
		return;
	}
	etag = remora_s3_answer_etag(req, "CompleteMultipartUploadResult", &err,
								 "completing the manifest upload");
	if (etag == NULL)
		set_fail_with(set, &err, NULL);
	else if (etag[0] != '\0')
		manifest_written(set, etag);
	else
	{
		S3Call call = {"HEAD", set->bucket, set->result.manifest_key,
					   NULL,   0,           NULL,
					   0,      NULL,        0,
					   false,  true};

		set->mreq =
			s3_start(set, NULL, &call, mhead_done, errbuf, sizeof(errbuf));
		if (set->mreq == NULL)
			set_fail(set, REMORA_ERR_INTERNAL, true, 0,
					 "reading the manifest object: %s", errbuf);
	}
	free(etag);
}

/* Send a full part of the manifest, or when finishing, the rest. */
static void
manifest_flush(RemoraSet *set)
{
	S3Call   call;
	RemoraKV q[2];
	char     partno[16];
	char     errbuf[256];
	bool     last = set->phase == S_FINISH;
	size_t   n;

	if (set->mreq || set->state != REMORA_TASK_RUNNING)
		return;
	if (!last && set->mlen < manifest_part(set))
		return;
	if (last && set->upload_id == NULL)
	{
		/* the whole manifest fits one PUT */
		set->part_body = set->mbuf;
		n = set->mlen;
		set->mbuf = NULL;
		set->mlen = set->mcap = 0;
		call =
			(S3Call){"PUT", set->bucket, set->result.manifest_key, NULL, 0,
					 NULL,  0,           set->part_body,           n,    false,
					 false};
		set->mreq =
			s3_start(set, NULL, &call, mfinal_done, errbuf, sizeof(errbuf));
	}
	else if (set->upload_id == NULL)
	{
		q[0] = (RemoraKV){"uploads", ""};
		call = (S3Call){"POST", set->bucket, set->result.manifest_key,
						q,      1,           NULL,
						0,      NULL,        0,
						false,  false};
		set->mreq =
			s3_start(set, NULL, &call, minit_done, errbuf, sizeof(errbuf));
	}
	else if (set->mlen > 0 && (set->mlen >= manifest_part(set) || last))
	{
		n = set->mlen < manifest_part(set) || last ? set->mlen
												   : manifest_part(set);
		set->part_body = malloc(n);
		if (set->part_body == NULL)
		{
			set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		memcpy(set->part_body, set->mbuf, n);
		memmove(set->mbuf, set->mbuf + n, set->mlen - n);
		set->mlen -= n;
		snprintf(partno, sizeof(partno), "%d", set->nparts + 1);
		q[0] = (RemoraKV){"partNumber", partno};
		q[1] = (RemoraKV){"uploadId", set->upload_id};
		call = (S3Call){"PUT", set->bucket, set->result.manifest_key, q, 2,
						NULL,  0,           set->part_body,           n, false,
						false};
		set->mreq =
			s3_start(set, NULL, &call, mpart_done, errbuf, sizeof(errbuf));
	}
	else if (last)
	{
		size_t len;

		q[0] = (RemoraKV){"uploadId", set->upload_id};
		set->part_body = remora_s3xml_complete_body(
			(const char *const *) set->part_etags, set->nparts, &len);
		if (set->part_body == NULL)
		{
			set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
			return;
		}
		call =
			(S3Call){"POST", set->bucket, set->result.manifest_key, q,   1,
					 NULL,   0,           set->part_body,           len, false,
					 false};
		set->mreq =
			s3_start(set, NULL, &call, mfinal_done, errbuf, sizeof(errbuf));
	}
	else
		return;
	if (set->mreq == NULL)
		set_fail(set, REMORA_ERR_INTERNAL, true, 0, "writing the manifest: %s",
				 errbuf);
}

static bool
manifest_header(RemoraSet *set)
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
static void
finish(RemoraSet *set)
{
	RemoraBuf line = {0};
	bool      ok;

	if (set->members_done == 0)
	{
		set_fail(set, REMORA_ERR_SOURCE, false, 0, "%s",
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
		set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return;
	}
	remora_sha256_final_hex(set->msha, set->result.manifest_sha256);
	set->result.members = set->members_done;
	set->result.bytes = set->bytes_done;
	set->result.members_reused = set->members_reused;
	set->phase = S_FINISH;
}

/* ------------------------------------------------------------ the set */

void
remora_set_pump(RemoraSet *set)
{
	if (set->state != REMORA_TASK_RUNNING)
		return;
	for (Entry *e = set->head; e && set->state == REMORA_TASK_RUNNING;
		 e = e->next)
		if (e->state == E_RUNNING)
			reap_child(set, e);
	if (set->phase == S_RESOLVE)
	{
		list_next(set);
		return;
	}
	if (set->phase == S_LIST)
	{
		pop_done(set);
		list_next(set);
		start_entries(set);
		if (set->listed && set->head == NULL &&
			set->state == REMORA_TASK_RUNNING && set->mreq == NULL)
			finish(set);
	}
	manifest_flush(set);
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
		set->src_endpoint = remora_xstrdup(spec->source_store->endpoint);
		set->src_region = remora_xstrdup(spec->source_store->region);
		set->src_akid = remora_xstrdup(spec->source_store->access_key_id);
		set->src_secret = remora_xstrdup(spec->source_store->secret_access_key);
		set->source_ep = (S3Endpoint){set->src_base_url,
									  set->src_host,
									  https,
									  spec->source_store->path_style,
									  set->src_region,
									  set->src_akid,
									  set->src_secret};
		set->source_cfg = (RemoraTargetConfig){
			set->src_endpoint, set->src_region, spec->source_store->path_style,
			set->src_akid, set->src_secret};
	}
	else
	{
		set->same_store = true;
		set->source_ep = (S3Endpoint){
			engine->base_url,         engine->host,   engine->https,
			engine->path_style,       engine->region, engine->access_key_id,
			engine->secret_access_key};
		set->source_cfg = (RemoraTargetConfig){
			engine->base_url, engine->region, engine->path_style,
			engine->access_key_id, engine->secret_access_key};
	}
	return set->source_bucket && set->source_key &&
		   (!set->single || set->file_name);
}

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
	set->engine = engine;
	set->kind = spec->kind;
	set->state = REMORA_TASK_RUNNING;
	set->phase = spec->kind == REMORA_SET_HF ? S_RESOLVE : S_LIST;
	set->display = remora_xstrdup(spec->display);
	set->bucket = remora_xstrdup(spec->bucket);
	set->staging = remora_xstrdup(spec->staging_prefix);
	set->attempt_id = remora_xstrdup(spec->attempt_id);
	set->job_id = spec->job_id;
	set->fencing_token = spec->fencing_token;
	set->prior = spec->prior;
	set->prior_arg = spec->prior_arg;
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
	if (ok && set->kind == REMORA_SET_S3 && !manifest_header(set))
		ok = false;
	if (ok)
		set->shell = remora_task_shell(engine, set);
	if (!ok || set->shell == NULL)
	{
		remora_set_free(set);
		return NULL;
	}
	remora_set_pump(set);
	return set->shell;
}

RemoraTaskState
remora_set_state(const RemoraSet *set)
{
	return set->state;
}

void
remora_set_progress(const RemoraSet *set, int64_t *done, int64_t *total)
{
	int64_t d = set->bytes_done;

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
bool
remora_set_checkpoint(RemoraSet *set, RemoraTaskCheckpoint *out)
{
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
	remora_set_progress(set, &out->bytes_done, &out->bytes_total);
	return true;
}

const RemoraTaskResult *
remora_set_result(const RemoraSet *set)
{
	return &set->result;
}

const RemoraTaskError *
remora_set_error(const RemoraSet *set)
{
	return &set->error;
}

void
remora_set_abort(RemoraSet *set)
{
	if (set->list_req)
		remora_req_cancel(set->list_req);
	set->list_req = NULL;
	if (set->mreq)
		remora_req_cancel(set->mreq);
	set->mreq = NULL;
	for (Entry *e = set->head; e; e = e->next)
	{
		if (e->child)
			remora_task_abort(e->child, false);
		if (e->copy)
			remora_req_cancel(e->copy);
		e->copy = NULL;
		if (e->hash_req)
			remora_req_cancel(e->hash_req);
		e->hash_req = NULL;
	}
	if (set->state == REMORA_TASK_RUNNING)
		set->state = REMORA_TASK_ABORTED;
}

void
remora_set_free(RemoraSet *set)
{
	remora_set_abort(set);
	while (set->head)
	{
		Entry *e = set->head;

		set->head = e->next;
		if (e->child)
			remora_task_free(e->child);
		entry_free(e);
	}
	free_members(set->cpq, set->ncpq);
	free(set->cpq);
	free_members(set->cp_out, set->ncp_out);
	free(set->cp_out);
	for (int i = 0; i < set->nparts; i++)
		free(set->part_etags[i]);
	free(set->part_etags);
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
	free(set->mbuf);
	free(set->part_body);
	free(set->upload_id);
	free(set->list_token);
	free(set->next_url);
	free(set->display);
	free(set->source_bucket);
	free(set->source_key);
	free(set->file_name);
	free(set->src_base_url);
	free(set->src_host);
	free(set->src_endpoint);
	free(set->src_region);
	free(set->src_akid);
	free(set->src_secret);
	free(set->hub_url);
	free(set->hub_host);
	free(set->repo_type);
	free(set->repo);
	free(set->revision);
	free(set->auth_header);
	free(set->bucket);
	free(set->staging);
	free(set->attempt_id);
	free(set);
}
