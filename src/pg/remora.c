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
#include "miscadmin.h"

#include <curl/curl.h>

#include "pg/shmem.h"
#include "pg/worker.h"

PG_MODULE_MAGIC;

void _PG_init(void);

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
	remora_shmem_init();
	remora_xact_init();
	remora_register_launcher();
}
