/*-------------------------------------------------------------------------
 *
 * pq_host.c
 *	  remora-worker as the runner's host: its operations table over libpq
 *	  (src/runner/host.h).  Each statement is one call on the connection
 *	  (conn.c), a transaction of its own; a round's checkpoints are each
 *	  committed alone, so there is no batch.
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "worker/log.h"
#include "worker/pq_host.h"

/* One statement; its rows, as text, into out. */
static bool
pq_exec(void *host, const char *what, const char *sql, int nparams,
		const char *const *params, RemoraRows *out)
{
	PqHost   *h = host;
	PGresult *res = remora_conn_exec(h->conn, what, sql, nparams, params);
	int       nrows, ncols;
	bool      ok = true;

	if (res == NULL)
		return false;
	if (out == NULL)
	{
		PQclear(res);
		return true;
	}
	nrows = PQntuples(res);
	ncols = PQnfields(res);
	ok = remora_rows_init(out, nrows, ncols);
	for (int c = 0; ok && c < ncols; c++)
		ok = remora_rows_set_name(out, c, PQfname(res, c));
	for (int r = 0; ok && r < nrows; r++)
		for (int c = 0; ok && c < ncols; c++)
			ok = PQgetisnull(res, r, c) ||
				 remora_rows_set(out, r, c, PQgetvalue(res, r, c));
	PQclear(res);
	if (!ok)
	{
		remora_wlog("%s failed: out of memory", what);
		remora_rows_wipe(out);
	}
	return ok;
}

static void
pq_log(void *host, const char *line)
{
	(void) host;
	remora_wlog("%s", line);
}

static RemoraEngine *
pq_new_engine(void *host)
{
	PqHost            *h = host;
	RemoraEngineConfig cfg;
	char               err[256];
	RemoraEngine      *e;

	remora_settings_engine_config(h->settings, &cfg);
	cfg.log = pq_log; /* the engine's own decisions, as the runner's */
	e = remora_engine_new(&cfg, err, sizeof(err));
	if (e == NULL)
	{
		remora_wlog("cannot start the transfer engine: %s", err);
		exit(1); /* EXIT_CANNOT_RUN */
	}
	return e;
}

const RemoraHostOps remora_pq_host_ops = {
	.exec = pq_exec,
	.log = pq_log,
	.new_engine = pq_new_engine,
};
