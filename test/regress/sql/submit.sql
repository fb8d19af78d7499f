--
-- remora_submit: validation of every field, canonical forms, idempotency.
--
-- pg_temp.try runs a statement and shows its outcome as "SQLSTATE: message
-- (detail)" so that each error path is checked with its code.
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

SET remora.default_bucket = 'target-bucket';
SET remora.default_prefix = 'downloads';

-- Happy paths: every source form, with its canonical spec.
SELECT remora_submit('https://Example.COM/data/model.bin#frag') AS http_job \gset
SELECT source, source_kind, bucket, prefix, spec -> 'source' AS source_spec,
	   spec -> 'options' AS options, state
  FROM remora.jobs WHERE job_id = :http_job;
SELECT remora_submit('http://example.com:8080/a%20b.tar.gz?x=1', 'other-bucket', 'a/b/') AS j \gset
SELECT source, bucket, prefix, spec #>> '{source,file_name}' AS file_name
  FROM remora.jobs WHERE job_id = :j;
SELECT remora_submit('s3://src-bucket/path/to/object.parquet') AS j \gset
SELECT source, source_kind, spec -> 'source' AS source_spec FROM remora.jobs WHERE job_id = :j;
SELECT remora_submit('s3://src-bucket/path/', options => '{"include": ["*.csv", "sub/**"], "exclude": ["tmp*"]}') AS j \gset
SELECT source, source_kind, spec -> 'options' AS options FROM remora.jobs WHERE job_id = :j;
SELECT remora_submit('s3://src-bucket/') AS j \gset
SELECT source, source_kind, spec #>> '{source,key}' AS key FROM remora.jobs WHERE job_id = :j;
SELECT remora_submit('hf://openai-community/gpt2') AS j \gset
SELECT source, source_kind, spec -> 'source' AS source_spec FROM remora.jobs WHERE job_id = :j;
SELECT remora_submit('hf://datasets/org_x/my.data-set@refs/pr/1') AS j \gset
SELECT source, spec -> 'source' AS source_spec FROM remora.jobs WHERE job_id = :j;
SELECT remora_submit('hf://models/owner/name@v1.0') AS j \gset
SELECT source FROM remora.jobs WHERE job_id = :j;
SELECT remora_submit('https://example.com/f', prefix => '') AS j \gset
SELECT prefix FROM remora.jobs WHERE job_id = :j;
SELECT remora_submit('https://example.com/f', options => '{"max_attempts": 3, "priority": -7, "label": "nightly weights", "expected_sha256": "ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789"}') AS j \gset
SELECT priority, max_attempts, label, spec -> 'options' AS options FROM remora.jobs WHERE job_id = :j;
-- parallel ranged GETs: the job's own number, or remora.object_connections
SHOW remora.object_connections;
SELECT remora_submit('https://example.com/c', options => '{"connections": 8}') AS j \gset
SELECT spec -> 'options' AS options FROM remora.jobs WHERE job_id = :j;
SELECT remora_submit('s3://src-bucket/p/', options => '{"connections": 1}') AS j \gset
SELECT spec -> 'options' AS options FROM remora.jobs WHERE job_id = :j;
SELECT remora_submit('https://example.com/f', options => NULL) IS NOT NULL AS null_options_ok;
-- every job starts queued, in the queue exactly once, with a ledger
SELECT count(*) AS jobs, count(*) FILTER (WHERE state = 'queued') AS queued,
	   (SELECT count(*) FROM remora.queue) AS queue_rows,
	   bool_and(request_hash ~ '^[0-9a-f]{64}$' AND definition_hash ~ '^[0-9a-f]{64}$'
				AND access_digest ~ '^[0-9a-f]{64}$') AS hashes_ok,
	   bool_and(provenance ->> 'role' = 'postgres' AND provenance ? 'backend_pid'
				AND NOT provenance ? 'cron_job_id') AS provenance_ok
  FROM remora.jobs;

-- source: every malformed form is 22023 naming the source
SELECT pg_temp.try($$SELECT remora_submit(NULL)$$);
SELECT pg_temp.try($$SELECT remora_submit('')$$);
SELECT pg_temp.try($$SELECT remora_submit('example.com/file')$$);
SELECT pg_temp.try($$SELECT remora_submit('ftp://example.com/file')$$);
SELECT pg_temp.try($$SELECT remora_submit('file:///etc/passwd')$$);
SELECT pg_temp.try($$SELECT remora_submit('gopher://example.com/file')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://user:secret@example.com/file')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://user@example.com/file')$$);
SELECT pg_temp.try($$SELECT remora_submit('https:///file')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/dir/..')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a%2Fb')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a%00b')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a b')$$);
SELECT pg_temp.try($$SELECT remora_submit(E'https://example.com/a\r\nHost: evil')$$);
SELECT pg_temp.try($$SELECT remora_submit(E'https://example.com/\tx')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/' || repeat('a', 9000))$$);
SELECT pg_temp.try($$SELECT remora_submit('https://exa mple.com/x')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://bucket-only')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://Bad_Bucket/key')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://ab/key')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://' || repeat('a', 64) || '/key')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://192.168.1.1/key')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://my..bucket/key')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://-bucket/key')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://xn--bucket/key')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://bucket-s3alias/key')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://bucket//abs/')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://bucket/dir/..')$$);
-- "." and ".." segments anywhere, and empty ones, in an s3:// key or prefix
SELECT pg_temp.try($$SELECT remora_submit('s3://bucket/pub/../private/secret.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://bucket/pub/./secret.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://bucket/pub/../')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://bucket/pub//secret.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://bucket//secret.bin')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://owner/name@refs/./main')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://bucket/' || repeat('k', 1025))$$);
SELECT pg_temp.try($$SELECT remora_submit(E's3://bucket/a\x01b')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://gpt2')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://owner/name/extra')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://../name')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://owner/na--me')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://owner/-name')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://owner/name@')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://owner/name@../../etc')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://owner/name@a//b')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://spaces/owner/name')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://models/datasets/name')$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://owner/' || repeat('n', 97))$$);
SELECT pg_temp.try($$SELECT remora_submit('hf://ówner/name')$$);

-- the outbound-source policy, already at submit: address literals in every
-- spelling, and ports (SQLSTATE RM001)
SELECT pg_temp.try($$SELECT remora_submit('http://127.0.0.1/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://2130706433/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://0x7f.1/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://0177.0.0.1/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://127.1/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://%32130706433/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://0/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://[::1]/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://[::ffff:127.0.0.1]/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://[::ffff:7f00:1]/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://[fe80::1]/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://[fd00::1]/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://169.254.169.254/latest/meta-data/iam')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://10.1.2.3/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://172.16.0.1/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://192.168.0.1/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://100.64.0.1/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://224.0.0.1/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://example.com:22/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('http://example.com:6379/f')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com:25/f')$$);
-- names are judged on the address the worker reaches, not here
SELECT remora_submit('http://localhost:8080/f') IS NOT NULL AS name_accepted;
-- an international host name is stored in punycode
SELECT remora_submit('https://bücher.example/f') AS idn \gset
SELECT source FROM remora.jobs WHERE job_id = :idn;

-- bucket: S3 naming rules, and a default must exist
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', 'UPPER')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', 'a')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', 'bucket.')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', '10.0.0.1')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', 'bad/bucket')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', '')$$);
SELECT pg_temp.try($$SET remora.default_bucket = 'Not_Valid'$$);
SET remora.default_bucket = '';
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f')$$);
SET remora.default_bucket = 'target-bucket';

-- prefix: normalised, traversal and control characters refused
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', NULL, '/abs')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', NULL, 'a/../b')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', NULL, '..')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', NULL, 'a/./b')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', NULL, 'a//b')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', NULL, E'a\nb')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', NULL, 'a\b')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', NULL, repeat('p', 513))$$);
SELECT pg_temp.try($$SET remora.default_prefix = '../up'$$);
SELECT remora_submit('https://example.com/f', NULL, 'x/y///') AS j \gset
SELECT prefix FROM remora.jobs WHERE job_id = :j;

-- options: not an object, unknown keys, wrong types and values name the key
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '[]')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '"x"')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"colour": 1}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"max_attempts": "3"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"max_attempts": 0}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"max_attempts": 101}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"max_attempts": 2.5}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"max_attempts": 1e30}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"priority": 1001}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"priority": null}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"include": ["*"]}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src-bucket/p/', options => '{"include": "*.csv"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src-bucket/p/', options => '{"exclude": [1]}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src-bucket/p/', options => '{"exclude": [""]}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src-bucket/p/', options => ('{"expected_sha256": "' || repeat('a', 64) || '"}')::jsonb)$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"expected_sha256": "xyz"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"endpoint": "minio"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src-bucket/k', options => '{"endpoint": "Bad Name"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src-bucket/k', options => '{"endpoint": "nowhere"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"label": 7}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => ('{"label": "' || repeat('l', 257) || '"}')::jsonb)$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => E'{"label": "a\\u0001b"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"connections": 0}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"connections": 65}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"connections": "8"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', options => '{"connections": 2.5}')$$);

-- idempotency keys
SELECT remora_submit('https://example.com/idem.bin', idempotency_key => 'k1') AS first \gset
SELECT remora_submit('https://example.com/idem.bin', idempotency_key => 'k1') = :first AS same_job;
-- the same request, spelled differently (fragment, key order), is the same
SELECT remora_submit('https://example.com/idem.bin#top', idempotency_key => 'k1',
					 options => '{}') = :first AS same_canonical_request;
-- connections pins a count: another request than none, whose count
-- adapts (from remora.object_connections), even when the two are equal
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/idem.bin', idempotency_key => 'k1', options => '{"connections": 4}')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/idem.bin', options => '{"connections": 8}', idempotency_key => 'k1')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/other.bin', idempotency_key => 'k1')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/idem.bin', 'another-bucket', idempotency_key => 'k1')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/idem.bin', options => '{"priority": 1}', idempotency_key => 'k1')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', idempotency_key => '')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/f', idempotency_key => repeat('k', 257))$$);
-- whatever its state: a cancelled job is still returned for its key
SELECT remora_cancel(:first);
SELECT remora_submit('https://example.com/idem.bin', idempotency_key => 'k1') = :first AS same_after_cancel;
SELECT count(*) AS jobs_with_k1 FROM remora.jobs WHERE idempotency_key = 'k1';

-- nothing was written by any refused call
SELECT count(*) AS jobs FROM remora.jobs;
