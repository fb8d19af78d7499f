/* ------------------------------------------------------------------------
 * Internal helpers (run inside the SECURITY DEFINER functions)
 * ------------------------------------------------------------------------ */

CREATE OR REPLACE FUNCTION remora._sha256(t text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT encode(sha256(convert_to(t, 'UTF8')), 'hex') $$;

CREATE OR REPLACE FUNCTION remora._may_act(caller oid, job_owner oid) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT caller = job_owner OR pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE') $$;

CREATE OR REPLACE FUNCTION remora._setting_interval(name text) RETURNS interval
LANGUAGE plpgsql STABLE
AS $$ BEGIN RETURN current_setting(name)::interval; END $$;

-- Exponential backoff with equal jitter, never shorter than a Retry-After.
CREATE OR REPLACE FUNCTION remora._backoff(attempt_no integer, retry_after numeric)
RETURNS interval
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	base	float8 := extract(epoch FROM remora._setting_interval('remora.retry_base_delay'));
	cap		float8 := extract(epoch FROM remora._setting_interval('remora.retry_max_delay'));
	delay	float8;
BEGIN
	delay := least(cap, base * power(2, greatest(attempt_no - 1, 0)));
	delay := delay / 2 + random() * delay / 2;
	IF retry_after IS NOT NULL AND retry_after > delay THEN
		delay := least(retry_after, 86400);
	END IF;
	RETURN make_interval(secs => delay);
END
$$;

-- Does attempt a, called with p_token, hold authority over its job j, whose
-- lease row (if there is one) expires at lease_expires?  'stale' unless a
-- is the job's current running attempt and p_token its token; then 'lost'
-- when the lease has expired, 'cancelled' when cancellation was requested,
-- 'ok' otherwise.  It only judges (the caller holds the job lock, and
-- settles): every call of the protocol that needs authority, commit and
-- commit_many included, judges by this one rule.  Plain SQL, so that it is
-- inlined into the statements that use it.
CREATE OR REPLACE FUNCTION remora._authority(j remora.jobs, a remora.attempts,
								  p_token bigint, lease_expires timestamptz)
RETURNS text
LANGUAGE sql STABLE
AS $$
	SELECT CASE
			 WHEN a.fencing_token IS DISTINCT FROM p_token OR a.state <> 'running'
				  OR j.state <> 'running'
				  OR j.current_attempt IS DISTINCT FROM a.attempt_id THEN 'stale'
			 WHEN lease_expires < now() THEN 'lost'
			 WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
			 ELSE 'ok' END
$$;

-- Lock a job and judge (remora._authority) whether (attempt, token) still
-- holds authority.
-- verdict: 'ok', 'unknown' (no such attempt), 'stale' (not the current
-- running attempt and token), or 'lost'/'cancelled' when this call found the
-- lease expired or cancellation requested and settled the attempt.
-- A missing lease row is coordination loss, not expiry: it never revokes.
-- Model: Authorize (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora._authorize(p_attempt uuid, p_token bigint,
								  OUT verdict text, OUT j remora.jobs,
								  OUT a remora.attempts)
LANGUAGE plpgsql
AS $$
DECLARE
	jid			bigint;
	expires		timestamptz;
BEGIN
	SELECT job_id INTO jid FROM remora.attempts WHERE attempt_id = p_attempt;
	IF NOT FOUND THEN
		verdict := 'unknown';
		RETURN;
	END IF;
	SELECT * INTO j FROM remora.jobs WHERE job_id = jid FOR UPDATE;
	SELECT * INTO a FROM remora.attempts WHERE attempt_id = p_attempt;
	SELECT expires_at INTO expires FROM remora.leases WHERE attempt_id = p_attempt;
	verdict := remora._authority(j, a, p_token, expires);
	IF verdict = 'lost' THEN
		PERFORM remora._settle(j, a, 'lost',
			jsonb_build_object('class', 'lease_expired',
							   'message', 'the attempt did not renew its lease in time'),
			true);
	ELSIF verdict = 'cancelled' THEN
		PERFORM remora._settle(j, a, 'cancelled', NULL, false);
	ELSE
		RETURN;
	END IF;
	SELECT * INTO j FROM remora.jobs WHERE job_id = jid;
	SELECT * INTO a FROM remora.attempts WHERE attempt_id = p_attempt;
END
$$;

-- End a running attempt that did not commit, and move its job on:
-- cancelled if cancellation was requested, retrying while budget remains
-- and the failure is retryable, failed otherwise.  Caller holds the job lock.
-- An export whose writes may have been sent without a conclusive answer
-- (the worker says class 'outcome_unknown', the attempt was lost, or a
-- stopping worker handed it back, class 'worker') and an export being
-- verified end outcome_unknown instead: never retried.
-- Model: Settle (proof/remora.pml)
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

