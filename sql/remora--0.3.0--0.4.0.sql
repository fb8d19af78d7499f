-- remora 0.3.0 -> 0.4.0
--
-- Each change to sql/remora.sql since 0.3.0 is carried here as well, in the
-- order it was made; a function changed more than once appears once, in
-- its final form, where it last changed (remora.claim: the lease
-- reservations; remora._leases_in_use: the PL/pgSQL helpers).
-- test/e2e/upgrade.sh checks that an updated catalog equals a fresh one.

\echo Use "ALTER EXTENSION remora UPDATE TO '0.4.0'" to load this file. \quit

/* ------------------------------------------------------------------------
 * Reconcile reads the jobs to rebuild the queue only after coordination
 * state was lost (remora.coordination), not every second.
 * ------------------------------------------------------------------------ */

-- A row while the queue and the leases are whole.  Crash recovery and a
-- promoted standby empty it with them (it is unlogged too), and a TRUNCATE
-- of either removes it (the triggers below): reconcile then rebuilds the
-- queue from the jobs, which it need not read otherwise (that read grows
-- with the backlog, and reconcile runs every second).
CREATE UNLOGGED TABLE remora.coordination (
	intact			boolean PRIMARY KEY DEFAULT true CHECK (intact)
);

CREATE FUNCTION remora._coordination_lost() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	DELETE FROM remora.coordination;
	RETURN NULL;
END
$$;
CREATE TRIGGER queue_truncated AFTER TRUNCATE ON remora.queue
	FOR EACH STATEMENT EXECUTE FUNCTION remora._coordination_lost();
CREATE TRIGGER leases_truncated AFTER TRUNCATE ON remora.leases
	FOR EACH STATEMENT EXECUTE FUNCTION remora._coordination_lost();

-- Rebuild coordination state from durable state and expire lapsed leases.
-- Returns the number of repairs made.  Safe to run at any time, by any
-- number of callers.
CREATE OR REPLACE FUNCTION remora.reconcile() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	repairs		integer := 0;
	n			integer;
	l			record;
	v			record;
BEGIN
	-- an incarnation known to have stopped holds no live lease
	UPDATE remora.leases le SET expires_at = now() - interval '1 microsecond'
	  FROM remora.incarnations i
	 WHERE i.incarnation = le.incarnation AND i.stopped_at IS NOT NULL
	   AND le.expires_at >= now();

	-- leases that lapsed: the attempt is lost (settled under the job lock).
	-- A job row someone else holds (its worker renewing, its owner
	-- cancelling in an open transaction) is left for the next round, so
	-- that nobody can stall the reconciliation of other jobs.
	FOR l IN SELECT le.attempt_id, le.fencing_token, le.job_id FROM remora.leases le
			  WHERE le.expires_at < now() ORDER BY le.job_id LOOP
		PERFORM 1 FROM remora.jobs j WHERE j.job_id = l.job_id FOR UPDATE SKIP LOCKED;
		CONTINUE WHEN NOT FOUND;
		v := remora._authorize(l.attempt_id, l.fencing_token);
		IF v.verdict IN ('lost', 'cancelled') THEN
			repairs := repairs + 1;
		END IF;
	END LOOP;

	-- leases whose attempt no longer runs
	DELETE FROM remora.leases le
	 WHERE NOT EXISTS (SELECT 1 FROM remora.attempts a
						JOIN remora.jobs j ON j.job_id = a.job_id
					   WHERE a.attempt_id = le.attempt_id AND a.state = 'running'
						 AND j.current_attempt = a.attempt_id);
	GET DIAGNOSTICS n = ROW_COUNT;
	repairs := repairs + n;

	-- running attempts whose lease was lost with coordination state: a
	-- fresh lease, so that a live worker keeps it and a dead one loses it
	-- (under the lease lock: these count against remora.max_active_leases
	-- as running jobs already)
	PERFORM remora._lock_leases();
	INSERT INTO remora.leases (attempt_id, job_id, fencing_token, incarnation, expires_at)
	SELECT a.attempt_id, a.job_id, a.fencing_token, a.incarnation,
		   clock_timestamp() + remora._setting_interval('remora.lease_duration')
	  FROM remora.jobs j
	  JOIN remora.attempts a ON a.attempt_id = j.current_attempt
	 WHERE j.state = 'running' AND a.state = 'running'
	   AND NOT EXISTS (SELECT 1 FROM remora.leases le WHERE le.attempt_id = a.attempt_id)
	ON CONFLICT DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	repairs := repairs + n;

	-- queue entries: exactly the jobs waiting to be claimed.  Submit,
	-- retry, cancel and claim keep them so; they are rebuilt from the jobs
	-- only when coordination state was lost (remora.coordination).
	IF NOT EXISTS (SELECT 1 FROM remora.coordination) THEN
		DELETE FROM remora.queue q
		 WHERE NOT EXISTS (SELECT 1 FROM remora.jobs j
						   WHERE j.job_id = q.job_id AND j.state IN ('queued', 'retrying'));
		GET DIAGNOSTICS n = ROW_COUNT;
		repairs := repairs + n;

		INSERT INTO remora.queue (job_id, priority, not_before)
		SELECT j.job_id, j.priority, j.not_before
		  FROM remora.jobs j
		 WHERE j.state IN ('queued', 'retrying')
		   AND NOT EXISTS (SELECT 1 FROM remora.queue q WHERE q.job_id = j.job_id)
		ON CONFLICT DO NOTHING;
		GET DIAGNOSTICS n = ROW_COUNT;
		repairs := repairs + n;
		INSERT INTO remora.coordination VALUES (true) ON CONFLICT DO NOTHING;
	END IF;

	RETURN repairs;
END
$$;
REVOKE ALL ON FUNCTION remora._coordination_lost() FROM PUBLIC;

/* ------------------------------------------------------------------------
 * TLS trust: a registered source endpoint may carry its own CA
 * certificates, set by remora.set_source_endpoint_ca and read only by the
 * workers.
 * ------------------------------------------------------------------------ */
ALTER TABLE remora.source_endpoints ADD COLUMN ca_pem text;

-- Trust a private CA for a registered source endpoint: PEM certificates
-- its TLS certificate may chain to (besides remora.ca_file); NULL forgets
-- them.  Only the workers read them: no view shows them.
CREATE FUNCTION remora.set_source_endpoint_ca(name text, ca_pem text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF $2 IS NOT NULL AND ($2 !~ '-----BEGIN CERTIFICATE-----' OR length($2) > 1048576) THEN
		RAISE EXCEPTION 'invalid endpoint CA' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'Give PEM certificates ("-----BEGIN CERTIFICATE-----"), at most 1 MB, or NULL.';
	END IF;
	UPDATE remora.source_endpoints e SET ca_pem = $2 WHERE e.name = $1;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'source endpoint "%" does not exist', $1
			USING ERRCODE = 'undefined_object',
				  HINT = 'Register it first with remora.register_source_endpoint().';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION remora.set_source_endpoint_ca(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.set_source_endpoint_ca(text, text) TO remora_admin;

/* ------------------------------------------------------------------------
 * Web client sorting: the jobs list ordered by priority pages
 * by keyset over (priority, job_id), served by this index.
 * ------------------------------------------------------------------------ */
-- the web client's list by priority (keyset over (priority, job_id))
CREATE INDEX jobs_priority_idx ON remora.jobs (priority, job_id)
	WHERE deleted_at IS NULL;

/* ------------------------------------------------------------------------
 * Each byte sent once: parts go straight into the attempt's own
 * multipart upload of the member, and checkpoints name that upload and
 * its validated parts instead of segment objects.
 * ------------------------------------------------------------------------ */
-- Validate a checkpoint before anything is written: what a later claim
-- offers as resume state must be what the workers can read back.  An
-- object's state names its multipart upload (upload_key, upload_id) and
-- the validated parts of it, in order.
CREATE OR REPLACE FUNCTION remora._check_checkpoint(cp jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
	st		jsonb := cp -> 'state';
	part	jsonb;
	bad		text;
BEGIN
	IF cp IS NULL OR jsonb_typeof(cp) <> 'object' THEN
		bad := 'A checkpoint must be a JSON object.';
	ELSIF NOT remora._is_count(cp -> 'bytes_done') OR NOT remora._is_count(cp -> 'bytes_total') THEN
		bad := '"bytes_done" and "bytes_total" must be non-negative integers.';
	ELSIF jsonb_typeof(cp -> 'restart_reason') NOT IN ('string', 'null') THEN
		bad := '"restart_reason" must be a string.';
	ELSIF cp ? 'state' AND jsonb_typeof(st) <> 'object' THEN
		bad := '"state" must be a JSON object.';
	ELSIF jsonb_typeof(st -> 'etag') NOT IN ('string', 'null')
		OR jsonb_typeof(st -> 'last_modified') NOT IN ('string', 'null')
		OR jsonb_typeof(st -> 'sha256_state') NOT IN ('string', 'null') THEN
		bad := '"state.etag", "state.last_modified" and "state.sha256_state" must be strings.';
	ELSIF NOT remora._is_count(st -> 'size') OR NOT remora._is_count(st -> 'members_done')
		OR NOT remora._is_count(st -> 'members_total') THEN
		bad := '"state.size", "state.members_done" and "state.members_total" must be non-negative integers.';
	ELSIF st ? 'parts' AND jsonb_typeof(st -> 'parts') <> 'array' THEN
		bad := '"state.parts" must be an array.';
	ELSIF st ? 'parts' AND (jsonb_typeof(st -> 'upload_key') IS DISTINCT FROM 'string'
		OR jsonb_typeof(st -> 'upload_id') IS DISTINCT FROM 'string') THEN
		bad := '"state.parts" needs the upload they belong to: string "state.upload_key" and "state.upload_id".';
	END IF;
	IF bad IS NULL AND jsonb_typeof(st -> 'parts') = 'array' THEN
		FOR part IN SELECT value FROM jsonb_array_elements(st -> 'parts') LOOP
			IF jsonb_typeof(part) <> 'object'
				OR jsonb_typeof(part -> 'etag') IS DISTINCT FROM 'string'
				OR part -> 'size' IS NULL OR NOT remora._is_count(part -> 'size') THEN
				bad := 'Each of "state.parts" needs a string etag and a non-negative integer size.';
				EXIT;
			END IF;
		END LOOP;
	END IF;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'invalid checkpoint'
			USING ERRCODE = 'invalid_parameter_value', DETAIL = bad;
	END IF;
END
$$;

/* ------------------------------------------------------------------------
 * Export to stable keys with forward recovery (remora_export,
 * remora_export_resolve, remora_exports, remora_export_attempts; the state
 * outcome_unknown): an export is a job of source kind 'export', so that
 * claim, renew, checkpoint, commit, fail, cancel and reconcile apply to it.
 * ------------------------------------------------------------------------ */

ALTER TABLE remora.jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE remora.jobs ADD CONSTRAINT jobs_state_check
		CHECK (state IN ('queued', 'running', 'retrying',
						 'succeeded', 'failed', 'cancelled',
						 'outcome_unknown'));
ALTER TABLE remora.attempts ADD COLUMN export_ledger jsonb;

-- An export (remora_export): a job of source kind 'export' in
-- remora.jobs, claimed, leased, fenced and cancelled like any job, plus
-- what it publishes.  Recorded before dispatch: the output digest (the
-- exported result's manifest SHA-256), members and bytes, the source
-- fingerprint (a digest of the member inventory) and the publication
-- digest (target, if_exists, output).  remora.export_refs holds each
-- member's conclusive answer.
CREATE TABLE remora.exports (
	export_id		bigint PRIMARY KEY REFERENCES remora.jobs ON DELETE CASCADE,
	job_id			bigint NOT NULL REFERENCES remora.jobs,
	result_attempt	uuid NOT NULL,	-- the exported result's attempt
	if_exists		text NOT NULL
		CHECK (if_exists IN ('fail', 'overwrite', 'skip_identical')),
	output_digest	text NOT NULL CHECK (output_digest ~ '^[0-9a-f]{64}$'),
	source_digest	text NOT NULL,
	publication_digest text NOT NULL,
	members			bigint NOT NULL,
	bytes			bigint NOT NULL,
	mode			text NOT NULL DEFAULT 'dispatch'
		CHECK (mode IN ('dispatch', 'verify')),
	committed_attempt uuid,
	decisions		jsonb NOT NULL DEFAULT '[]'	-- resolutions: who, what, when
);
CREATE INDEX exports_job_idx ON remora.exports (job_id);

-- An export's conclusive answer for each member of the exported result, by
-- path: {path, key, etag, version_id, size, outcome}.  A row a member, so
-- that a checkpoint costs its batch, not every answer recorded so far.
CREATE TABLE remora.export_refs (
	export_id		bigint NOT NULL REFERENCES remora.exports ON DELETE CASCADE,
	path			text NOT NULL,
	ref				jsonb NOT NULL,
	PRIMARY KEY (export_id, path)
);
SELECT pg_catalog.pg_extension_config_dump('remora.exports', '');
SELECT pg_catalog.pg_extension_config_dump('remora.export_refs', '');
ALTER TABLE remora.exports ENABLE ROW LEVEL SECURITY;
CREATE POLICY exports_visible ON remora.exports FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = exports.export_id));
ALTER TABLE remora.export_refs ENABLE ROW LEVEL SECURITY;
CREATE POLICY export_refs_visible ON remora.export_refs FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = export_refs.export_id));
GRANT SELECT ON remora.exports, remora.export_refs TO remora_user;

-- End a running attempt that did not commit, and move its job on:
-- cancelled if cancellation was requested, retrying while budget remains
-- and the failure is retryable, failed otherwise.  Caller holds the job lock.
-- An export whose writes may have been sent without a conclusive answer
-- (the worker says class 'outcome_unknown', the attempt was lost, or a
-- stopping worker handed it back, class 'worker') and an export being
-- verified end outcome_unknown instead: never retried.
CREATE OR REPLACE FUNCTION remora._settle(j remora.jobs, a remora.attempts, outcome text,
							   err jsonb, retryable boolean)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
	next_state	text;
	wait		interval;
	recorded	jsonb;
	ex_mode		text;
BEGIN
	IF err IS NOT NULL THEN
		recorded := err || jsonb_build_object(
			'attempt_no', a.attempt_no, 'attempt_id', a.attempt_id,
			'retryable', retryable, 'at', now());
	END IF;

	UPDATE remora.attempts
	   SET state = outcome, error = recorded, finished_at = now()
	 WHERE attempt_id = a.attempt_id;
	DELETE FROM remora.leases WHERE attempt_id = a.attempt_id;

	IF j.source_kind = 'export' THEN
		SELECT e.mode INTO ex_mode FROM remora.exports e WHERE e.export_id = j.job_id;
	END IF;

	IF ex_mode = 'verify' THEN
		next_state := 'outcome_unknown';
	ELSIF outcome = 'cancelled' OR j.cancel_requested_at IS NOT NULL THEN
		next_state := 'cancelled';
	ELSIF ex_mode IS NOT NULL
		AND (outcome = 'lost' OR err ->> 'class' IN ('outcome_unknown', 'worker')) THEN
		next_state := 'outcome_unknown';
	ELSIF retryable AND j.attempts_used < j.max_attempts THEN
		next_state := 'retrying';
		wait := remora._backoff(a.attempt_no,
								CASE WHEN jsonb_typeof(err -> 'retry_after') = 'number'
									 THEN (err ->> 'retry_after')::numeric END);
	ELSE
		next_state := 'failed';
	END IF;

	UPDATE remora.jobs
	   SET state = next_state,
		   last_error = coalesce(recorded, last_error),
		   not_before = CASE WHEN wait IS NULL THEN not_before ELSE now() + wait END,
		   finished_at = CASE WHEN next_state = 'retrying' THEN NULL ELSE now() END
	 WHERE job_id = j.job_id;

	IF next_state = 'retrying' THEN
		INSERT INTO remora.queue (job_id, priority, not_before)
		VALUES (j.job_id, j.priority, now() + wait)
		ON CONFLICT (job_id) DO UPDATE SET not_before = EXCLUDED.not_before;
	END IF;
	RETURN next_state;
END
$$;

-- Does an s3:// source on the target store reach into the staging and
-- result area of Remora's own jobs?  Every object a job writes is under
-- <prefix>/<job id>/<attempt id>/.  Refused: a key or prefix inside such
-- an area (by its shape, or under a job's <prefix>/<digits>/), and a
-- prefix whose listing could return keys of an area, now or later: a
-- parent of the directory of the default target, of an existing job's
-- prefix or of an exact target grant, and anything that overlaps a target
-- grant ending in '*' (jobs may be created anywhere under it).  Returns the
-- area reached (as '<dir><job id>/' or '<dir>…/<job id>/'), or NULL.
CREATE OR REPLACE FUNCTION remora._job_area_reached(spec jsonb) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	WITH src AS (
		SELECT $1 #>> '{source,bucket}' AS bucket,
			   $1 #>> '{source,key}' AS path,
			   $1 #>> '{source,kind}' = 's3_prefix' AS listing
		 WHERE $1 #>> '{source,kind}' IN ('s3_object', 's3_prefix')
		   AND ($1 #>> '{options,endpoint}' IS NULL
				OR EXISTS (SELECT 1 FROM remora.source_endpoints e
							WHERE e.name = $1 #>> '{options,endpoint}'
							  AND rtrim(e.url, '/') = rtrim(current_setting('remora.s3_endpoint'), '/')))),
	dirs AS (
		SELECT remora._prefix_dir(current_setting('remora.default_prefix')) AS dir,
			   false AS wild
		  FROM src WHERE src.bucket = current_setting('remora.default_bucket')
		UNION
		SELECT remora._prefix_dir(j.prefix), false
		  FROM src JOIN remora.jobs j ON j.bucket = src.bucket
		 WHERE j.source_kind <> 'export'
		UNION
		SELECT CASE WHEN right(g.prefix_pattern, 1) = '*'
					THEN rtrim(g.prefix_pattern, '*')
					ELSE remora._prefix_dir(g.prefix_pattern) END,
			   right(g.prefix_pattern, 1) = '*'
		  FROM src JOIN remora.target_grants g ON g.bucket = src.bucket)
	SELECT coalesce(
		(SELECT d.dir || CASE WHEN d.wild THEN '…/<job id>/' ELSE '<job id>/' END
		   FROM src, dirs d
		  WHERE (src.listing AND left(d.dir, length(src.path)) = src.path)
			 OR (src.listing AND d.wild AND left(src.path, length(d.dir)) = d.dir)
			 OR (NOT d.wild AND left(src.path, length(d.dir)) = d.dir
				 AND substr(src.path, length(d.dir) + 1) ~ '^[0-9]+/')
		  ORDER BY d.wild, d.dir DESC LIMIT 1),
		(SELECT '<prefix>/<job id>/<attempt id>/' FROM src
		  WHERE src.path ~ '(^|/)[0-9]+/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/'))
$$;

-- Delete: tombstone (the job leaves the default views; objects stay).  An
-- unfinished job is cancelled first.  hard also records the request to
-- delete the job's objects, which the workers carry out.
CREATE OR REPLACE FUNCTION remora._delete(caller oid, job bigint, hard boolean)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	j	remora.jobs := remora._job_for(caller, job);
BEGIN
	IF j.state IN ('queued', 'retrying', 'running') THEN
		PERFORM remora._cancel(caller, job);
	END IF;
	UPDATE remora.jobs
	   SET deleted_at = coalesce(deleted_at, now()),
		   hard_delete_requested_at = CASE WHEN hard
			   THEN coalesce(hard_delete_requested_at, now())
			   ELSE hard_delete_requested_at END
	 WHERE job_id = job;
	-- a job that never ran wrote nothing: its hard delete is done; an
	-- export stages nothing, and its stable keys are never deleted
	IF hard AND (j.source_kind = 'export'
				 OR NOT EXISTS (SELECT 1 FROM remora.attempts a WHERE a.job_id = job)) THEN
		UPDATE remora.jobs SET hard_deleted_at = coalesce(hard_deleted_at, now())
		 WHERE job_id = job;
	END IF;
END
$$;

-- Record validated resume progress and completed members of the current
-- attempt.  checkpoint: {"state": {...}, "bytes_done": n, "bytes_total": n,
-- "members": [{path, bucket, key, size, sha256, etag, source}]}; every key
-- is optional.  Repeating a call records nothing new.
CREATE OR REPLACE FUNCTION remora.checkpoint(attempt_id uuid, fencing_token bigint,
								  checkpoint jsonb)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_attempt	uuid := $1;
	p_token		bigint := $2;
	p_cp		jsonb := $3;
	v		record;
BEGIN
	PERFORM remora._check_checkpoint(p_cp);
	PERFORM remora._check_members(p_cp -> 'members');

	v := remora._authorize(p_attempt, p_token);
	IF v.verdict <> 'ok' THEN
		RETURN false;
	END IF;

	PERFORM remora._record_members(p_attempt, p_cp -> 'members');
	IF (v.j).source_kind = 'export' THEN
		PERFORM remora._record_refs((v.j).job_id, p_cp -> 'references');
	END IF;

	-- the attempt could not use the checkpoint it was offered: say so, and
	-- drop the stale one
	IF jsonb_typeof(p_cp -> 'restart_reason') = 'string' THEN
		UPDATE remora.attempts a
		   SET restart_reason = coalesce(a.restart_reason, p_cp ->> 'restart_reason')
		 WHERE a.attempt_id = p_attempt;
		DELETE FROM remora.checkpoints c
		 WHERE c.job_id = (v.j).job_id AND c.attempt_id <> p_attempt;
	END IF;

	IF p_cp ? 'state' THEN
		INSERT INTO remora.checkpoints AS c
			(job_id, attempt_id, fencing_token, state, bytes_done, bytes_total)
		VALUES ((v.j).job_id, p_attempt, p_token,
				p_cp -> 'state',
				coalesce((p_cp ->> 'bytes_done')::bigint, 0),
				(p_cp ->> 'bytes_total')::bigint)
		ON CONFLICT ON CONSTRAINT checkpoints_pkey DO UPDATE
		   SET attempt_id = EXCLUDED.attempt_id,
			   fencing_token = EXCLUDED.fencing_token,
			   state = EXCLUDED.state,
			   bytes_done = EXCLUDED.bytes_done,
			   bytes_total = EXCLUDED.bytes_total,
			   writes = c.writes + 1,
			   updated_at = now();
	END IF;
	RETURN true;
END
$$;

-- The compare-and-swap that publishes a result.  True only for the current
-- attempt and token of a running job whose cancellation was not requested
-- (or for the exact repeat of the call that succeeded); false otherwise,
-- changing nothing.  The descriptor must name a manifest under the
-- attempt's own staging prefix; its member count and bytes must equal those
-- of the members recorded for the attempt plus its "entries", exactly.
CREATE OR REPLACE FUNCTION remora.commit(attempt_id uuid, fencing_token bigint,
							  manifest jsonb)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_attempt	uuid := $1;
	p_token		bigint := $2;
	v			record;
	r			remora.results;
	d			jsonb;
	staging		text;
	n			bigint;
	total		bigint;
BEGIN
	IF EXISTS (SELECT 1 FROM remora.attempts a
				 JOIN remora.exports e ON e.export_id = a.job_id
				WHERE a.attempt_id = p_attempt) THEN
		RETURN remora._commit_export(p_attempt, p_token, manifest);
	END IF;
	d := remora._check_manifest(manifest);

	v := remora._authorize(p_attempt, p_token);
	IF v.verdict <> 'ok' THEN
		-- the repeat of a successful call (also one that waited for it on the
		-- job lock) is true; everything else is refused
		SELECT * INTO r FROM remora.results res WHERE res.attempt_id = p_attempt;
		RETURN FOUND AND r.fencing_token = p_token AND r.descriptor = d;
	END IF;

	staging := remora._staging_prefix((v.j).prefix, (v.j).job_id, p_attempt);
	IF left(d ->> 'key', length(staging)) <> staging
		OR length(d ->> 'key') = length(staging) THEN
		RAISE WARNING 'commit refused: the manifest key is not under the attempt''s staging prefix';
		RETURN false;
	END IF;

	-- every member must be an object this attempt wrote, in the job's
	-- bucket, and not the manifest itself
	IF EXISTS (SELECT 1
				 FROM (SELECT m.bucket, m.key FROM remora.members m
						WHERE m.attempt_id = p_attempt
					   UNION ALL
					   SELECT e.value ->> 'bucket', e.value ->> 'key'
						 FROM jsonb_array_elements(coalesce(d -> 'entries', '[]')) e) k
				WHERE k.bucket <> (v.j).bucket
				   OR left(k.key, length(staging)) <> staging
				   OR k.key = d ->> 'key') THEN
		RAISE WARNING 'commit refused: a member is not an object of the attempt''s staging prefix, or is the manifest';
		RETURN false;
	END IF;

	-- the member set this commit would publish: recorded members plus the
	-- descriptor's entries.  They must add up exactly to the descriptor's
	-- counts, also when there are none: a descriptor that claims members
	-- nobody recorded would publish an empty result.
	SELECT count(*), coalesce(sum(s.size), 0) INTO n, total
	  FROM (SELECT m.path, m.size FROM remora.members m
			 WHERE m.attempt_id = p_attempt
			UNION
			SELECT e.value ->> 'path', (e.value ->> 'size')::bigint
			  FROM jsonb_array_elements(coalesce(d -> 'entries', '[]')) e) s;
	IF n <> (d ->> 'members')::bigint OR total <> (d ->> 'bytes')::bigint THEN
		RAISE WARNING 'commit refused: the manifest lists % members and % bytes, the attempt recorded % and %',
			d ->> 'members', d ->> 'bytes', n, total;
		RETURN false;
	END IF;
	PERFORM remora._record_members(p_attempt, d -> 'entries');

	INSERT INTO remora.results
		(job_id, attempt_id, fencing_token, manifest_key, manifest_etag,
		 manifest_sha256, members, bytes, descriptor)
	VALUES ((v.j).job_id, p_attempt, p_token, d ->> 'key',
			d ->> 'etag', d ->> 'sha256', (d ->> 'members')::bigint,
			(d ->> 'bytes')::bigint, d);
	-- its staging holds the result and nothing else, so there is nothing to
	-- clean (a 0.3.0 commit left segments/ there: those are still found)
	UPDATE remora.attempts a
	   SET state = 'succeeded', finished_at = now(), cleaned_at = now()
	 WHERE a.attempt_id = p_attempt;
	UPDATE remora.jobs jb SET state = 'succeeded', finished_at = now()
	 WHERE jb.job_id = (v.j).job_id;
	DELETE FROM remora.leases l WHERE l.attempt_id = p_attempt;
	DELETE FROM remora.checkpoints c WHERE c.job_id = (v.j).job_id;
	RETURN true;
END
$$;

/* ------------------------------------------------------------------------
 * Export to stable keys (remora_export): a job of source kind 'export'.
 * It runs through claim, renew, checkpoint, commit, fail, cancel and
 * reconcile like any job; what differs is here.  doc/protocol.md has its
 * state machine.
 * ------------------------------------------------------------------------ */

-- What a claimed export publishes, for its worker: the mode, if_exists,
-- the output digest and the exported result's member count and bytes.
-- Not the members: the worker reads them a page at a time
-- (remora.export_members), so that neither the spec nor the worker's
-- memory grows with their number.
CREATE FUNCTION remora._export_spec(export bigint) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT jsonb_build_object(
		'job_id', e.job_id, 'mode', e.mode, 'if_exists', e.if_exists,
		'output_digest', e.output_digest, 'members_total', e.members,
		'bytes_total', e.bytes)
	  FROM remora.exports e WHERE e.export_id = $1
$$;

-- A page of the members an export's attempt publishes, in path order: at
-- most max_rows members of the exported result whose path sorts after
-- `after` (NULL: from the first), each with the ETag of the conclusive
-- answer an earlier attempt recorded for it (ref_etag, NULL if none).  A
-- worker reads them page by page (keyset by path, the members' primary
-- key) instead of all at once in the claim's spec.  Only the export's
-- current running attempt with its token, not cancelled, its lease not
-- expired, is answered; any other gets no rows (its checkpoint and commit
-- would be refused).  It locks nothing and changes nothing.
CREATE FUNCTION remora.export_members(attempt_id uuid, fencing_token bigint,
									  after text DEFAULT NULL,
									  max_rows integer DEFAULT 1000)
RETURNS TABLE (path text, bucket text, key text, size bigint, sha256 text,
			   etag text, ref_etag text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_attempt	uuid := $1;
	p_token		bigint := $2;
	p_after		text := $3;
	p_max		integer := $4;
	p_export	bigint;
	result_att	uuid;
BEGIN
	IF p_max IS NULL OR p_max < 1 OR p_max > 10000 THEN
		RAISE EXCEPTION 'invalid max_rows: %', p_max
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'max_rows must be between 1 and 10000.';
	END IF;
	SELECT e.export_id, e.result_attempt INTO p_export, result_att
	  FROM remora.attempts a
	  JOIN remora.jobs j ON j.job_id = a.job_id
	  JOIN remora.exports e ON e.export_id = a.job_id
	 WHERE a.attempt_id = p_attempt AND a.fencing_token = p_token
	   AND a.state = 'running' AND j.state = 'running'
	   AND j.current_attempt = p_attempt AND j.cancel_requested_at IS NULL
	   AND NOT EXISTS (SELECT 1 FROM remora.leases l
						WHERE l.attempt_id = p_attempt AND l.expires_at < now());
	IF NOT FOUND THEN
		RETURN;
	END IF;
	RETURN QUERY
	SELECT m.path, m.bucket, m.key, m.size, m.sha256, m.etag, r.ref ->> 'etag'
	  FROM remora.members m
	  LEFT JOIN remora.export_refs r ON r.export_id = p_export AND r.path = m.path
	 WHERE m.attempt_id = result_att
	   AND m.path > coalesce(p_after, '')	-- a range of the primary key (no path is '')
	 ORDER BY m.path
	 LIMIT p_max;
END
$$;

-- Record conclusive per-member answers of an export: [{path, key, etag,
-- version_id, size, outcome}], by path (a later answer replaces one).
CREATE FUNCTION remora._record_refs(export bigint, p_refs jsonb) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r	jsonb;
BEGIN
	IF p_refs IS NULL THEN
		RETURN;
	END IF;
	IF jsonb_typeof(p_refs) <> 'array' THEN
		RAISE EXCEPTION 'invalid references' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'references must be a JSON array of objects.';
	END IF;
	FOR r IN SELECT value FROM jsonb_array_elements(p_refs) LOOP
		IF jsonb_typeof(r) <> 'object'
			OR jsonb_typeof(r -> 'path') IS DISTINCT FROM 'string'
			OR jsonb_typeof(r -> 'key') IS DISTINCT FROM 'string'
			OR jsonb_typeof(r -> 'etag') IS DISTINCT FROM 'string'
			OR NOT remora._is_count(r -> 'size') THEN
			RAISE EXCEPTION 'invalid reference' USING ERRCODE = 'invalid_parameter_value',
				DETAIL = 'Each reference needs string path, key and etag and a non-negative integer size.';
		END IF;
	END LOOP;
	-- the last answer for a path in the batch, as for one before it
	INSERT INTO remora.export_refs AS r (export_id, path, ref)
	SELECT DISTINCT ON (x.value ->> 'path') export, x.value ->> 'path', x.value
	  FROM jsonb_array_elements(p_refs) WITH ORDINALITY x(value, n)
	 ORDER BY x.value ->> 'path', x.n DESC
	ON CONFLICT (export_id, path) DO UPDATE SET ref = EXCLUDED.ref;
END
$$;

-- The commit of an export: true when the attempt holds authority and every
-- member of the exported result has a conclusive reference (those
-- checkpointed plus the descriptor's "references"), with the descriptor's
-- sha256 the export's output digest; the references and the success are
-- one transaction.  The exact repeat of a successful call is true.
CREATE FUNCTION remora._commit_export(p_attempt uuid, p_token bigint,
									  manifest jsonb)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v		record;
	e		remora.exports;
	missing	bigint;
BEGIN
	IF manifest IS NULL OR jsonb_typeof(manifest) <> 'object'
		OR coalesce(manifest ->> 'sha256', '') !~ '^[0-9a-fA-F]{64}$' THEN
		RAISE EXCEPTION 'invalid export descriptor' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'An export''s descriptor is a JSON object with "sha256" (the output digest) and "references".';
	END IF;
	v := remora._authorize(p_attempt, p_token);
	SELECT * INTO e FROM remora.exports x
	 WHERE x.export_id = (SELECT a.job_id FROM remora.attempts a WHERE a.attempt_id = p_attempt);
	IF v.verdict <> 'ok' THEN
		RETURN coalesce(e.committed_attempt = p_attempt
						AND (v.a).fencing_token = p_token
						AND (v.j).state = 'succeeded', false);
	END IF;
	IF lower(manifest ->> 'sha256') <> e.output_digest THEN
		RAISE WARNING 'commit refused: the descriptor names output % , the export publishes %',
			manifest ->> 'sha256', e.output_digest;
		RETURN false;
	END IF;
	PERFORM remora._record_refs(e.export_id, manifest -> 'references');
	SELECT count(*) INTO missing FROM remora.members m
	 WHERE m.attempt_id = e.result_attempt
	   AND NOT EXISTS (SELECT 1 FROM remora.export_refs r
					    WHERE r.export_id = e.export_id AND r.path = m.path);
	IF missing > 0 THEN
		RAISE WARNING 'commit refused: % members of the export have no conclusive answer', missing;
		RETURN false;
	END IF;
	UPDATE remora.exports x SET committed_attempt = p_attempt WHERE x.export_id = e.export_id;
	UPDATE remora.attempts a SET state = 'succeeded', finished_at = now()
	 WHERE a.attempt_id = p_attempt;
	UPDATE remora.jobs jb SET state = 'succeeded', finished_at = now(), last_error = NULL
	 WHERE jb.job_id = e.export_id;
	DELETE FROM remora.leases l WHERE l.attempt_id = p_attempt;
	RETURN true;
END
$$;

-- Record an export (remora_export validated bucket, prefix and key).
-- Replaying an idempotency key returns the existing export whatever its
-- state; 22023 names a bad option, P0002 is a job the caller cannot see or
-- that has no committed result, 42501 a target without a grant or inside
-- the area where Remora keeps its jobs.
CREATE FUNCTION remora._export(caller oid, job bigint, bucket text,
							   prefix text, options jsonb, idem_key text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_job		bigint := $2;
	p_bucket	text := $3;
	p_prefix	text := $4;
	opts		jsonb := coalesce($5, '{}');
	k			text;
	v			jsonb;
	if_exists	text := 'fail';
	canon		jsonb := '{}';
	request		jsonb;
	existing	record;
	j			remora.jobs;
	r			remora.results;
	spec		jsonb;
	new_id		bigint;
	src_digest	text;
	clash		text;
BEGIN
	IF jsonb_typeof(opts) <> 'object' THEN
		RAISE EXCEPTION 'invalid options' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'options must be a JSON object.';
	END IF;
	FOR k, v IN SELECT key, value FROM jsonb_each(opts) LOOP
		IF k = 'if_exists' THEN
			IF jsonb_typeof(v) IS DISTINCT FROM 'string'
				OR v #>> '{}' NOT IN ('fail', 'overwrite', 'skip_identical') THEN
				RAISE EXCEPTION 'invalid option "if_exists"' USING ERRCODE = 'invalid_parameter_value',
					DETAIL = 'if_exists is "fail", "overwrite" or "skip_identical".';
			END IF;
			if_exists := v #>> '{}';
		ELSIF k IN ('max_attempts', 'priority') THEN
			IF jsonb_typeof(v) IS DISTINCT FROM 'number'
				OR (v #>> '{}')::numeric <> trunc((v #>> '{}')::numeric)
				OR (k = 'max_attempts' AND (v #>> '{}')::numeric NOT BETWEEN 1 AND 100)
				OR (k = 'priority' AND (v #>> '{}')::numeric NOT BETWEEN -1000 AND 1000) THEN
				RAISE EXCEPTION 'invalid option "%"', k USING ERRCODE = 'invalid_parameter_value',
					DETAIL = CASE WHEN k = 'max_attempts' THEN 'max_attempts is an integer from 1 to 100.'
								  ELSE 'priority is an integer from -1000 to 1000.' END;
			END IF;
			canon := canon || jsonb_build_object(k, (v #>> '{}')::integer);
		ELSIF k = 'label' THEN
			IF jsonb_typeof(v) IS DISTINCT FROM 'string' OR length(v #>> '{}') > 256 THEN
				RAISE EXCEPTION 'invalid option "label"' USING ERRCODE = 'invalid_parameter_value',
					DETAIL = 'label is a string of at most 256 characters.';
			END IF;
			canon := canon || jsonb_build_object(k, v);
		ELSE
			RAISE EXCEPTION 'invalid option "%"', k USING ERRCODE = 'invalid_parameter_value',
				DETAIL = 'An export knows the options if_exists, max_attempts, priority and label.';
		END IF;
	END LOOP;
	canon := canon || jsonb_build_object('if_exists', if_exists);
	request := jsonb_build_object('export', p_job, 'bucket', p_bucket,
								  'prefix', p_prefix, 'options', canon);

	-- a replayed key returns the export, whatever has happened since
	IF idem_key IS NOT NULL THEN
		SELECT jb.job_id, jb.request_hash INTO existing
		  FROM remora.jobs jb WHERE jb.owner = caller AND jb.idempotency_key = idem_key;
		IF FOUND THEN
			IF existing.request_hash <> remora._sha256(request::text) THEN
				RAISE EXCEPTION 'idempotency key "%" was already used for job %', idem_key, existing.job_id
					USING ERRCODE = 'unique_violation',
						  DETAIL = 'The key was reused for another request; the existing export or job is unchanged.',
						  HINT = 'Use a new idempotency key for a different request.';
			END IF;
			RETURN existing.job_id;
		END IF;
	END IF;

	SELECT * INTO j FROM remora.jobs jb WHERE jb.job_id = p_job FOR SHARE;
	IF NOT FOUND OR NOT remora._may_act(caller, j.owner) OR j.source_kind = 'export' THEN
		RAISE EXCEPTION 'job % does not exist', p_job USING ERRCODE = 'no_data_found';
	END IF;
	SELECT * INTO r FROM remora.results rr WHERE rr.job_id = p_job;
	IF j.state <> 'succeeded' OR r.job_id IS NULL OR j.hard_delete_requested_at IS NOT NULL THEN
		RAISE EXCEPTION 'job % has no result to export', p_job
			USING ERRCODE = 'no_data_found',
				  DETAIL = format('The job is %s; only a succeeded job whose result was not deleted can be exported.',
								  CASE WHEN j.hard_delete_requested_at IS NOT NULL THEN 'deleted' ELSE j.state END);
	END IF;

	-- never onto the staging and result areas of Remora's own jobs
	SELECT k2.key INTO clash
	  FROM (SELECT CASE WHEN p_prefix = '' THEN m.path ELSE p_prefix || '/' || m.path END AS key
			  FROM remora.members m WHERE m.attempt_id = r.attempt_id) k2,
		   (SELECT remora._prefix_dir(current_setting('remora.default_prefix')) AS dir
			 WHERE p_bucket = current_setting('remora.default_bucket')
			UNION
			SELECT DISTINCT remora._prefix_dir(jb.prefix) FROM remora.jobs jb
			 WHERE jb.bucket = p_bucket AND jb.source_kind <> 'export') d
	 WHERE left(k2.key, length(d.dir)) = d.dir
	   AND substr(k2.key, length(d.dir) + 1) ~ '^[0-9]+/'
	 LIMIT 1;
	IF clash IS NOT NULL THEN
		RAISE EXCEPTION 'permission denied for target bucket "%" key "%"', p_bucket, clash
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'The key is inside the area where Remora keeps the staging objects and results of jobs.',
				  HINT = 'Export under a prefix of its own.';
	END IF;

	SELECT remora._sha256(coalesce(string_agg(
			   concat_ws(' ', m.path, m.key, m.etag, m.size, m.sha256), E'\n' ORDER BY m.path), ''))
	  INTO src_digest
	  FROM remora.members m WHERE m.attempt_id = r.attempt_id;

	spec := jsonb_build_object(
		'source', jsonb_build_object('kind', 'export', 'uri', 'remora-job:' || p_job,
									 'job_id', p_job),
		'bucket', p_bucket, 'prefix', p_prefix,
		'options', jsonb_build_object(
			'if_exists', if_exists,
			'max_attempts', coalesce((canon ->> 'max_attempts')::integer,
									 current_setting('remora.max_attempts')::integer),
			'priority', coalesce((canon ->> 'priority')::integer, 0))
			|| CASE WHEN canon ? 'label' THEN jsonb_build_object('label', canon -> 'label')
					ELSE '{}' END);
	new_id := remora._submit(caller, spec, request, idem_key, NULL);

	INSERT INTO remora.exports AS e
		(export_id, job_id, result_attempt, if_exists, output_digest,
		 source_digest, publication_digest, members, bytes)
	VALUES (new_id, p_job, r.attempt_id, if_exists, r.manifest_sha256, src_digest,
			remora._sha256(jsonb_build_object(
				'bucket', p_bucket, 'prefix', p_prefix, 'if_exists', if_exists,
				'output_digest', r.manifest_sha256, 'source_digest', src_digest)::text),
			r.members, r.bytes)
	ON CONFLICT (export_id) DO NOTHING;
	RETURN new_id;
END
$$;

-- Resolve an export that ended outcome_unknown.  'verify' (its owner or an
-- administrator) queues an attempt that only observes the targets: it
-- commits succeeded when every member is exactly there, and otherwise
-- leaves the export outcome_unknown with the members that differ in its
-- error.  'retry' (dispatch again: a new attempt with a greater token) and
-- 'fail' are an administrator's decisions.  Each is recorded with who
-- decided.  Returns the export's state after the call.
CREATE FUNCTION remora._export_resolve(caller oid, export bigint, action text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	j		remora.jobs;
	admin	boolean := pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE');
	new_state text;
BEGIN
	SELECT jb.* INTO j FROM remora.jobs jb JOIN remora.exports e ON e.export_id = jb.job_id
	 WHERE jb.job_id = export FOR UPDATE OF jb;
	IF NOT FOUND OR NOT remora._may_act(caller, j.owner) OR j.deleted_at IS NOT NULL THEN
		RAISE EXCEPTION 'export % does not exist', export USING ERRCODE = 'no_data_found';
	END IF;
	IF action IS NULL OR action NOT IN ('verify', 'retry', 'fail') THEN
		RAISE EXCEPTION 'invalid action' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'action is "verify", "retry" or "fail".';
	END IF;
	IF action IN ('retry', 'fail') AND NOT admin THEN
		RAISE EXCEPTION 'permission denied to % export %', action, export
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Only remora_admin decides to retry or fail an export whose outcome is unknown.',
				  HINT = 'Ask for ''verify'', which observes the targets.';
	END IF;
	IF j.state <> 'outcome_unknown' THEN
		RAISE EXCEPTION 'export % is %, not outcome_unknown', export, j.state
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'Only an export whose outcome is unknown is resolved.';
	END IF;

	UPDATE remora.exports e
	   SET mode = CASE WHEN action = 'verify' THEN 'verify' ELSE 'dispatch' END,
		   decisions = e.decisions || jsonb_build_object(
			   'action', action, 'by', pg_get_userbyid(caller), 'at', now(),
			   'attempt_no', j.attempts_used)
	 WHERE e.export_id = export;
	IF action = 'fail' THEN
		new_state := 'failed';
		UPDATE remora.jobs jb
		   SET state = new_state, finished_at = now(),
			   last_error = jsonb_build_object(
				   'class', 'resolved', 'retryable', false, 'at', now(),
				   'message', format('%s decided that the export failed', pg_get_userbyid(caller)),
				   'previous', j.last_error)
		 WHERE jb.job_id = export;
	ELSE
		-- a new attempt: one more in the budget, whatever was spent
		new_state := 'queued';
		UPDATE remora.jobs jb
		   SET state = new_state, finished_at = NULL, not_before = now(),
			   max_attempts = greatest(jb.max_attempts, jb.attempts_used + 1)
		 WHERE jb.job_id = export;
		INSERT INTO remora.queue (job_id, priority, not_before)
		VALUES (export, j.priority, now())
		ON CONFLICT (job_id) DO UPDATE SET not_before = EXCLUDED.not_before;
	END IF;
	RETURN new_state;
END
$$;

CREATE FUNCTION remora_export(job bigint, bucket text, prefix text,
							  options jsonb DEFAULT '{}',
							  idempotency_key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'remora_export'
LANGUAGE C VOLATILE;

CREATE FUNCTION remora_export_resolve(export bigint, action text)
RETURNS text
AS 'MODULE_PATHNAME', 'remora_export_resolve'
LANGUAGE C VOLATILE;

CREATE OR REPLACE VIEW remora_jobs WITH (security_invoker = true) AS
SELECT j.job_id,
	   pg_catalog.pg_get_userbyid(j.owner) AS owner,
	   j.source,
	   j.source_kind,
	   j.bucket,
	   j.prefix,
	   j.label,
	   j.state,
	   j.priority,
	   j.attempts_used,
	   j.max_attempts,
	   j.current_attempt AS current_attempt_id,
	   j.fencing_token,
	   j.cancel_requested_at IS NOT NULL AS cancel_requested,
	   j.idempotency_key,
	   j.submitted_at,
	   j.started_at,
	   j.finished_at,
	   CASE WHEN j.state = 'retrying' THEN j.not_before END AS next_attempt_at,
	   -- validated durable progress plus the current attempt's live progress
	   coalesce(greatest(p.bytes_done, cp.bytes_done), cp.bytes_done,
				CASE WHEN j.state = 'succeeded' THEN r.bytes END) AS bytes_done,
	   cp.bytes_done AS bytes_validated,
	   coalesce(p.bytes_total, cp.bytes_total,
				CASE WHEN j.state = 'succeeded' THEN r.bytes END) AS bytes_total,
	   p.rate AS bytes_per_second,
	   -- a later attempt that could not (or was not offered to) resume
	   (ca.attempt_no > 1 AND (ca.resumed_from IS NULL OR ca.restart_reason IS NOT NULL))
		   AS restarted_from_zero,
	   ca.restart_reason,
	   j.last_error,
	   (SELECT jsonb_agg(a.error ORDER BY a.attempt_no)
		  FROM remora.attempts a
		 WHERE a.job_id = j.job_id AND a.error IS NOT NULL) AS error_history,
	   r.manifest_key AS result_manifest_key,
	   r.manifest_etag AS result_manifest_etag,
	   r.manifest_sha256 AS result_manifest_sha256,
	   r.members AS result_members,
	   r.bytes AS result_bytes,
	   r.committed_at,
	   j.hard_delete_requested_at IS NOT NULL AS hard_delete_requested,
	   -- many-member sources: members recorded by the current attempt
	   CASE WHEN j.state = 'succeeded' THEN r.members
			WHEN j.source_kind <> 'http' THEN
				(SELECT count(*) FROM remora.members m
				  WHERE m.attempt_id = j.current_attempt) END AS members_done,
	   CASE WHEN j.state = 'succeeded' THEN r.members
			WHEN j.source_kind <> 'http' THEN
				(cp.state ->> 'members_total')::bigint END AS members_total
  FROM remora.jobs j
  LEFT JOIN remora.results r ON r.job_id = j.job_id
  LEFT JOIN remora.checkpoints cp ON cp.job_id = j.job_id
  LEFT JOIN remora.attempts ca ON ca.attempt_id = j.current_attempt
  LEFT JOIN remora._progress() p
		 ON p.attempt_id = j.current_attempt AND p.fencing_token = j.fencing_token
			AND j.state = 'running'
 WHERE j.deleted_at IS NULL AND j.source_kind <> 'export';

CREATE OR REPLACE VIEW remora_attempts WITH (security_invoker = true) AS
SELECT a.attempt_id,
	   a.job_id,
	   a.attempt_no,
	   a.fencing_token,
	   a.incarnation,
	   a.state,
	   a.started_at,
	   a.finished_at,
	   l.expires_at AS lease_expires_at,
	   l.renewed_at AS lease_renewed_at,
	   a.resumed_from,
	   a.restart_reason,
	   a.cleaned_at AS staging_cleaned_at,
	   a.error,
	   a.definition_hash,
	   a.request_hash,
	   a.access_digest,
	   a.provenance
  FROM remora.attempts a
  LEFT JOIN remora.leases l ON l.attempt_id = a.attempt_id
 WHERE NOT EXISTS (SELECT 1 FROM remora.exports e WHERE e.export_id = a.job_id);

CREATE OR REPLACE VIEW remora_stats WITH (security_invoker = true) AS
SELECT count(*) FILTER (WHERE state = 'queued') AS queued,
	   count(*) FILTER (WHERE state = 'running') AS running,
	   count(*) FILTER (WHERE state = 'retrying') AS retrying,
	   count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
	   count(*) FILTER (WHERE state = 'failed') AS failed,
	   count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
	   (SELECT coalesce(sum(r.bytes), 0) FROM remora.results r) AS bytes_committed,
	   (SELECT coalesce(sum(p.bytes_done), 0) FROM remora_progress p) AS bytes_in_flight,
	   (SELECT coalesce(sum(p.bytes_per_second), 0) FROM remora_progress p)
		   AS bytes_per_second,
	   (SELECT coalesce(jsonb_object_agg(f.class, f.n), '{}')
		  FROM (SELECT a.error ->> 'class' AS class, count(*) AS n
				  FROM remora.attempts a
				 WHERE a.error IS NOT NULL
				   AND NOT EXISTS (SELECT 1 FROM remora.exports e
									WHERE e.export_id = a.job_id)
				 GROUP BY 1) f) AS failures_by_class,
	   (SELECT count(*) FROM remora.leases) AS active_leases,
	   current_setting('remora.max_active_leases')::integer AS max_active_leases
  FROM remora.jobs
 WHERE deleted_at IS NULL AND source_kind <> 'export';

CREATE VIEW remora_exports WITH (security_invoker = true) AS
SELECT j.job_id AS export_id,
	   e.job_id,
	   pg_catalog.pg_get_userbyid(j.owner) AS owner,
	   j.bucket,
	   j.prefix,
	   j.state,
	   e.output_digest,
	   e.publication_digest,
	   e.source_digest,
	   e.members,
	   e.bytes,
	   (SELECT count(*) FROM remora.export_refs r WHERE r.export_id = e.export_id) AS members_done,
	   (SELECT jsonb_agg(r.ref ORDER BY r.path) FROM remora.export_refs r
		 WHERE r.export_id = e.export_id) AS "references",
	   e.if_exists,
	   e.mode = 'verify' AND j.state IN ('queued', 'running') AS verifying,
	   j.label,
	   j.idempotency_key,
	   j.attempts_used,
	   j.max_attempts,
	   j.current_attempt AS current_attempt_id,
	   j.fencing_token,
	   j.cancel_requested_at IS NOT NULL AS cancel_requested,
	   j.last_error,
	   e.decisions,
	   j.submitted_at AS created_at,
	   j.started_at,
	   j.finished_at
  FROM remora.jobs j
  JOIN remora.exports e ON e.export_id = j.job_id
 WHERE j.deleted_at IS NULL;

CREATE VIEW remora_export_attempts WITH (security_invoker = true) AS
SELECT a.attempt_id,
	   a.job_id AS export_id,
	   a.attempt_no,
	   a.fencing_token,
	   a.incarnation,
	   a.state,
	   a.started_at,
	   a.finished_at,
	   l.expires_at AS lease_expires_at,
	   a.error,
	   a.export_ledger AS ledger,
	   a.definition_hash,
	   a.request_hash,
	   a.access_digest,
	   a.provenance
  FROM remora.attempts a
  JOIN remora.exports e ON e.export_id = a.job_id
  LEFT JOIN remora.leases l ON l.attempt_id = a.attempt_id;

REVOKE ALL ON FUNCTION remora._export_spec(bigint),
	remora.export_members(uuid, bigint, text, integer),
	remora._record_refs(bigint, jsonb), remora._commit_export(uuid, bigint, jsonb),
	remora._export(oid, bigint, text, text, jsonb, text),
	remora._export_resolve(oid, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.export_members(uuid, bigint, text, integer)
	TO remora_worker;
REVOKE ALL ON FUNCTION remora_export(bigint, text, text, jsonb, text),
	remora_export_resolve(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora_export(bigint, text, text, jsonb, text),
	remora_export_resolve(bigint, text) TO remora_user;
GRANT SELECT ON remora_exports, remora_export_attempts TO remora_user;
REVOKE ALL ON remora_exports, remora_export_attempts FROM PUBLIC;

/* ------------------------------------------------------------------------
 * Claims in one statement: the batch is claimed by one set-based statement,
 * and the lease count reads the lease rows alone while coordination state
 * is whole (reading the running jobs cost a scan of every index entry of a
 * job that ran since the last vacuum, under the lease lock).  Member
 * checks in one statement.
 * ------------------------------------------------------------------------ */

-- Validate a member array before anything is written.  One statement
-- over the array (the terms of the OR are evaluated in order, so a size is
-- only cast once it is known to be a number).
CREATE OR REPLACE FUNCTION remora._check_members(members jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	IF members IS NULL THEN
		RETURN;
	END IF;
	IF jsonb_typeof(members) <> 'array' THEN
		RAISE EXCEPTION 'invalid members' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'members must be a JSON array of objects.';
	END IF;
	IF EXISTS (SELECT 1 FROM jsonb_array_elements(members) e(m)
				WHERE jsonb_typeof(m) <> 'object'
				   OR jsonb_typeof(m -> 'path') IS DISTINCT FROM 'string'
				   OR jsonb_typeof(m -> 'bucket') IS DISTINCT FROM 'string'
				   OR jsonb_typeof(m -> 'key') IS DISTINCT FROM 'string'
				   OR jsonb_typeof(m -> 'size') IS DISTINCT FROM 'number'
				   OR jsonb_typeof(m -> 'etag') IS DISTINCT FROM 'string'
				   OR coalesce(m ->> 'sha256', '') !~ '^[0-9a-fA-F]{64}$'
				   OR (m ->> 'size')::numeric < 0
				   OR (m ->> 'size')::numeric <> trunc((m ->> 'size')::numeric)) THEN
		RAISE EXCEPTION 'invalid member'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'Each member needs string path, bucket, key and etag, a non-negative integer size and a 64-digit hex sha256.';
	END IF;
END
$$;

/* ------------------------------------------------------------------------
 * A sweep that reads what it hands out: remora.staging_to_clean took the
 * oldest of every uncleaned attempt by sorting them all (1.5 s at 150,000
 * finished attempts, in every worker's sweep, holding up its claims).
 * ------------------------------------------------------------------------ */

-- the sweep's order (remora.staging_to_clean): attempts to clean for the
-- first time by when they ended, those whose cleanup failed by when it may
-- be tried again; an index each, so that a sweep reads what it hands out
-- and not every attempt that waits (a store that refuses every delete
-- makes them many)
CREATE INDEX attempts_clean_due_idx ON remora.attempts (finished_at, attempt_id)
	WHERE cleaned_at IS NULL AND clean_after IS NULL;
CREATE INDEX attempts_clean_retry_idx ON remora.attempts (clean_after, attempt_id)
	WHERE cleaned_at IS NULL AND clean_after IS NOT NULL;

-- hard deletes waiting to be carried out (remora.staging_to_clean)
CREATE INDEX jobs_doomed_idx ON remora.jobs (hard_delete_requested_at)
	WHERE hard_delete_requested_at IS NOT NULL AND hard_deleted_at IS NULL;

CREATE OR REPLACE FUNCTION remora.staging_to_clean(max_rows integer DEFAULT 1)
RETURNS TABLE (attempt_id uuid, job_id bigint, bucket text, prefix text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH doomed AS (
		SELECT j.job_id, j.bucket, j.prefix, j.hard_delete_requested_at,
			   r.attempt_id AS committed
		  FROM remora.jobs j
		  LEFT JOIN remora.results r ON r.job_id = j.job_id
		 WHERE j.hard_delete_requested_at IS NOT NULL AND j.hard_deleted_at IS NULL
		   AND j.state IN ('succeeded', 'failed', 'cancelled')
		   AND (j.delete_after IS NULL OR j.delete_after <= now())
		   AND coalesce(j.finished_at, j.hard_delete_requested_at)
			   <= now() - remora._setting_interval('remora.lease_duration'))
	(SELECT u.attempt_id, u.job_id, u.bucket, u.prefix
	   FROM (SELECT a.attempt_id, d.job_id, d.bucket,
					remora._staging_prefix(d.prefix, d.job_id, a.attempt_id) AS prefix,
					d.hard_delete_requested_at AS since
			   FROM doomed d
			   JOIN remora.attempts a ON a.job_id = d.job_id
			  WHERE a.cleaned_at IS NULL
				AND a.attempt_id IS DISTINCT FROM d.committed
				AND (a.clean_after IS NULL OR a.clean_after <= now())
			 UNION ALL
			 SELECT NULL::uuid, d.job_id, d.bucket,
					remora._staging_prefix(d.prefix, d.job_id, last.attempt_id),
					d.hard_delete_requested_at
			   FROM doomed d
			   CROSS JOIN LATERAL (
					SELECT a.attempt_id FROM remora.attempts a
					 WHERE a.job_id = d.job_id
					 ORDER BY a.attempt_id = d.committed DESC, a.attempt_no DESC
					 LIMIT 1) last
			  WHERE NOT EXISTS (SELECT 1 FROM remora.attempts a
								 WHERE a.job_id = d.job_id AND a.cleaned_at IS NULL
								   AND a.attempt_id IS DISTINCT FROM d.committed)) u
	  ORDER BY u.since, u.job_id, u.attempt_id NULLS LAST
	  LIMIT greatest(max_rows, 0))
	UNION ALL
	(SELECT c.attempt_id, c.job_id, j.bucket,
			remora._staging_prefix(j.prefix, j.job_id, c.attempt_id)
			|| CASE WHEN r.attempt_id IS NULL THEN '' ELSE 'segments/' END
	   FROM ((SELECT a.attempt_id, a.job_id, a.finished_at AS due
				FROM remora.attempts a
			   WHERE a.cleaned_at IS NULL AND a.clean_after IS NULL
				 AND a.finished_at <= now() - remora._setting_interval('remora.lease_duration')
			   ORDER BY a.finished_at, a.attempt_id)
			 UNION ALL
			 (SELECT a.attempt_id, a.job_id, a.clean_after
				FROM remora.attempts a
			   WHERE a.cleaned_at IS NULL AND a.clean_after <= now()
				 AND a.finished_at <= now() - remora._setting_interval('remora.lease_duration')
			   ORDER BY a.clean_after, a.attempt_id)) c
	   JOIN remora.jobs j ON j.job_id = c.job_id
	   LEFT JOIN remora.results r ON r.attempt_id = c.attempt_id
	  WHERE j.hard_delete_requested_at IS NULL
		AND j.state IN ('succeeded', 'failed', 'cancelled')
	  ORDER BY c.due, c.attempt_id
	  LIMIT greatest(max_rows, 0))
	LIMIT greatest(max_rows, 0)
$$;

/* ------------------------------------------------------------------------
 * Claims that do not wait for each other: a claim reserves its leases in
 * shared memory instead of holding the lease lock until its commit (and so
 * through its WAL flush).
 * ------------------------------------------------------------------------ */

-- Lease reservations of claims in flight (src/pg/leases.c): the word to
-- compare, a reservation made only if the word is still the one read, and
-- room given back.  Only claim calls them.
CREATE FUNCTION remora._lease_reservations() RETURNS bigint
AS 'MODULE_PATHNAME', 'remora_lease_reservations'
LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION remora._reserve_leases(seen bigint, n integer) RETURNS boolean
AS 'MODULE_PATHNAME', 'remora_reserve_leases'
LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION remora._release_leases(n integer) RETURNS void
AS 'MODULE_PATHNAME', 'remora_release_leases'
LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION remora._lease_reservations(), remora._reserve_leases(bigint, integer),
	remora._release_leases(integer) FROM PUBLIC;

-- Hand out up to max_jobs runnable jobs, by priority then age.  Each claim
-- creates a new attempt with a fencing token greater than any before it
-- for the job, records the recovery ledger, and takes a lease.  Leases in
-- use never exceed remora.max_active_leases: a claim reserves the room it
-- takes in shared memory before it takes it, against the leases it can see
-- plus those others reserved (running jobs count while the lease rows are
-- lost), and the reservation lasts until its transaction ends (leases.c
-- says why that suffices); claimers never wait for each other, and skip
-- queue and job rows others hold.  A lease runs from when it is written
-- (clock_timestamp()), not from a transaction start.
CREATE OR REPLACE FUNCTION remora.claim(incarnation uuid, max_jobs integer DEFAULT 1)
RETURNS TABLE (job_id bigint, attempt_id uuid, fencing_token bigint,
			   spec jsonb, resume jsonb, lease_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- one plan for the batch statement: replanning it on each call (its LIMIT
-- is a parameter) cost more than the claim itself
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
	p_incarnation uuid := $1;
	lim			integer := current_setting('remora.max_active_leases')::integer;
	room		integer;
	seen		bigint;
	taken		integer;
	expires		timestamptz;
BEGIN
	IF incarnation IS NULL THEN
		RAISE EXCEPTION 'incarnation must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF max_jobs IS NULL OR max_jobs < 1 OR max_jobs > 1000 THEN
		RAISE EXCEPTION 'invalid max_jobs: %', max_jobs
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'max_jobs must be between 1 and 1000.';
	END IF;
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'remora.claim requires the READ COMMITTED isolation level'
			USING ERRCODE = 'active_sql_transaction';
	END IF;

	-- an incarnation seen for the first time is recorded; one that has been
	-- marked stopped claims nothing
	INSERT INTO remora.incarnations (incarnation) VALUES (p_incarnation)
	ON CONFLICT DO NOTHING;
	IF EXISTS (SELECT 1 FROM remora.incarnations i
				WHERE i.incarnation = p_incarnation AND i.stopped_at IS NOT NULL) THEN
		RETURN;
	END IF;

	-- the reservation is read before the leases are counted (each
	-- statement here takes a new snapshot)
	LOOP
		seen := remora._lease_reservations();
		room := least(max_jobs, lim - remora._leases_in_use()
								- (seen & 4294967295)::integer);
		IF room <= 0 THEN
			RETURN;
		END IF;
		EXIT WHEN remora._reserve_leases(seen, room);
	END LOOP;
	expires := clock_timestamp() + remora._setting_interval('remora.lease_duration');

	-- One statement for the whole batch.  The queue is read in claim order
	-- from its index: a claim reads the rows it hands out (and those others
	-- hold, which it skips), whatever the backlog.  A job row is locked only
	-- if nobody else holds it, so a claim never waits on a cancel (which
	-- holds the job, then the queue row).  The queue entry of every job
	-- locked goes: it is claimed now, or it no longer waits (an entry left
	-- behind; reconcile removes them too).
	RETURN QUERY
	WITH picked AS MATERIALIZED (
		SELECT qq.job_id FROM remora.queue qq
		 WHERE qq.not_before <= now()
		 ORDER BY qq.priority DESC, qq.job_id
		 LIMIT room
		   FOR UPDATE SKIP LOCKED
	), held AS MATERIALIZED (
		SELECT jb.* FROM remora.jobs jb
		 WHERE jb.job_id IN (SELECT p.job_id FROM picked p)
		   FOR UPDATE SKIP LOCKED
	), unqueued AS (
		-- by key, from the batch: a join (planned generically for up to
		-- max_jobs rows) would hash the whole queue
		DELETE FROM remora.queue qq
		 WHERE qq.job_id = ANY (ARRAY(SELECT h.job_id FROM held h))
	), go AS MATERIALIZED (
		SELECT h.*, gen_random_uuid() AS new_attempt,
			   (SELECT c FROM remora.checkpoints c WHERE c.job_id = h.job_id) AS cp,
			   (SELECT u.url FROM remora.source_urls u WHERE u.job_id = h.job_id) AS url,
			   (SELECT e FROM remora.exports e WHERE e.export_id = h.job_id) AS ex
		  FROM held h
		 WHERE h.state IN ('queued', 'retrying') AND h.cancel_requested_at IS NULL
		   AND h.attempts_used < h.max_attempts
	), attempt AS (
		-- an export stages nothing to clean up, and records what it is to
		-- publish before it runs
		INSERT INTO remora.attempts
			(attempt_id, job_id, attempt_no, fencing_token, incarnation,
			 definition_hash, request_hash, access_digest, provenance,
			 resumed_from, cleaned_at, export_ledger)
		SELECT g.new_attempt, g.job_id, g.attempts_used + 1, g.fencing_token + 1,
			   p_incarnation, g.definition_hash, g.request_hash, g.access_digest,
			   g.provenance, (g.cp).attempt_id,
			   CASE WHEN (g.ex).export_id IS NOT NULL THEN now() END,
			   CASE WHEN (g.ex).export_id IS NOT NULL THEN jsonb_build_object(
					'output_digest', (g.ex).output_digest, 'source_digest', (g.ex).source_digest,
					'publication_digest', (g.ex).publication_digest, 'members', (g.ex).members,
					'bytes', (g.ex).bytes, 'if_exists', (g.ex).if_exists, 'mode', (g.ex).mode,
					'decision', (g.ex).decisions -> -1) END
		  FROM go g
	), job AS (
		UPDATE remora.jobs jb
		   SET state = 'running',
			   attempts_used = jb.attempts_used + 1,
			   fencing_token = jb.fencing_token + 1,
			   current_attempt = g.new_attempt,
			   started_at = coalesce(jb.started_at, now())
		  FROM go g
		 WHERE jb.job_id = g.job_id
	), lease AS (
		INSERT INTO remora.leases (attempt_id, job_id, fencing_token, incarnation, expires_at)
		SELECT g.new_attempt, g.job_id, g.fencing_token + 1, p_incarnation, expires
		  FROM go g
	)
	SELECT g.job_id, g.new_attempt, g.fencing_token + 1,
		   -- the worker gets the whole URL, query string included
		   CASE WHEN g.url IS NULL THEN s.spec
				ELSE coalesce(jsonb_set(s.spec, '{source,uri}', to_jsonb(g.url)), s.spec) END
		   || CASE WHEN (g.ex).export_id IS NULL THEN '{}'::jsonb
				   ELSE jsonb_build_object('export', remora._export_spec(g.job_id)) END,
		   CASE WHEN g.cp IS NULL THEN NULL
				ELSE jsonb_build_object('attempt_id', (g.cp).attempt_id,
										'fencing_token', (g.cp).fencing_token,
										'bytes_done', (g.cp).bytes_done,
										'state', (g.cp).state) END,
		   expires
	  FROM go g
	 CROSS JOIN LATERAL (SELECT g.spec || jsonb_build_object(
				'job_id', g.job_id, 'attempt_no', g.attempts_used + 1, 'owner', g.owner,
				'staging_prefix', remora._staging_prefix(g.prefix, g.job_id, g.new_attempt))
				AS spec) s
	 ORDER BY g.priority DESC, g.job_id;
	GET DIAGNOSTICS taken = ROW_COUNT;
	PERFORM remora._release_leases(room - taken);
END
$$;

/* ------------------------------------------------------------------------
 * Helpers of claim and commit in PL/pgSQL: a SQL-language function that
 * cannot be inlined (these pin their search_path) is parsed and planned
 * again in every transaction; PL/pgSQL keeps its plans for the session.
 * ------------------------------------------------------------------------ */

CREATE OR REPLACE FUNCTION remora._setting_interval(name text) RETURNS interval
LANGUAGE plpgsql STABLE
AS $$ BEGIN RETURN current_setting(name)::interval; END $$;
CREATE OR REPLACE FUNCTION remora._staging_prefix(prefix text, job bigint, attempt uuid)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	RETURN CASE WHEN prefix = '' THEN '' ELSE prefix || '/' END
		   || job::text || '/' || attempt::text || '/';
END
$$;
CREATE OR REPLACE FUNCTION remora._leases_in_use() RETURNS bigint
LANGUAGE plpgsql STABLE
AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM remora.coordination) THEN
		RETURN (SELECT count(*) FROM remora.leases);
	END IF;
	RETURN (SELECT count(*)
			  FROM (SELECT j.job_id FROM remora.jobs j WHERE j.state = 'running'
					UNION
					SELECT l.job_id FROM remora.leases l) s);
END
$$;

/* ------------------------------------------------------------------------
 * External workers (remora-worker): incarnations say where they
 * run, workers are told of queued jobs and cancels by NOTIFY remora_jobs,
 * and remora.worker_settings() hands a remora_worker the settings.
 * ------------------------------------------------------------------------ */

ALTER TABLE remora.incarnations ADD COLUMN host text,
	ADD COLUMN label text, ADD COLUMN version text;

CREATE FUNCTION remora._notify_workers() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM pg_catalog.pg_notify('remora_jobs', TG_ARGV[0]);
	RETURN NULL;
END
$$;
CREATE TRIGGER queue_notify AFTER INSERT ON remora.queue
	FOR EACH STATEMENT EXECUTE FUNCTION remora._notify_workers('claim');
CREATE TRIGGER cancel_notify AFTER UPDATE OF cancel_requested_at ON remora.jobs
	FOR EACH ROW WHEN (OLD.cancel_requested_at IS NULL
					   AND NEW.cancel_requested_at IS NOT NULL
					   AND NEW.state = 'running')
	EXECUTE FUNCTION remora._notify_workers('cancel');

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
	OUT export_copy_cutoff bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'remora_worker_settings'
LANGUAGE C VOLATILE;

CREATE OR REPLACE VIEW remora_workers WITH (security_invoker = true) AS
SELECT i.incarnation,
	   i.pid,
	   i.kind,
	   i.started_at,
	   i.heartbeat_at,
	   i.stopped_at,
	   (SELECT count(*) FROM remora.leases l WHERE l.incarnation = i.incarnation)
		   AS active_leases,
	   i.host,
	   i.label,
	   i.version
  FROM remora.incarnations i;

REVOKE ALL ON FUNCTION remora._notify_workers(), remora.worker_settings()
	FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.worker_settings() TO remora_worker;
GRANT SELECT (stopped_at), INSERT (host, label, version)
	ON remora.incarnations TO remora_worker;

/* ------------------------------------------------------------------------
 * The protocol's private helpers run only inside SECURITY DEFINER functions,
 * which pin search_path; a SET clause of their own cost every call a save
 * and restore of the setting and a new search path (10-25 % of a batched
 * claim and commit).
 * ------------------------------------------------------------------------ */
ALTER FUNCTION remora._authorize(uuid, bigint) RESET search_path;
ALTER FUNCTION remora._settle(remora.jobs, remora.attempts, text, jsonb, boolean) RESET search_path;
ALTER FUNCTION remora._check_members(jsonb) RESET search_path;
ALTER FUNCTION remora._record_members(uuid, jsonb) RESET search_path;
ALTER FUNCTION remora._check_manifest(jsonb) RESET search_path;
ALTER FUNCTION remora._staging_prefix(text, bigint, uuid) RESET search_path;
ALTER FUNCTION remora._setting_interval(text) RESET search_path;
ALTER FUNCTION remora._check_checkpoint(jsonb) RESET search_path;
ALTER FUNCTION remora._leases_in_use() RESET search_path;
ALTER FUNCTION remora._lock_leases() RESET search_path;
ALTER FUNCTION remora._backoff(integer, numeric) RESET search_path;

/* ------------------------------------------------------------------------
 * Several results committed in one call (a worker whose attempts finish in
 * one round).
 * ------------------------------------------------------------------------ */
-- Commit the results of several attempts in one call, as a worker does
-- when several finish in one round.  Each item is decided exactly as
-- remora.commit(attempt_ids[i], fencing_tokens[i], manifests[i]) decides
-- it, and one row comes back for each, in the order given.  The jobs are
-- locked in job order first, so that two batches never deadlock.  The
-- items that pass every check of remora.commit are committed together, one
-- statement a table (a commit's statements, item by item, were most of a
-- claim-and-commit's cost); any other item (a stale token, a lapsed lease, a
-- cancel, an export, a repeat, a descriptor that does not add up) goes
-- through remora.commit itself, which settles, refuses or repeats it.  A
-- descriptor that is not valid raises, and the call changes nothing.
CREATE FUNCTION remora.commit_many(attempt_ids uuid[], fencing_tokens bigint[],
								   manifests jsonb[])
RETURNS TABLE (attempt_id uuid, committed boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- one plan for each statement: a custom plan for each call (the arrays are
-- parameters) cost more than the commits (4 ms of a 5 ms call of one item)
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
	n			integer := cardinality(attempt_ids);
	ds			jsonb[];
	exports		integer[];
	clean		integer[];
	ok			boolean[];
	k			integer;
	msg			text;
	det			text;
	code		text;
BEGIN
	IF attempt_ids IS NULL OR fencing_tokens IS NULL OR manifests IS NULL THEN
		RAISE EXCEPTION 'attempt_ids, fencing_tokens and manifests must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF array_ndims(attempt_ids) > 1 OR array_ndims(fencing_tokens) > 1
		OR array_ndims(manifests) > 1
		OR cardinality(fencing_tokens) <> n OR cardinality(manifests) <> n THEN
		RAISE EXCEPTION 'invalid batch of commits'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'attempt_ids, fencing_tokens and manifests must be one-dimensional arrays of the same length.';
	END IF;
	IF n > 1000 THEN
		RAISE EXCEPTION 'invalid batch of commits'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = format('A batch holds at most 1000 commits, not %s.', n);
	END IF;
	IF n = 0 THEN
		RETURN;
	END IF;

	PERFORM 1 FROM remora.jobs jb
	 WHERE jb.job_id = ANY (ARRAY(SELECT a.job_id FROM remora.attempts a
								   WHERE a.attempt_id = ANY (attempt_ids)))
	 ORDER BY jb.job_id
	   FOR UPDATE OF jb;

	-- validate every descriptor first (an export's goes to its own commit),
	-- saying which item is wrong
	-- (each row of the tables below is found by key from an item: the
	-- lateral subqueries keep the planner from joining whole tables, which
	-- a generic plan made while they were small had done)
	SELECT coalesce(array_agg(i.ord::integer), '{}') INTO exports
	  FROM unnest(attempt_ids) WITH ORDINALITY i(aid, ord)
	 CROSS JOIN LATERAL (SELECT a.job_id FROM remora.attempts a
						  WHERE a.attempt_id = i.aid OFFSET 0) a
	 WHERE EXISTS (SELECT 1 FROM remora.exports e WHERE e.export_id = a.job_id);
	ds := array_fill(NULL::jsonb, ARRAY[n]);
	BEGIN
		FOR i IN 1 .. n LOOP
			k := i;
			IF NOT i = ANY (exports) THEN
				ds[i] := remora._check_manifest(manifests[i]);
			END IF;
		END LOOP;
	EXCEPTION WHEN invalid_parameter_value THEN
		GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
								code = RETURNED_SQLSTATE;
		RAISE EXCEPTION '% (item % of the batch)', msg, k
			USING ERRCODE = code, DETAIL = det;
	END;

	-- the items every check of remora.commit passes: the current attempt
	-- and token of a running job, its lease not lapsed, no cancel
	-- requested, the manifest and every member in the attempt's staging and
	-- the job's bucket, the counts exact, no member recorded otherwise
	SELECT coalesce(array_agg(i.ord::integer), '{}') INTO clean
	  FROM unnest(attempt_ids, fencing_tokens, ds) WITH ORDINALITY i(aid, tok, d, ord)
	 CROSS JOIN LATERAL (SELECT a.job_id, a.fencing_token, a.state FROM remora.attempts a
						  WHERE a.attempt_id = i.aid OFFSET 0) a
	 CROSS JOIN LATERAL (SELECT j.bucket, j.state, j.current_attempt, j.cancel_requested_at,
								remora._staging_prefix(j.prefix, j.job_id, i.aid) AS sp
						   FROM remora.jobs j WHERE j.job_id = a.job_id OFFSET 0) j
	 WHERE i.d IS NOT NULL
	   AND array_position(attempt_ids, i.aid) = i.ord
	   AND array_position(attempt_ids, i.aid, i.ord::integer + 1) IS NULL
	   AND a.fencing_token = i.tok AND a.state = 'running'
	   AND j.state = 'running' AND j.current_attempt = i.aid
	   AND j.cancel_requested_at IS NULL
	   AND NOT EXISTS (SELECT 1 FROM remora.leases l
						WHERE l.attempt_id = i.aid AND l.expires_at < now())
	   AND left(i.d ->> 'key', length(j.sp)) = j.sp
	   AND length(i.d ->> 'key') <> length(j.sp)
	   AND NOT EXISTS (SELECT 1
						 FROM (SELECT m.bucket, m.key FROM remora.members m
								WHERE m.attempt_id = i.aid
							   UNION ALL
							   SELECT e.value ->> 'bucket', e.value ->> 'key'
								 FROM jsonb_array_elements(coalesce(i.d -> 'entries', '[]')) e) x
						WHERE x.bucket <> j.bucket
						   OR left(x.key, length(j.sp)) <> j.sp
						   OR x.key = i.d ->> 'key')
	   AND (SELECT (count(*), coalesce(sum(u.size), 0))
			  FROM (SELECT m.path, m.size FROM remora.members m
					 WHERE m.attempt_id = i.aid
					UNION
					SELECT e.value ->> 'path', (e.value ->> 'size')::bigint
					  FROM jsonb_array_elements(coalesce(i.d -> 'entries', '[]')) e) u)
		   = ((i.d ->> 'members')::bigint, (i.d ->> 'bytes')::numeric)
	   AND NOT EXISTS (SELECT 1
						 FROM jsonb_array_elements(coalesce(i.d -> 'entries', '[]')) e
						 JOIN remora.members m
						   ON m.attempt_id = i.aid AND m.path = e.value ->> 'path'
						WHERE (m.key, m.size, m.sha256) IS DISTINCT FROM
							  (e.value ->> 'key', (e.value ->> 'size')::bigint,
							   lower(e.value ->> 'sha256')));

	ok := array_fill(false, ARRAY[n]);
	IF cardinality(clean) > 0 THEN
		WITH c AS MATERIALIZED (
			SELECT i.aid, i.tok, i.d, a.job_id
			  FROM unnest(attempt_ids, fencing_tokens, ds) WITH ORDINALITY i(aid, tok, d, ord)
			 CROSS JOIN LATERAL (SELECT a.job_id FROM remora.attempts a
								  WHERE a.attempt_id = i.aid OFFSET 0) a
			 WHERE i.ord = ANY (clean)
		), mem AS (
			INSERT INTO remora.members (attempt_id, path, bucket, key, size, sha256, etag, source)
			SELECT c.aid, e.value ->> 'path', e.value ->> 'bucket', e.value ->> 'key',
				   (e.value ->> 'size')::bigint, lower(e.value ->> 'sha256'),
				   e.value ->> 'etag', e.value -> 'source'
			  FROM c CROSS JOIN LATERAL jsonb_array_elements(coalesce(c.d -> 'entries', '[]')) e
			ON CONFLICT DO NOTHING
		), res AS (
			INSERT INTO remora.results
				(job_id, attempt_id, fencing_token, manifest_key, manifest_etag,
				 manifest_sha256, members, bytes, descriptor)
			SELECT c.job_id, c.aid, c.tok, c.d ->> 'key', c.d ->> 'etag', c.d ->> 'sha256',
				   (c.d ->> 'members')::bigint, (c.d ->> 'bytes')::bigint, c.d
			  FROM c
		), att AS (
			-- as in remora.commit: the staging holds the result alone
			UPDATE remora.attempts a
			   SET state = 'succeeded', finished_at = now(), cleaned_at = now()
			 WHERE a.attempt_id = ANY (ARRAY(SELECT c.aid FROM c))
		), job AS (
			UPDATE remora.jobs jb SET state = 'succeeded', finished_at = now()
			 WHERE jb.job_id = ANY (ARRAY(SELECT c.job_id FROM c))
		), lease AS (
			DELETE FROM remora.leases l WHERE l.attempt_id = ANY (ARRAY(SELECT c.aid FROM c))
		)
		DELETE FROM remora.checkpoints cp WHERE cp.job_id = ANY (ARRAY(SELECT c.job_id FROM c));
		FOREACH k IN ARRAY clean LOOP
			ok[k] := true;
		END LOOP;
	END IF;

	-- the others, one by one in job order
	FOR k IN SELECT i.ord::integer
			   FROM unnest(attempt_ids) WITH ORDINALITY i(aid, ord)
			   LEFT JOIN LATERAL (SELECT a.job_id FROM remora.attempts a
								   WHERE a.attempt_id = i.aid OFFSET 0) a ON true
			  WHERE NOT i.ord = ANY (clean)
			  ORDER BY a.job_id NULLS LAST, i.ord LOOP
		ok[k] := remora.commit(attempt_ids[k], fencing_tokens[k], manifests[k]);
	END LOOP;

	RETURN QUERY SELECT i.aid, ok[i.ord]
				   FROM unnest(attempt_ids) WITH ORDINALITY i(aid, ord)
				  ORDER BY i.ord;
END
$$;

REVOKE ALL ON FUNCTION remora.commit_many(uuid[], bigint[], jsonb[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.commit_many(uuid[], bigint[], jsonb[]) TO remora_worker;
