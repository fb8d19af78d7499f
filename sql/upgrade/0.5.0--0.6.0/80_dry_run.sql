-- Dry runs (options.dry_run, doc/user-guide.md, "Mirrors"): a member of
-- a dry run's result is a plan, with no key, ETag or SHA-256.
ALTER TABLE remora.members
	ALTER COLUMN key DROP NOT NULL,
	ALTER COLUMN sha256 DROP NOT NULL,
	ALTER COLUMN etag DROP NOT NULL,
	ADD CONSTRAINT members_written_or_planned
		CHECK ((key IS NULL) = (sha256 IS NULL) AND (key IS NULL) = (etag IS NULL));
