-- Webhooks are claimed round-robin between owners, each at most
-- remora.webhook_max_in_flight_per_role at once, each try bounded by
-- remora.webhook_timeout, which remora.webhooks_due hands the worker in a
-- new column: its result changes, so it is dropped and made again
-- (sql/functions/).
DROP FUNCTION remora.webhooks_due(uuid, integer);
