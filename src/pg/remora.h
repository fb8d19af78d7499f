/*-------------------------------------------------------------------------
 *
 * remora.h
 *	  Declarations shared by the PostgreSQL-facing part of remora.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_H
#define REMORA_H

#include "postgres.h"

/*
 * Remora's own SQLSTATE class "RM": what no standard code says.  RM001: the
 * outbound policy refuses a source.  (A lost lease or a refused commit is
 * not an error: the protocol functions answer false or NULL, and a worker
 * acts on that.)
 */
#define ERRCODE_REMORA_POLICY_DENIED MAKE_SQLSTATE('R', 'M', '0', '0', '1')

/* GUCs (guc.c); see doc/operator-guide.md for meaning and defaults */
extern char *remora_database;
extern int   remora_max_workers;
extern int   remora_worker_concurrency;
extern int   remora_max_active_leases;
extern int   remora_default_role_weight;
extern int   remora_default_role_max_running;
extern int   remora_default_role_max_queued;
extern int   remora_default_role_max_bytes_per_second;
extern int   remora_max_bytes_per_second;
extern int   remora_lease_duration_ms;
extern int   remora_max_attempts;
extern int   remora_retry_base_delay_ms;
extern int   remora_retry_max_delay_ms;
extern char *remora_s3_endpoint;
extern char *remora_s3_region;
extern bool  remora_s3_path_style;
extern char *remora_s3_access_key_id;
extern char *remora_s3_secret_access_key;
extern char *remora_hf_token;
extern char *remora_default_bucket;
extern char *remora_default_prefix;
extern int   remora_part_size_kb;
extern int   remora_object_connections;
extern int   remora_max_connections_per_host;
extern int   remora_export_copy_cutoff_kb;
extern int   remora_max_upload_parts;
extern char *remora_allow_networks;
extern char *remora_allow_ports;
extern char *remora_deny_networks;
extern char *remora_hf_endpoint;
extern int   remora_stall_timeout_ms;
extern int   remora_presign_max_ttl_s;
extern int   remora_retention_s;
extern char *remora_worker_role;
extern char *remora_s3_secret_access_key_file;
extern char *remora_ca_file;
extern char *remora_ca_path;
extern char *remora_http_proxy;
extern char *remora_https_proxy;
extern char *remora_no_proxy;

extern void        remora_define_gucs(void);
extern int         remora_protocol_lock_timeout_ms(void);
extern int         remora_protocol_statement_timeout_ms(void);
extern void        remora_pin_session(void);
extern const char *remora_target_secret(void);
struct RemoraTargetConfig;
extern void        remora_target_config(struct RemoraTargetConfig *out);
extern const char *remora_target_secret_loaded;
extern void        remora_register_static_worker(const char *function,
												 const char *name);
extern void        remora_reload_at_start(void);
extern int         remora_spi_execute(const char *query, int nargs, Oid *types,
									  Datum *values, const char *nulls, bool read_only,
									  long count);

/* Call remora.<name> as the extension's owner (submit.c), at most 6 args. */
extern Datum remora_call_internal(const char *name, int nargs,
								  const Oid *argtypes, const Datum *args,
								  const bool *nulls, bool *resnull);

/* A job's options.notify_url, validated and canonical (submit.c). */
extern char *remora_notify_url(const char *url);

#endif /* REMORA_H */
