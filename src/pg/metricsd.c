/*-------------------------------------------------------------------------
 *
 * metricsd.c
 *	  The background worker "remora metrics": GET /metrics without
 *	  sign-in, on the loopback address of remora.metrics_listen.
 *
 * The web server answers /metrics to a signed-in remora_admin (src/http/
 * api_admin.c).  A Prometheus server on the same host, or an agent beside
 * it, should not need a password for that: this worker serves the same
 * text, remora.metrics_text(), to whoever reaches its address, and so
 * serves only a loopback one (127.0.0.0/8, ::1); any other is refused with
 * a message in the server log, and the worker exits for good (exit code 0,
 * as "remora http" does), since the metrics name workers, their hosts and
 * their labels.
 *
 * Registered by the postmaster when remora.metrics_listen is set (empty,
 * the default, turns it off), whether or not the web server runs.  It
 * connects to remora.database as the bootstrap superuser, as the launcher
 * does, and runs libmicrohttpd with no thread of its own: the worker's one
 * thread waits on its latch and on libmicrohttpd's epoll descriptor, then
 * runs MHD_run.  A request for /metrics is suspended in libmicrohttpd's
 * callback; back in the loop, outside libmicrohttpd, one short transaction
 * reads remora.metrics_text() for every request waiting (an ERROR there is
 * logged and answered 503, never thrown through libmicrohttpd's frames),
 * and the requests are resumed with the answer.
 *
 *-------------------------------------------------------------------------
 */
#include "pg/remora.h"

#include <microhttpd.h>
#include <stdlib.h>

#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "http/http.h"
#include "pg/bgw_common.h"
#include "pg/guc.h"
#include "pg/metricsd.h"
#include "pg/xact.h"

PGDLLEXPORT void remora_metrics_main(Datum main_arg);

char *remora_metrics_listen = NULL;

/*
 * One request, from its first callback to its completion; malloc'd, as
 * libmicrohttpd's callbacks may run outside any memory context's life.
 */
typedef struct MetricsRequest
{
	struct MHD_Connection *conn;
	int                    status; /* 0: not answered yet */
	char                  *body;   /* malloc'd */
	size_t                 len;
	struct MetricsRequest *next; /* in the list of those waiting */
} MetricsRequest;

static MetricsRequest *waiting = NULL;

void
remora_metrics_define_gucs(void)
{
	DefineCustomStringVariable(
		"remora.metrics_listen",
		"Loopback address (host:port) that serves GET /metrics without "
		"sign-in.",
		"Empty turns it off.  Only a loopback address is served.",
		&remora_metrics_listen, "", PGC_POSTMASTER, GUC_SUPERUSER_ONLY, NULL,
		NULL, NULL);
}

void
remora_register_metrics(void)
{
	if (remora_metrics_listen == NULL || remora_metrics_listen[0] == '\0')
		return;
	remora_register_static_worker("remora_metrics_main", "remora metrics");
}

/* --- libmicrohttpd's callbacks (no PostgreSQL function is called) ------- */

static enum MHD_Result
answer(struct MHD_Connection *conn, int status, const char *type,
	   const char *body, size_t len, const char *allow)
{
	struct MHD_Response *response = MHD_create_response_from_buffer(
		len, (void *) body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result r;

	if (response == NULL)
		return MHD_NO;
	MHD_add_response_header(response, "Content-Type", type);
	MHD_add_response_header(response, "Cache-Control", "no-store");
	MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
	if (allow)
		MHD_add_response_header(response, "Allow", allow);
	r = MHD_queue_response(conn, status, response);
	MHD_destroy_response(response);
	return r;
}

/*
 * The path as sent, undecoded: the one path served is /metrics, and
 * libmicrohttpd's own decoding would make "/metrics%00" (a NUL, where a C
 * string ends) that path too.
 */
static size_t
as_sent(void *cls, struct MHD_Connection *conn, char *s)
{
	return strlen(s);
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url,
	   const char *method, const char *version, const char *upload_data,
	   size_t *upload_data_size, void **con_cls)
{
	MetricsRequest *r = *con_cls;

	if (r == NULL)
	{
		if ((r = calloc(1, sizeof(MetricsRequest))) == NULL)
			return MHD_NO;
		*con_cls = r;
		return MHD_YES;
	}
	if (*upload_data_size > 0)
	{
		*upload_data_size = 0; /* a body is ignored */
		return MHD_YES;
	}
	if (r->status == 200)
		return answer(conn, 200, "text/plain; version=0.0.4; charset=utf-8",
					  r->body, r->len, NULL);
	if (r->status != 0)
	{
		static const char msg[] =
			"the metrics could not be read: see the server log\n";

		return answer(conn, r->status, "text/plain; charset=utf-8", msg,
					  sizeof(msg) - 1, NULL);
	}
	if (strcmp(url, "/metrics") != 0)
		return answer(conn, 404, "text/plain; charset=utf-8", "not found\n", 10,
					  NULL);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return answer(conn, 405, "text/plain; charset=utf-8",
					  "method not allowed\n", 19, "GET, HEAD");
	/* the loop reads the metrics, then resumes it (answer_waiting) */
	r->conn = conn;
	r->next = waiting;
	waiting = r;
	MHD_suspend_connection(conn);
	return MHD_YES;
}

static void
completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		  enum MHD_RequestTerminationCode toe)
{
	MetricsRequest *r = *con_cls;

	if (r)
	{
		free(r->body);
		free(r);
	}
	*con_cls = NULL;
}

static void
log_error(void *cls, const char *fmt, va_list ap)
{
	/* libmicrohttpd's own complaints (a client gone...): not logged */
}

/* --- the loop's side ----------------------------------------------------- */

typedef struct MetricsText
{
	char  *data; /* malloc'd */
	size_t len;
} MetricsText;

/* In a transaction (remora_tx_call): the text of remora.metrics_text(). */
static void
read_metrics(void *arg)
{
	MetricsText *out = arg;
	bool         isnull;
	Datum        d;
	text        *t;

	if (remora_spi_execute("SELECT remora.metrics_text()", 0, NULL, NULL, NULL,
						   true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
						errmsg("remora.metrics_text() returned no row")));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return;
	t = DatumGetTextPP(d);
	out->len = VARSIZE_ANY_EXHDR(t);
	out->data = malloc(out->len + 1);
	if (out->data == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	memcpy(out->data, VARDATA_ANY(t), out->len);
	out->data[out->len] = '\0';
}

/*
 * Answer every request waiting with one reading of the metrics, and
 * resume them; false when none was waiting.
 */
static bool
answer_waiting(void)
{
	MetricsText m = {NULL, 0};
	bool        ok;

	if (waiting == NULL)
		return false;
	ok = remora_tx_call("reading metrics", 0, read_metrics, &m) &&
		 m.data != NULL;
	while (waiting)
	{
		MetricsRequest *r = waiting;

		waiting = r->next;
		r->next = NULL;
		r->status = ok ? 200 : 503;
		if (ok && (r->body = malloc(m.len + 1)) != NULL)
		{
			memcpy(r->body, m.data, m.len + 1);
			r->len = m.len;
		}
		else if (ok)
			r->status = 503;
		MHD_resume_connection(r->conn);
	}
	free(m.data);
	return true;
}

static struct MHD_Daemon *
start_daemon(const RemoraHttpConfig *cfg)
{
	unsigned int flags =
		MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;

	if (cfg->addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	return MHD_start_daemon(
		flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR, &cfg->addr,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) 10,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int) 32,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) 32 * 1024,
		MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
		MHD_OPTION_UNESCAPE_CALLBACK, as_sent, NULL, MHD_OPTION_EXTERNAL_LOGGER,
		log_error, NULL, MHD_OPTION_END);
}

/* The address to serve, or exit (logged) when it is invalid or not loopback. */
static void
listen_address(RemoraHttpConfig *cfg)
{
	bool loopback;
	char err[256];

	memset(cfg, 0, sizeof(*cfg));
	if (!remora_http_parse_listen(remora_metrics_listen, cfg, &loopback, err,
								  sizeof(err)))
	{
		ereport(LOG, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					  errmsg("remora metrics is not started: invalid "
							 "remora.metrics_listen \"%s\"",
							 remora_metrics_listen),
					  errdetail("%s.", err),
					  errhint("Set it to host:port, e.g. 127.0.0.1:9187.")));
		proc_exit(0);
	}
	if (!loopback)
	{
		ereport(LOG,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("remora metrics refuses to listen on \"%s\": not a "
						"loopback address",
						remora_metrics_listen),
				 errdetail("The metrics listener asks for no credentials; "
						   "only a loopback address (127.0.0.1, ::1) is "
						   "served."),
				 errhint("Scrape GET /metrics of the web server "
						 "(remora.http_listen) as a remora_admin, or listen "
						 "on a loopback address.")));
		proc_exit(0);
	}
}

void
remora_metrics_main(Datum main_arg)
{
	RemoraHttpConfig            cfg;
	struct MHD_Daemon          *daemon;
	const union MHD_DaemonInfo *info;
	int                         epoll_fd;
	MemoryContext               cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(remora_database, NULL, 0);
	remora_reload_at_start();
	remora_pin_session();
	pgstat_report_appname("remora metrics");

	listen_address(&cfg);
	daemon = start_daemon(&cfg);
	info =
		daemon ? MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
	if (info == NULL)
		ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
						errmsg("remora metrics could not serve on \"%s\"",
							   remora_metrics_listen),
						errhint("Check that the address is free.")));
	epoll_fd = info->epoll_fd;
	ereport(LOG,
			(errmsg("remora metrics listening on %s", remora_metrics_listen)));

	cxt = AllocSetContextCreate(TopMemoryContext, "remora metrics",
								ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);
	for (;;)
	{
		MHD_UNSIGNED_LONG_LONG mhd_ms;
		long                   timeout = 1000;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			remora_pin_session();
		}
		MHD_run(daemon);
		/* answered requests resume: let libmicrohttpd send at once */
		if (answer_waiting())
			timeout = 0;
		else if (MHD_get_timeout(daemon, &mhd_ms) == MHD_YES &&
				 mhd_ms < (MHD_UNSIGNED_LONG_LONG) timeout)
			timeout = (long) mhd_ms;
		MemoryContextReset(cxt);
		(void) WaitLatchOrSocket(MyLatch,
								 WL_LATCH_SET | WL_SOCKET_READABLE |
									 WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 epoll_fd, timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
