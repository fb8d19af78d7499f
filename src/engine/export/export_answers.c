/*-------------------------------------------------------------------------
 *
 * export_answers.c
 *	  An export's record of each member's answer: conclusive answers
 *	  queued for the next checkpoint, the first failure (which stops new
 *	  starts) and copies without a conclusive answer (the export ends
 *	  outcome_unknown).
 *
 * The lowest of the export's files: export.c, export_pages.c and
 * export_parts.c all record answers here, and it calls none of them.
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/export/export_int.h"

/* Record a failure; the first one is what the export reports. */
void
remora_export_note_failure(Export *x, const RemoraTaskError *err)
{
	if (!x->has_first && !x->ambiguous)
	{
		x->first = *err;
		x->has_first = true;
	}
	x->stopping = true;
}

/*
 * A copy without a conclusive answer: the export will end outcome_unknown,
 * but the other members are independent keys, so dispatch goes on and
 * every other member gets its conclusive answer.
 */
void
remora_export_note_ambiguous(Export *x, const Member *mb, RemoraTaskError *err)
{
	char what[sizeof(err->message)];

	snprintf(what, sizeof(what), "%s", err->message);
	snprintf(err->message, sizeof(err->message), "%.200s: %.300s", mb->target,
			 what);
	err->class = REMORA_ERR_OUTCOME_UNKNOWN;
	err->retryable = false;
	if (!x->ambiguous)
	{
		x->first = *err;
		x->has_first = true;
	}
	x->ambiguous = true;
}

void
remora_export_note_failuref(Export *x, const char *class, bool retryable,
							long status, const char *fmt, ...)
{
	RemoraTaskError err;
	va_list         ap;

	va_start(ap, fmt);
	remora_error_vset(&err, class, retryable, status, fmt, ap);
	va_end(ap);
	remora_export_note_failure(x, &err);
}

/* A conclusive answer for a member: queue it for the next checkpoint. */
void
remora_export_conclude(Export *x, Member *mb, const char *etag,
					   const char *version, const char *outcome)
{
	RemoraExportRef *r;
	RemoraExportRef *grown =
		realloc(x->refs, (size_t) (x->nrefs + 1) * sizeof(RemoraExportRef));

	mb->state = M_DONE;
	x->finished++;
	x->bytes_done += mb->m.size;
	if (grown == NULL)
	{
		remora_export_note_failuref(x, REMORA_ERR_INTERNAL, true, 0,
									"out of memory");
		return;
	}
	x->refs = grown;
	r = &x->refs[x->nrefs];
	memset(r, 0, sizeof(*r));
	r->path = strdup(mb->m.path);
	r->key = strdup(mb->target);
	remora_etag_canon(etag, r->etag, sizeof(r->etag));
	snprintf(r->version_id, sizeof(r->version_id), "%s",
			 version ? version : "");
	remora_utf8_scrub(r->version_id);
	r->size = mb->m.size;
	r->outcome = outcome;
	if (r->path == NULL || r->key == NULL)
	{
		free(r->path);
		free(r->key);
		remora_export_note_failuref(x, REMORA_ERR_INTERNAL, true, 0,
									"out of memory");
		return;
	}
	x->nrefs++;
}

/* Was the request certainly never sent (nothing reached the store)? */
bool
remora_export_never_sent(CURLcode rc)
{
	return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
		   rc == CURLE_COULDNT_RESOLVE_PROXY;
}
