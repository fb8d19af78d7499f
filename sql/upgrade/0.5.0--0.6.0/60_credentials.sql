-- Cloud credentials (doc/operator-guide.md, "Cloud credentials"): a
-- source endpoint takes a session token, the chain or no credentials, and
-- a role; an incarnation says where its target credentials came from.
-- remora.register_source_endpoint, remora.source_endpoint_settings,
-- remora._source_endpoints (and its view) and remora.heartbeat change
-- their arguments or results, so they are dropped and made again
-- (sql/functions/).
ALTER TABLE remora.source_endpoints
	ADD COLUMN session_token text,
	ADD COLUMN credentials text NOT NULL DEFAULT 'static'
		CHECK (credentials IN ('static', 'chain', 'anonymous')),
	ADD COLUMN role_arn text,
	ADD COLUMN external_id text;
-- an endpoint registered without keys was read anonymously: it says so now
UPDATE remora.source_endpoints SET credentials = 'anonymous'
 WHERE access_key_id IS NULL AND secret_access_key IS NULL;
ALTER TABLE remora.incarnations
	ADD COLUMN credentials text,
	ADD COLUMN credentials_expire_at timestamptz;
DROP FUNCTION remora.register_source_endpoint(text, text, text, boolean, text, text);
DROP FUNCTION remora.source_endpoint_settings(text);
DROP VIEW remora_source_endpoints;
DROP FUNCTION remora._source_endpoints();
DROP FUNCTION remora.heartbeat(uuid);
