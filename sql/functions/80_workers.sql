-- Checkpoint-writer statistics since the server started, from shared memory.
CREATE OR REPLACE FUNCTION remora._checkpoint_stats()
RETURNS TABLE (transactions bigint, checkpoints bigint, max_batch bigint,
			   commit_ms_total double precision, commit_ms_max double precision,
			   refusals bigint)
AS 'MODULE_PATHNAME', 'remora_checkpoint_stats'
LANGUAGE C VOLATILE;

-- Live progress of running attempts, from shared memory: the caller's own
-- jobs (an administrator's: all).
CREATE OR REPLACE FUNCTION remora._progress()
RETURNS TABLE (job_id bigint, attempt_id uuid, fencing_token bigint,
			   bytes_done bigint, bytes_total bigint, rate double precision,
			   restarted boolean, started_at timestamptz,
			   updated_at timestamptz, worker_pid integer)
AS 'MODULE_PATHNAME', 'remora_progress'
LANGUAGE C VOLATILE;

-- host:port of an http(s) URL (the scheme's port when none is written),
-- the host in lower case, an IPv6 address in brackets; NULL for anything
-- else.
CREATE OR REPLACE FUNCTION remora._origin(url text) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
	SELECT lower(m[2]) || ':' || coalesce(m[3], CASE lower(m[1]) WHEN 'https' THEN '443' ELSE '80' END)
	  FROM pg_catalog.regexp_match($1, '^(https?)://(?:[^@/]*@)?(\[[^]/]*\]|[^:/?#\[]+)(?::([0-9]+))?') m
$$;

-- The origins (host:port, comma-separated) that no http(s) source,
-- redirect or webhook may reach, whatever remora.allow_networks says
-- (doc/security.md, "In 0.6.0: restores, sharing under abuse, cloud credentials"): the
-- target store (remora.s3_endpoint, when one is set), every registered
-- source endpoint, and Remora's own listeners (remora.http_listen,
-- remora.metrics_listen; one that listens on every address, on the
-- loopback ones too).  Judged at submit as written (src/pg/submit.c), and
-- by the workers on the addresses their engine resolved these to
-- (remora.worker_settings, src/pg/spi_host.c).
CREATE OR REPLACE FUNCTION remora._blocked_origins() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT string_agg(DISTINCT o, ',' ORDER BY o)
	  FROM (SELECT remora._origin(nullif(current_setting('remora.s3_endpoint', true), ''))
			UNION ALL
			SELECT remora._origin(e.url) FROM remora.source_endpoints e
			UNION ALL
			SELECT unnest(CASE WHEN w.l ~ '^(0\.0\.0\.0|\[::\]|\*):'
							   THEN ARRAY['127.0.0.1:' || w.p, '[::1]:' || w.p]
							   ELSE ARRAY[w.l] END)
			  FROM (SELECT v.l, (pg_catalog.regexp_match(v.l, ':([0-9]+)$'))[1] AS p
					  FROM (VALUES (lower(nullif(current_setting('remora.http_listen', true), ''))),
								   (lower(nullif(current_setting('remora.metrics_listen', true), '')))) v(l)
					 WHERE v.l IS NOT NULL) w) x(o)
	 WHERE o IS NOT NULL
$$;

-- What an external worker (remora-worker) needs of the server's settings:
-- the target store with its credentials, the outbound policy and the lease.
-- Secrets: executable by remora_worker only (and checked again inside);
-- not SECURITY DEFINER: the C function reads the settings (and the secret
-- key file) itself.  doc/security.md: connect with sslmode=verify-full.
CREATE OR REPLACE FUNCTION remora.worker_settings(
	OUT s3_endpoint text, OUT s3_region text, OUT s3_path_style boolean,
	OUT s3_access_key_id text, OUT s3_secret_access_key text,
	OUT default_bucket text, OUT default_prefix text, OUT part_size bigint,
	OUT lease_duration_ms integer, OUT worker_concurrency integer,
	OUT stall_timeout_ms integer, OUT allow_networks text,
	OUT deny_networks text, OUT allow_ports text, OUT hf_endpoint text,
	OUT hf_token text, OUT ca_file text, OUT ca_path text,
	OUT http_proxy text, OUT https_proxy text, OUT no_proxy text,
	OUT object_connections integer, OUT max_connections_per_host integer,
	OUT export_copy_cutoff bigint, OUT max_upload_parts integer,
	OUT blocked_origins text, OUT s3_session_token text,
	OUT s3_credentials text, OUT s3_role_arn text, OUT s3_external_id text,
	OUT s3_role_session_name text, OUT sts_endpoint text,
	OUT imds_endpoint text, OUT s3_sse text, OUT s3_sse_kms_key_id text,
	OUT s3_sse_customer_key text, OUT s3_storage_class text)
RETURNS record
AS 'MODULE_PATHNAME', 'remora_worker_settings'
LANGUAGE C VOLATILE;

/* ------------------------------------------------------------------------
 * What a worker records and reads besides the attempt protocol
 *
 * A worker (a background worker, or remora-worker as a member of
 * remora_worker) reaches the database through these functions and the
 * protocol's alone: remora_worker holds no privilege on any table.
 * ------------------------------------------------------------------------ */

-- Record a new worker incarnation: kind 'worker' (a background worker) or
-- 'external' (remora-worker, which says on which host it runs, under which
-- label, and its version).  An incarnation already recorded is an error:
-- each is new.
CREATE OR REPLACE FUNCTION remora.start_incarnation(incarnation uuid, pid integer,
										 kind text, host text, label text,
										 version text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF $1 IS NULL THEN
		RAISE EXCEPTION 'incarnation must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF $3 IS NULL OR $3 NOT IN ('worker', 'external') THEN
		RAISE EXCEPTION 'invalid incarnation kind: %', $3
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'The kind is worker or external.';
	END IF;
	INSERT INTO remora.incarnations (incarnation, pid, kind, host, label, version)
	VALUES ($1, $2, $3, $4, $5, $6);
END
$$;

-- The incarnation is alive: true if recorded, false if it has been ended
-- (the worker then starts another; its claims would be refused).  It says
-- where its target credentials came from and when they expire (never a
-- secret), for remora_workers; a worker of 0.5.0 says nothing.
CREATE OR REPLACE FUNCTION remora.heartbeat(incarnation uuid,
		credentials text DEFAULT NULL,
		credentials_expire_at timestamptz DEFAULT NULL) RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH beat AS (
		UPDATE remora.incarnations i
		   SET heartbeat_at = now(),
			   credentials = left(coalesce($2, i.credentials), 300),
			   credentials_expire_at = CASE WHEN $2 IS NULL
											THEN i.credentials_expire_at
											ELSE $3 END
		 WHERE i.incarnation = $1 AND i.stopped_at IS NULL
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM beat)
$$;

-- Record the end of an incarnation, unless already recorded (true: ended
-- now).  remora.reconcile then takes its leases as lapsed.
CREATE OR REPLACE FUNCTION remora.end_incarnation(incarnation uuid) RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH ended AS (
		UPDATE remora.incarnations i SET stopped_at = now()
		 WHERE i.incarnation = $1 AND i.stopped_at IS NULL
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM ended)
$$;

-- The launcher, first in a server lifetime: every background worker
-- incarnation of the previous lifetime has ended.  Not for remora_worker
-- (an external worker cannot know that); returns how many were recorded.
CREATE OR REPLACE FUNCTION remora.end_previous_lifetime() RETURNS integer
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH ended AS (
		UPDATE remora.incarnations i SET stopped_at = now()
		 WHERE i.kind = 'worker' AND i.stopped_at IS NULL
		RETURNING 1)
	SELECT count(*)::integer FROM ended
$$;

-- Members the attempt attempt_id may copy instead of downloading: for
-- each of paths (pos: its place in paths, from 1, the first if repeated),
-- the copy of the newest other attempt of the job; else, when the job
-- reuses an earlier job's result (options.reuse_from, resolved at submit
-- to a job id), that result's member, unless the job is deleted or its
-- bucket is another (or, for an http(s) source, its URL).  from_job: the earlier job the bytes came from (null:
-- this job downloaded them).  Paths with none are absent.
CREATE OR REPLACE FUNCTION remora.earlier_members(job_id bigint, attempt_id uuid, paths text[])
RETURNS TABLE (pos integer, path text, key text, etag text, sha256 text,
			   size bigint, source jsonb, from_job bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT DISTINCT ON (c.path) c.pos, c.path, c.key, c.etag, c.sha256, c.size,
		   c.source, c.from_job
	  FROM (SELECT p.pos::integer AS pos, m.path, m.key, m.etag, m.sha256, m.size,
				   m.source, m.reused_from_job AS from_job, 0 AS rank, t.attempt_no
			  FROM unnest($3) WITH ORDINALITY p(path, pos)
			  JOIN remora.members m ON m.path = p.path
			  JOIN remora.attempts t ON t.attempt_id = m.attempt_id
			 WHERE t.job_id = $1 AND t.attempt_id <> $2 AND m.key IS NOT NULL
			   AND m.bucket = (SELECT j.bucket FROM remora.jobs j WHERE j.job_id = $1)
			UNION ALL
			SELECT p.pos::integer, m.path, m.key, m.etag, m.sha256, m.size,
				   m.source, e.job_id, 1, 0
			  FROM remora.jobs j
			  JOIN remora.jobs e
				ON e.job_id = (j.spec #>> '{options,reuse_from}')::bigint
			   AND e.bucket = j.bucket AND e.deleted_at IS NULL
			   AND e.hard_delete_requested_at IS NULL
			   -- an ETag or a date is an HTTP resource's own: the same URL
			   AND (j.source_kind <> 'http' OR e.source = j.source)
			  JOIN remora.results r ON r.job_id = e.job_id
			  JOIN unnest($3) WITH ORDINALITY p(path, pos) ON true
			  JOIN remora.members m ON m.attempt_id = r.attempt_id AND m.path = p.path
			 WHERE j.job_id = $1 AND m.key IS NOT NULL) c
	 ORDER BY c.path, c.rank, c.attempt_no DESC, c.pos
$$;

-- The registered source endpoint a job of an s3 source names, with its
-- secret (a worker signs its requests with it): no row if there is none.
-- region, access_key_id and secret_access_key are '' rather than null; ca_pem
-- is null when the endpoint has no CAs of its own.
CREATE OR REPLACE FUNCTION remora.source_endpoint_settings(name text)
RETURNS TABLE (url text, region text, path_style boolean,
			   access_key_id text, secret_access_key text, ca_pem text,
			   session_token text, credentials text, role_arn text,
			   external_id text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT e.url, coalesce(e.region, ''), e.path_style,
		   coalesce(e.access_key_id, ''), coalesce(e.secret_access_key, ''),
		   e.ca_pem, coalesce(e.session_token, ''), e.credentials,
		   coalesce(e.role_arn, ''), coalesce(e.external_id, '')
	  FROM remora.source_endpoints e
	 WHERE e.name = $1
$$;

