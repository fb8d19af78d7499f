--
-- remora_retry: a new job with the same request for the job's owner, from
-- a failed or cancelled job only; and an export never to a bucket's root.
--
CREATE FUNCTION pg_temp.try(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st	text;
	msg text;
	det text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL;
	RETURN st || ': ' || msg || coalesce(' (' || nullif(det, '') || ')', '');
END
$$;

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SET remora.default_bucket = 'target';
SET remora.default_prefix = 'remora';
SET client_min_messages = error;

CREATE ROLE regress_retry_ann LOGIN;
CREATE ROLE regress_retry_ben LOGIN;
CREATE ROLE regress_retry_adm LOGIN;
GRANT remora_user TO regress_retry_ann, regress_retry_ben;
GRANT remora_admin TO regress_retry_adm;
SELECT remora.grant_target('regress_retry_ann', 'out', '*');

SET ROLE regress_retry_ann;
SELECT remora_submit('https://example.com/a.bin?sig=secret', 'out', 'nightly',
					 '{"label": "a", "max_attempts": 1, "notify_url": "https://hooks.example.com/r?t=1"}') AS failing \gset
SELECT remora_submit('https://example.com/b.bin') AS cancelled \gset
SELECT remora_submit('https://example.com/c.bin') AS queued \gset
SELECT remora_cancel(:cancelled);
RESET ROLE;
-- the first fails for good
SELECT attempt_id AS att, fencing_token AS tok
  FROM remora.claim('66666666-6666-6666-6666-666666666666') WHERE job_id = :failing \gset
SELECT remora.fail(:'att', :tok, '{"class": "http", "message": "gone", "http_status": 404}', false);

-- only a failed or cancelled job: 22023; nobody's, or another's: P0002
SET ROLE regress_retry_ann;
SELECT pg_temp.try(format('SELECT remora_retry(%s)', :queued));
SELECT pg_temp.try('SELECT remora_retry(424242)');
SELECT pg_temp.try('SELECT remora_retry(NULL)');
RESET ROLE;
SET ROLE regress_retry_ben;
SELECT pg_temp.try(format('SELECT remora_retry(%s)', :failing));
RESET ROLE;

-- a retry is the same request, as a new job of the owner's
SET ROLE regress_retry_ann;
SELECT remora_retry(:failing) AS again \gset
SELECT remora_retry(:cancelled) AS again2 \gset
RESET ROLE;
SELECT n.job_id = :again AS new_job, n.owner = o.owner AS same_owner, n.state,
	   n.spec = o.spec AS same_spec, n.request_hash = o.request_hash AS same_request,
	   n.source, n.bucket, n.prefix, n.label,
	   (SELECT url FROM remora.source_urls WHERE job_id = n.job_id) AS url,
	   (SELECT url FROM remora.notify_urls WHERE job_id = n.job_id) AS notify
  FROM remora.jobs n, remora.jobs o WHERE n.job_id = :again AND o.job_id = :failing;
SELECT state, attempts_used FROM remora.jobs WHERE job_id IN (:failing, :again2) ORDER BY job_id;
SELECT count(*) AS queued_now FROM remora.queue WHERE job_id IN (:again, :again2);

-- an administrator's retry is the owner's job
SET ROLE regress_retry_adm;
SELECT remora_retry(:cancelled) AS by_admin \gset
RESET ROLE;
SELECT pg_get_userbyid(owner) AS owner FROM remora.jobs WHERE job_id = :by_admin;
-- a deleted job is gone
SET ROLE regress_retry_ann;
SELECT remora_delete(:cancelled);
SELECT pg_temp.try(format('SELECT remora_retry(%s)', :cancelled));

-- an export under a prefix, never to the bucket's root
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'out', '')$$, :failing));
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'out', '/')$$, :failing));
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'out', '//')$$, :failing));
RESET ROLE;

DROP OWNED BY regress_retry_ann, regress_retry_ben, regress_retry_adm;
DROP ROLE regress_retry_ann, regress_retry_ben, regress_retry_adm;
