-- A notify_url's query string is kept as a source URL's is: out of the
-- job's options and its webhooks, in remora.notify_urls, which no role
-- reads.  The jobs and webhooks recorded before move theirs there; the
-- webhooks (and their tries) of jobs retention already pruned go.
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

INSERT INTO remora.notify_urls (job_id, url)
SELECT j.job_id, j.spec #>> '{options,notify_url}' FROM remora.jobs j
 WHERE strpos(j.spec #>> '{options,notify_url}', '?') > 0;
UPDATE remora.jobs j
   SET spec = jsonb_set(j.spec, '{options,notify_url}',
						to_jsonb(split_part(j.spec #>> '{options,notify_url}', '?', 1)))
 WHERE strpos(j.spec #>> '{options,notify_url}', '?') > 0;
UPDATE remora.webhooks w SET url = split_part(w.url, '?', 1)
 WHERE strpos(w.url, '?') > 0;
DELETE FROM remora.webhook_tries t USING remora.webhooks w, remora.jobs j
 WHERE t.webhook_id = w.webhook_id AND j.job_id = w.job_id AND j.pruned_at IS NOT NULL;
DELETE FROM remora.webhooks w USING remora.jobs j
 WHERE j.job_id = w.job_id AND j.pruned_at IS NOT NULL;
