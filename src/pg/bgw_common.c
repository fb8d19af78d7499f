/*-------------------------------------------------------------------------
 *
 * bgw_common.c
 *	  What every background process of Remora does alike: the static
 *	  workers' registration and the reload at start.
 *
 * The launcher (launcher.c) and the web server (httpd.c) are static
 * background workers registered by module initialisation (remora.c); the
 * launcher, the workers and the web server all read the configuration
 * files once at start.  Both live here, below all of them, so that none
 * calls up into module initialisation.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "postmaster/bgworker.h"
#include "utils/guc.h"

#include "pg/bgw_common.h"

/*
 * A background worker of this library that the postmaster starts once
 * recovery has finished and restarts 5 s after it exits (the launcher, the
 * web server).  name is also its pg_stat_activity.backend_type.  Only in
 * the postmaster, during shared_preload_libraries.
 */
void
remora_register_static_worker(const char *function, const char *name)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags =
		BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "remora");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker.bgw_name, BGW_MAXLEN, "%s", name);
	snprintf(worker.bgw_type, BGW_MAXLEN, "%s", name);
	RegisterBackgroundWorker(&worker);
}

/*
 * For a background worker's start, once its SIGHUP handler is set and its
 * signals unblocked: a reload that the postmaster announced while the
 * process started can be lost (start-up ignores SIGHUP until the handler
 * is set), which would leave it the settings inherited at fork.  Read the
 * files once, as a SIGHUP would.
 */
void
remora_reload_at_start(void)
{
	ProcessConfigFile(PGC_SIGHUP);
}
