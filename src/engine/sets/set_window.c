/*-------------------------------------------------------------------------
 *
 * set_window.c
 *	  A set's window of listed entries: what enters it (a member path that
 *	  is safe and short enough, selected by the include and exclude
 *	  patterns, not seen before), the lookup of each listed page, and the
 *	  failure of the set, which stops everything in the window.
 *
 * Duplicates are told by 64-bit hashes of member paths and their contents,
 * keyed with a random key of the set's, so that a source cannot name two
 * members whose hashes collide (one would be taken for the other).  The
 * same path with the same content is counted once; with other content it
 * fails the set.
 *
 *-------------------------------------------------------------------------
 */
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "engine/sets/set.h"
#include "engine/common/source_uri.h"

/* A member path as an error message may show it: printable ASCII only. */
void
remora_set_shown(char *out, size_t outlen, const char *s)
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

void
remora_set_entry_free(Entry *e)
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

/* Fail the set for a listed member's path (shown escaped); frees e. */
static bool
refuse(RemoraSet *set, Entry *e, const char *before, const char *after)
{
	char shown[300];

	remora_set_shown(shown, sizeof(shown), e->path);
	remora_set_entry_free(e);
	remora_set_fail(set, REMORA_ERR_SOURCE, false, 0, "%s\"%s\"%s", before,
					shown, after);
	return false;
}

/*
 * Add a listed member to the window.  Returns false when the set failed
 * (a bad path, a conflict).
 */
bool
remora_set_add_entry(RemoraSet *set, Entry *e)
{
	char content[400];
	int  dup;

	if (!remora_member_path_valid(e->path))
		return refuse(set, e,
					  "the source lists a member path that cannot be used "
					  "safely: ",
					  " (absolute, empty, \".\" or \"..\" segments, "
					  "backslashes and control characters are refused)");
	if (!selected(set, e->path))
	{
		remora_set_entry_free(e);
		return true;
	}
	if (strlen(set->staging) + strlen("data/") + strlen(e->path) >
		REMORA_MAX_S3_KEY_LEN)
	{
		char after[100];

		snprintf(after, sizeof(after),
				 " is too long: its key in the target store would be longer "
				 "than %d bytes",
				 REMORA_MAX_S3_KEY_LEN);
		return refuse(set, e, "the member path ", after);
	}
	snprintf(content, sizeof(content), "%" PRId64 "/%s/%s", e->size,
			 e->src_etag ? e->src_etag : "", e->oid ? e->oid : "");
	dup = seen_add(set, e->path, content);
	if (dup == -2)
	{
		remora_set_entry_free(e);
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return false;
	}
	if (dup == -1)
		return refuse(set, e,
					  "two source objects with different content map to the "
					  "member path ",
					  "");
	if (dup == 1)
	{
		set->duplicates++;
		remora_set_entry_free(e);
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
 * A listing's next entry, complete (false: a copy of one of its strings
 * failed): into the window, with *first the page's first new entry.  False
 * when the listing must stop (the set failed).
 */
bool
remora_set_take_listed(RemoraSet *set, Entry *e, bool complete, Entry **first)
{
	if (!complete)
	{
		remora_set_entry_free(e);
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return false;
	}
	if (!remora_set_add_entry(set, e))
		return false;
	if (*first == NULL && set->tail == e)
		*first = e;
	return true;
}

/* ---------------------------------------------------------- failures */

void
remora_set_fail(RemoraSet *set, const char *class, bool retryable,
				long http_status, const char *fmt, ...)
{
	va_list ap;

	if (set->status.state != REMORA_TASK_RUNNING)
		return;
	va_start(ap, fmt);
	remora_vfail(&set->status, class, retryable, http_status, fmt, ap);
	va_end(ap);
	remora_set_stop(set); /* the rest: the state stays failed */
}

/*
 * A retryable failure with tries left: when to try again (at least the
 * answer's Retry-After), and a wake-up then.  False when it is final.
 */
bool
remora_set_retry_at(RemoraSet *set, const RemoraTaskError *err, int *tries,
					int64_t *at)
{
	int64_t wait;

	if (!err->retryable || ++*tries >= REMORA_SET_TRIES)
		return false;
	wait = RETRY_BASE_MS << *tries;
	if (err->retry_after > 0 && err->retry_after * 1000 > wait)
		wait = err->retry_after * 1000;
	*at = remora_now_ms() + wait;
	remora_loop_wake_at(&set->base.engine->loop, *at);
	return true;
}

void
remora_set_fail_with(RemoraSet *set, const RemoraTaskError *err,
					 const char *path)
{
	char msg[sizeof(err->message)];

	if (set->status.state != REMORA_TASK_RUNNING)
		return;
	if (path)
	{
		char shown[300];

		remora_set_shown(shown, sizeof(shown), path);
		snprintf(msg, sizeof(msg), "member \"%.150s\": %.340s", shown,
				 err->message);
	}
	else
		snprintf(msg, sizeof(msg), "%s", err->message);
	remora_set_fail(set, err->class, err->retryable, err->http_status, "%s",
					msg);
	set->status.error.curl_code = err->curl_code;
	set->status.error.retry_after = err->retry_after;
	snprintf(set->status.error.s3_code, sizeof(set->status.error.s3_code), "%s",
			 err->s3_code);
	remora_utf8_scrub(set->status.error.s3_code);
}

/*
 * Stop every request and member (on failure or abort); the state stays
 * failed, or becomes aborted.  A lookup the host holds stays valid until
 * it is handed back (or the job is aborted or freed, see engine.c).
 */
void
remora_set_stop(RemoraSet *set)
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
	if (set->status.state == REMORA_TASK_RUNNING)
		set->status.state = REMORA_TASK_ABORTED;
}

/* ------------------------------------------------------------- lookups */

void
remora_set_drop_lookup(RemoraSet *set)
{
	free(set->lookup_entries);
	free(set->lookup_paths);
	set->lookup_entries = NULL;
	set->lookup_paths = NULL;
	set->lookup = NULL;
	set->lookup_first = NULL;
}

/*
 * The host answered which of the page's entries an earlier attempt
 * completed: keep those whose validators still match, to be copied instead
 * of transferred.
 */
static void
lookup_answered(RemoraTask *t, RemoraLookup *lookup, bool ok)
{
	RemoraSet *set = (RemoraSet *) t;

	(void) ok; /* not ok: out is zeroed, nothing found */

	for (int i = 0; i < lookup->n && set->status.state == REMORA_TASK_RUNNING;
		 i++)
	{
		Entry       *e = set->lookup_entries[i];
		RemoraPrior *p = &lookup->out[i];
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
	remora_set_drop_lookup(set);
}

/*
 * A page was listed, its first new entry `first`: ask the host which of
 * its entries an earlier attempt completed.  Those entries wait until the
 * answer (remora_set_start_entries stops at lookup_first).
 */
void
remora_set_listed_page(RemoraSet *set, Entry *first)
{
	int n = 0;

	if (!set->earlier_attempts || first == NULL ||
		set->status.state != REMORA_TASK_RUNNING)
		return;
	for (Entry *e = first; e; e = e->next)
		n++;
	set->lookup_entries = calloc(n, sizeof(Entry *));
	set->lookup_paths = calloc(n, sizeof(char *));
	if (set->lookup_entries != NULL && set->lookup_paths != NULL)
	{
		int i = 0;

		for (Entry *e = first; e; e = e->next, i++)
		{
			set->lookup_entries[i] = e;
			set->lookup_paths[i] = e->path;
		}
		set->lookup = remora_lookup_queue(
			set->base.engine, &set->base, set->host_arg,
			(const char *const *) set->lookup_paths, n, lookup_answered);
	}
	if (set->lookup == NULL)
		remora_set_drop_lookup(set); /* nothing reused: still correct */
	else
		set->lookup_first = first;
}
