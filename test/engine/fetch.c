/*
 * fetch: drive the transfer engine without PostgreSQL, for tests and
 * debugging under sanitizers.
 *
 *   fetch ENDPOINT BUCKET STAGING_PREFIX URL FILE_NAME [PART_SIZE]
 *
 * Credentials from REMORA_KEY / REMORA_SECRET (default S3RVER), sources
 * allowed on 127.0.0.1; TLS trust and egress proxies from REMORA_CA_FILE,
 * REMORA_HTTP_PROXY, REMORA_HTTPS_PROXY and REMORA_NO_PROXY (unset: the
 * system's bundle, direct); ranged GETs in parallel from REMORA_CONNECTIONS
 * (unset: one GET; "adapt": as many as pay, the engine's changes of the
 * count on stderr), at most 16 connections to a host; timeouts from
 * REMORA_CONNECT_TIMEOUT_MS and REMORA_STALL_TIMEOUT_MS (unset: 5 and 10 s).
 * Prints the result or the error, exits 0 on success.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "engine/engine.h"

/* a positive number of milliseconds from the environment, or the default */
static long
env_ms(const char *name, long fallback)
{
	const char *v = getenv(name);
	long        ms = v ? strtol(v, NULL, 10) : 0;

	return ms > 0 ? ms : fallback;
}

static void
log_line(void *arg, const char *line)
{
	(void) arg;
	fprintf(stderr, "%s\n", line);
}

/* REMORA_CONNECTIONS: a number, or "adapt" */
static int
connections(void)
{
	const char *v = getenv("REMORA_CONNECTIONS");

	if (v == NULL)
		return 1;
	return strcmp(v, "adapt") == 0 ? REMORA_CONNECTIONS_ADAPT(4) : atoi(v);
}

int
main(int argc, char **argv)
{
	RemoraEngineConfig cfg;
	RemoraTaskSpec     spec;
	RemoraEngine      *engine;
	RemoraTask        *task;
	char               err[256];
	const char        *key = getenv("REMORA_KEY");
	const char        *secret = getenv("REMORA_SECRET");
	int                rc;

	if (argc < 6)
	{
		fprintf(stderr,
				"usage: fetch ENDPOINT BUCKET STAGING URL FILE [PART_SIZE]\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	memset(&cfg, 0, sizeof(cfg));
	cfg.target.endpoint = argv[1];
	cfg.target.region = "us-east-1";
	cfg.target.path_style = true;
	cfg.target.access_key_id = key ? key : "S3RVER";
	cfg.target.secret_access_key = secret ? secret : "S3RVER";
	cfg.part_size = argc > 6 ? strtoul(argv[6], NULL, 10) : 5 * 1024 * 1024;
	cfg.allow_networks = "127.0.0.1/32";
	cfg.deny_networks = "";
	cfg.allow_ports = "1-65535";
	/*
	 * Under valgrind a TLS handshake (the CA bundle read included) can take
	 * longer than a real worker's connect timeout on a busy machine: the
	 * harness may lengthen both, so that the class a test expects does not
	 * turn into "timeout" with the machine's speed.
	 */
	cfg.connect_timeout_ms = env_ms("REMORA_CONNECT_TIMEOUT_MS", 5000);
	cfg.stall_timeout_ms = env_ms("REMORA_STALL_TIMEOUT_MS", 10000);
	cfg.ca_file = getenv("REMORA_CA_FILE");
	cfg.http_proxy = getenv("REMORA_HTTP_PROXY");
	cfg.https_proxy = getenv("REMORA_HTTPS_PROXY");
	cfg.no_proxy = getenv("REMORA_NO_PROXY");
	cfg.max_connections_per_host = 16;
	cfg.log = log_line;
	engine = remora_engine_new(&cfg, err, sizeof(err));
	if (engine == NULL)
	{
		fprintf(stderr, "engine: %s\n", err);
		return 1;
	}
	memset(&spec, 0, sizeof(spec));
	spec.source_url = argv[4];
	spec.file_name = argv[5];
	spec.bucket = argv[2];
	spec.staging_prefix = argv[3];
	spec.job_id = 1;
	spec.attempt_id = "00000000-0000-0000-0000-000000000001";
	spec.fencing_token = 1;
	spec.connections = connections();
	task = remora_task_start(engine, &spec, err, sizeof(err));
	if (task == NULL)
	{
		fprintf(stderr, "task: %s\n", err);
		return 1;
	}
	while (remora_task_state(task) == REMORA_TASK_RUNNING)
	{
		struct pollfd p = {remora_engine_fd(engine), POLLIN, 0};
		long          t = remora_engine_timeout_ms(engine);

		poll(&p, 1, t < 0 || t > 200 ? 200 : (int) t);
		remora_engine_run(engine);
	}
	if (remora_task_state(task) == REMORA_TASK_SUCCEEDED)
	{
		const RemoraTaskResult *r = remora_task_result(task);

		printf("member %s size %lld sha256 %s etag %s\nmanifest %s etag %s "
			   "sha256 %s\n",
			   r->member_key, (long long) r->member_size, r->member_sha256,
			   r->member_etag, r->manifest_key, r->manifest_etag,
			   r->manifest_sha256);
		rc = 0;
	}
	else
	{
		const RemoraTaskError *e = remora_task_error(task);

		printf("failed: class %s retryable %d http %ld curl %d s3 %s: %s\n",
			   e->class, e->retryable, e->http_status, e->curl_code, e->s3_code,
			   e->message);
		rc = 1;
	}
	remora_task_free(task);
	remora_engine_free(engine);
	curl_global_cleanup();
	return rc;
}
