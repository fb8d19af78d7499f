/*-------------------------------------------------------------------------
 *
 * guc.h
 *	  The settings (remora.*) and what is derived from them: the protocol
 *	  calls' timeouts, the sessions' pinned settings, the target store
 *	  (guc.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_GUC_H
#define REMORA_GUC_H

#include "pg/remora.h"

#include "engine/engine.h"

/* see doc/operator-guide.md for meaning and defaults */
extern char *remora_database;
extern int   remora_max_workers;
extern int   remora_worker_concurrency;
extern int   remora_max_active_leases;
extern int   remora_default_role_weight;
extern int   remora_default_role_max_running;
extern int   remora_default_role_max_queued;
extern int   remora_default_role_max_bytes_per_second;
extern int   remora_max_bytes_per_second;
extern int   remora_min_bytes_per_second;
extern int   remora_time_slice_s;
extern int   remora_webhook_max_in_flight_per_role;
extern int   remora_webhook_timeout_ms;
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

#define REMORA_CREDENTIALS_STATIC 0
#define REMORA_CREDENTIALS_CHAIN  1
extern int   remora_s3_credentials;
extern char *remora_s3_session_token;
extern char *remora_s3_role_arn;
extern char *remora_s3_external_id;
extern char *remora_s3_role_session_name;
extern char *remora_sts_endpoint;
extern char *remora_imds_endpoint;
extern char *remora_s3_sse;
extern char *remora_s3_sse_kms_key_id;
extern char *remora_s3_sse_customer_key_file;
extern char *remora_s3_storage_class;

extern void          remora_define_gucs(void);
extern int           remora_protocol_lock_timeout_ms(void);
extern int           remora_protocol_statement_timeout_ms(void);
extern void          remora_pin_session(void);
extern const char   *remora_target_secret(void);
extern void          remora_target_config(RemoraTargetConfig *out);
extern void          remora_sse_config(RemoraSseConfig *out);
extern const char   *remora_sse_customer_key(void);
extern const char   *remora_sse_key_loaded;
extern void          remora_engine_config(RemoraEngineConfig *cfg);
extern RemoraEngine *remora_engine_from_config(const RemoraEngineConfig *cfg,
											   const char               *who);
extern const char   *remora_target_secret_loaded;

#endif /* REMORA_GUC_H */
