--
-- Source grants: reading an s3:// source needs a grant for its bucket, key
-- or prefix and endpoint; remora_admin reads everything; nobody else reads
-- the staging and result area of Remora's own jobs, not even with a grant
-- on the whole bucket.
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

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
TRUNCATE remora.target_grants, remora.source_grants;
DELETE FROM remora.source_endpoints;
ALTER DATABASE contrib_regression SET remora.default_bucket = 'target';
SET remora.default_bucket = 'target';
SHOW remora.default_prefix;

CREATE ROLE regress_alice LOGIN;
CREATE ROLE regress_bob LOGIN;
CREATE ROLE regress_carol LOGIN;		-- an administrator
GRANT remora_user TO regress_alice, regress_bob;
GRANT remora_admin TO regress_carol;

-- without a grant, an s3:// source is refused, naming bucket and key
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('s3://data/raw/x.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/raw/')$$);
-- http(s) sources need no source grant
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/x.bin')$$);
-- users cannot grant, nor see the grants
SELECT pg_temp.try($$SELECT remora.grant_source('regress_alice', 'data')$$);
SELECT pg_temp.try('SELECT * FROM remora_source_grants');
SELECT pg_temp.try('SELECT * FROM remora.source_grants');
RESET ROLE;

-- an administrator grants; bad arguments are errors
SET ROLE regress_carol;
SELECT remora.grant_source('regress_alice', 'data', 'raw/*');
SELECT remora.grant_source('regress_alice', 'data', 'raw/*');	-- once is enough
SELECT remora.grant_source('regress_alice', 'data', 'exact/file.bin');
SELECT pg_temp.try($$SELECT remora.grant_source('no_such_role', 'data')$$);
SELECT pg_temp.try($$SELECT remora.grant_source('regress_alice', 'Bad_Bucket')$$);
SELECT pg_temp.try($$SELECT remora.grant_source('regress_alice', 'data', '../up/*')$$);
SELECT pg_temp.try($$SELECT remora.grant_source('regress_alice', 'data', 'a*b')$$);
SELECT pg_temp.try($$SELECT remora.grant_source('regress_alice', 'data', '*', 'nowhere')$$);
SELECT role, bucket, prefix_pattern, endpoint, granted_by FROM remora_source_grants ORDER BY 3;
RESET ROLE;

SET ROLE regress_alice;
-- a key matching the pattern, and a prefix inside a pattern ending in '*'
SELECT pg_temp.try($$SELECT remora_submit('s3://data/raw/x.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/raw/deep/y.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/raw/')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/raw/deep/')$$);
-- a parent of the granted prefix lists more than was granted
SELECT pg_temp.try($$SELECT remora_submit('s3://data/')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/rawer/z.bin')$$);
-- an exact pattern is that one key, not a prefix
SELECT pg_temp.try($$SELECT remora_submit('s3://data/exact/file.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/exact/file.bin2')$$);
-- another bucket
SELECT pg_temp.try($$SELECT remora_submit('s3://other/raw/x.bin')$$);
RESET ROLE;

-- bob is not alice: her grant is not his; a grant to a role counts for
-- its members
SET ROLE regress_bob;
SELECT pg_temp.try($$SELECT remora_submit('s3://data/raw/x.bin')$$);
RESET ROLE;
SELECT remora.grant_source('remora_user', 'shared');
SET ROLE regress_bob;
SELECT pg_temp.try($$SELECT remora_submit('s3://shared/anything/at/all.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://shared/')$$);
RESET ROLE;

-- registered endpoints: a grant names the endpoint, and a grant on the
-- target store does not cover an endpoint (nor the other way round)
SELECT remora.register_source_endpoint('partner', 'http://192.0.2.10:9000');
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('s3://data/raw/x.bin', options => '{"endpoint": "partner"}')$$);
RESET ROLE;
SET ROLE regress_carol;
SELECT remora.grant_source('regress_alice', 'pbucket', 'in/*', 'partner');
RESET ROLE;
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('s3://pbucket/in/x.bin', options => '{"endpoint": "partner"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://pbucket/in/x.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/raw/x.bin', options => '{"endpoint": "partner"}')$$);
RESET ROLE;
-- dropping the endpoint drops its grants
SELECT remora.drop_source_endpoint('partner');
SELECT count(*) AS partner_grants FROM remora.source_grants WHERE endpoint = 'partner';

-- an administrator reads everything without a grant
SET ROLE regress_carol;
SELECT pg_temp.try($$SELECT remora_submit('s3://anything/at/all.bin')$$);
RESET ROLE;

-- Remora's own area.  alice's job writes under remora/<job id>/; bob has a
-- grant on the whole target bucket, and still may not read it.
SET ROLE regress_alice;
SELECT remora_submit('https://example.com/private.bin') AS alice_job \gset
RESET ROLE;
SELECT attempt_id AS alice_attempt FROM remora.claim('11111111-1111-1111-1111-111111111111') \gset
SELECT remora.grant_source('regress_bob', 'target', '*');
SET ROLE regress_bob;
-- the issue's attack: a prefix source on another user's job
SELECT pg_temp.try(format($$SELECT remora_submit('s3://target/remora/%s/')$$, :alice_job));
-- one of its objects
SELECT replace(pg_temp.try(format($$SELECT remora_submit('s3://target/remora/%s/%s/data/private.bin')$$, :alice_job, :'alice_attempt')),
			   :'alice_attempt', '<attempt>');
-- parents of the area: a listing would return other jobs' results
SELECT pg_temp.try($$SELECT remora_submit('s3://target/remora/')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://target/')$$);
-- the area of a job that does not exist yet
SELECT pg_temp.try($$SELECT remora_submit('s3://target/remora/999/')$$);
-- anything shaped like an attempt's staging prefix, wherever it is
SELECT pg_temp.try($$SELECT remora_submit('s3://target/elsewhere/7/0a5b5c1e-0000-4000-8000-000000000000/x.bin')$$);
-- beside the area is fine
SELECT pg_temp.try($$SELECT remora_submit('s3://target/datasets/a.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://target/datasets/')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://target/remora-old/a.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://target/remora/notes.txt')$$);
RESET ROLE;

-- where target grants let jobs be created, a listing may meet their areas
-- later: a prefix source that overlaps a target grant ending in '*' is
-- refused, one beside it is not
SELECT remora.grant_target('regress_alice', 'team-a', 'alice/*');
SELECT remora.grant_source('regress_bob', 'team-a', '*');
SET ROLE regress_bob;
SELECT pg_temp.try($$SELECT remora_submit('s3://team-a/alice/photos/')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://team-a/')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://team-a/bob/')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://team-a/alice/photos/cat.jpg')$$);
RESET ROLE;
-- a job whose prefix was given: its area is protected too
SET ROLE regress_alice;
SELECT remora_submit('https://example.com/x.bin', 'team-a', 'alice/models') AS team_job \gset
RESET ROLE;
SET ROLE regress_bob;
SELECT pg_temp.try(format($$SELECT remora_submit('s3://team-a/alice/models/%s/')$$, :team_job));
RESET ROLE;

-- an administrator may read the area (to repair, to audit)
SET ROLE regress_carol;
SELECT pg_temp.try(format($$SELECT remora_submit('s3://target/remora/%s/')$$, :alice_job));
RESET ROLE;

-- the check is at submit: a job keeps running after its grant is revoked
SET ROLE regress_alice;
SELECT remora_submit('s3://data/raw/kept.bin') AS kept \gset
RESET ROLE;
SELECT remora.revoke_source('regress_alice', 'data', 'raw/*') AS revoked,
	   remora.revoke_source('regress_alice', 'data', 'raw/*') AS revoked_again;
-- (claims share between owners: only this job is runnable)
UPDATE remora.queue SET not_before = now() + interval '1 hour' WHERE job_id <> :kept;
SELECT job_id = :kept AS kept_claimed FROM remora.claim('11111111-1111-1111-1111-111111111111');
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('s3://data/raw/x.bin')$$);
RESET ROLE;

-- an endpoint's own CA: an administrator sets it, no view shows it, a
-- user may not set it, and it must be PEM certificates
SELECT remora.register_source_endpoint('private', 'https://192.0.2.20');
SET ROLE regress_carol;
SELECT remora.set_source_endpoint_ca('private',
	E'-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
SELECT pg_temp.try($$SELECT remora.set_source_endpoint_ca('private', 'not a certificate')$$);
SELECT pg_temp.try($$SELECT remora.set_source_endpoint_ca('nosuch', NULL)$$);
SELECT name, url FROM remora_source_endpoints WHERE name = 'private';
SELECT pg_temp.try($$SELECT ca_pem FROM remora.source_endpoints$$);
RESET ROLE;
SELECT ca_pem IS NOT NULL AS stored FROM remora.source_endpoints WHERE name = 'private';
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora.set_source_endpoint_ca('private', NULL)$$);
SELECT pg_temp.try($$SHOW remora.https_proxy$$);
SELECT pg_temp.try($$SHOW remora.ca_file$$);
SELECT count(*) FROM pg_settings WHERE name IN ('remora.http_proxy', 'remora.https_proxy');
RESET ROLE;
SELECT remora.set_source_endpoint_ca('private', NULL);
SELECT ca_pem IS NULL AS forgotten FROM remora.source_endpoints WHERE name = 'private';
SELECT remora.drop_source_endpoint('private');
-- a proxy is a URL with a host, credentials optional; the refusal never
-- repeats the value
ALTER SYSTEM SET remora.https_proxy = 'socks5://u:hunter22@proxy:1080';
ALTER SYSTEM SET remora.http_proxy = 'http://u:hunter22@proxy:3128/some/path';

-- An s3:// key is matched against grants as written: "." and ".."
-- segments, which a store keeping objects as files would resolve, are
-- refused before any grant is looked at.
SET ROLE regress_carol;
SELECT remora.grant_source('regress_alice', 'data', 'pub/*');
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('s3://data/pub/x.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/pub/../private/secret.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/pub/../')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/pub/./x.bin')$$);
RESET ROLE;

-- Hub sources.  Without remora.hf_token only public repositories can be
-- read, and they need no grant.
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('hf://acme/x')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://datasets/other/y')$$);
RESET ROLE;
-- 'hf' names the Hub in source grants: it cannot be an S3 endpoint's name
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('hf', 'https://hub.example')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://data/pub/x.bin', options => '{"endpoint": "hf"}')$$);

-- With a token every private and gated repository it reads is in reach:
-- an hf:// source needs a hub grant (endpoint 'hf', bucket 'models' or
-- 'datasets', a pattern over owner/name).
\getenv abs_srcdir PG_ABS_SRCDIR
\set hf_token_wait :abs_srcdir '/sql/hf_token_wait.psql'
ALTER SYSTEM SET remora.hf_token = 'hf_regress_not_a_real_token';
SELECT pg_reload_conf();
SELECT true AS hf_want, clock_timestamp() + interval '60 s' AS hf_deadline \gset
\set ECHO none
\i :hf_token_wait
\set ECHO all
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('hf://acme/x')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://datasets/acme/x')$$);
RESET ROLE;
SET ROLE regress_carol;
SELECT remora.grant_source('regress_alice', 'models', 'acme/*', 'hf');
SELECT remora.grant_source('regress_alice', 'models', 'acme/*', 'hf');	-- once is enough
SELECT pg_temp.try($$SELECT remora.grant_source('regress_alice', 'spaces', '*', 'hf')$$);
SELECT pg_temp.try($$SELECT remora.grant_source('regress_alice', 'models', 'a/b/c', 'hf')$$);
SELECT pg_temp.try($$SELECT remora.grant_source('regress_alice', 'models', '../x', 'hf')$$);
SELECT pg_temp.try($$SELECT remora.grant_source('regress_alice', 'models', 'acme', 'hf')$$);
SELECT pg_temp.try($$SELECT remora.grant_source('regress_alice', 'models', 'a*/b', 'hf')$$);
SELECT role, bucket, prefix_pattern, endpoint FROM remora_source_grants
 WHERE bucket IN ('models', 'datasets') ORDER BY 2, 3;
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('hf://acme/x')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://models/acme/x@v1')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://other/x')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://acme-evil/x')$$);
-- datasets are granted apart from models
SELECT pg_temp.try($$SELECT remora_submit('hf://datasets/acme/x')$$);
-- a hub grant opens no s3:// bucket of the same name
SELECT pg_temp.try($$SELECT remora_submit('s3://models/acme/x.bin')$$);
RESET ROLE;
-- bob has no grant; an administrator reads every repository
SET ROLE regress_bob;
SELECT pg_temp.try($$SELECT remora_submit('hf://acme/x')$$);
RESET ROLE;
SET ROLE regress_carol;
SELECT pg_temp.try($$SELECT remora_submit('hf://other/private')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://datasets/other/private')$$);
SELECT remora.grant_source('regress_alice', 'datasets', '*', 'hf');
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('hf://datasets/other/y')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://other/y')$$);
RESET ROLE;
-- revoked with the same arguments; endpoint NULL is the target store's
-- grant, not the hub's
SET ROLE regress_carol;
SELECT remora.revoke_source('regress_alice', 'models', 'acme/*');
SELECT remora.revoke_source('regress_alice', 'models', 'acme/*', 'hf');
SELECT remora.revoke_source('regress_alice', 'models', 'acme/*', 'hf');
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('hf://acme/x')$$);
RESET ROLE;
ALTER SYSTEM RESET remora.hf_token;
SELECT pg_reload_conf();
SELECT false AS hf_want, clock_timestamp() + interval '60 s' AS hf_deadline \gset
\set ECHO none
\i :hf_token_wait
\set ECHO all
SET ROLE regress_bob;
SELECT pg_temp.try($$SELECT remora_submit('hf://acme/x')$$);
RESET ROLE;

-- clean up
ALTER DATABASE contrib_regression RESET remora.default_bucket;
TRUNCATE remora.target_grants, remora.source_grants;
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
DROP ROLE regress_alice, regress_bob, regress_carol;
