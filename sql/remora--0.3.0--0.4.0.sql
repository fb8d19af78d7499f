-- remora 0.3.0 -> 0.4.0
--
-- Each change to sql/remora.sql since 0.3.0 is carried here as well, in the
-- order it was made; test/e2e/upgrade.sh checks that an updated catalog
-- equals a fresh one.

\echo Use "ALTER EXTENSION remora UPDATE TO '0.4.0'" to load this file. \quit

/* ------------------------------------------------------------------------
 * Claims in O(log backlog): the queue is read from its index in claim
 * order with SKIP LOCKED, instead of sorting a join of the whole queue
 * with the jobs.
 * ------------------------------------------------------------------------ */

-- Hand out up to max_jobs runnable jobs, by priority then age.  Each claim
-- creates a new attempt with a fencing token greater than any before it
-- for the job, records the recovery ledger, and takes a lease.  Leases in
-- use never exceed remora.max_active_leases: claimers serialise on the
-- lease lock for the count (running jobs count, so a lost lease table does
-- not make room), and skip queue and job rows others hold.  A lease runs from when
-- it is written (clock_timestamp()), not from a transaction start that may
-- have waited on the lock.
CREATE OR REPLACE FUNCTION remora.claim(incarnation uuid, max_jobs integer DEFAULT 1)
RETURNS TABLE (job_id bigint, attempt_id uuid, fencing_token bigint,
			   spec jsonb, resume jsonb, lease_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_incarnation uuid := $1;
	lim			integer := current_setting('remora.max_active_leases')::integer;
	room		integer;
	next_job	record;
	j			remora.jobs;
	cp			remora.checkpoints;
	new_attempt uuid;
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

	PERFORM remora._lock_leases();
	room := least(max_jobs, lim - remora._leases_in_use());
	expires := clock_timestamp() + remora._setting_interval('remora.lease_duration');

	-- the queue in claim order, from its index: a claim reads the rows it
	-- hands out (and those others hold, which it skips), whatever the
	-- backlog; the job row is only locked if nobody else holds it, so a
	-- claim never waits on a cancel (which holds the job, then the queue row)
	FOR next_job IN
		SELECT qq.job_id FROM remora.queue qq
		 WHERE qq.not_before <= now()
		 ORDER BY qq.priority DESC, qq.job_id
		 LIMIT greatest(room, 0)
		   FOR UPDATE SKIP LOCKED
	LOOP
		SELECT * INTO j FROM remora.jobs jb WHERE jb.job_id = next_job.job_id
		   FOR UPDATE SKIP LOCKED;
		CONTINUE WHEN NOT FOUND;
		IF j.state NOT IN ('queued', 'retrying') OR j.cancel_requested_at IS NOT NULL
			OR j.attempts_used >= j.max_attempts THEN
			-- an entry left behind (reconcile removes them too)
			DELETE FROM remora.queue qq WHERE qq.job_id = j.job_id;
			CONTINUE;
		END IF;

		new_attempt := gen_random_uuid();
		SELECT * INTO cp FROM remora.checkpoints c WHERE c.job_id = j.job_id;

		INSERT INTO remora.attempts
			(attempt_id, job_id, attempt_no, fencing_token, incarnation,
			 definition_hash, request_hash, access_digest, provenance,
			 resumed_from)
		VALUES
			(new_attempt, j.job_id, j.attempts_used + 1, j.fencing_token + 1,
			 p_incarnation, j.definition_hash, j.request_hash,
			 j.access_digest, j.provenance, cp.attempt_id);

		UPDATE remora.jobs jb
		   SET state = 'running',
			   attempts_used = jb.attempts_used + 1,
			   fencing_token = jb.fencing_token + 1,
			   current_attempt = new_attempt,
			   started_at = coalesce(jb.started_at, now())
		 WHERE jb.job_id = j.job_id;

		INSERT INTO remora.leases (attempt_id, job_id, fencing_token, incarnation, expires_at)
		VALUES (new_attempt, j.job_id, j.fencing_token + 1, p_incarnation, expires);
		DELETE FROM remora.queue q WHERE q.job_id = j.job_id;

		job_id := j.job_id;
		attempt_id := new_attempt;
		fencing_token := j.fencing_token + 1;
		spec := j.spec || jsonb_build_object(
			'job_id', j.job_id, 'attempt_no', j.attempts_used + 1,
			'owner', j.owner,
			'staging_prefix', remora._staging_prefix(j.prefix, j.job_id, new_attempt));
		-- the worker gets the whole URL, query string included
		spec := coalesce(jsonb_set(spec, '{source,uri}',
								   to_jsonb((SELECT u.url FROM remora.source_urls u
											  WHERE u.job_id = j.job_id))),
						 spec);
		resume := CASE WHEN cp.job_id IS NULL THEN NULL
					   ELSE jsonb_build_object('attempt_id', cp.attempt_id,
											   'fencing_token', cp.fencing_token,
											   'bytes_done', cp.bytes_done,
											   'state', cp.state) END;
		lease_expires_at := expires;
		RETURN NEXT;
	END LOOP;
END
$$;

/* ------------------------------------------------------------------------
 * TLS trust (issue 17): a registered source endpoint may carry its own CA
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
