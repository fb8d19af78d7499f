/* ------------------------------------------------------------------------
 * Events (doc/user-guide.md, "Waiting for a job: LISTEN", and "Webhooks"):
 * NOTIFY remora_events on every state change of a job or an export (an export
 * is a row of remora.jobs too), and signed webhooks on a job's terminal
 * state.
 *
 * A webhook is recorded in the transaction that ends the job, so that one
 * is owed exactly when the end commits; workers deliver it later, each try
 * a short transaction around no network I/O (remora.webhooks_due claims,
 * remora.webhook_tried records).  Nothing here changes a job: a delivery's
 * failure never changes the job's outcome.
 * ------------------------------------------------------------------------ */

-- NOTIFY remora_events '{"job_id": N, "state": "..."}' when the change
-- commits.  LISTEN is open to every role: the payload says nothing more
-- than that a job of that number changed state; a client reads the rest
-- from remora_jobs, where row-level security applies.  No search_path of
-- its own (every name in it is qualified): only the extension's
-- functions, which pinned it, write the jobs, and a SET clause cost every
-- submit a save and restore of the setting.
CREATE OR REPLACE FUNCTION remora._notify_event() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	PERFORM pg_catalog.pg_notify('remora_events',
		pg_catalog.format('{"job_id": %s, "state": %s}', NEW.job_id,
						  pg_catalog.to_json(NEW.state)));
	RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER jobs_event_insert AFTER INSERT ON remora.jobs
	FOR EACH ROW EXECUTE FUNCTION remora._notify_event();
CREATE OR REPLACE TRIGGER jobs_event_state AFTER UPDATE OF state ON remora.jobs
	FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
	EXECUTE FUNCTION remora._notify_event();

-- The caller's secret as 'whsec_' || base64, created from fresh (32 random
-- bytes from remora_webhook_secret, C) on first use, or replaced by it
-- when rotate.  Called by remora_webhook_secret, remora_rotate_webhook_secret
-- and by remora_submit and remora_export for a notify_url, so that a
-- webhook owed always has a secret to sign with.
CREATE OR REPLACE FUNCTION remora._webhook_secret(caller oid, fresh bytea, rotate boolean)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	s	bytea;
BEGIN
	IF caller IS NULL OR fresh IS NULL OR length(fresh) <> 32 OR rotate IS NULL THEN
		RAISE EXCEPTION 'invalid webhook secret request' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF rotate THEN
		INSERT INTO remora.webhook_secrets AS ws (owner, secret) VALUES (caller, fresh)
		ON CONFLICT (owner) DO UPDATE SET secret = EXCLUDED.secret, created_at = now()
		RETURNING ws.secret INTO s;
	ELSE
		INSERT INTO remora.webhook_secrets (owner, secret) VALUES (caller, fresh)
		ON CONFLICT (owner) DO NOTHING;
		SELECT ws.secret INTO s FROM remora.webhook_secrets ws WHERE ws.owner = caller;
	END IF;
	RETURN 'whsec_' || encode(s, 'base64');
END
$$;

-- The caller's webhook secret, created on first use; and a new one in its
-- place (C: 32 bytes from pg_strong_random, then remora._webhook_secret).
CREATE OR REPLACE FUNCTION remora_webhook_secret() RETURNS text
AS 'MODULE_PATHNAME', 'remora_webhook_secret'
LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION remora_rotate_webhook_secret() RETURNS text
AS 'MODULE_PATHNAME', 'remora_rotate_webhook_secret'
LANGUAGE C VOLATILE;

-- Deferred to the end of the transaction that ended the job, so that the
-- body sees the result (or the export's figures) that the same transaction
-- recorded, and a job that changed state again before COMMIT owes one
-- webhook, for its last state.  Runs as the extension's owner: a cancel
-- commits in the user's own transaction.
CREATE OR REPLACE FUNCTION remora._webhook_owed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	j	remora.jobs;
	sha text;
	n	bigint;
	b	bigint;
BEGIN
	SELECT * INTO j FROM remora.jobs jb WHERE jb.job_id = NEW.job_id;
	IF NOT FOUND OR j.state <> NEW.state OR NOT (j.spec -> 'options' ? 'notify_url') THEN
		RETURN NULL;
	END IF;
	IF j.state = 'succeeded' THEN
		IF j.source_kind = 'export' THEN
			SELECT e.output_digest, e.members, e.bytes INTO sha, n, b
			  FROM remora.exports e WHERE e.export_id = j.job_id;
		ELSE
			SELECT r.manifest_sha256, r.members, r.bytes INTO sha, n, b
			  FROM remora.results r WHERE r.job_id = j.job_id;
		END IF;
	END IF;
	INSERT INTO remora.webhooks (webhook_id, job_id, state, finished_at, url, body, give_up_at)
	VALUES ('msg_' || replace(gen_random_uuid()::text, '-', ''), j.job_id, j.state,
			j.finished_at, j.spec #>> '{options,notify_url}',
			jsonb_build_object('job_id', j.job_id, 'state', j.state,
							   'result_manifest_sha256', sha, 'members', n,
							   'bytes', b, 'last_error', j.last_error)::text,
			now() + interval '24 hours')
	ON CONFLICT (job_id, state, finished_at) DO NOTHING;
	RETURN NULL;
END
$$;
-- PostgreSQL cannot replace a constraint trigger (CREATE OR REPLACE
-- CONSTRAINT TRIGGER is refused): it is created when missing, and an
-- upgrade that changes it drops it first (sql/README.md).
DO $jobs_webhook$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger
					WHERE tgrelid = 'remora.jobs'::pg_catalog.regclass
					  AND tgname = 'jobs_webhook') THEN
		CREATE CONSTRAINT TRIGGER jobs_webhook AFTER UPDATE OF state ON remora.jobs
			DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
							   AND NEW.state IN ('succeeded', 'failed', 'cancelled',
												 'outcome_unknown'))
			EXECUTE FUNCTION remora._webhook_owed();
	END IF;
END
$jobs_webhook$;

-- Worker protocol: claim up to max_webhooks webhooks due now, with the
-- secret of each one's job owner: the URL and body are the job's own, so a
-- worker never sends one user's job to another user's receiver.  Owners
-- are served round-robin, each at most remora.webhook_max_in_flight_per_role
-- at once across every worker (the claims of an owner's webhooks lock its
-- secret's row, so that two claims count each other's), so that one
-- user's slow receivers never hold up another's webhooks.  A try may take
-- remora.webhook_timeout (timeout_ms, which the worker applies); it is
-- claimed for that and a minute more.  attempt numbers the try (1, 2,
-- ...): a try that outlives its claim is recorded, but the schedule
-- follows the latest.  The URL is the whole one, query string included
-- (remora.notify_urls).
CREATE OR REPLACE FUNCTION remora.webhooks_due(incarnation uuid, max_webhooks integer)
RETURNS TABLE (webhook_id text, job_id bigint, url text, body text,
			   secret bytea, attempt integer, timeout_ms integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	per_role	integer := current_setting('remora.webhook_max_in_flight_per_role')::integer;
	timeout		interval := remora._setting_interval('remora.webhook_timeout');
	owners		oid[];
BEGIN
	IF $1 IS NULL OR $2 IS NULL OR $2 < 1 THEN
		RAISE EXCEPTION 'incarnation and a positive max_webhooks are required'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- as in remora.claim, an incarnation unknown or stopped claims nothing
	IF NOT EXISTS (SELECT 1 FROM remora.incarnations i
					WHERE i.incarnation = $1 AND i.stopped_at IS NULL) THEN
		RETURN;
	END IF;
	-- the owners with webhooks due, their secrets' rows locked in order
	owners := ARRAY(SELECT DISTINCT j.owner::oid
					  FROM remora.webhooks w JOIN remora.jobs j ON j.job_id = w.job_id
					 WHERE w.ended_at IS NULL AND w.next_try_at <= now()
					   AND (w.claimed_until IS NULL OR w.claimed_until <= now())
					 ORDER BY 1);
	IF cardinality(owners) = 0 THEN
		RETURN;
	END IF;
	PERFORM 1 FROM remora.webhook_secrets s
	 WHERE s.owner::oid = ANY (owners) ORDER BY s.owner FOR UPDATE;
	RETURN QUERY
	WITH in_flight AS (
		SELECT j.owner, count(*) AS n
		  FROM remora.webhooks w JOIN remora.jobs j ON j.job_id = w.job_id
		 WHERE w.ended_at IS NULL AND w.claimed_until > now()
		   AND j.owner::oid = ANY (owners)
		 GROUP BY j.owner
	), due AS (
		SELECT w.webhook_id, w.next_try_at,
			   row_number() OVER (PARTITION BY j.owner ORDER BY w.next_try_at, w.webhook_id)
			   + coalesce(f.n, 0) AS turn
		  FROM remora.webhooks w JOIN remora.jobs j ON j.job_id = w.job_id
		  LEFT JOIN in_flight f ON f.owner = j.owner
		 WHERE w.ended_at IS NULL AND w.next_try_at <= now()
		   AND (w.claimed_until IS NULL OR w.claimed_until <= now())
		   AND j.owner::oid = ANY (owners)
	), picked AS (
		SELECT d.webhook_id FROM due d
		 WHERE d.turn <= per_role
		 ORDER BY d.turn, d.next_try_at, d.webhook_id
		 LIMIT $2
	)
	UPDATE remora.webhooks w
	   SET tries = w.tries + 1, claimed_until = now() + timeout + interval '1 minute'
	  FROM picked, remora.jobs j, remora.webhook_secrets s
	 WHERE w.webhook_id = picked.webhook_id AND j.job_id = w.job_id
	   AND s.owner = j.owner
	RETURNING w.webhook_id, w.job_id,
			  coalesce((SELECT n.url FROM remora.notify_urls n WHERE n.job_id = w.job_id),
					   w.url),
			  w.body, s.secret, w.tries,
			  (extract(epoch FROM timeout) * 1000)::integer;
END
$$;

-- Worker protocol: record a try.  delivered for a 2xx answer; retry for a
-- failure worth repeating (a 5xx answer, a timeout, a reset connection):
-- tried again after 1, 2, 4 ... seconds, at most 5 minutes apart, until
-- 24 hours after the job ended.  Anything else (a 4xx answer, a URL the
-- outbound-source policy refuses at connect time) ends the webhook.
-- Returns when it is tried next, NULL if not.
CREATE OR REPLACE FUNCTION remora.webhook_tried(webhook_id text, attempt integer,
									 http_status integer, error text,
									 retry boolean)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	w		remora.webhooks;
	ok		boolean := coalesce($3 BETWEEN 200 AND 299, false);
	next_at timestamptz;
BEGIN
	IF $1 IS NULL OR $2 IS NULL OR $5 IS NULL THEN
		RAISE EXCEPTION 'webhook_id, attempt and retry are required'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT * INTO w FROM remora.webhooks wh WHERE wh.webhook_id = $1 FOR UPDATE;
	IF NOT FOUND OR $2 < 1 OR $2 > w.tries THEN
		RAISE EXCEPTION 'webhook % has no try %', $1, $2 USING ERRCODE = 'no_data_found';
	END IF;
	IF NOT ok AND $5 AND w.ended_at IS NULL THEN
		next_at := now() + least(interval '1 second' * power(2, least($2 - 1, 16)),
								 interval '5 minutes');
		IF next_at > w.give_up_at THEN
			next_at := NULL;
		END IF;
	END IF;
	INSERT INTO remora.webhook_tries (webhook_id, attempt, http_status, error,
									  next_try_at, delivered)
	VALUES ($1, $2, $3, left($4, 1000), next_at, ok)
	ON CONFLICT DO NOTHING;
	IF ok AND w.delivered_at IS NULL THEN
		UPDATE remora.webhooks wh
		   SET delivered_at = now(), ended_at = coalesce(wh.ended_at, now()),
			   claimed_until = NULL
		 WHERE wh.webhook_id = $1;
	ELSIF $2 = w.tries AND w.ended_at IS NULL THEN
		UPDATE remora.webhooks wh
		   SET next_try_at = coalesce(next_at, wh.next_try_at), claimed_until = NULL,
			   ended_at = CASE WHEN next_at IS NULL THEN now() END
		 WHERE wh.webhook_id = $1;
	END IF;
	RETURN next_at;
END
$$;

-- Each try of each webhook of the caller's jobs (row-level security).
CREATE OR REPLACE VIEW remora_webhook_deliveries WITH (security_invoker = true) AS
SELECT w.job_id, t.webhook_id, t.attempt, t.http_status, t.error,
	   t.tried_at, t.next_try_at, t.delivered
  FROM remora.webhook_tries t
  JOIN remora.webhooks w ON w.webhook_id = t.webhook_id;

REVOKE ALL ON FUNCTION remora._notify_event(), remora._webhook_secret(oid, bytea, boolean),
	remora._webhook_owed(), remora.webhooks_due(uuid, integer),
	remora.webhook_tried(text, integer, integer, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION remora_webhook_secret(), remora_rotate_webhook_secret()
	FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora_webhook_secret(), remora_rotate_webhook_secret()
	TO remora_user;
GRANT EXECUTE ON FUNCTION remora.webhooks_due(uuid, integer),
	remora.webhook_tried(text, integer, integer, text, boolean) TO remora_worker;
GRANT SELECT ON remora_webhook_deliveries TO remora_user;
REVOKE ALL ON remora_webhook_deliveries FROM PUBLIC;
