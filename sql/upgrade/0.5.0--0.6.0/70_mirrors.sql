-- Mirrors (doc/user-guide.md, "Mirrors"): a member copied from an
-- earlier job's result (options.reuse_from) says from which.
-- remora_result and remora.earlier_members gain columns, so they are
-- dropped and made again (sql/functions/).
ALTER TABLE remora.members ADD COLUMN reused_from_job bigint;
ALTER TABLE remora.results ADD COLUMN bytes_reused bigint NOT NULL DEFAULT 0;
DROP FUNCTION remora_result(bigint);
DROP FUNCTION remora.earlier_members(bigint, uuid, text[]);
