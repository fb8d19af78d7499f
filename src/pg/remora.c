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
#include "parser/analyze.h"
#include "pgstat.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/elog.h"
#include "utils/memutils.h"

#include <curl/curl.h>

#include "pg/guc.h"
#include "pg/httpd.h"
#include "pg/launcher.h"
#include "pg/leases.h"
#include "pg/metricsd.h"
#include "pg/shmem.h"

PG_MODULE_MAGIC;

void _PG_init(void);

static emit_log_hook_type           prev_emit_log_hook = NULL;
static post_parse_analyze_hook_type prev_post_parse_analyze_hook = NULL;

/* a redacted copy of the statement being logged (see redact_secrets) */
static char *redacted_statement = NULL;

/* Does s name something of Remora's (remora_submit, remora.*, ...)? */
static bool
mentions_remora(const char *s)
{
	return s != NULL && strcasestr(s, "remora") != NULL;
}

/*
 * s with the query string of every URL in it replaced by "?(redacted)"
 * (presigned sources carry their signature there), in the current context;
 * NULL when there is none.  A statement that calls
 * remora.register_source_endpoint carries a secret key among its
 * arguments: it is replaced as a whole, and so is one that sets an egress
 * proxy with credentials (ALTER SYSTEM SET remora.https_proxy = ...).  The
 * field of a message keeps its text, but for its URLs' query strings: it
 * goes to the client too.
 */
static char *
redact_urls(const char *s, bool statement)
{
	StringInfoData buf;
	const char    *p = s;
	bool           changed = false;

	if (s == NULL)
		return NULL;
	if (statement && strcasestr(s, "register_source_endpoint") != NULL)
		return pstrdup("(a call of remora.register_source_endpoint, "
					   "hidden: it may carry credentials)");
	if (statement &&
		(strcasestr(s, "http_proxy") != NULL ||
		 strcasestr(s, "https_proxy") != NULL) &&
		strchr(s, '@') != NULL)
		return pstrdup("(a statement that names an egress proxy with "
					   "credentials, hidden)");
	initStringInfo(&buf);
	while (*p)
	{
		const char *scheme = strstr(p, "://");
		const char *q;
		size_t      url_end;

		if (scheme == NULL)
			break;
		/* the URL runs to a quote, a space or a closing parenthesis */
		url_end = strcspn(scheme, "'\" \t\r\n)");
		q = memchr(scheme, '?', url_end);
		if (q == NULL)
		{
			appendBinaryStringInfo(&buf, p, scheme + url_end - p);
			p = scheme + url_end;
			continue;
		}
		appendBinaryStringInfo(&buf, p, q - p);
		appendStringInfoString(&buf, "?(redacted)");
		p = scheme + url_end;
		changed = true;
	}
	appendStringInfoString(&buf, p);
	if (!changed)
	{
		pfree(buf.data);
		return NULL;
	}
	return buf.data;
}

/* s with its URLs' query strings redacted, or s itself if it has none */
static char *
redact_or_keep(char *s)
{
	char *r = redact_urls(s, false);

	return r ? r : s;
}

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
 * The user information of a proxy URL ("user:password") and its password
 * alone, copied into the two buffers ("" when there is none).
 */
static void
proxy_secrets(const char *url, char *userinfo, char *password, size_t len)
{
	const char *start = url ? strstr(url, "://") : NULL;
	const char *at;
	const char *colon;

	userinfo[0] = password[0] = '\0';
	if (start == NULL || (at = strchr(start + 3, '@')) == NULL)
		return;
	start += 3;
	snprintf(userinfo, len, "%.*s", (int) (at - start), start);
	colon = memchr(start, ':', at - start);
	if (colon)
		snprintf(password, len, "%.*s", (int) (at - colon - 1), colon + 1);
}

/*
 * The target's secret and session token, the SSE-C key, the Hub token and
 * proxy credentials never reach the server log, whoever writes the
 * message: PostgreSQL itself logs "parameter ... changed to ..." when the
 * configuration is reloaded.  Every process has
 * this hook (the library is preloaded).
 */
static void
redact_secrets(ErrorData *edata)
{
	char        proxy[4][256];
	const char *secrets[9] = {remora_s3_secret_access_key,
							  remora_hf_token,
							  remora_target_secret_loaded,
							  remora_s3_session_token,
							  remora_sse_key_loaded,
							  proxy[0],
							  proxy[1],
							  proxy[2],
							  proxy[3]};

	/* proxy credentials: user:password first, then the password alone */
	proxy_secrets(remora_http_proxy, proxy[0], proxy[2], sizeof(proxy[0]));
	proxy_secrets(remora_https_proxy, proxy[1], proxy[3], sizeof(proxy[1]));

	/*
	 * A statement that names Remora is logged (the STATEMENT line, and
	 * log_statement's "statement: ...") with its URLs' query strings
	 * redacted: the statement logged is a redacted copy, kept until the
	 * next one (PostgreSQL resets debug_query_string after each statement).
	 */
	if (mentions_remora(debug_query_string) &&
		debug_query_string != redacted_statement)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		char         *r = redact_urls(debug_query_string, true);

		MemoryContextSwitchTo(old);
		if (r != NULL)
		{
			if (redacted_statement)
				pfree(redacted_statement);
			redacted_statement = r;
			debug_query_string = redacted_statement;
		}
	}
	if (debug_query_string != NULL && debug_query_string == redacted_statement)
	{
		MemoryContext old = MemoryContextSwitchTo(ErrorContext);

		edata->message = redact_or_keep(edata->message);
		edata->detail = redact_or_keep(edata->detail);
		edata->detail_log = redact_or_keep(edata->detail_log);
		edata->hint = redact_or_keep(edata->hint);
		edata->context = redact_or_keep(edata->context);
		MemoryContextSwitchTo(old);
	}

	for (int i = 0; i < (int) lengthof(secrets); i++)
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

/*
 * pg_stat_activity keeps a session's last statement while it is idle: one
 * that names Remora and has a URL with a query string is shown redacted
 * from the moment it is parsed.  (Anything that copied the text before,
 * such as pg_stat_statements, is outside Remora's reach.)
 */
static void
redact_activity(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze_hook)
		prev_post_parse_analyze_hook(pstate, query, jstate);
	/* the client's own statement only, not SQL run inside a function */
	if (pstate && pstate->p_sourcetext == debug_query_string &&
		mentions_remora(pstate->p_sourcetext) && MyBackendType == B_BACKEND)
	{
		char *r = redact_urls(pstate->p_sourcetext, true);

		if (r != NULL)
		{
			pgstat_report_activity(STATE_RUNNING, r);
			pfree(r);
		}
	}
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

	remora_http_define_gucs(); /* before the prefix is reserved */
	remora_metrics_define_gucs();
	remora_define_gucs();
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = redact_secrets;
	prev_post_parse_analyze_hook = post_parse_analyze_hook;
	post_parse_analyze_hook = redact_activity;
	remora_shmem_init();
	remora_xact_init();
	remora_leases_init(); /* after: its callback runs first */
	remora_register_launcher();
	remora_register_http();
	remora_register_metrics();
}
