-- remora 0.5.0 -> 0.6.0
--
-- The changes to the catalog since 0.5.0 (tables, columns, indexes,
-- policies; objects dropped or renamed), one part each, in the order they
-- were made; the Makefile appends every part of sql/functions/, which
-- creates or replaces each function, trigger and view and grants their
-- privileges.  test/e2e/upgrade.sh checks that an updated catalog equals
-- a fresh one.

\echo Use "ALTER EXTENSION remora UPDATE TO '0.6.0'" to load this file. \quit
