/*-------------------------------------------------------------------------
 *
 * worker_settings.c
 *	  remora.worker_settings(): the settings an external worker
 *	  (remora-worker, src/worker/) runs with, secrets included.
 *
 * An external worker has no access to the server's configuration, so it
 * asks for it over its connection: the target store (endpoint, region,
 * addressing, where its credentials come from: static keys, the secret
 * read from remora.s3_secret_access_key_file when that is set, with a
 * session token, or the worker's own AWS credential chain, with no key at
 * all; a role to assume; encryption, the SSE-C key included, and storage
 * class), where jobs go, the part size, the lease, the outbound policy,
 * the Hub and its token, TLS trust and the egress proxies.
 *
 * The settings that hold secrets are GUC_SUPERUSER_ONLY; this function
 * reads the C variables behind them, so it needs no SECURITY DEFINER.
 * Who may call it is decided by its ACL (EXECUTE is revoked from PUBLIC
 * and granted to remora_worker only) and checked again here, so that a
 * careless GRANT cannot hand the secrets to anyone else.
 *
 * The connection that carries them must be protected too: libpq's
 * default sslmode=prefer falls back to clear text without a word.  So the
 * settings are answered only over a Unix socket, from a loopback address
 * or over an encrypted connection (SSL, or GSSAPI encryption); a plain TCP
 * connection from anywhere else gets an error and no secret.  The server
 * sees only its own hop: a pooler on the server's host that takes remote
 * clients in clear text must itself require TLS (doc/security.md).
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "common/ip.h"
#include "port/pg_bswap.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"

#include "engine/engine.h"
#include "pg/guc.h"
#include "pg/submit.h"

PG_FUNCTION_INFO_V1(remora_worker_settings);

#define NCOLS 37

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

/*
 * May the worker settings travel over this session's connection?  A
 * process with no client connection (a background worker) has nothing to
 * protect.  A Unix socket and a loopback address never leave the host;
 * anything else must be encrypted.  Read from the session's activity
 * entry, which records the client address and encryption as pg_stat_ssl
 * and pg_stat_gssapi show them (the server's Port struct needs the GSSAPI
 * headers to be seen from an extension).  host receives the client
 * address for a refusal.
 */
static bool
transport_protected(char *host, size_t hostlen)
{
	const PgBackendStatus         *be = MyBEEntry;
	const struct sockaddr_storage *addr;

	strlcpy(host, "?", hostlen);
	if (MyProcPort == NULL)
		return true;
	if (be == NULL)
		return false; /* cannot tell: refuse */
	if (be->st_ssl)
		return true;
	if (be->st_gss && be->st_gssstatus != NULL && be->st_gssstatus->gss_enc)
		return true;
	addr = &be->st_clientaddr.addr;
	switch (addr->ss_family)
	{
		case AF_UNIX:
			return true;
		case AF_INET:
		{
			const struct sockaddr_in *in = (const struct sockaddr_in *) addr;

			if ((pg_ntoh32(in->sin_addr.s_addr) >> 24) == 127)
				return true;
			break;
		}
		case AF_INET6:
		{
			const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) addr;

			if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
				return true;
			/* ::ffff:127.0.0.0/104, IPv4 loopback on a v6 socket */
			if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) &&
				in6->sin6_addr.s6_addr[12] == 127)
				return true;
			break;
		}
	}
	(void) pg_getnameinfo_all(addr, be->st_clientaddr.salen, host, hostlen,
							  NULL, 0, NI_NUMERICHOST);
	return false;
}

Datum
remora_worker_settings(PG_FUNCTION_ARGS)
{
	TupleDesc          desc;
	AttInMetadata     *meta;
	char              *values[NCOLS];
	RemoraTargetConfig target;
	RemoraSseConfig    sse;
	Oid                worker = get_role_oid("remora_worker", true);
	HeapTuple          tuple;
	int                i = 0;
	char               host[NI_MAXHOST];
	Datum              blocked;
	bool               isnull;

	if (!OidIsValid(worker) || !has_privs_of_role(GetUserId(), worker))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to read the worker settings"),
				 errdetail("Only members of remora_worker may read them."),
				 errhint("Run remora-worker as a role that is a member of "
						 "remora_worker.")));

	/*
	 * 28000, as for a pg_hba.conf "hostssl" line that refuses a plain
	 * connection: the role may read the settings, the connection may not
	 * carry them.
	 */
	if (!transport_protected(host, sizeof(host)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("the worker settings are not sent over an "
						"unencrypted connection"),
				 errdetail("The connection comes from host \"%s\" over TCP "
						   "without SSL, and the settings hold the target "
						   "store's secret key, the Hub token and the proxy "
						   "credentials.",
						   host),
				 errhint("Connect with sslmode=require (better verify-full), "
						 "or over a Unix socket or a loopback address.")));
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
	values[i++] = int_text(remora_object_connections);
	values[i++] = int_text(remora_max_connections_per_host);
	values[i++] = int_text((int64) remora_export_copy_cutoff_kb * 1024);
	values[i++] = int_text(remora_max_upload_parts);
	blocked =
		remora_call_internal("_blocked_origins", 0, NULL, NULL, NULL, &isnull);
	values[i++] = isnull ? NULL : TextDatumGetCString(blocked);
	/* with the chain, each worker resolves its own: no key travels */
	values[i++] = str(target.session_token);
	values[i++] = str(target.credentials);
	values[i++] = str(target.role_arn);
	values[i++] = str(target.external_id);
	values[i++] = str(target.role_session_name);
	values[i++] = str(target.sts_endpoint);
	values[i++] = str(target.imds_endpoint);
	remora_sse_config(&sse); /* may ERROR: the SSE-C key file */
	values[i++] = str(sse.sse);
	values[i++] = str(sse.kms_key_id);
	values[i++] = str(sse.customer_key);
	values[i++] = str(sse.storage_class);
	Assert(i == NCOLS);

	meta = TupleDescGetAttInMetadata(BlessTupleDesc(desc));
	tuple = BuildTupleFromCStrings(meta, values);
	PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}
