-- remora 0.5.0 -> 0.6.0
--
-- Each change to the install script (sql/remora/) since 0.5.0 is carried
-- here as well, in the order it was made; a function changed more than
-- once appears once, in its final form, where it last changed.
-- test/e2e/upgrade.sh checks that an updated catalog equals a fresh one.

\echo Use "ALTER EXTENSION remora UPDATE TO '0.6.0'" to load this file. \quit
