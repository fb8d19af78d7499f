--
-- Cloud credentials and encryption (doc/operator-guide.md, "Cloud
-- credentials"): source endpoints with a session token, the chain, no
-- credentials or a role; a job's storage class; the settings refuse what
-- S3 and STS would; workers say where their credentials came from, and no
-- view or setting shows a secret to anyone but a superuser.
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
DELETE FROM remora.source_endpoints;
ALTER DATABASE contrib_regression SET remora.default_bucket = 'target';
SET remora.default_bucket = 'target';

-- Source endpoints: keys (with a session token), the chain, none, a role
SELECT remora.register_source_endpoint('keyed', 'https://s3.eu.example',
	access_key_id => 'ASIAKEY', secret_access_key => 'temp-secret',
	session_token => 'FQoGZXIvYXdz/token+=');
SELECT remora.register_source_endpoint('open', 'https://s3.open.example');
SELECT remora.register_source_endpoint('mine', 'https://s3.mine.example',
	credentials => 'chain');
SELECT remora.register_source_endpoint('partner', 'https://s3.partner.example',
	credentials => 'chain', role_arn => 'arn:aws:iam::123456789012:role/reader',
	external_id => 'remora-42');
SELECT remora.register_source_endpoint('rgw', 'http://127.0.0.1:8000',
	access_key_id => 'AKID', secret_access_key => 'secret',
	role_arn => 'arn:aws:iam:::role/reader');
-- what an administrator sees: where the credentials come from, the role
SELECT name, has_credentials, credentials, role_arn
  FROM remora_source_endpoints ORDER BY name;
-- never a secret, a token or an external id
SELECT count(*) AS columns_with_secrets
  FROM information_schema.columns
 WHERE table_name = 'remora_source_endpoints'
   AND column_name IN ('secret_access_key', 'session_token', 'external_id');
-- what a worker reads
SELECT session_token, credentials, role_arn, external_id
  FROM remora.source_endpoint_settings('keyed')
UNION ALL
SELECT session_token, credentials, role_arn, external_id
  FROM remora.source_endpoint_settings('partner');

-- hostile and inconsistent registrations: 22023, and nothing changes
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', credentials => 'magic')$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', credentials => 'static')$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', access_key_id => 'A', secret_access_key => 'S', credentials => 'chain')$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', access_key_id => 'A', secret_access_key => 'S', credentials => 'anonymous')$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', credentials => 'chain', session_token => 'T')$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', access_key_id => 'A', secret_access_key => 'S', session_token => E'tok\nen')$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', access_key_id => 'A', secret_access_key => 'S', session_token => repeat('t', 8193))$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', role_arn => 'arn:aws:iam::1:role/r')$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', credentials => 'chain', role_arn => 'arn:aws:s3:::bucket')$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', credentials => 'chain', role_arn => 'arn:aws:iam::1:role/r x')$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', credentials => 'chain', external_id => 'e42')$$);
SELECT pg_temp.try($$SELECT remora.register_source_endpoint('x', 'https://h', credentials => 'chain', role_arn => 'arn:aws:iam::1:role/r', external_id => 'a b')$$);
SELECT count(*) AS endpoints FROM remora.source_endpoints;

-- changing an endpoint to the chain forgets its keys and token
SELECT remora.register_source_endpoint('keyed', 'https://s3.eu.example',
	credentials => 'chain');
SELECT access_key_id IS NULL AS no_key, secret_access_key IS NULL AS no_secret,
	   session_token IS NULL AS no_token, credentials
  FROM remora.source_endpoints WHERE name = 'keyed';

-- A job's storage class: one S3 names, kept in its options
SELECT remora_submit('https://example.com/a.bin',
	options => '{"storage_class": "STANDARD_IA"}') AS job;
SELECT spec #>> '{options,storage_class}' AS storage_class
  FROM remora.jobs WHERE job_id = 1;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/b.bin', options => '{"storage_class": "COLD"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/b.bin', options => '{"storage_class": "standard"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/b.bin', options => '{"storage_class": 1}')$$);
SELECT count(*) AS jobs FROM remora.jobs;

-- The settings refuse what S3 and STS would (22023), and take the rest
ALTER SYSTEM SET remora.s3_credentials = 'magic';
ALTER SYSTEM SET remora.s3_sse = 'rot13';
ALTER SYSTEM SET remora.s3_storage_class = 'COLD';
ALTER SYSTEM SET remora.s3_role_arn = 'admin';
ALTER SYSTEM SET remora.s3_external_id = 'a b';
ALTER SYSTEM SET remora.sts_endpoint = 'ftp://sts';
ALTER SYSTEM SET remora.imds_endpoint = 'http://user:pw@169.254.169.254';
ALTER SYSTEM SET remora.s3_credentials = 'chain';
ALTER SYSTEM SET remora.s3_sse = 'aws:kms';
ALTER SYSTEM SET remora.s3_storage_class = 'GLACIER_IR';
ALTER SYSTEM SET remora.s3_role_arn = 'arn:aws:iam::123456789012:role/writer';
ALTER SYSTEM RESET remora.s3_credentials;
ALTER SYSTEM RESET remora.s3_sse;
ALTER SYSTEM RESET remora.s3_storage_class;
ALTER SYSTEM RESET remora.s3_role_arn;

-- secrets and the credentials' settings: superusers only
CREATE ROLE regress_cred_user LOGIN;
GRANT remora_user TO regress_cred_user;
SET ROLE regress_cred_user;
SELECT pg_temp.try($$SELECT current_setting('remora.s3_session_token')$$);
SELECT pg_temp.try($$SELECT current_setting('remora.s3_sse_customer_key_file')$$);
SELECT pg_temp.try($$SELECT current_setting('remora.s3_credentials')$$);
SELECT count(*) AS shown FROM pg_settings
 WHERE name IN ('remora.s3_session_token', 'remora.s3_sse_customer_key_file');
SELECT pg_temp.try($$SELECT * FROM remora.source_endpoint_settings('partner')$$);
RESET ROLE;

-- A worker says where its target credentials came from, never a secret
INSERT INTO remora.incarnations (incarnation, kind)
VALUES ('aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa', 'external');
SELECT remora.heartbeat('aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa',
	'instance role writer (IMDSv2)', '2030-01-01 00:00:00+00');
SELECT credentials, credentials_expire_at = '2030-01-01 00:00:00+00' AS expires
  FROM remora_workers;
-- a worker of 0.5.0 says nothing: what was said stays
SELECT remora.heartbeat('aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa');
SELECT credentials, credentials_expire_at IS NOT NULL AS expires
  FROM remora_workers;
-- static keys: no expiry
SELECT remora.heartbeat('aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa', 'static', NULL);
SELECT credentials, credentials_expire_at FROM remora_workers;

DROP ROLE regress_cred_user;
DELETE FROM remora.source_endpoints;
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
