/* ------------------------------------------------------------------------
 * Webhooks (sql/functions/97_events.sql): each role's secret, the webhooks
 * owed and each try of them.
 * ------------------------------------------------------------------------ */

-- Each role's webhook secret: 32 random bytes, the HMAC key; users see it
-- as 'whsec_' || base64 (remora_webhook_secret).  No role may read the
-- table: the owner's functions hand a role its own, and a worker the
-- secret of the delivery it claimed.
CREATE TABLE remora.webhook_secrets (
	owner			regrole PRIMARY KEY,
	secret			bytea NOT NULL CHECK (pg_catalog.length(secret) = 32),
	created_at		timestamptz NOT NULL DEFAULT now()
);

-- A webhook owed: one per terminal state a job with options.notify_url
-- reached.  The body is fixed when the job ends, so that every try sends
-- the same bytes under the same webhook_id.  Tried until delivered (a 2xx
-- answer), refused (another answer that is not worth repeating) or
-- give_up_at, with backoff between tries (remora.webhook_tried).  No
-- foreign key to remora.jobs: a job's row is never deleted (retention
-- prunes its history, not the row), and the webhooks are a log that a
-- TRUNCATE of the jobs need not cascade to.
CREATE TABLE remora.webhooks (
	webhook_id		text PRIMARY KEY,
	job_id			bigint NOT NULL,
	state			text NOT NULL,
	finished_at		timestamptz,
	url				text NOT NULL,
	body			text NOT NULL,
	created_at		timestamptz NOT NULL DEFAULT now(),
	give_up_at		timestamptz NOT NULL,
	next_try_at		timestamptz NOT NULL DEFAULT now(),
	tries			integer NOT NULL DEFAULT 0,	-- tries handed out so far
	claimed_until	timestamptz,	-- a worker is trying it until then
	delivered_at	timestamptz,
	ended_at		timestamptz,	-- delivered, refused or given up
	UNIQUE NULLS NOT DISTINCT (job_id, state, finished_at)
);
CREATE INDEX webhooks_job_idx ON remora.webhooks (job_id);
CREATE INDEX webhooks_due_idx ON remora.webhooks (next_try_at)
	WHERE ended_at IS NULL;

-- Each try of a webhook, as the worker that made it reported it.
CREATE TABLE remora.webhook_tries (
	webhook_id		text NOT NULL,
	attempt			integer NOT NULL,
	http_status		integer,
	error			text,
	tried_at		timestamptz NOT NULL DEFAULT now(),
	next_try_at		timestamptz,	-- NULL: not tried again
	delivered		boolean NOT NULL,
	PRIMARY KEY (webhook_id, attempt)
);

ALTER TABLE remora.webhook_secrets ENABLE ROW LEVEL SECURITY;
ALTER TABLE remora.webhooks ENABLE ROW LEVEL SECURITY;
CREATE POLICY webhooks_visible ON remora.webhooks FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = webhooks.job_id));
ALTER TABLE remora.webhook_tries ENABLE ROW LEVEL SECURITY;
CREATE POLICY webhook_tries_visible ON remora.webhook_tries FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.webhooks w WHERE w.webhook_id = webhook_tries.webhook_id));

SELECT pg_catalog.pg_extension_config_dump('remora.webhook_secrets', '');
SELECT pg_catalog.pg_extension_config_dump('remora.webhooks', '');
SELECT pg_catalog.pg_extension_config_dump('remora.webhook_tries', '');
GRANT SELECT ON remora.webhooks, remora.webhook_tries TO remora_user;

-- The whole notify_url of a job whose notify_url has a query string
-- (which may carry a token), kept as a source URL's is (remora.source_urls):
-- the job's options and its webhooks name it without the query, and only
-- the extension's functions read this table, to hand the URL to a worker.
CREATE TABLE remora.notify_urls (
	job_id			bigint PRIMARY KEY REFERENCES remora.jobs ON DELETE CASCADE,
	url				text NOT NULL
);
ALTER TABLE remora.notify_urls ENABLE ROW LEVEL SECURITY;
SELECT pg_catalog.pg_extension_config_dump('remora.notify_urls', '');
