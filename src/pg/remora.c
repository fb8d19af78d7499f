/*-------------------------------------------------------------------------
 *
 * remora.c
 *	  Module initialisation.
 *
 * Remora must be loaded through shared_preload_libraries: its GUCs are
 * read by the postmaster, which also reserves its shared memory and
 * starts its launcher.  Loading it any other way is refused
 * with a hint that says how to fix it.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/elog.h"
#include "utils/memutils.h"

#include <curl/curl.h>

#include "pg/shmem.h"
#include "pg/worker.h"

PG_MODULE_MAGIC;

void _PG_init(void);

static emit_log_hook_type prev_emit_log_hook = NULL;

/* s with every occurrence of secret replaced, in the current context */
static char *
redact(char *s, const char *secret)
{
	StringInfoData buf;
	const char    *p = s;
	const char    *hit;
	size_t         n = strlen(secret);

	if (s == NULL || (hit = strstr(s, secret)) == NULL)
		return s;
	initStringInfo(&buf);
	while (hit)
	{
		appendBinaryStringInfo(&buf, p, hit - p);
		appendStringInfoString(&buf, "(redacted)");
		p = hit + n;
		hit = strstr(p, secret);
	}
	appendStringInfoString(&buf, p);
	return buf.data;
}

/*
 * The target's secret and the Hub token never reach the server log, whoever
 * writes the message: PostgreSQL itself logs "parameter ... changed to ..."
 * when the configuration is reloaded.  Every process has this hook (the library
 * is preloaded).
 */
static void
redact_secrets(ErrorData *edata)
{
	const char *secrets[2] = {remora_s3_secret_access_key, remora_hf_token};

	for (int i = 0; i < 2; i++)
	{
		const char   *secret = secrets[i];
		MemoryContext old;

		if (secret == NULL || strlen(secret) < 4)
			continue;
		old = MemoryContextSwitchTo(ErrorContext);
		edata->message = redact(edata->message, secret);
		edata->detail = redact(edata->detail, secret);
		edata->detail_log = redact(edata->detail_log, secret);
		edata->hint = redact(edata->hint, secret);
		edata->context = redact(edata->context, secret);
		MemoryContextSwitchTo(old);
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("remora must be loaded via shared_preload_libraries"),
				 errhint("Add remora to shared_preload_libraries in "
						 "postgresql.conf and restart the server.")));

	/*
	 * libcurl's global state is set up once in the postmaster, before any
	 * thread could exist, and inherited by every backend and worker.
	 */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		ereport(ERROR, (errcode(ERRCODE_SYSTEM_ERROR),
						errmsg("could not initialize libcurl")));

	remora_define_gucs();
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = redact_secrets;
	remora_shmem_init();
	remora_xact_init();
	remora_register_launcher();
}
