/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Remora's configuration parameters.
 *
 * Names are part of the public contract.  Settings that change what a
 * deployment may reach or write (endpoints, credentials, network policy)
 * are for the server administrator only; defaults for where jobs land can
 * be set per role or database by a superuser.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include <ctype.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/fd.h"
#include "utils/memutils.h"
#include "utils/guc.h"

#include "engine/engine.h"
#include "engine/common/netpolicy.h"
#include "engine/common/source_uri.h"
#include "pg/guc.h"

char *remora_database = NULL;
int   remora_max_workers = 2;
int   remora_worker_concurrency = 4;
int   remora_max_active_leases = 64;
int   remora_default_role_weight = 1;
int   remora_default_role_max_running = 0;
int   remora_default_role_max_queued = 0;
int   remora_default_role_max_bytes_per_second = 0;
int   remora_max_bytes_per_second = 0;
int   remora_min_bytes_per_second = 65536;
int   remora_time_slice_s = 300;
int   remora_webhook_max_in_flight_per_role = 2;
int   remora_webhook_timeout_ms = 10000;
int   remora_lease_duration_ms = 30000;
int   remora_max_attempts = 5;
int   remora_retry_base_delay_ms = 10000;
int   remora_retry_max_delay_ms = 600000;
char *remora_s3_endpoint = NULL;
char *remora_s3_region = NULL;
bool  remora_s3_path_style = false;
char *remora_s3_access_key_id = NULL;
char *remora_s3_secret_access_key = NULL;
char *remora_default_bucket = NULL;
char *remora_default_prefix = NULL;
int   remora_part_size_kb = 16 * 1024;
int   remora_object_connections = 4;
int   remora_max_connections_per_host = 16;
int   remora_export_copy_cutoff_kb = 5 * 1024 * 1024;
int   remora_max_upload_parts = 10000;
char *remora_allow_networks = NULL;
char *remora_allow_ports = NULL;
char *remora_deny_networks = NULL;
char *remora_hf_endpoint = NULL;
char *remora_hf_token = NULL;
int   remora_stall_timeout_ms = 60000;
int   remora_presign_max_ttl_s = 86400;
int   remora_retention_s = 30 * 86400;
char *remora_worker_role = NULL;
char *remora_s3_secret_access_key_file = NULL;
char *remora_ca_file = NULL;
char *remora_ca_path = NULL;
char *remora_http_proxy = NULL;
char *remora_https_proxy = NULL;
char *remora_no_proxy = NULL;
int   remora_s3_credentials = REMORA_CREDENTIALS_STATIC;
char *remora_s3_session_token = NULL;
char *remora_s3_role_arn = NULL;
char *remora_s3_external_id = NULL;
char *remora_s3_role_session_name = NULL;
char *remora_sts_endpoint = NULL;
char *remora_imds_endpoint = NULL;
char *remora_s3_sse = NULL;
char *remora_s3_sse_kms_key_id = NULL;
char *remora_s3_sse_customer_key_file = NULL;
char *remora_s3_storage_class = NULL;

static const struct config_enum_entry credentials_options[] = {
	{"static", REMORA_CREDENTIALS_STATIC, false},
	{"chain", REMORA_CREDENTIALS_CHAIN, false},
	{NULL, 0, false}};

static bool
check_networks(char **newval, void **extra, GucSource source)
{
	RemoraCidr *list;
	int         n;
	char        err[REMORA_ERRBUF_LEN];

	if (!remora_cidr_list_parse(*newval, &list, &n, err, sizeof(err)))
	{
		GUC_check_errdetail("%s", err);
		return false;
	}
	free(list);
	return true;
}

static bool
check_ports(char **newval, void **extra, GucSource source)
{
	RemoraPortRange *list;
	int              n;
	char             err[REMORA_ERRBUF_LEN];

	if (!remora_port_list_parse(*newval, &list, &n, err, sizeof(err)))
	{
		GUC_check_errdetail("%s", err);
		return false;
	}
	free(list);
	return true;
}

static bool
check_bucket(char **newval, void **extra, GucSource source)
{
	char err[REMORA_ERRBUF_LEN];

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!remora_bucket_name_valid(*newval, err, sizeof(err)))
	{
		GUC_check_errdetail("%s", err);
		return false;
	}
	return true;
}

static bool
check_prefix(char **newval, void **extra, GucSource source)
{
	char  err[REMORA_ERRBUF_LEN];
	char *norm;

	if (*newval == NULL)
		return true;
	norm = remora_prefix_normalize(*newval, err, sizeof(err));
	if (norm == NULL)
	{
		GUC_check_errdetail("%s", err);
		return false;
	}
	free(norm);
	return true;
}

/* An endpoint base URL: empty, or http(s)://host[:port][/path]. */
static bool
check_base_url(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;

	if (v == NULL || v[0] == '\0')
		return true;
	if ((strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) ||
		strpbrk(v, " \t\r\n?#@") != NULL)
	{
		GUC_check_errdetail("An endpoint must be an http:// or https:// URL "
							"without credentials, query or fragment.");
		return false;
	}
	return true;
}

/* A role's ARN, as STS takes it (empty: none). */
static bool
check_role_arn(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;
	const char *role = v ? strstr(v, ":role/") : NULL;

	if (v == NULL || v[0] == '\0')
		return true;
	if (strncmp(v, "arn:", 4) != 0 || role == NULL ||
		strstr(v, ":iam::") == NULL || strlen(role) < 7 || strlen(v) > 2048 ||
		strpbrk(v, " \t\r\n") != NULL)
	{
		GUC_check_errdetail("A role is named by its ARN, "
							"arn:aws:iam::123456789012:role/name.");
		return false;
	}
	return true;
}

/* A name STS takes (a session's name, an external id): printable, no space. */
static bool
check_sts_word(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;

	if (v == NULL)
		return true;
	for (const char *p = v; *p; p++)
		if (!(isalnum((unsigned char) *p) || strchr("_+=,.@:/-", *p)))
		{
			GUC_check_errdetail("Use letters, digits and _+=,.@:/- only.");
			return false;
		}
	if (strlen(v) > 1224)
	{
		GUC_check_errdetail("At most 1224 characters.");
		return false;
	}
	return true;
}

static bool
check_sse(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;

	if (v == NULL || v[0] == '\0' || strcmp(v, "AES256") == 0 ||
		strcmp(v, "aws:kms") == 0 || strcmp(v, "customer") == 0)
		return true;
	GUC_check_errdetail("Server-side encryption is '' (none), 'AES256', "
						"'aws:kms' or 'customer' (SSE-C).");
	return false;
}

static bool
check_storage_class(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;

	if (v == NULL || v[0] == '\0' || remora_storage_class_valid(v))
		return true;
	GUC_check_errdetail("A storage class is one S3 names: STANDARD, "
						"STANDARD_IA, INTELLIGENT_TIERING, GLACIER_IR, ...");
	return false;
}

/*
 * An egress proxy: empty, or http(s)://[user:password@]host[:port][/].
 * The message never repeats the value: it may hold a password.
 */
static bool
check_proxy(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;
	const char *rest;

	if (v == NULL || v[0] == '\0')
		return true;
	if (strncmp(v, "http://", 7) == 0)
		rest = v + 7;
	else if (strncmp(v, "https://", 8) == 0)
		rest = v + 8;
	else
		rest = NULL;
	if (rest == NULL || rest[0] == '\0' || rest[0] == '/' || rest[0] == '@' ||
		strpbrk(v, " \t\r\n?#") != NULL ||
		(strchr(rest, '/') != NULL && strchr(rest, '/')[1] != '\0'))
	{
		/* PostgreSQL's own message would repeat the value */
		GUC_check_errmsg("invalid egress proxy URL (not repeated here: it "
						 "may hold a password)");
		GUC_check_errdetail("A proxy is an http:// or https:// URL with a "
							"host, an optional port and optional "
							"user:password, and nothing else.");
		return false;
	}
	return true;
}

/* A CA file or directory: empty, or an absolute path. */
static bool
check_ca(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0' || (*newval)[0] == '/')
		return true;
	GUC_check_errdetail("Give an absolute path.");
	return false;
}

void
remora_define_gucs(void)
{
	DefineCustomStringVariable(
		"remora.database",
		"Database the remora launcher and workers connect to.", NULL,
		&remora_database, "postgres", PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.max_workers", "Maximum number of remora worker processes.",
		"Zero stops all transfers; each worker start is a new incarnation.",
		&remora_max_workers, 2, 0, 64, PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("remora.worker_concurrency",
							"Tasks one remora worker runs at once.", NULL,
							&remora_worker_concurrency, 4, 1, 256, PGC_SIGHUP,
							0, NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.max_active_leases",
		"Live leases (running attempts) allowed in the whole deployment.", NULL,
		&remora_max_active_leases, 64, 0, 100000, PGC_SIGHUP, 0, NULL, NULL,
		NULL);

	/*
	 * Sharing the deployment between roles (remora.role_limits): the
	 * defaults of a role without limits of its own, and the deployment's
	 * byte rate.  Byte rates are integers of bytes per second, so at most
	 * INT_MAX (2 GiB/s); a role's own max_bytes_per_second is a bigint.
	 */
	DefineCustomIntVariable(
		"remora.default_role_weight",
		"Share of the workers a role gets under contention, against the "
		"weights of the other roles with runnable jobs.",
		"remora.set_role_limits() sets a role's own.",
		&remora_default_role_weight, 1, 1, 1000, PGC_SIGHUP, 0, NULL, NULL,
		NULL);

	DefineCustomIntVariable(
		"remora.default_role_max_running",
		"Running attempts one role may hold at once; 0 means no limit.",
		"remora.set_role_limits() sets a role's own.",
		&remora_default_role_max_running, 0, 0, 100000, PGC_SIGHUP, 0, NULL,
		NULL, NULL);

	DefineCustomIntVariable(
		"remora.default_role_max_queued",
		"Jobs and exports one role may have queued or waiting to retry; 0 "
		"means no limit.",
		"A submit or export beyond it is refused with SQLSTATE 53400.",
		&remora_default_role_max_queued, 0, 0, INT_MAX, PGC_SIGHUP, 0, NULL,
		NULL, NULL);

	DefineCustomIntVariable(
		"remora.default_role_max_bytes_per_second",
		"Bytes per second all running attempts of one role may move "
		"together; 0 means no limit.",
		"remora.set_role_limits() sets a role's own, up to a bigint.",
		&remora_default_role_max_bytes_per_second, 0, 0, INT_MAX, PGC_SIGHUP, 0,
		NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.max_bytes_per_second",
		"Bytes per second the whole deployment may move; 0 means no limit.",
		NULL, &remora_max_bytes_per_second, 0, 0, INT_MAX, PGC_SIGHUP, 0, NULL,
		NULL, NULL);

	/*
	 * Sharing under abuse (doc/operator-guide.md, "Time slices"): a cap
	 * below this is refused, so that no capped job holds a worker for ever;
	 * and an attempt whose owner holds more than its share hands its job
	 * back after a slice when another owner waits.
	 */
	DefineCustomIntVariable(
		"remora.min_bytes_per_second",
		"The lowest byte-rate cap a job or a role may be given; 0 means none.",
		NULL, &remora_min_bytes_per_second, 65536, 0, INT_MAX, PGC_SIGHUP, 0,
		NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.time_slice",
		"How long an attempt runs before it may have to hand its job back to "
		"another owner's waiting jobs.",
		NULL, &remora_time_slice_s, 300, 1, 86400, PGC_SIGHUP, GUC_UNIT_S, NULL,
		NULL, NULL);

	/* webhooks: one owner's slow receivers do not hold up another's */
	DefineCustomIntVariable(
		"remora.webhook_max_in_flight_per_role",
		"Webhook tries of one role's jobs in flight at once, across every "
		"worker.",
		NULL, &remora_webhook_max_in_flight_per_role, 2, 1, 1000, PGC_SIGHUP, 0,
		NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.webhook_timeout",
		"How long a webhook's receiver has to answer one try.", NULL,
		&remora_webhook_timeout_ms, 10000, 1000, 300 * 1000, PGC_SIGHUP,
		GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.lease_duration",
		"How long an attempt's lease lasts without renewal.", NULL,
		&remora_lease_duration_ms, 30000, 1000, 3600 * 1000, PGC_SIGHUP,
		GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.max_attempts", "Default number of attempts a job may use.",
		NULL, &remora_max_attempts, 5, 1, 100, PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.retry_base_delay",
		"Backoff before the second attempt; doubles with each attempt.", NULL,
		&remora_retry_base_delay_ms, 10000, 0, 3600 * 1000, PGC_SIGHUP,
		GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.retry_max_delay", "Longest backoff between attempts.", NULL,
		&remora_retry_max_delay_ms, 600000, 0, 24 * 3600 * 1000, PGC_SIGHUP,
		GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomStringVariable(
		"remora.s3_endpoint", "Base URL of the target S3-compatible store.",
		"Empty means AWS S3 in remora.s3_region.", &remora_s3_endpoint, "",
		PGC_SIGHUP, 0, check_base_url, NULL, NULL);

	DefineCustomStringVariable(
		"remora.s3_region", "Region used to sign requests to the target store.",
		NULL, &remora_s3_region, "us-east-1", PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable(
		"remora.s3_path_style",
		"Address the target store path-style (endpoint/bucket/key).", NULL,
		&remora_s3_path_style, false, PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomStringVariable(
		"remora.s3_access_key_id", "Access key id for the target store.", NULL,
		&remora_s3_access_key_id, "", PGC_SIGHUP,
		GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL, NULL, NULL, NULL);

	DefineCustomStringVariable("remora.s3_secret_access_key",
							   "Secret access key for the target store.", NULL,
							   &remora_s3_secret_access_key, "", PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL, NULL, NULL,
							   NULL);

	DefineCustomStringVariable("remora.default_bucket",
							   "Target bucket of jobs submitted without one.",
							   NULL, &remora_default_bucket, "", PGC_SUSET, 0,
							   check_bucket, NULL, NULL);

	DefineCustomStringVariable("remora.default_prefix",
							   "Target prefix of jobs submitted without one.",
							   NULL, &remora_default_prefix, "remora",
							   PGC_SUSET, 0, check_prefix, NULL, NULL);

	DefineCustomIntVariable("remora.part_size", "Multipart upload part size.",
							NULL, &remora_part_size_kb, 16 * 1024, 5 * 1024,
							5 * 1024 * 1024, PGC_SIGHUP, GUC_UNIT_KB, NULL,
							NULL, NULL);

	DefineCustomIntVariable(
		"remora.max_upload_parts",
		"The most parts the target store takes in one multipart upload.",
		"An object that remora.part_size would cut into more gets larger "
		"parts.  S3 takes 10000; Swift's S3 API 1000.",
		&remora_max_upload_parts, 10000, 1, 10000, PGC_SIGHUP, 0, NULL, NULL,
		NULL);

	DefineCustomIntVariable(
		"remora.object_connections",
		"Ranged GETs in flight at once for one large object.",
		"The count an object starts with, then as many as add throughput "
		"(options.connections pins a job's); one is a single GET.",
		&remora_object_connections, 4, 1, 64, PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.max_connections_per_host",
		"Connections one worker keeps to one host at once, across its jobs.",
		"Requests above it wait for a connection.",
		&remora_max_connections_per_host, 16, 1, 1024, PGC_SIGHUP, 0, NULL,
		NULL, NULL);

	DefineCustomIntVariable(
		"remora.export_copy_cutoff",
		"Members of an export larger than this are copied in parts "
		"(UploadPartCopy) rather than with one CopyObject.",
		"CopyObject takes at most 5 GB, the default and the maximum.",
		&remora_export_copy_cutoff_kb, 5 * 1024 * 1024, 5 * 1024,
		5 * 1024 * 1024, PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);

	DefineCustomStringVariable("remora.allow_networks",
							   "Networks (CIDR list) user-supplied sources may "
							   "reach although the default policy denies them.",
							   NULL, &remora_allow_networks, "", PGC_SIGHUP, 0,
							   check_networks, NULL, NULL);

	DefineCustomStringVariable(
		"remora.deny_networks",
		"Networks (CIDR list) user-supplied sources may never reach.", NULL,
		&remora_deny_networks, "", PGC_SIGHUP, 0, check_networks, NULL, NULL);

	DefineCustomStringVariable("remora.allow_ports",
							   "Destination ports user-supplied sources may "
							   "use (list of ports and ranges).",
							   NULL, &remora_allow_ports, REMORA_DEFAULT_PORTS,
							   PGC_SIGHUP, 0, check_ports, NULL, NULL);

	DefineCustomStringVariable("remora.hf_endpoint",
							   "Base URL of the Hugging Face Hub.", NULL,
							   &remora_hf_endpoint, "https://huggingface.co",
							   PGC_SIGHUP, 0, check_base_url, NULL, NULL);

	DefineCustomStringVariable(
		"remora.hf_token",
		"Hugging Face access token, for gated and private repositories.", NULL,
		&remora_hf_token, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
		NULL, NULL, NULL);

	DefineCustomIntVariable(
		"remora.stall_timeout",
		"A transfer that moves no byte for this long fails (and is retried).",
		NULL, &remora_stall_timeout_ms, 60000, 1000, 3600 * 1000, PGC_SIGHUP,
		GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("remora.presign_max_ttl",
							"Longest validity of a URL from remora_presign.",
							NULL, &remora_presign_max_ttl_s, 86400, 1,
							7 * 86400, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL,
							NULL);

	DefineCustomIntVariable(
		"remora.retention",
		"How long the history of finished jobs is kept; 0 keeps it forever.",
		"Older jobs keep a tombstone row; their attempts are pruned.",
		&remora_retention_s, 30 * 86400, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_S,
		NULL, NULL, NULL);

	DefineCustomStringVariable(
		"remora.s3_secret_access_key_file",
		"File holding the secret access key for the target store.",
		"When set, it takes the place of remora.s3_secret_access_key, whose "
		"value members of pg_read_all_settings can read.",
		&remora_s3_secret_access_key_file, "", PGC_SIGHUP,
		GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL, NULL, NULL, NULL);

	/* cloud credentials and encryption (doc/operator-guide.md) */
	DefineCustomEnumVariable(
		"remora.s3_credentials",
		"Where the target store's credentials come from.",
		"static: remora.s3_access_key_id and its secret (with "
		"remora.s3_session_token when temporary); chain: each process's "
		"AWS credential chain (environment, web identity, profile files, "
		"container endpoint, instance metadata).",
		&remora_s3_credentials, REMORA_CREDENTIALS_STATIC, credentials_options,
		PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

	DefineCustomStringVariable(
		"remora.s3_session_token",
		"Session token of temporary static credentials for the target store.",
		NULL, &remora_s3_session_token, "", PGC_SIGHUP,
		GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL, NULL, NULL, NULL);

	DefineCustomStringVariable(
		"remora.s3_role_arn",
		"A role assumed (STS AssumeRole) on top of the target's credentials.",
		NULL, &remora_s3_role_arn, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY,
		check_role_arn, NULL, NULL);

	DefineCustomStringVariable("remora.s3_external_id",
							   "The external id the role asks for, if any.",
							   NULL, &remora_s3_external_id, "", PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY, check_sts_word, NULL, NULL);

	DefineCustomStringVariable(
		"remora.s3_role_session_name",
		"The name of the sessions of the assumed role (in the store's logs).",
		NULL, &remora_s3_role_session_name, "remora", PGC_SIGHUP,
		GUC_SUPERUSER_ONLY, check_sts_word, NULL, NULL);

	DefineCustomStringVariable("remora.sts_endpoint",
							   "STS, for roles and web identities; empty means "
							   "https://sts.<remora.s3_region>.amazonaws.com.",
							   NULL, &remora_sts_endpoint, "", PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY, check_base_url, NULL, NULL);

	DefineCustomStringVariable(
		"remora.imds_endpoint",
		"The instance metadata service the credential chain asks last.", NULL,
		&remora_imds_endpoint, "http://169.254.169.254", PGC_SIGHUP,
		GUC_SUPERUSER_ONLY, check_base_url, NULL, NULL);

	DefineCustomStringVariable(
		"remora.s3_sse",
		"Server-side encryption of every object written to the target.",
		"'' (none), 'AES256', 'aws:kms' (with remora.s3_sse_kms_key_id) or "
		"'customer' (SSE-C, the key in remora.s3_sse_customer_key_file).",
		&remora_s3_sse, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY, check_sse, NULL,
		NULL);

	DefineCustomStringVariable(
		"remora.s3_sse_kms_key_id",
		"The KMS key of aws:kms encryption; empty: the store's default.", NULL,
		&remora_s3_sse_kms_key_id, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL,
		NULL, NULL);

	DefineCustomStringVariable(
		"remora.s3_sse_customer_key_file",
		"File holding the base64 of the 32-byte key of SSE-C encryption.", NULL,
		&remora_s3_sse_customer_key_file, "", PGC_SIGHUP,
		GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL, NULL, NULL, NULL);

	DefineCustomStringVariable(
		"remora.s3_storage_class",
		"Storage class of the objects written to the target; empty: the "
		"store's default.",
		"options.storage_class sets a job's own.", &remora_s3_storage_class, "",
		PGC_SIGHUP, 0, check_storage_class, NULL, NULL);

	DefineCustomStringVariable(
		"remora.worker_role",
		"Role the remora workers connect as; empty means the bootstrap "
		"superuser.",
		"The role needs LOGIN and membership in remora_worker.",
		&remora_worker_role, "", PGC_POSTMASTER, GUC_SUPERUSER_ONLY, NULL, NULL,
		NULL);

	DefineCustomStringVariable(
		"remora.ca_file",
		"CA certificates (a PEM bundle) that TLS peers must chain to.",
		"Used for sources, the Hub and the target store in place of the "
		"system's bundle; empty means the system's bundle.",
		&remora_ca_file, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY, check_ca, NULL,
		NULL);

	DefineCustomStringVariable(
		"remora.ca_path",
		"Directory of CA certificates (hashed names, as c_rehash makes them) "
		"that TLS peers may chain to.",
		NULL, &remora_ca_path, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY, check_ca,
		NULL, NULL);

	DefineCustomStringVariable(
		"remora.http_proxy",
		"Proxy for http:// sources and the Hub: "
		"http://[user:password@]host:port; empty means direct.",
		NULL, &remora_http_proxy, "", PGC_SIGHUP,
		GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL, check_proxy, NULL, NULL);

	DefineCustomStringVariable(
		"remora.https_proxy",
		"Proxy for https:// sources and the Hub: "
		"http://[user:password@]host:port; empty means direct.",
		NULL, &remora_https_proxy, "", PGC_SIGHUP,
		GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL, check_proxy, NULL, NULL);

	DefineCustomStringVariable(
		"remora.no_proxy",
		"Hosts reached directly although a proxy is set: names (with their "
		"subdomains) and addresses, comma-separated; * means all.",
		NULL, &remora_no_proxy, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL,
		NULL);

	MarkGUCPrefixReserved("remora");
}

/*
 * The lock_timeout of the launcher's and the workers' protocol calls: a
 * tenth of the lease.  A worker renews every third of the lease, so even
 * a few renewals that each wait this long on a row someone else holds
 * still leave the other attempts' renewals well inside their leases.
 */
int
remora_protocol_lock_timeout_ms(void)
{
	return Max(remora_lease_duration_ms / 10, 100);
}

/*
 * The statement timeout of one protocol call: a third of the lease, the
 * interval between renewals, so that one stuck call cannot hold up the
 * next round's renewals past the lease.
 */
int
remora_protocol_statement_timeout_ms(void)
{
	return Max(remora_lease_duration_ms / 3, 300);
}

/*
 * Settings of the launcher's and the workers' own sessions, made right
 * after they connect (and again after a reload, for the timeouts), over
 * whatever ALTER ROLE or ALTER DATABASE set:
 *	  - search_path is pg_catalog, pg_temp, so no operator, function or
 *		type a user creates in another schema can be resolved by the SQL
 *		these processes run (which also names every object by schema);
 *	  - lock_timeout bounds each lock wait of a protocol call.
 * The statement timeout is armed around each statement by the caller
 * (SPI runs no statement timer of its own).
 */
void
remora_pin_session(void)
{
	char buf[32];

	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET,
					PGC_S_OVERRIDE);
	snprintf(buf, sizeof(buf), "%d", remora_protocol_lock_timeout_ms());
	SetConfigOption("lock_timeout", buf, PGC_SUSET, PGC_S_OVERRIDE);
	snprintf(buf, sizeof(buf), "%d", remora_protocol_statement_timeout_ms());
	SetConfigOption("statement_timeout", buf, PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * The engine's configuration as the settings give it: the target store,
 * part sizes, the outbound policy, TLS trust and proxies.  No log hook.
 * May ERROR (see remora_target_secret).  The strings are the settings'
 * own: the engine copies them.
 */
void
remora_engine_config(RemoraEngineConfig *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	remora_target_config(&cfg->target);
	remora_sse_config(&cfg->sse);
	cfg->part_size = (size_t) remora_part_size_kb * 1024;
	cfg->max_upload_parts = remora_max_upload_parts;
	cfg->export_copy_cutoff = (int64_t) remora_export_copy_cutoff_kb * 1024;
	cfg->allow_networks = remora_allow_networks;
	cfg->deny_networks = remora_deny_networks;
	cfg->allow_ports = remora_allow_ports;
	cfg->connect_timeout_ms = 10000;
	cfg->stall_timeout_ms = remora_stall_timeout_ms;
	cfg->user_agent = "remora/" REMORA_VERSION;
	cfg->ca_file = remora_ca_file;
	cfg->ca_path = remora_ca_path;
	cfg->http_proxy = remora_http_proxy;
	cfg->https_proxy = remora_https_proxy;
	cfg->no_proxy = remora_no_proxy;
	cfg->max_connections_per_host = remora_max_connections_per_host;
}

/*
 * A transfer engine made from cfg; ERROR, naming who, when it cannot be
 * (the settings are wrong).  The caller frees it (remora_engine_free), on
 * an ERROR too.
 */
RemoraEngine *
remora_engine_from_config(const RemoraEngineConfig *cfg, const char *who)
{
	char          err[256];
	RemoraEngine *e = remora_engine_new(cfg, err, sizeof(err));

	if (e == NULL)
		ereport(
			ERROR,
			(errcode(ERRCODE_CONFIG_FILE_ERROR),
			 errmsg("%s cannot start its transfer engine", who),
			 errdetail("%s", err),
			 errhint("Check remora.s3_endpoint and the network settings.")));
	return e;
}

/*
 * The target store as the settings name it, for the workers' engine and
 * for remora_presign.  May ERROR (see remora_target_secret).
 */
void
remora_target_config(RemoraTargetConfig *out)
{
	memset(out, 0, sizeof(*out));
	out->endpoint = remora_s3_endpoint;
	out->region = remora_s3_region;
	out->path_style = remora_s3_path_style;
	out->credentials =
		remora_s3_credentials == REMORA_CREDENTIALS_CHAIN ? "chain" : "static";
	if (remora_s3_credentials == REMORA_CREDENTIALS_STATIC)
	{
		out->access_key_id = remora_s3_access_key_id;
		out->secret_access_key = remora_target_secret();
		out->session_token = remora_s3_session_token;
	}
	out->role_arn = remora_s3_role_arn;
	out->external_id = remora_s3_external_id;
	out->role_session_name = remora_s3_role_session_name;
	out->sts_endpoint = remora_sts_endpoint;
	out->imds_endpoint = remora_imds_endpoint;
}

/*
 * How what is written to the target is encrypted, and its storage class.
 * May ERROR (the SSE-C key file).
 */
void
remora_sse_config(RemoraSseConfig *out)
{
	out->sse = remora_s3_sse;
	out->kms_key_id = remora_s3_sse_kms_key_id;
	out->customer_key = remora_sse_customer_key();
	out->storage_class = remora_s3_storage_class;
}

/*
 * The first line of a file that holds a secret, read again when its name,
 * size or modification time changes, kept in TopMemoryContext.  ERROR
 * when it cannot be read; the message names the file (what, and the
 * setting that names it), never its content.
 */
typedef struct SecretFile
{
	char  *value;
	char  *path;
	time_t mtime;
	off_t  size;
} SecretFile;

static const char *
secret_file(SecretFile *c, const char *path, const char *what,
			const char *setting)
{
	struct stat st;
	FILE       *f;
	char        buf[1024];
	size_t      n;

	if (stat(path, &st) != 0 || (f = AllocateFile(path, "r")) == NULL)
		ereport(ERROR, (errcode_for_file_access(),
						errmsg("could not read %s \"%s\": %m", what, path),
						errhint("Check %s.", setting)));
	if (c->value && c->path && strcmp(c->path, path) == 0 &&
		c->mtime == st.st_mtime && c->size == st.st_size)
	{
		FreeFile(f);
		return c->value;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	FreeFile(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	if (c->value)
	{
		explicit_bzero(c->value, strlen(c->value));
		pfree(c->value);
	}
	if (c->path)
		pfree(c->path);
	c->value = MemoryContextStrdup(TopMemoryContext, buf);
	c->path = MemoryContextStrdup(TopMemoryContext, path);
	explicit_bzero(buf, sizeof(buf));
	c->mtime = st.st_mtime;
	c->size = st.st_size;
	return c->value;
}

/* the secrets last read from files, for the log hook (never reads) */
const char *remora_target_secret_loaded = NULL;
const char *remora_sse_key_loaded = NULL;

/*
 * The target store's secret access key: the first line of
 * remora.s3_secret_access_key_file when that is set, else
 * remora.s3_secret_access_key.  May ERROR (the file cannot be read).
 */
const char *
remora_target_secret(void)
{
	static SecretFile cache;

	if (remora_s3_secret_access_key_file == NULL ||
		remora_s3_secret_access_key_file[0] == '\0')
		return remora_s3_secret_access_key ? remora_s3_secret_access_key : "";
	remora_target_secret_loaded = NULL;
	remora_target_secret_loaded =
		secret_file(&cache, remora_s3_secret_access_key_file,
					"the target store's secret key file",
					"remora.s3_secret_access_key_file");
	return remora_target_secret_loaded;
}

/*
 * The SSE-C key (base64), from remora.s3_sse_customer_key_file, when
 * remora.s3_sse is 'customer'; "" otherwise.  May ERROR.
 */
const char *
remora_sse_customer_key(void)
{
	static SecretFile cache;

	if (remora_s3_sse == NULL || strcmp(remora_s3_sse, "customer") != 0)
		return "";
	if (remora_s3_sse_customer_key_file == NULL ||
		remora_s3_sse_customer_key_file[0] == '\0')
		ereport(ERROR, (errcode(ERRCODE_CONFIG_FILE_ERROR),
						errmsg("remora.s3_sse is 'customer' but "
							   "remora.s3_sse_customer_key_file is empty"),
						errhint("Name a file (readable by the server's OS user "
								"only) holding the base64 of a 32-byte key.")));
	remora_sse_key_loaded = NULL;
	remora_sse_key_loaded =
		secret_file(&cache, remora_s3_sse_customer_key_file,
					"the SSE-C key file", "remora.s3_sse_customer_key_file");
	return remora_sse_key_loaded;
}
