/*
 * remora: durable, fenced downloads into S3-compatible storage.
 *
 * Authority (jobs, attempts, fencing tokens, cancel intent, results) lives
 * in logged tables of schema remora.  Coordination state (queue, leases)
 * lives in UNLOGGED tables: a crash empties them and remora.reconcile()
 * rebuilds them from durable state.  The job row is the serialisation point
 * of every authority change: each such change locks it first.
 *
 * Users reach jobs through the remora_* functions and views; the worker
 * protocol (remora.claim .. remora.reconcile) is for remora_worker.  Nobody
 * but these functions writes the tables.
 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION remora" to load this file. \quit

-- Roles are cluster-wide and outlive the extension; create them once.
DO $roles$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'remora_user') THEN
		CREATE ROLE remora_user NOLOGIN;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'remora_admin') THEN
		CREATE ROLE remora_admin NOLOGIN;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'remora_worker') THEN
		CREATE ROLE remora_worker NOLOGIN;
	END IF;
	IF NOT pg_catalog.pg_has_role('remora_admin', 'remora_user', 'MEMBER') THEN
		GRANT remora_user TO remora_admin;
	END IF;
END
$roles$;

CREATE SCHEMA remora;
REVOKE ALL ON SCHEMA remora FROM PUBLIC;
GRANT USAGE ON SCHEMA remora TO remora_user, remora_worker;

-- Every function that a role can call, and every one a view or a policy
-- uses, pins search_path (SET search_path = pg_catalog, pg_temp).  The
-- protocol's private helpers (_authorize, _authority, _settle, _check_*,
-- _record_members, _member_clashes, _commit_verdict, _publish,
-- _staging_prefix, _setting_interval, _backoff, the lease counters) do
-- not: nobody may call them, and they run only inside a SECURITY DEFINER
-- function that pinned it already.  A SET clause of their own cost every
-- call a save and restore of the setting and a new search path (without
-- them, batched claims and commits ran 10-25 % faster), and would keep
-- the plain SQL ones from being inlined.

/* ------------------------------------------------------------------------
 * Durable state
 * ------------------------------------------------------------------------ */

CREATE TABLE remora.jobs (
	job_id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	owner			regrole NOT NULL,	-- by name in pg_dump (below)
	source			text NOT NULL,		-- canonical source, never a secret
	source_kind		text NOT NULL,
	bucket			text NOT NULL,
	prefix			text NOT NULL,
	-- canonical definition given to workers; its options (validated,
	-- defaults applied) are read from it (spec -> 'options'), not kept a
	-- second time: every byte of the row is WAL a submit's commit waits on
	spec			jsonb NOT NULL,
	label			text,
	priority		integer NOT NULL,
	max_attempts	integer NOT NULL CHECK (max_attempts >= 1),
	idempotency_key text,
	request_hash	text NOT NULL,
	definition_hash text NOT NULL,
	access_digest	text NOT NULL,
	provenance		jsonb NOT NULL,
	state			text NOT NULL DEFAULT 'queued'
		CHECK (state IN ('queued', 'running', 'retrying',
						 'succeeded', 'failed', 'cancelled',
						 'outcome_unknown')),
	attempts_used	integer NOT NULL DEFAULT 0,
	fencing_token	bigint NOT NULL DEFAULT 0,	-- highest token ever issued
	current_attempt uuid,
	not_before		timestamptz NOT NULL DEFAULT now(),
	cancel_requested_at timestamptz,
	last_error		jsonb,
	submitted_at	timestamptz NOT NULL DEFAULT now(),
	started_at		timestamptz,
	finished_at		timestamptz,
	deleted_at		timestamptz,			-- tombstone
	hard_delete_requested_at timestamptz,
	hard_deleted_at timestamptz,
	delete_failures integer NOT NULL DEFAULT 0,
	delete_after	timestamptz,	-- a failed hard delete waits until then
	pruned_at		timestamptz,	-- history removed by retention
	-- also the index by owner (its lead column): a second one on owner
	-- alone cost every submit another index entry
	UNIQUE (owner, idempotency_key)
) WITH (fillfactor = 50);
-- A claim's update of the job row (state, attempt, token, start) is HOT:
-- it changes no column that an index names, so it writes no index entry
-- (PostgreSQL 15 makes an update HOT only if no index names a column it
-- changes, in its key or its predicate).  So no index names state: the
-- unfinished jobs (queued, running, retrying) are those whose finished_at
-- is NULL, as every change of state into or out of them sets or clears
-- finished_at with it; the running ones are found through their running
-- attempts (attempts_running_idx).  The new version must fit on the old
-- one's page, so half of each page is kept free: a claim takes a page's
-- jobs together (16 at a time, in order) while their old versions are
-- still visible (at 80 % a third of the claims' updates were HOT).  The
-- versions a commit leaves behind are pruned and their room used again:
-- the table grew no larger than at 100 % (bench/claim_cpu.sh, 3,200 jobs).
CREATE INDEX jobs_unfinished_idx ON remora.jobs (owner)
	WHERE finished_at IS NULL;
-- the web client's list by priority (keyset over (priority, job_id))
CREATE INDEX jobs_priority_idx ON remora.jobs (priority, job_id)
	WHERE deleted_at IS NULL;
-- hard deletes waiting to be carried out (remora.staging_to_clean)
CREATE INDEX jobs_doomed_idx ON remora.jobs (hard_delete_requested_at)
	WHERE hard_delete_requested_at IS NOT NULL AND hard_deleted_at IS NULL;
-- the jobs that ended, by when (remora_throughput reads the last hour's)
CREATE INDEX jobs_finished_idx ON remora.jobs (finished_at)
	WHERE finished_at IS NOT NULL;
-- the ended jobs whose history retention has still to prune, oldest
-- first (remora.prune): jobs_finished_idx would walk every tombstone of a
-- long history before it reached the first of them
CREATE INDEX jobs_unpruned_idx ON remora.jobs (finished_at)
	WHERE finished_at IS NOT NULL AND pruned_at IS NULL;

CREATE TABLE remora.incarnations (
	incarnation		uuid PRIMARY KEY,
	pid				integer,
	kind			text NOT NULL DEFAULT 'external',
	started_at		timestamptz NOT NULL DEFAULT now(),
	heartbeat_at	timestamptz NOT NULL DEFAULT now(),
	stopped_at		timestamptz,
	-- an external worker (remora-worker) says where it runs
	host			text,
	label			text,
	version			text,
	-- where its target credentials came from, and when they expire (never
	-- a secret; NULL: static keys, or not said)
	credentials		text,
	credentials_expire_at timestamptz
);

-- One row per attempt, including the recovery-ledger fields recorded
-- before the attempt runs.  Never a secret.
CREATE TABLE remora.attempts (
	attempt_id		uuid PRIMARY KEY,
	job_id			bigint NOT NULL REFERENCES remora.jobs ON DELETE CASCADE,
	attempt_no		integer NOT NULL,
	fencing_token	bigint NOT NULL,
	incarnation		uuid NOT NULL REFERENCES remora.incarnations,
	state			text NOT NULL DEFAULT 'running'
		CHECK (state IN ('running', 'succeeded', 'failed', 'lost', 'cancelled',
						 'yielded')),
	definition_hash text NOT NULL,
	request_hash	text NOT NULL,
	access_digest	text NOT NULL,
	provenance		jsonb NOT NULL,
	resumed_from	uuid,		-- attempt whose checkpoint was offered at claim
	restart_reason	text,		-- why an offered checkpoint could not be used
	error			jsonb,
	started_at		timestamptz NOT NULL DEFAULT now(),
	finished_at		timestamptz,
	cleaned_at		timestamptz,	-- staging objects deleted
	clean_failures	integer NOT NULL DEFAULT 0,
	clean_after		timestamptz,	-- a failed cleanup waits until then
	-- an export's attempt: what it was to publish, recorded before it ran
	-- (output, source and publication digests, members, bytes, mode, and
	-- the resolution that queued it, with who decided)
	export_ledger	jsonb,
	UNIQUE (job_id, attempt_no),
	UNIQUE (job_id, fencing_token)
);
CREATE INDEX attempts_uncleaned_idx ON remora.attempts (job_id)
	WHERE cleaned_at IS NULL;
-- the running attempts: those of the running jobs (a running job's current
-- attempt runs, and an attempt stops running in the transaction that moves
-- its job on), for what reads the running jobs without an index on the
-- jobs' state (see remora.jobs)
CREATE INDEX attempts_running_idx ON remora.attempts (job_id)
	WHERE state = 'running';
-- the sweep's order (remora.staging_to_clean): attempts to clean for the
-- first time by when they ended, those whose cleanup failed by when it may
-- be tried again; an index each, so that a sweep reads what it hands out
-- and not every attempt that waits (a store that refuses every delete
-- makes them many); only attempts that ended are due, so a claim's new
-- attempt is not entered (the sweep's finished_at <= ... implies it)
CREATE INDEX attempts_clean_due_idx ON remora.attempts (finished_at, attempt_id)
	WHERE cleaned_at IS NULL AND clean_after IS NULL AND finished_at IS NOT NULL;
CREATE INDEX attempts_clean_retry_idx ON remora.attempts (clean_after, attempt_id)
	WHERE cleaned_at IS NULL AND clean_after IS NOT NULL;

-- The latest validated resume checkpoint of a job (from its current or an
-- earlier attempt).  Replaced by each accepted remora.checkpoint.
CREATE TABLE remora.checkpoints (
	job_id			bigint PRIMARY KEY REFERENCES remora.jobs ON DELETE CASCADE,
	attempt_id		uuid NOT NULL REFERENCES remora.attempts ON DELETE CASCADE,
	fencing_token	bigint NOT NULL,
	state			jsonb NOT NULL,
	bytes_done		bigint NOT NULL DEFAULT 0,
	bytes_total		bigint,
	writes			bigint NOT NULL DEFAULT 1,
	updated_at		timestamptz NOT NULL DEFAULT now()
);

-- Members an attempt has staged and verified.  The committed result is the
-- member set of the committing attempt.
CREATE TABLE remora.members (
	attempt_id		uuid NOT NULL REFERENCES remora.attempts ON DELETE CASCADE,
	path			text NOT NULL,
	bucket			text NOT NULL,
	key				text,
	size			bigint NOT NULL CHECK (size >= 0),
	sha256			text CHECK (sha256 ~ '^[0-9a-f]{64}$'),
	etag			text,
	source			jsonb,		-- source validators: etag, last_modified, ...
	recorded_at		timestamptz NOT NULL DEFAULT now(),
	-- copied from this job's result (options.reuse_from), not downloaded
	reused_from_job bigint,
	PRIMARY KEY (attempt_id, path),
	-- written (key, etag and sha256), or a dry run's plan (none of them)
	CONSTRAINT members_written_or_planned
		CHECK ((key IS NULL) = (sha256 IS NULL) AND (key IS NULL) = (etag IS NULL))
);

-- The committed result: at most one per job, by its primary key.
CREATE TABLE remora.results (
	job_id			bigint PRIMARY KEY REFERENCES remora.jobs ON DELETE CASCADE,
	attempt_id		uuid NOT NULL UNIQUE REFERENCES remora.attempts,
	fencing_token	bigint NOT NULL,
	manifest_key	text NOT NULL,
	manifest_etag	text NOT NULL,
	manifest_sha256 text NOT NULL,
	members			bigint NOT NULL,
	bytes			bigint NOT NULL,
	descriptor		jsonb NOT NULL,
	committed_at	timestamptz NOT NULL DEFAULT now(),
	-- of its members' bytes, those copied from an earlier job's result
	bytes_reused	bigint NOT NULL DEFAULT 0
);

-- Source endpoints registered by an administrator.  Credentials are
-- readable only by the extension's own functions.  The name 'hf' is
-- reserved: source grants name the Hugging Face Hub with it.
CREATE TABLE remora.source_endpoints (
	name			text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_-]{0,62}$' AND name <> 'hf'),
	url				text NOT NULL,
	region			text NOT NULL DEFAULT 'us-east-1',
	path_style		boolean NOT NULL DEFAULT true,
	access_key_id	text,
	secret_access_key text,
	created_at		timestamptz NOT NULL DEFAULT now(),
	ca_pem			text,	-- CAs its TLS certificate may chain to, besides remora.ca_file
	-- where its credentials come from (doc/operator-guide.md, "Cloud
	-- credentials"): the keys above ('static', with session_token when
	-- they are temporary), each worker's own chain ('chain'), or none
	-- ('anonymous'); with role_arn, that role assumed on top
	session_token	text,
	credentials		text NOT NULL DEFAULT 'static'
		CHECK (credentials IN ('static', 'chain', 'anonymous')),
	role_arn		text,
	external_id		text
);

-- The whole source URL of a job whose URL has a query string (which may
-- carry a signature or a token).  Users see the URL without it in
-- remora.jobs; only the extension's functions read this table, to hand the
-- URL to a worker.
CREATE TABLE remora.source_urls (
	job_id			bigint PRIMARY KEY REFERENCES remora.jobs ON DELETE CASCADE,
	url				text NOT NULL
);

-- Which roles may write to which buckets and prefixes, beyond the
-- defaults.  A pattern is a prefix, or a prefix ending in '*' (any
-- continuation); '*' alone allows every prefix of the bucket.
CREATE TABLE remora.target_grants (
	grantee			regrole NOT NULL,
	bucket			text NOT NULL,
	prefix_pattern	text NOT NULL DEFAULT '*',
	granted_by		regrole NOT NULL,
	granted_at		timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (grantee, bucket, prefix_pattern)
);

-- Which roles may read which s3:// sources.  endpoint NULL is the target
-- store itself, a name is that registered source endpoint (the grant goes
-- when the endpoint is dropped).  A pattern is a key, or a key prefix
-- ending in '*'; '*' alone allows the whole bucket.
--
-- A hub grant (granted and shown as endpoint 'hf') lets a role read
-- hf:// repositories with the deployment's token (remora.hf_token): bucket
-- 'models' or 'datasets', the pattern over owner/name.  It has no
-- endpoint row: the Hub is no registered S3 store, and 'hf' can never be
-- registered as one.
CREATE TABLE remora.source_grants (
	grantee			regrole NOT NULL,
	bucket			text NOT NULL,
	prefix_pattern	text NOT NULL DEFAULT '*',
	endpoint		text REFERENCES remora.source_endpoints ON DELETE CASCADE,
	granted_by		regrole NOT NULL,
	granted_at		timestamptz NOT NULL DEFAULT now(),
	hub				boolean NOT NULL DEFAULT false,
	CONSTRAINT source_grants_hub_check
		CHECK (NOT hub OR (endpoint IS NULL AND bucket IN ('models', 'datasets'))),
	UNIQUE NULLS NOT DISTINCT (grantee, bucket, prefix_pattern, endpoint, hub)
);

-- An export (remora_export): a job of source kind 'export' in
-- remora.jobs, claimed, leased, fenced and cancelled like any job, plus
-- what it publishes.  Recorded before dispatch: the output digest (the
-- exported result's manifest SHA-256), members and bytes, the source
-- fingerprint (a digest of the member inventory) and the publication
-- digest (target, if_exists, output).  remora.export_refs holds each
-- member's conclusive answer.
CREATE TABLE remora.exports (
	export_id		bigint PRIMARY KEY REFERENCES remora.jobs ON DELETE CASCADE,
	job_id			bigint NOT NULL REFERENCES remora.jobs,
	result_attempt	uuid NOT NULL,	-- the exported result's attempt
	if_exists		text NOT NULL
		CHECK (if_exists IN ('fail', 'overwrite', 'skip_identical')),
	output_digest	text NOT NULL CHECK (output_digest ~ '^[0-9a-f]{64}$'),
	source_digest	text NOT NULL,
	publication_digest text NOT NULL,
	members			bigint NOT NULL,
	bytes			bigint NOT NULL,
	mode			text NOT NULL DEFAULT 'dispatch'
		CHECK (mode IN ('dispatch', 'verify')),
	committed_attempt uuid,
	decisions		jsonb NOT NULL DEFAULT '[]'	-- resolutions: who, what, when
);
CREATE INDEX exports_job_idx ON remora.exports (job_id);

-- An export's conclusive answer for each member of the exported result, by
-- path: {path, key, etag, version_id, size, outcome}.  A row a member, so
-- that a checkpoint costs its batch, not every answer recorded so far.
CREATE TABLE remora.export_refs (
	export_id		bigint NOT NULL REFERENCES remora.exports ON DELETE CASCADE,
	path			text NOT NULL,
	ref				jsonb NOT NULL,
	PRIMARY KEY (export_id, path)
);

-- Who publishes each key exported to a bucket: the role whose export last
-- wrote it (an answer "copied" or "verified", published) or, until one
-- does, whose export was created for it (published false).  The primary
-- key is the lookup remora_export and remora.export_members make, and the
-- reservation: of two roles exporting to one new key at once, the second
-- waits for the first's row and is refused (doc/security.md).  A
-- reservation whose export ended without writing the key binds no one.
-- Not tied to an export's row: a published key stays in the store, and
-- its publisher with it, when the export is deleted.
CREATE TABLE remora.export_keys (
	bucket			text NOT NULL,
	key				text NOT NULL,
	owner			regrole NOT NULL,
	export_id		bigint NOT NULL,	-- the export that wrote or reserved it
	published		boolean NOT NULL,
	PRIMARY KEY (bucket, key)
);

/* ------------------------------------------------------------------------
 * Coordination state: reconstructible, emptied by a crash
 * ------------------------------------------------------------------------ */

-- The coordination tables churn: every claim writes and every commit
-- removes rows of the queue, the leases and the queue's owners.  Their
-- dead rows are vacuumed after every thousand, whatever the table's size,
-- and at full speed: claims read the leases whole (remora._leases_in_use),
-- and dead rows they must step over made claims of 16 clients eight times
-- slower (bench/scale.sh).
--
-- A job waiting to be claimed.  owner is its job's (remora._queue_owner
-- fills it in): claims share the workers between owners and read the
-- queue owner by owner, each owner's jobs in its own priority order
-- (remora.claim).
CREATE UNLOGGED TABLE remora.queue (
	job_id			bigint PRIMARY KEY,
	priority		integer NOT NULL,
	not_before		timestamptz NOT NULL,
	enqueued_at		timestamptz NOT NULL DEFAULT now(),
	owner			regrole NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
	  autovacuum_vacuum_cost_delay = 0);
CREATE INDEX queue_owner_idx ON remora.queue (owner, priority DESC, job_id);

-- The owners with queued jobs, and each one's pass: its place in the turns
-- that owners with nothing running take (remora.claim), so that a claim
-- finds the next owners by index, however many wait.  A queue insert adds
-- its owner (remora._owners_wait), a claim moves the pass of each owner it
-- picks on, and reconcile removes owners left without queued jobs or
-- running attempts.
CREATE UNLOGGED TABLE remora.queue_owners (
	owner			regrole PRIMARY KEY,
	pass			float8 NOT NULL CHECK (pass >= 0)
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
	  autovacuum_vacuum_cost_delay = 0);
CREATE INDEX queue_owners_pass_idx ON remora.queue_owners (pass, owner);

-- (the next job due: remora.next_due)
-- The queued jobs that wait for a time later than when they were queued:
-- retries and the jobs reconcile queues again for later, never a submit's
-- (queued due at once, not_before = enqueued_at).  A job outside the index
-- was due when it was queued; the earliest one not yet due is the index's
-- first entry past now: one descent, however long the queue.  Without an
-- index every idle poll of every worker would scan the queue (100,000 rows
-- and more); an index of every row would cost each submit an insert into
-- it (a third more time to insert queue rows, measured), where this one
-- costs a submit its predicate alone (bench/submit.sh).
CREATE INDEX queue_later_idx ON remora.queue (not_before)
	WHERE not_before > enqueued_at;

-- A live lease is also the deployment-wide permit: their count is bounded
-- by remora.max_active_leases.
CREATE UNLOGGED TABLE remora.leases (
	attempt_id		uuid PRIMARY KEY,
	job_id			bigint NOT NULL UNIQUE,
	fencing_token	bigint NOT NULL,
	incarnation		uuid NOT NULL,
	granted_at		timestamptz NOT NULL DEFAULT now(),
	renewed_at		timestamptz NOT NULL DEFAULT now(),
	expires_at		timestamptz NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
	  autovacuum_vacuum_cost_delay = 0);
CREATE INDEX leases_expiry_idx ON remora.leases (expires_at);

-- A row while the queue and the leases are whole.  Crash recovery and a
-- promoted standby empty it with them (it is unlogged too), and a TRUNCATE
-- of either removes it (the triggers below): reconcile then rebuilds the
-- queue from the jobs, which it need not read otherwise (that read grows
-- with the backlog, and reconcile runs every second).
CREATE UNLOGGED TABLE remora.coordination (
	intact			boolean PRIMARY KEY DEFAULT true CHECK (intact)
);

-- The lock that renew and reconcile hold when they re-create a lost lease:
-- this one row, locked FOR UPDATE.  No role but the extension's owner may
-- lock it (an advisory lock, anyone could hold).  Claims do not take it:
-- they reserve their leases in shared memory (src/pg/leases.c).
CREATE TABLE remora.lease_lock (
	id				boolean PRIMARY KEY DEFAULT true CHECK (id)
);
INSERT INTO remora.lease_lock VALUES (true);

-- What pg_dump and pg_restore carry: every table that is not
-- reconstructible, and the job id's sequence (an identity's sequence is
-- dumped only if it is named too), so that ids continue after a restore.
-- A role is recorded as regrole, which pg_dump writes by name: restored
-- into a cluster whose roles have other OIDs, each row is still its own
-- role's (doc/operator-guide.md, "Backup and restore").
SELECT pg_catalog.pg_extension_config_dump('remora.jobs', '');
SELECT pg_catalog.pg_extension_config_dump('remora.jobs_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('remora.incarnations', '');
SELECT pg_catalog.pg_extension_config_dump('remora.attempts', '');
SELECT pg_catalog.pg_extension_config_dump('remora.checkpoints', '');
SELECT pg_catalog.pg_extension_config_dump('remora.members', '');
SELECT pg_catalog.pg_extension_config_dump('remora.results', '');
SELECT pg_catalog.pg_extension_config_dump('remora.source_endpoints', '');
SELECT pg_catalog.pg_extension_config_dump('remora.source_urls', '');
SELECT pg_catalog.pg_extension_config_dump('remora.target_grants', '');
SELECT pg_catalog.pg_extension_config_dump('remora.source_grants', '');
SELECT pg_catalog.pg_extension_config_dump('remora.exports', '');
SELECT pg_catalog.pg_extension_config_dump('remora.export_refs', '');
SELECT pg_catalog.pg_extension_config_dump('remora.export_keys', '');

/* ------------------------------------------------------------------------
 * Row-level security: a user sees only their own jobs, an admin sees all.
 * The functions below run as the extension owner and are not subject to it.
 * ------------------------------------------------------------------------ */

ALTER TABLE remora.jobs ENABLE ROW LEVEL SECURITY;
-- Parsed once, here: later search_path settings cannot change its meaning.
CREATE POLICY jobs_visible ON remora.jobs FOR SELECT
	USING (owner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
		   OR pg_catalog.pg_has_role(current_user, 'remora_admin', 'USAGE'));

ALTER TABLE remora.attempts ENABLE ROW LEVEL SECURITY;
CREATE POLICY attempts_visible ON remora.attempts FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = attempts.job_id));

ALTER TABLE remora.checkpoints ENABLE ROW LEVEL SECURITY;
CREATE POLICY checkpoints_visible ON remora.checkpoints FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = checkpoints.job_id));

ALTER TABLE remora.results ENABLE ROW LEVEL SECURITY;
CREATE POLICY results_visible ON remora.results FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = results.job_id));

ALTER TABLE remora.members ENABLE ROW LEVEL SECURITY;
CREATE POLICY members_visible ON remora.members FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.attempts a WHERE a.attempt_id = members.attempt_id));

ALTER TABLE remora.leases ENABLE ROW LEVEL SECURITY;
CREATE POLICY leases_visible ON remora.leases FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = leases.job_id));

ALTER TABLE remora.exports ENABLE ROW LEVEL SECURITY;
CREATE POLICY exports_visible ON remora.exports FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = exports.export_id));
ALTER TABLE remora.export_refs ENABLE ROW LEVEL SECURITY;
CREATE POLICY export_refs_visible ON remora.export_refs FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = export_refs.export_id));
ALTER TABLE remora.export_keys ENABLE ROW LEVEL SECURITY;

ALTER TABLE remora.source_endpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE remora.source_urls ENABLE ROW LEVEL SECURITY;
ALTER TABLE remora.target_grants ENABLE ROW LEVEL SECURITY;
CREATE POLICY target_grants_admin ON remora.target_grants FOR SELECT
	USING (pg_catalog.pg_has_role(current_user, 'remora_admin', 'USAGE'));
ALTER TABLE remora.source_grants ENABLE ROW LEVEL SECURITY;
CREATE POLICY source_grants_admin ON remora.source_grants FOR SELECT
	USING (pg_catalog.pg_has_role(current_user, 'remora_admin', 'USAGE'));

GRANT SELECT ON remora.jobs, remora.attempts, remora.checkpoints,
	remora.results, remora.members, remora.leases TO remora_user;
GRANT SELECT ON remora.exports, remora.export_refs TO remora_user;
GRANT SELECT ON remora.incarnations, remora.target_grants TO remora_admin;
GRANT SELECT ON remora.source_grants TO remora_admin;
