#!/usr/bin/env bash
#
# Extension versioning: install the first released version (0.1.0), with a
# job in flight, ALTER EXTENSION remora UPDATE, and compare the catalog
# with a fresh install of the current version: tables, columns, defaults,
# constraints, indexes, functions (bodies included), views, policies and
# privileges must be identical, and the data must survive.  Until the
# update the launcher refuses to run transfers, and says why.  The last
# release (the Makefile's PREVIOUS) is updated and compared so too.
#
# sql/ no longer holds 0.1.0's install script: it comes from the
# repository's history (test/lib/history.sh), into the extension directory
# of a private copy of the PostgreSQL installation, so the installation
# itself never offers 0.1.0, nor the last release.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin upgrade

PGBIN=$(cluster_private_install "$T/install") ||
	{ not_ok "a private copy of the PostgreSQL installation"; exit 1; }
first="$("$PGBIN/pg_config" --sharedir)/extension/remora--0.1.0.sql"
history_show sql/remora--0.1.0.sql "$first" ||
	{ not_ok "0.1.0's install script from the repository's history"; exit 1; }
previous=$(sed -n 's/^PREVIOUS = //p' Makefile)
history_show "sql/remora--$previous.sql" "$(dirname "$first")/remora--$previous.sql" ||
	{ not_ok "$previous's install script from the repository's history"; exit 1; }

e2e_cluster <<CONF
remora.default_bucket = 'target'
remora.database = 'upgraded'
remora.s3_access_key_id = 'AKIDEXAMPLE'
remora.s3_secret_access_key = 'not-a-real-secret'
CONF
current=$(grep -oP "^default_version = '\K[^']+" remora.control)

psql -X -q -c "CREATE DATABASE upgraded" -c "CREATE DATABASE fresh" -c "CREATE DATABASE previous"
E2E_DB=previous q "CREATE EXTENSION remora VERSION '$previous'" >/dev/null
E2E_DB=upgraded q "CREATE EXTENSION remora VERSION '0.1.0'" >/dev/null
check_eq "0.1.0 installs" "$(E2E_DB=upgraded q "SELECT extversion FROM pg_extension WHERE extname = 'remora'")" "0.1.0"
check_eq "the new library says the schema is old" \
	"$(psql -X -q -t -A -d upgraded -c "SELECT remora_submit('https://example.com/a.bin')" 2>&1 | grep -c "remora's SQL objects are at version 0.1.0, the library is at $current")" "1"
# a job as 0.1.0 recorded it (its URL with a query string in plain sight)
job=$(E2E_DB=upgraded q "SELECT remora._submit(10, jsonb_build_object(
	'source', jsonb_build_object('kind', 'http', 'uri', 'https://example.com/a.bin?sig=s3cr3t', 'file_name', 'a.bin'),
	'bucket', 'target', 'prefix', 'remora', 'options', jsonb_build_object('priority', 0, 'max_attempts', 5)),
	'{}', NULL)")
warned() { grep -q "remora 0.1.0 is installed in database \"upgraded\", but the library is $current" "$T/pg/server.log"; }
check "the launcher says the schema must be updated" wait_for 10 warned
check_eq "and starts no worker meanwhile" \
	"$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" "0"

E2E_DB=upgraded q "ALTER EXTENSION remora UPDATE" >/dev/null
E2E_DB=fresh q "CREATE EXTENSION remora" >/dev/null
check_eq "the update reaches $current" \
	"$(E2E_DB=upgraded q "SELECT extversion FROM pg_extension WHERE extname = 'remora'")" "$current"

CATALOG="
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
	   || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
	   || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
	   || coalesce(' identity ' || nullif(a.attidentity::text, ''), '')
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE n.nspname IN ('remora', 'public') AND a.attnum > 0 AND NOT a.attisdropped
   AND c.relkind IN ('r', 'v')
UNION ALL
SELECT 'relation ' || c.relname || ' ' || c.relkind::text || ' ' || c.relpersistence::text
	   || ' rls=' || c.relrowsecurity || ' acl=' || coalesce(c.relacl::text, '')
	   || ' options=' || coalesce(c.reloptions::text, '')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname IN ('remora', 'public') AND c.relkind IN ('r', 'v', 'i', 'S')
UNION ALL
SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'remora'::regnamespace
UNION ALL
SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'remora'
UNION ALL
SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname IN ('remora', 'public') AND c.relkind = 'v'
UNION ALL
SELECT 'function ' || p.oid::regprocedure || ' acl=' || coalesce(p.proacl::text, '')
	   || ' ' || pg_get_functiondef(p.oid)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname IN ('remora', 'public') AND p.prokind = 'f'
UNION ALL
SELECT 'policy ' || tablename || ' ' || policyname || ' ' || cmd || ' ' || coalesce(qual, '')
  FROM pg_policies WHERE schemaname = 'remora'
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid)
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = 'remora'::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'dumped ' || c::regclass || ' ' || coalesce(w, '')
  FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS x(c, w)
 WHERE e.extname = 'remora'
UNION ALL
SELECT 'member ' || pg_describe_object(classid, objid, objsubid)
  FROM pg_depend WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'remora')
ORDER BY 1"
E2E_DB=upgraded q "$CATALOG" >"$T/upgraded.txt"
E2E_DB=fresh q "$CATALOG" >"$T/fresh.txt"
check "the catalog description is not empty" test "$(wc -l <"$T/fresh.txt")" -gt 200
if diff "$T/fresh.txt" "$T/upgraded.txt" >"$T/catalog.diff"; then
	ok "the upgraded catalog equals a fresh install ($(wc -l <"$T/fresh.txt") objects and attributes)"
else
	not_ok "the upgraded catalog differs from a fresh install"
	head -40 "$T/catalog.diff"
fi
E2E_DB=previous q "ALTER EXTENSION remora UPDATE" >/dev/null
E2E_DB=previous q "$CATALOG" >"$T/previous.txt"
if diff "$T/fresh.txt" "$T/previous.txt" >"$T/previous.diff"; then
	ok "$previous updated equals a fresh install of $current"
else
	not_ok "$previous updated differs from a fresh install of $current"
	head -40 "$T/previous.diff"
fi
check_eq "the update leaves remora_worker no privilege on a table, column or sequence" \
	"$(E2E_DB=upgraded q "SELECT count(*) FROM pg_class c
		WHERE c.relnamespace = 'remora'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
		  AND CASE WHEN c.relkind = 'S'
			  THEN has_sequence_privilege('remora_worker', c.oid, 'USAGE, SELECT, UPDATE')
			  ELSE has_table_privilege('remora_worker', c.oid,
					'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
				OR has_any_column_privilege('remora_worker', c.oid,
					'SELECT, INSERT, UPDATE, REFERENCES') END")" "0"
workers() { q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'"; }
has_workers() { [ "$(workers)" -ge 1 ]; }
check "once the schema is current the launcher starts workers" wait_for 15 has_workers
# stop them, so that the rest of this test drives the protocol alone
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
no_workers() { [ "$(workers)" = 0 ]; }
check "and stops them when remora.max_workers drops to 0" wait_for 15 no_workers
E2E_DB=upgraded q "UPDATE remora.jobs SET state = 'queued', not_before = now(), attempts_used = 0 WHERE job_id = $job;
	DELETE FROM remora.attempts WHERE job_id = $job; TRUNCATE remora.queue;
	SELECT remora.reconcile()" >/dev/null
check_eq "the job submitted before the update is still there" \
	"$(E2E_DB=upgraded q "SELECT count(*) || ' ' || delete_failures FROM remora.jobs WHERE job_id = $job GROUP BY delete_failures")" "1 0"
check_eq "the update moved the query string out of sight" \
	"$(E2E_DB=upgraded q "SELECT j.source || ' ' || (j.spec #>> '{source,uri}') || ' ' || u.url FROM remora.jobs j JOIN remora.source_urls u USING (job_id) WHERE job_id = $job")" \
	"https://example.com/a.bin https://example.com/a.bin https://example.com/a.bin?sig=s3cr3t"
check_eq "the new functions work on the upgraded schema" \
	"$(E2E_DB=upgraded q "SELECT remora.prune() || ' ' || (SELECT count(*) FROM remora_checkpoint_stats)")" "0 1"
# a job goes through the whole upgraded protocol
E2E_DB=upgraded q "SELECT count(*) FROM remora.claim('11111111-1111-1111-1111-111111111111')" >/dev/null
committed=$(E2E_DB=upgraded q "SELECT remora.commit(a.attempt_id, a.fencing_token, jsonb_build_object(
	'key', remora._staging_prefix(j.prefix, j.job_id, a.attempt_id) || 'manifest.jsonl', 'etag', 'e',
	'sha256', repeat('a', 64), 'members', 1, 'bytes', 5, 'entries', jsonb_build_array(jsonb_build_object(
	'path', 'a.bin', 'bucket', 'target', 'key', remora._staging_prefix(j.prefix, j.job_id, a.attempt_id) || 'data/a.bin',
	'size', 5, 'sha256', repeat('b', 64), 'etag', 'x'))))
	FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt WHERE j.job_id = $job")
presigned=$(E2E_DB=upgraded q "SELECT remora_presign($job, 'a.bin') LIKE 'https://target.s3.us-east-1.amazonaws.com/%X-Amz-Signature=%'")
check_eq "the upgraded protocol commits, and offers a URL for the result" "$committed $presigned" "t t"

e2e_finish
