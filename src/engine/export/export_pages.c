/*-------------------------------------------------------------------------
 *
 * export_pages.c
 *	  An export's members, a page at a time from its host (a lookup of
 *	  kind REMORA_LOOKUP_EXPORT_PAGE, keyset by path): the next page is
 *	  asked for when the newest has no more members left to start than run
 *	  at once, at most two pages are held, and a page is freed once every
 *	  member of it is started and answered.  So an export's memory does not
 *	  grow with its member count.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/export/export_int.h"

void
remora_export_page_free(Page *pg)
{
	for (int i = 0; i < pg->n; i++)
	{
		Member *mb = &pg->members[i];

		remora_export_member_free(&mb->m);
		free(mb->target);
		remora_sha256_free(mb->hsha);
		remora_mpu_forget(&mb->mpu);
		remora_copy_guard_reset(&mb->guard);
	}
	free(pg->members);
	free(pg);
}

/* Free the oldest pages whose members are all started and idle. */
void
remora_export_pages_release(Export *x)
{
	while (x->oldest)
	{
		Page *pg = x->oldest;

		while (pg->idle < pg->next && pg->members[pg->idle].req == NULL)
			pg->idle++;
		if (pg->idle < pg->n)
			return;
		x->oldest = pg->newer;
		if (x->newest == pg)
			x->newest = NULL;
		x->npages--;
		remora_export_page_free(pg);
	}
}

static void
page_answered(RemoraTask *t, RemoraLookup *lookup, bool ok)
{
	Export             *x = (Export *) t;
	int                 asked = lookup->max;
	int                 n;
	RemoraExportMember *got = remora_lookup_take_members(lookup, &n);
	Page               *pg = NULL;

	x->lookup = NULL;
	if (ok && n == asked)
	{
		pg = calloc(1, sizeof(Page));
		if (pg)
			pg->members = calloc((size_t) n, sizeof(Member));
		if (pg && pg->members == NULL)
		{
			free(pg);
			pg = NULL;
		}
	}
	for (int i = 0; i < n; i++)
	{
		Member *mb;
		size_t  len;

		if (pg == NULL)
		{
			remora_export_member_free(&got[i]);
			continue;
		}
		mb = &pg->members[pg->n++];
		mb->m = got[i]; /* its strings move into the page */
		len = strlen(x->prefix) + strlen(mb->m.path) + 2;
		mb->target = malloc(len);
		if (mb->target)
			snprintf(mb->target, len, "%s%s%s", x->prefix,
					 x->prefix[0] ? "/" : "", mb->m.path);
		else
			ok = false;
	}
	free(got);
	if (pg != NULL && ok)
	{
		char *after = strdup(pg->members[n - 1].m.path);

		if (after != NULL)
		{
			free(x->after);
			x->after = after;
		}
		ok = after != NULL;
	}
	if (pg == NULL || !ok)
	{
		if (pg)
			remora_export_page_free(pg);
		if (ok && n != asked)
			remora_export_note_failuref(
				x, REMORA_ERR_INTERNAL, true, 0,
				"the database handed out %d of the %d members asked for "
				"after %lld of %lld (the attempt may have lost its authority)",
				n, asked, (long long) x->received, (long long) x->total);
		else
			remora_export_note_failuref(
				x, REMORA_ERR_INTERNAL, true, 0,
				"the export's members after %lld of %lld could not be read",
				(long long) x->received, (long long) x->total);
		return;
	}
	if (x->newest)
		x->newest->newer = pg;
	else
		x->oldest = pg;
	x->newest = pg;
	x->npages++;
	x->received += n;
	/* (the engine pumps the export at its next run) */
}

/*
 * Ask for the next page in time: when the newest page has no more members
 * to start than run at once, and fewer than two pages are held.
 */
void
remora_export_pages_ask(Export *x)
{
	int64_t left = x->total - x->received;
	int     max = left < REMORA_EXPORT_PAGE ? (int) left : REMORA_EXPORT_PAGE;

	if (x->lookup || left <= 0 || x->stopping || x->npages >= 2 ||
		(x->newest &&
		 x->newest->n - x->newest->next > REMORA_EXPORT_CONCURRENCY))
		return;
	x->lookup = remora_lookup_queue_page(x->base.engine, &x->base, x->host_arg,
										 x->after, max, page_answered);
	if (x->lookup == NULL)
		remora_export_note_failuref(x, REMORA_ERR_INTERNAL, true, 0,
									"out of memory");
}

/* The next member to start, in order, or NULL. */
Member *
remora_export_next_member(Export *x)
{
	for (Page *pg = x->oldest; pg; pg = pg->newer)
		if (pg->next < pg->n)
			return &pg->members[pg->next++];
	return NULL;
}
