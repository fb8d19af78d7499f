-- ---------------------------------------------------------------------
-- remora.max_upload_parts reaches remora-worker: worker_settings() gets
-- a column, so it is dropped and made again (an OUT list cannot change
-- in place), with the same privileges.
-- ---------------------------------------------------------------------

DROP FUNCTION remora.worker_settings();

-- What an external worker (remora-worker) needs of the server's settings:
-- the target store with its credentials, the outbound policy and the lease.
-- Secrets: executable by remora_worker only (and checked again inside);
-- not SECURITY DEFINER: the C function reads the settings (and the secret
-- key file) itself.  doc/security.md: connect with sslmode=verify-full.
CREATE FUNCTION remora.worker_settings(
	OUT s3_endpoint text, OUT s3_region text, OUT s3_path_style boolean,
	OUT s3_access_key_id text, OUT s3_secret_access_key text,
	OUT default_bucket text, OUT default_prefix text, OUT part_size bigint,
	OUT lease_duration_ms integer, OUT worker_concurrency integer,
	OUT stall_timeout_ms integer, OUT allow_networks text,
	OUT deny_networks text, OUT allow_ports text, OUT hf_endpoint text,
	OUT hf_token text, OUT ca_file text, OUT ca_path text,
	OUT http_proxy text, OUT https_proxy text, OUT no_proxy text,
	OUT object_connections integer, OUT max_connections_per_host integer,
	OUT export_copy_cutoff bigint, OUT max_upload_parts integer)
RETURNS record
AS 'MODULE_PATHNAME', 'remora_worker_settings'
LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION remora.worker_settings() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.worker_settings() TO remora_worker;
