--
-- The views' columns: names and types are what DBAs and tools rely on.
--
SELECT table_name, column_name, data_type
  FROM information_schema.columns
 WHERE table_schema = 'public' AND table_name LIKE 'remora\_%'
 ORDER BY table_name, ordinal_position;

-- every view is security_invoker, so row-level security applies to readers
SELECT c.relname, c.reloptions
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND c.relkind = 'v' AND c.relname LIKE 'remora\_%'
 ORDER BY c.relname;

-- the public functions and their result types
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args,
	   pg_get_function_result(p.oid) AS result, p.prosecdef AS security_definer
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname IN ('public', 'remora') AND p.proname NOT LIKE '\_%'
 ORDER BY n.nspname, p.proname;

-- every SECURITY DEFINER function pins its search_path
SELECT p.proname
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname IN ('public', 'remora') AND p.prosecdef
   AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false);

-- a function that does not pin its search_path is one nobody may call:
-- it runs only inside one that does
SELECT p.proname
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname IN ('public', 'remora') AND p.prolang <> 13
   AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)
   AND (p.proacl IS NULL
		OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) x
					WHERE x.grantee <> p.proowner AND x.privilege_type = 'EXECUTE'));

-- coordination tables are unlogged, authority tables logged
SELECT c.relname, c.relpersistence
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'remora' AND c.relkind = 'r'
 ORDER BY c.relname;

-- the GUCs of the contract
SELECT name, unit, context, vartype FROM pg_settings
 WHERE name LIKE 'remora.%' AND name NOT LIKE '%secret%' AND name NOT LIKE '%access_key%'
 ORDER BY name;
SELECT count(*) AS secret_gucs FROM pg_settings
 WHERE name IN ('remora.s3_access_key_id', 'remora.s3_secret_access_key');

-- GET /metrics: remora.metrics_text() is remora_admin's only, and escapes
-- label values as the Prometheus text format requires
SELECT remora._metric_label(E'a"b\\c\nd\re') AS escaped;
CREATE ROLE regress_metrics_user;
GRANT remora_user TO regress_metrics_user;
CREATE ROLE regress_metrics_admin;
GRANT remora_admin TO regress_metrics_admin;
SET ROLE regress_metrics_user;
\set VERBOSITY sqlstate
SELECT remora.metrics_text();
\set VERBOSITY default
RESET ROLE;
SET ROLE regress_metrics_admin;
SELECT l AS line FROM regexp_split_to_table(remora.metrics_text(), E'\n') l
 WHERE l LIKE '# TYPE %';
SELECT right(remora.metrics_text(), 1) = E'\n' AS ends_with_newline;
RESET ROLE;
DROP ROLE regress_metrics_user, regress_metrics_admin;
