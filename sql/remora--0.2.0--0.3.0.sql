-- remora 0.2.0 -> 0.3.0: tenant isolation (source grants, exact commits,
-- locks no user can take) and hardening of the worker protocol.  Each
-- section below repeats what sql/remora.sql now says; test/e2e/upgrade.sh
-- checks that an upgraded catalog equals a fresh install.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION remora UPDATE TO '0.3.0'" to load this file. \quit
