--
-- Webhooks (doc/user-guide.md, "Webhooks"): options.notify_url on submit and
-- export, judged like a source; each role's secret (remora_webhook_secret,
-- created on first use; remora_rotate_webhook_secret); a webhook owed when a
-- job with a notify_url ends, its tries claimed and recorded by workers
-- (remora.webhooks_due, remora.webhook_tried); remora_webhook_deliveries
-- under row-level security.  NOTIFY remora_events is
-- test/isolation/specs/events-notify.spec.
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
GRANT EXECUTE ON FUNCTION pg_temp.try(text) TO PUBLIC;
CREATE FUNCTION pg_temp.manifest(a uuid) RETURNS jsonb
LANGUAGE sql AS $$
	SELECT jsonb_build_object(
		'key', remora._staging_prefix(j.prefix, j.job_id, a) || 'manifest.json',
		'etag', '"m"', 'sha256', repeat('ab', 32), 'members', 0, 'bytes', 0)
	  FROM remora.attempts t JOIN remora.jobs j USING (job_id)
	 WHERE t.attempt_id = a
$$;

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases, remora.webhook_secrets, remora.webhooks,
	remora.webhook_tries;
SET remora.default_bucket = 'target';
SET remora.default_prefix = 'remora';
SET client_min_messages = error;

CREATE ROLE regress_wh_ann LOGIN;
CREATE ROLE regress_wh_ben LOGIN;
CREATE ROLE regress_wh_worker LOGIN;
GRANT remora_user TO regress_wh_ann, regress_wh_ben;
GRANT remora_worker TO regress_wh_worker;

-- notify_url: an http(s) URL of at most 2048 bytes (22023), that the
-- outbound-source policy allows (RM001, as for a source): the metadata
-- address, loopback and a port outside remora.allow_ports are refused
SET ROLE regress_wh_ann;
SELECT o AS options, pg_temp.try(format($$SELECT remora_submit('https://example.com/x.bin', options => %L)$$, o))
  FROM unnest(ARRAY['{"notify_url": "ftp://example.com/hook"}',
					'{"notify_url": "s3://bucket/hook"}',
					'{"notify_url": "hf://owner/name"}',
					'{"notify_url": 42}', '{"notify_url": null}',
					'{"notify_url": ["https://example.com/hook"]}',
					'{"notify_url": "https://"}',
					'{"notify_url": "https://exa mple.com/hook"}',
					'{"notify_url": "https://example.com/a\nb"}',
					'{"notify_url": "http://169.254.169.254/latest/meta-data/"}',
					'{"notify_url": "http://[::ffff:169.254.169.254]/"}',
					'{"notify_url": "http://2852039166/"}',
					'{"notify_url": "http://127.0.0.1:8080/hook"}',
					'{"notify_url": "https://example.com:22/hook"}']) o;
SELECT pg_temp.try(format($$SELECT remora_submit('https://example.com/x.bin', options => %L)$$,
						  jsonb_build_object('notify_url', 'https://example.com/' || repeat('a', 2048))));
-- nothing was recorded, no secret made
SELECT count(*) AS jobs FROM remora_jobs;
RESET ROLE;
SELECT count(*) AS secrets FROM remora.webhook_secrets;

-- a good one is kept in its canonical form, in the job's options, and its
-- query string where no role reads it (as a source URL's): only a worker
-- is handed it with the webhook (below)
SET ROLE regress_wh_ann;
SELECT remora_submit('https://example.com/a1.bin',
					 options => '{"notify_url": "HTTPS://Example.COM:443/hook?t=1"}') AS a1 \gset
SELECT spec #>> '{options,notify_url}' AS notify_url FROM remora.jobs WHERE job_id = :a1;
SELECT pg_temp.try($$SELECT * FROM remora.notify_urls$$);
RESET ROLE;
SELECT url AS kept FROM remora.notify_urls WHERE job_id = :a1;

-- and ann has a secret now: whsec_ and the base64 of 32 bytes, the same
-- on every call until rotated; ben's is his own
SELECT count(*) AS secrets FROM remora.webhook_secrets;
SET ROLE regress_wh_ann;
SELECT remora_webhook_secret() AS s1 \gset
SELECT :'s1' ~ '^whsec_[A-Za-z0-9+/]{43}=$' AS well_formed,
	   length(decode(substr(:'s1', 7), 'base64')) AS key_bytes,
	   remora_webhook_secret() = :'s1' AS stable;
SELECT remora_rotate_webhook_secret() AS s2 \gset
SELECT :'s2' <> :'s1' AS rotated, remora_webhook_secret() = :'s2' AS kept;
SET ROLE regress_wh_ben;
SELECT remora_webhook_secret() AS sb \gset
SELECT :'sb' NOT IN (:'s1', :'s2') AS own_secret;
-- no role reads the secrets, nor calls the worker's functions
SELECT pg_temp.try($$SELECT * FROM remora.webhook_secrets$$);
SELECT pg_temp.try($$SELECT remora._webhook_secret(0, '\x00', false)$$);
SELECT pg_temp.try($$SELECT * FROM remora.webhooks_due('7a7e0000-0000-4000-8000-000000000001', 1)$$);
SELECT pg_temp.try($$SELECT remora.webhook_tried('x', 1, 200, NULL, false)$$);
SET ROLE regress_wh_worker;
SELECT pg_temp.try($$SELECT remora_webhook_secret()$$);
SELECT pg_temp.try($$SELECT * FROM remora.webhook_secrets$$);
RESET ROLE;

-- ben's job with a hook of his own
SET ROLE regress_wh_ben;
SELECT remora_submit('https://example.com/b1.bin',
					 options => '{"notify_url": "https://ben.example/hook"}') AS b1 \gset
RESET ROLE;

-- ann's job succeeds, ben's fails, his other (without a hook) is
-- cancelled: a webhook is owed for each job with a notify_url, with the
-- body of doc/user-guide.md, "Webhooks"
SELECT count(*) AS claimed FROM remora.claim('7a7e0000-0000-4000-8000-000000000001', 3);
SET ROLE regress_wh_ben;
SELECT remora_submit('https://example.com/b2.bin') AS b2 \gset
RESET ROLE;
SELECT current_attempt AS a1att, fencing_token AS a1tok FROM remora.jobs WHERE job_id = :a1 \gset
SELECT current_attempt AS b1att, fencing_token AS b1tok FROM remora.jobs WHERE job_id = :b1 \gset
SELECT remora.commit(:'a1att', :a1tok, pg_temp.manifest(:'a1att')) AS committed;
SELECT remora.fail(:'b1att', :b1tok, '{"class": "http", "message": "404"}', false) AS failed;
SET ROLE regress_wh_ben;
SELECT remora_cancel(:b2);
RESET ROLE;
SELECT job_id, state, url, body::jsonb - 'last_error' AS body,
	   body::jsonb #>> '{last_error,class}' AS error_class,
	   webhook_id ~ '^msg_[0-9a-f]{32}$' AS id_ok,
	   give_up_at - created_at AS retried_for
  FROM remora.webhooks ORDER BY job_id;

-- an export of ann's result, with a hook: judged like a submit's
SELECT remora.grant_target('regress_wh_ann', 'target', 'copy');
SET ROLE regress_wh_ann;
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'target', 'copy', %L)$$, :a1, o))
  FROM unnest(ARRAY['{"notify_url": "http://169.254.169.254/"}',
					'{"notify_url": "gopher://example.com/"}',
					'{"notify_url": 1}']) o;
SELECT remora_export(:a1, 'target', 'copy',
					 '{"notify_url": "https://Example.com/export-hook"}') AS e1 \gset
RESET ROLE;
SELECT spec #>> '{options,notify_url}' AS export_notify_url FROM remora.jobs WHERE job_id = :e1;
SET ROLE regress_wh_ann;
SELECT remora_cancel(:e1);
RESET ROLE;
SELECT job_id, state, body::jsonb AS body FROM remora.webhooks WHERE job_id = :e1;

-- a worker claims what is due, each with its owner's secret; an unknown
-- incarnation claims nothing
SET ROLE regress_wh_worker;
SELECT count(*) AS unknown FROM remora.webhooks_due('7a7e0000-0000-4000-8000-0000000000ff', 10);
CREATE TEMP TABLE due AS
SELECT * FROM remora.webhooks_due('7a7e0000-0000-4000-8000-000000000001', 10);
RESET ROLE;
SELECT d.job_id, d.attempt, pg_get_userbyid(j.owner) AS owner,
	   'whsec_' || encode(d.secret, 'base64') = CASE pg_get_userbyid(j.owner)
			WHEN 'regress_wh_ann' THEN :'s2' ELSE :'sb' END AS owners_secret,
	   d.url = coalesce((SELECT n.url FROM remora.notify_urls n WHERE n.job_id = d.job_id),
						j.spec #>> '{options,notify_url}') AS own_url,
	   strpos(d.url, '?') > 0 AS with_query
  FROM due d JOIN remora.jobs j USING (job_id) ORDER BY d.job_id;
-- claimed: not handed out again until the claim lapses
SET ROLE regress_wh_worker;
SELECT count(*) AS again FROM remora.webhooks_due('7a7e0000-0000-4000-8000-000000000001', 10);
-- ann's first try answers 500: tried again a second later, same id
SELECT remora.webhook_tried(webhook_id, 1, 500, NULL, true) - now() AS retry_in
  FROM due WHERE job_id = :a1;
-- ben's is refused (404, not repeated); ann's export's is delivered
SELECT remora.webhook_tried(webhook_id, 1, 404, NULL, false) AS ben_next
  FROM due WHERE job_id = :b1;
SELECT remora.webhook_tried(webhook_id, 1, 204, NULL, false) AS export_next
  FROM due WHERE job_id = :e1;
-- bad calls
SELECT pg_temp.try($$SELECT remora.webhook_tried('msg_none', 1, 200, NULL, false)$$);
SELECT regexp_replace(pg_temp.try(format($$SELECT remora.webhook_tried(%L, 2, 200, NULL, false)$$, webhook_id)),
					  'msg_[0-9a-f]{32}', 'msg_ID') AS try
  FROM due WHERE job_id = :a1;
SELECT pg_temp.try($$SELECT remora.webhook_tried(NULL, 1, 200, NULL, false)$$);
SELECT pg_temp.try($$SELECT * FROM remora.webhooks_due('7a7e0000-0000-4000-8000-000000000001', 0)$$);
RESET ROLE;
-- a second later ann's is due again, as try 2, under the same id
UPDATE remora.webhooks SET next_try_at = now() WHERE job_id = :a1;
SET ROLE regress_wh_worker;
SELECT d.attempt, d.webhook_id = (SELECT webhook_id FROM due WHERE job_id = :a1) AS same_id
  FROM remora.webhooks_due('7a7e0000-0000-4000-8000-000000000001', 10) d;
SELECT remora.webhook_tried((SELECT webhook_id FROM due WHERE job_id = :a1), 2, 200, NULL, false) AS ann_next;
RESET ROLE;
SELECT job_id, tries, delivered_at IS NOT NULL AS delivered, ended_at IS NOT NULL AS ended
  FROM remora.webhooks ORDER BY job_id;

-- each user sees the tries of their own jobs; an administrator all
SET ROLE regress_wh_ann;
SELECT job_id, attempt, http_status, error, next_try_at IS NOT NULL AS retried, delivered
  FROM remora_webhook_deliveries ORDER BY job_id, attempt;
SELECT count(*) AS hooks_seen FROM remora.webhooks;
SET ROLE regress_wh_ben;
SELECT job_id, attempt, http_status, delivered FROM remora_webhook_deliveries;
SET ROLE regress_wh_worker;
SELECT pg_temp.try($$SELECT * FROM remora_webhook_deliveries$$);
RESET ROLE;
SELECT count(*) AS all_tries FROM remora_webhook_deliveries;

-- the webhooks never changed a job
SELECT job_id, state FROM remora.jobs ORDER BY job_id;

-- retention prunes a job's webhooks and their tries with the job, and its
-- notify_url's query string, once every webhook of it has ended
UPDATE remora.webhooks SET ended_at = NULL WHERE job_id = :b1;
UPDATE remora.jobs SET finished_at = now() - interval '31 days' WHERE finished_at IS NOT NULL;
UPDATE remora.attempts SET cleaned_at = now();
SELECT remora.prune() AS pruned;
SELECT w.job_id, count(t.*) AS tries FROM remora.webhooks w
  LEFT JOIN remora.webhook_tries t USING (webhook_id) GROUP BY w.job_id ORDER BY 1;
SELECT count(*) AS notify_urls FROM remora.notify_urls;

-- clean up
DROP TABLE due;
SELECT remora.revoke_target('regress_wh_ann', 'target', 'copy');
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases, remora.webhook_secrets, remora.webhooks,
	remora.webhook_tries;
DROP ROLE regress_wh_ann, regress_wh_ben, regress_wh_worker;
