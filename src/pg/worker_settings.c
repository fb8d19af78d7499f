/*-------------------------------------------------------------------------
 *
 * worker_settings.c
 *	  remora.worker_settings(): the settings an external worker
 *	  (remora-worker, src/worker/) runs with, secrets included.
 *
 * An external worker has no access to the server's configuration, so it
 * asks for it over its connection: the target store (endpoint, region,
 * addressing, access key and secret, the secret read from
 * remora.s3_secret_access_key_file when that is set), where jobs go, the
 * part size, the lease, the outbound policy, the Hub and its token, TLS
 * trust and the egress proxies.
 *
 * The settings that hold secrets are GUC_SUPERUSER_ONLY; this function
 * reads the C variables behind them, so it needs no SECURITY DEFINER.
 * Who may call it is decided by its ACL (EXECUTE is revoked from PUBLIC
 * and granted to remora_worker only) and checked again here, so that a
 * careless GRANT cannot hand the secrets to anyone else.  The connection
 * that carries them must be protected (doc/security.md: TLS with
 * sslmode=verify-full).
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "engine/engine.h"

PG_FUNCTION_INFO_V1(remora_worker_settings);

#define NCOLS 21

static char *
int_text(int64 v)
{
	return psprintf(INT64_FORMAT, v);
}

/* A setting as a column: NULL for an unset (NULL) string. */
static char *
str(const char *s)
{
	return s ? pstrdup(s) : NULL;
}

Datum
remora_worker_settings(PG_FUNCTION_ARGS)
{
	TupleDesc          desc;
	AttInMetadata     *meta;
	char              *values[NCOLS];
	RemoraTargetConfig target;
	Oid                worker = get_role_oid("remora_worker", true);
	HeapTuple          tuple;
	int                i = 0;

	if (!OidIsValid(worker) || !has_privs_of_role(GetUserId(), worker))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to read the worker settings"),
				 errdetail("Only members of remora_worker may read them."),
				 errhint("Run remora-worker as a role that is a member of "
						 "remora_worker.")));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE ||
		desc->natts != NCOLS)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("remora.worker_settings() has the wrong result "
							   "type"),
						errhint("Run ALTER EXTENSION remora UPDATE.")));

	remora_target_config(&target); /* may ERROR: the secret file */
	values[i++] = str(target.endpoint);
	values[i++] = str(target.region);
	values[i++] = pstrdup(target.path_style ? "t" : "f");
	values[i++] = str(target.access_key_id);
	values[i++] = str(target.secret_access_key);
	values[i++] = str(remora_default_bucket);
	values[i++] = str(remora_default_prefix);
	values[i++] = int_text((int64) remora_part_size_kb * 1024);
	values[i++] = int_text(remora_lease_duration_ms);
	values[i++] = int_text(remora_worker_concurrency);
	values[i++] = int_text(remora_stall_timeout_ms);
	values[i++] = str(remora_allow_networks);
	values[i++] = str(remora_deny_networks);
	values[i++] = str(remora_allow_ports);
	values[i++] = str(remora_hf_endpoint);
	values[i++] = str(remora_hf_token);
	values[i++] = str(remora_ca_file);
	values[i++] = str(remora_ca_path);
	values[i++] = str(remora_http_proxy);
	values[i++] = str(remora_https_proxy);
	values[i++] = str(remora_no_proxy);
	Assert(i == NCOLS);

	meta = TupleDescGetAttInMetadata(BlessTupleDesc(desc));
	tuple = BuildTupleFromCStrings(meta, values);
	PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}
