/*-------------------------------------------------------------------------
 *
 * httpd.c
 *	  The background worker "remora http": the web client and JSON API.
 *
 * Registered by the postmaster when remora.http_listen is set (empty, the
 * default, turns it off) and restarted like the launcher when it exits
 * with an error.  It connects to no database itself (it shows in
 * pg_stat_activity as backend_type "remora http"); its main thread only
 * reads the settings, starts libmicrohttpd with signals blocked in every
 * thread it creates, and then waits on its latch: for SIGTERM (stop
 * serving and exit), SIGHUP (apply the settings that may change while
 * running) and, once a second, to expire sessions and cut off slow
 * clients (remora_http_tick).  The serving threads run the code of
 * src/http/, which calls no PostgreSQL server function, reaches the
 * database through libpq as the signed-in role, and calls nothing of this
 * folder: this file fills its RemoraHttpConfig and drives it.
 *
 * Without TLS (remora.http_tls_cert_file and remora.http_tls_key_file)
 * only a loopback address is served: anything else is refused with a
 * message in the server log, and the worker exits for good (exit code 0,
 * so the postmaster does not restart it into the same refusal).
 *
 *-------------------------------------------------------------------------
 */
#include "pg/remora.h"

#include <limits.h>
#include <signal.h>
#include <pthread.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/varlena.h"

#include "engine/common/netpolicy.h"
#include "http/http.h"
#include "pg/bgw_common.h"
#include "pg/guc.h"
#include "pg/httpd.h"

PGDLLEXPORT void remora_http_main(Datum main_arg);

char *remora_http_listen = NULL;
char *remora_http_tls_cert_file = NULL;
char *remora_http_tls_key_file = NULL;
int   remora_http_session_idle_timeout_s = 30 * 60;
int   remora_http_session_max_age_s = 12 * 3600;
int   remora_http_pool_size = 4;
int   remora_http_max_body_kb = 1024;
int   remora_http_client_timeout_s = 30;
int   remora_http_max_connections = 256;
int   remora_http_login_max_failures = 5;
int   remora_http_login_lockout_s = 60;
char *remora_http_trusted_proxies = NULL;

/* remora.http_trusted_proxies must be a list of addresses and networks */
static bool
check_trusted_proxies(char **newval, void **extra, GucSource source)
{
	RemoraCidr *list;
	int         n;
	char        err[256];

	if (!remora_cidr_list_parse(*newval, &list, &n, err, sizeof(err)))
	{
		GUC_check_errdetail("%s.", err);
		GUC_check_errhint("Give addresses or CIDR networks separated by "
						  "commas, e.g. '127.0.0.1/32, 10.0.0.0/8'.");
		return false;
	}
	free(list);
	return true;
}

/*
 * The GUCs of the web server.  Called before remora_define_gucs, which
 * reserves the prefix "remora" (and so drops placeholders of any remora.*
 * setting not yet defined).
 */
void
remora_http_define_gucs(void)
{
	DefineCustomStringVariable(
		"remora.http_listen",
		"Address (host:port) the remora web client and API listen on.",
		"Empty turns them off.  Without TLS only a loopback address is "
		"accepted.",
		&remora_http_listen, "", PGC_POSTMASTER, GUC_SUPERUSER_ONLY, NULL, NULL,
		NULL);

	DefineCustomStringVariable(
		"remora.http_tls_cert_file",
		"PEM file with the certificate (chain) of the remora web server.", NULL,
		&remora_http_tls_cert_file, "", PGC_POSTMASTER, GUC_SUPERUSER_ONLY,
		NULL, NULL, NULL);

	DefineCustomStringVariable(
		"remora.http_tls_key_file",
		"PEM file with the private key of the remora web server.", NULL,
		&remora_http_tls_key_file, "", PGC_POSTMASTER,
		GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL, NULL, NULL, NULL);

	DefineCustomIntVariable("remora.http_session_idle_timeout",
							"A web session unused for this long ends.", NULL,
							&remora_http_session_idle_timeout_s, 30 * 60, 1,
							7 * 86400, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL,
							NULL);

	DefineCustomIntVariable(
		"remora.http_session_max_age",
		"A web session ends this long after sign-in, used or not.", NULL,
		&remora_http_session_max_age_s, 12 * 3600, 1, 30 * 86400, PGC_SIGHUP,
		GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.http_pool_size",
		"Database connections the web server keeps per signed-in role.", NULL,
		&remora_http_pool_size, 4, 1, 64, PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("remora.http_max_body",
							"Largest request body the web server reads.", NULL,
							&remora_http_max_body_kb, 1024, 1, 64 * 1024,
							PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.http_client_timeout",
		"A web client connection idle for this long is closed.",
		"So is one whose request has not arrived whole this long after the "
		"connection or its previous answer began.",
		&remora_http_client_timeout_s, 30, 1, 3600, PGC_POSTMASTER, GUC_UNIT_S,
		NULL, NULL, NULL);

	DefineCustomIntVariable("remora.http_max_connections",
							"Client connections the web server serves at once.",
							NULL, &remora_http_max_connections, 256, 1, 10000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.http_login_max_failures",
		"Failed sign-ins of one role before its sign-in is locked for a "
		"while.",
		"A client address, and a role over all addresses, get four times as "
		"many; an address where the role signed in before is not held to "
		"those.",
		&remora_http_login_max_failures, 5, 1, 1000, PGC_SIGHUP, 0, NULL, NULL,
		NULL);

	DefineCustomStringVariable(
		"remora.http_trusted_proxies",
		"Proxies (CIDR list) whose X-Forwarded-For names the web client.",
		"Only when the connection comes from one of these networks is the "
		"client's address taken from X-Forwarded-For, for the sign-in "
		"throttle.  Empty: the header is ignored.",
		&remora_http_trusted_proxies, "", PGC_SIGHUP, 0, check_trusted_proxies,
		NULL, NULL);

	DefineCustomIntVariable(
		"remora.http_login_lockout",
		"How long sign-in stays locked after too many failures.", NULL,
		&remora_http_login_lockout_s, 60, 1, 86400, PGC_SIGHUP, GUC_UNIT_S,
		NULL, NULL, NULL);
}

void
remora_register_http(void)
{
	if (remora_http_listen == NULL || remora_http_listen[0] == '\0')
		return;
	remora_register_static_worker("remora_http_main", "remora http");
}

/* The settings that may change while serving. */
static void
apply_live_settings(void)
{
	RemoraHttpConfig *cfg = &remora_http_config;
	char              err[256];

	atomic_store(&cfg->session_idle_s, remora_http_session_idle_timeout_s);
	atomic_store(&cfg->session_max_age_s, remora_http_session_max_age_s);
	atomic_store(&cfg->max_body, remora_http_max_body_kb * 1024);
	atomic_store(&cfg->login_failures, remora_http_login_max_failures);
	atomic_store(&cfg->login_lockout_s, remora_http_login_lockout_s);
	/* valid: the check hook accepted it */
	(void) remora_http_set_trusted_proxies(remora_http_trusted_proxies, err,
										   sizeof(err));
}

/* A whole PEM file, malloc'd; ERROR if it cannot be read. */
static char *
read_pem(const char *guc, const char *path)
{
	FILE  *f = AllocateFile(path, "r");
	char  *data;
	size_t n;

	if (f == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open \"%s\" given by %s: %m", path, guc)));
	data = malloc(1024 * 1024 + 1);
	if (data == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	n = fread(data, 1, 1024 * 1024, f);
	FreeFile(f);
	data[n] = '\0';
	if (n == 0 || n == 1024 * 1024)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("\"%s\" given by %s is empty or larger than "
							   "1 MB",
							   path, guc)));
	return data;
}

/* Where libpq finds this server: its first socket directory, or TCP. */
static void
local_server(RemoraHttpConfig *cfg)
{
	char *dirs =
		pstrdup(Unix_socket_directories ? Unix_socket_directories : "");
	List *list = NIL;

	cfg->pg_port = PostPortNumber;
	cfg->pg_host = NULL;
	if (SplitDirectoriesString(dirs, ',', &list) && list != NIL)
		cfg->pg_host = strdup((char *) linitial(list));
	if (cfg->pg_host == NULL || cfg->pg_host[0] == '\0')
		cfg->pg_host = strdup("127.0.0.1");
	cfg->database = strdup(remora_database);
	if (cfg->pg_host == NULL || cfg->database == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
}

void
remora_http_main(Datum main_arg)
{
	RemoraHttpConfig *cfg = &remora_http_config;
	bool              loopback;
	bool              tls;
	char              err[256];
	sigset_t          all, old;

	/*
	 * Sign-in must prove the password it was given, and nothing else: libpq
	 * reads a password, a password file and service files (which may hold
	 * a password) from the environment of the server's OS user when a
	 * connection does not say otherwise.  http/session.c never connects without
	 * a password and names no file, and this process forgets the variables
	 * before any thread starts (unsetenv is not thread-safe).
	 */
	unsetenv("PGPASSWORD");
	unsetenv("PGPASSFILE");
	unsetenv("PGSERVICE");
	unsetenv("PGSERVICEFILE");
	unsetenv("PGSYSCONFDIR");

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	/* no database: just a place in pg_stat_activity */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	remora_reload_at_start();
	pgstat_report_appname("remora http");

	memset(cfg, 0, sizeof(*cfg));
	if (!remora_http_parse_listen(remora_http_listen, cfg, &loopback, err,
								  sizeof(err)))
	{
		ereport(LOG, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					  errmsg("remora http is not started: invalid "
							 "remora.http_listen \"%s\"",
							 remora_http_listen),
					  errdetail("%s.", err),
					  errhint("Set it to host:port, e.g. 127.0.0.1:8080.")));
		proc_exit(0);
	}
	tls = remora_http_tls_cert_file[0] != '\0' ||
		  remora_http_tls_key_file[0] != '\0';
	if (tls && (remora_http_tls_cert_file[0] == '\0' ||
				remora_http_tls_key_file[0] == '\0'))
	{
		ereport(LOG, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					  errmsg("remora http is not started: TLS needs both a "
							 "certificate and a key"),
					  errhint("Set both remora.http_tls_cert_file and "
							  "remora.http_tls_key_file, or neither.")));
		proc_exit(0);
	}
	if (!tls && !loopback)
	{
		ereport(LOG,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("remora http refuses to listen on \"%s\" without TLS",
						remora_http_listen),
				 errdetail("Passwords and session cookies would cross the "
						   "network in clear text; without TLS only a "
						   "loopback address (127.0.0.1, ::1) is served."),
				 errhint("Set remora.http_tls_cert_file and "
						 "remora.http_tls_key_file, or listen on a loopback "
						 "address behind a TLS-terminating proxy.")));
		proc_exit(0);
	}
	if (tls)
	{
		cfg->tls_cert_pem =
			read_pem("remora.http_tls_cert_file", remora_http_tls_cert_file);
		cfg->tls_key_pem =
			read_pem("remora.http_tls_key_file", remora_http_tls_key_file);
	}
	local_server(cfg);
	/* the sign-in throttle's known places, kept across restarts */
	cfg->places_file = strdup(psprintf("%s/remora_http_places", DataDir));
	remora_signin_load(time(NULL));
	cfg->pool_size = remora_http_pool_size;
	cfg->client_timeout_s = remora_http_client_timeout_s;
	cfg->max_connections = remora_http_max_connections;
	apply_live_settings();

	/* the serving threads inherit a mask that blocks every signal */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (!remora_http_start(err, sizeof(err)))
	{
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
						errmsg("remora http could not serve on \"%s\": %s",
							   remora_http_listen, err),
						errhint("Check that the address is free and the TLS "
								"files are a PEM certificate and key.")));
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	ereport(LOG, (errmsg("remora http listening on %s%s", remora_http_listen,
						 tls ? " (TLS)" : "")));

	while (!ShutdownRequestPending)
	{
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			apply_live_settings();
		}
		remora_http_tick();
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	remora_http_stop();
	/* exit 1: restarted unless the whole server is shutting down */
	proc_exit(1);
}
