/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The server's settings remora-worker runs with: read from
 *	  remora.worker_settings() (members of remora_worker only), turned into
 *	  the engine's configuration.
 *
 * The secrets among them (the target's secret key and session token, the
 * SSE-C key, the Hub token, proxy passwords) stay in this process's memory
 * and are never logged.  With remora.s3_credentials = 'chain' the server
 * sends no key: the engine resolves this host's own (src/engine/s3/creds.h).
 *ca_file and ca_path name files on the worker's own host.
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "worker/log.h"
#include "worker/settings.h"

/* the columns of remora.worker_settings(), in order */
static const char *const names[REMORA_WSETTINGS_N] = {
	"s3_endpoint",
	"s3_region",
	"s3_path_style",
	"s3_access_key_id",
	"s3_secret_access_key",
	"default_bucket",
	"default_prefix",
	"part_size",
	"lease_duration_ms",
	"worker_concurrency",
	"stall_timeout_ms",
	"allow_networks",
	"deny_networks",
	"allow_ports",
	"hf_endpoint",
	"hf_token",
	"ca_file",
	"ca_path",
	"http_proxy",
	"https_proxy",
	"no_proxy",
	"object_connections",
	"max_connections_per_host",
	"export_copy_cutoff",
	"max_upload_parts",
	"blocked_origins",
	"s3_session_token",
	"s3_credentials",
	"s3_role_arn",
	"s3_external_id",
	"s3_role_session_name",
	"sts_endpoint",
	"imds_endpoint",
	"s3_sse",
	"s3_sse_kms_key_id",
	"s3_sse_customer_key",
	"s3_storage_class"};

void
remora_settings_free(RemoraWorkerSettings *s)
{
	for (int i = 0; i < REMORA_WSETTINGS_N; i++)
	{
		if (s->values[i])
			memset(s->values[i], 0, strlen(s->values[i]));
		free(s->values[i]);
		s->values[i] = NULL;
	}
}

const char *
remora_setting(const RemoraWorkerSettings *s, const char *name)
{
	for (int i = 0; i < REMORA_WSETTINGS_N; i++)
		if (strcmp(names[i], name) == 0)
			return s->values[i] ? s->values[i] : "";
	return "";
}

/*
 * Read the settings (s is overwritten; free the old ones first).  False
 * when the call failed (logged): permission denied, the secret file
 * unreadable, no connection.
 */
bool
remora_settings_load(RemoraConn *c, RemoraWorkerSettings *s)
{
	PGresult *res =
		remora_conn_exec(c, "reading remora.worker_settings()",
						 "SELECT * FROM remora.worker_settings()", 0, NULL);
	bool ok = true;

	memset(s, 0, sizeof(*s));
	if (res == NULL)
		return false;
	if (PQntuples(res) != 1)
		ok = false;
	for (int i = 0; ok && i < REMORA_WSETTINGS_N; i++)
	{
		int col = PQfnumber(res, names[i]);

		if (col < 0)
		{
			remora_wlog("remora.worker_settings() has no column %s: update "
						"the extension",
						names[i]);
			ok = false;
			break;
		}
		if (!PQgetisnull(res, 0, col))
		{
			s->values[i] = strdup(PQgetvalue(res, 0, col));
			ok = s->values[i] != NULL;
		}
	}
	PQclear(res);
	if (!ok)
	{
		remora_settings_free(s);
		return false;
	}
	s->lease_ms = atoi(remora_setting(s, "lease_duration_ms"));
	if (s->lease_ms < 1000)
		s->lease_ms = 1000;
	s->concurrency = atoi(remora_setting(s, "worker_concurrency"));
	return true;
}

bool
remora_settings_equal(const RemoraWorkerSettings *a,
					  const RemoraWorkerSettings *b)
{
	for (int i = 0; i < REMORA_WSETTINGS_N; i++)
	{
		const char *x = a->values[i] ? a->values[i] : "";
		const char *y = b->values[i] ? b->values[i] : "";

		if (strcmp(x, y) != 0)
			return false;
	}
	return true;
}

/* The engine's configuration; its strings point into s. */
void
remora_settings_engine_config(const RemoraWorkerSettings *s,
							  RemoraEngineConfig         *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->target.endpoint = remora_setting(s, "s3_endpoint");
	cfg->target.region = remora_setting(s, "s3_region");
	cfg->target.path_style =
		strcmp(remora_setting(s, "s3_path_style"), "t") == 0;
	cfg->target.access_key_id = remora_setting(s, "s3_access_key_id");
	cfg->target.secret_access_key = remora_setting(s, "s3_secret_access_key");
	cfg->target.session_token = remora_setting(s, "s3_session_token");
	cfg->target.credentials = remora_setting(s, "s3_credentials");
	cfg->target.role_arn = remora_setting(s, "s3_role_arn");
	cfg->target.external_id = remora_setting(s, "s3_external_id");
	cfg->target.role_session_name = remora_setting(s, "s3_role_session_name");
	cfg->target.sts_endpoint = remora_setting(s, "sts_endpoint");
	cfg->target.imds_endpoint = remora_setting(s, "imds_endpoint");
	cfg->sse.sse = remora_setting(s, "s3_sse");
	cfg->sse.kms_key_id = remora_setting(s, "s3_sse_kms_key_id");
	cfg->sse.customer_key = remora_setting(s, "s3_sse_customer_key");
	cfg->sse.storage_class = remora_setting(s, "s3_storage_class");
	cfg->part_size = (size_t) strtoll(remora_setting(s, "part_size"), NULL, 10);
	cfg->allow_networks = remora_setting(s, "allow_networks");
	cfg->deny_networks = remora_setting(s, "deny_networks");
	cfg->allow_ports = remora_setting(s, "allow_ports");
	cfg->connect_timeout_ms = 10000;
	cfg->stall_timeout_ms = atol(remora_setting(s, "stall_timeout_ms"));
	cfg->user_agent = "remora-worker/" REMORA_VERSION;
	cfg->ca_file = remora_setting(s, "ca_file");
	cfg->ca_path = remora_setting(s, "ca_path");
	cfg->http_proxy = remora_setting(s, "http_proxy");
	cfg->https_proxy = remora_setting(s, "https_proxy");
	cfg->no_proxy = remora_setting(s, "no_proxy");
	cfg->max_connections_per_host =
		atoi(remora_setting(s, "max_connections_per_host"));
	cfg->export_copy_cutoff =
		strtoll(remora_setting(s, "export_copy_cutoff"), NULL, 10);
	cfg->max_upload_parts = atoi(remora_setting(s, "max_upload_parts"));
	cfg->blocked_origins = remora_setting(s, "blocked_origins");
}
