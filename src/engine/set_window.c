/*-------------------------------------------------------------------------
 *
 * set_window.c
 *	  What enters a set's window: listed entries whose member path is safe
 *	  and short enough, selected by the include and exclude patterns, and
 *	  not seen before.
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
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "engine/set.h"
#include "engine/source_uri.h"

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
	{
		char shown[300];

		remora_set_shown(shown, sizeof(shown), e->path);
		remora_set_entry_free(e);
		remora_set_fail(
			set, REMORA_ERR_SOURCE, false, 0,
			"the source lists a member path that cannot be used safely: "
			"\"%s\" (absolute, empty, \".\" or \"..\" segments, "
			"backslashes and control characters are refused)",
			shown);
		return false;
	}
	if (!selected(set, e->path))
	{
		remora_set_entry_free(e);
		return true;
	}
	if (strlen(set->staging) + strlen("data/") + strlen(e->path) >
		REMORA_MAX_S3_KEY_LEN)
	{
		char shown[300];

		remora_set_shown(shown, sizeof(shown), e->path);
		remora_set_entry_free(e);
		remora_set_fail(
			set, REMORA_ERR_SOURCE, false, 0,
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
		remora_set_entry_free(e);
		remora_set_fail(set, REMORA_ERR_INTERNAL, true, 0, "out of memory");
		return false;
	}
	if (dup == -1)
	{
		char shown[300];

		remora_set_shown(shown, sizeof(shown), e->path);
		remora_set_entry_free(e);
		remora_set_fail(set, REMORA_ERR_SOURCE, false, 0,
						"two source objects with different content map to the "
						"member path \"%s\"",
						shown);
		return false;
	}
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
