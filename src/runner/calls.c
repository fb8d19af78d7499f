/*-------------------------------------------------------------------------
 *
 * calls.c
 *	  Every SQL statement a worker runs, once, for both hosts: the worker
 *	  protocol (remora.claim, next_due, renew, rate_limits, checkpoint,
 *	  commit, commit_many, fail, export_members), its incarnation, the
 *	  members of earlier attempts, a source endpoint, the cleanup sweep,
 *	  and the webhooks (remora.webhooks_due, webhook_tried).
 *
 * Each is a call of a remora.* function (the worker role holds no
 * privilege on any table), one parameterized statement run by the host's
 * exec (a transaction of its own, or one of the open batch), parameters
 * passed as text and cast in the statement; every operator and function
 * is named with its schema, besides the session's pinned search_path.
 * Results are read by column name.  A call that fails returns false (or
 * NULL, or -1) and was logged by the host; the caller tries again later.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/calls.h"
#include "runner/codec.h"
#include "runner/state.h"

/* a column's value by name; NULL if NULL or absent */
static const char *
col(const RemoraRows *res, int row, const char *name)
{
	return remora_rows_get(res, row, name);
}

static bool
col_bool(const RemoraRows *res, int row, const char *name)
{
	const char *v = col(res, row, name);

	return v && strcmp(v, "t") == 0;
}

static int64_t
col_int(const RemoraRows *res, int row, const char *name)
{
	const char *v = col(res, row, name);

	return v ? strtoll(v, NULL, 10) : 0;
}

static char *
dup_str(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* one statement whose result is not read: true if it ran */
static bool
run(const char *what, const char *sql, int n, const char *const *params)
{
	return remora_runner.ops->exec(remora_runner.host, what, sql, n, params,
								   NULL);
}

/* one statement and its rows: true if it ran (free them) */
static bool
query(const char *what, const char *sql, int n, const char *const *params,
	  RemoraRows *res)
{
	memset(res, 0, sizeof(*res));
	return remora_runner.ops->exec(remora_runner.host, what, sql, n, params,
								   res);
}

/* ------------------------------------------------------- incarnation */

bool
remora_call_start_incarnation(const char *inc, const char *kind,
							  const char *host, const char *label)
{
	char        pid[16];
	const char *params[6] = {inc, pid, kind, host, label, REMORA_VERSION};

	snprintf(pid, sizeof(pid), "%d", (int) getpid());
	return run("recording the incarnation",
			   "SELECT remora.start_incarnation($1::pg_catalog.uuid, "
			   "$2::pg_catalog.int4, $3::pg_catalog.text, $4::pg_catalog.text, "
			   "$5::pg_catalog.text, $6::pg_catalog.text)",
			   6, params);
}

/*
 * 1: recorded; 0: the incarnation was ended (start another); -1: failed.
 * server_ms: the server's wall clock when it answered (ms since 1970).
 */
int
remora_call_heartbeat(const char *inc, const char *credentials, int64_t expires,
					  int64_t *server_ms)
{
	char        exp[32];
	const char *params[3] = {inc, credentials, expires > 0 ? exp : NULL};
	RemoraRows  res;
	bool        alive;

	snprintf(exp, sizeof(exp), "%lld", (long long) expires);
	if (!query("recording the heartbeat",
			   "SELECT remora.heartbeat($1::pg_catalog.uuid, "
			   "$2::pg_catalog.text, "
			   "pg_catalog.to_timestamp($3::pg_catalog.float8)) AS alive, "
			   "(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp())"
			   " * 1000)::pg_catalog.int8 AS server_ms",
			   3, params, &res))
		return -1;
	alive = res.nrows == 1 && col_bool(&res, 0, "alive");
	*server_ms = res.nrows == 1 ? col_int(&res, 0, "server_ms") : 0;
	remora_rows_free(&res);
	return alive ? 1 : 0;
}

void
remora_call_end_incarnation(const char *inc)
{
	const char *params[1] = {inc};

	(void) run("recording the end of the incarnation",
			   "SELECT remora.end_incarnation($1::pg_catalog.uuid)", 1, params);
}

/* -------------------------------------------------------------- claim */

/* Up to room attempts (out[]); -1 when the call failed. */
int
remora_call_claim(const char *inc, int room, RemoraClaimRow *out)
{
	char        n[16];
	const char *params[2] = {inc, n};
	RemoraRows  res;
	int         got = 0;

	snprintf(n, sizeof(n), "%d", room);
	if (!query("claiming",
			   "SELECT c.job_id, c.attempt_id, c.fencing_token, "
			   "c.spec::pg_catalog.text AS spec, "
			   "c.resume::pg_catalog.text AS resume FROM "
			   "remora.claim($1::pg_catalog.uuid, $2::pg_catalog.int4) c",
			   2, params, &res))
		return -1;
	for (int i = 0; i < res.nrows && got < room; i++)
	{
		RemoraClaimRow *r = &out[got++];
		const char     *att = col(&res, i, "attempt_id");

		r->job_id = col_int(&res, i, "job_id");
		snprintf(r->attempt_id, sizeof(r->attempt_id), "%s", att ? att : "");
		r->token = col_int(&res, i, "fencing_token");
		r->spec = dup_str(col(&res, i, "spec"));
		r->resume = dup_str(col(&res, i, "resume"));
	}
	remora_rows_free(&res);
	return got;
}

/*
 * Milliseconds until the next queued job is due, by the server's clock; 0
 * when one is due already; -1 when nothing is queued (or the call failed).
 */
int64_t
remora_call_next_due(const char *inc)
{
	const char *params[1] = {inc};
	RemoraRows  res;
	const char *v;
	int64_t     ms = -1;

	if (!query("asking when a job is due next",
			   "SELECT remora.next_due($1::pg_catalog.uuid) AS ms", 1, params,
			   &res))
		return -1;
	v = res.nrows == 1 ? col(&res, 0, "ms") : NULL;
	if (v)
		ms = strtoll(v, NULL, 10);
	remora_rows_free(&res);
	return ms;
}

/* ------------------------------------------------------ attempt calls */

/*
 * One call on an attempt: $1 attempt id, $2 token, $3 a document, $4
 * retryable; false when it failed, else its rows in *res (free them).
 */
static bool
attempt_call(const char *what, int64_t job, const char *sql, int n,
			 const char *attempt, int64_t token, const char *doc,
			 bool retryable, RemoraRows *res)
{
	char        tok[24];
	char        label[96];
	const char *params[4] = {attempt, tok, doc, retryable ? "t" : "f"};

	snprintf(tok, sizeof(tok), "%" PRId64, token);
	snprintf(label, sizeof(label), "job %" PRId64 ": %s", job, what);
	return query(label, sql, n, params, res);
}

/* The boolean column "ok" of an attempt call's one row. */
static bool
attempt_ok(const char *what, int64_t job, const char *sql, const char *attempt,
		   int64_t token, const char *doc, bool *ok)
{
	RemoraRows res;

	*ok = false;
	if (!attempt_call(what, job, sql, 3, attempt, token, doc, false, &res))
		return false;
	*ok = res.nrows == 1 && col_bool(&res, 0, "ok");
	remora_rows_free(&res);
	return true;
}

/*
 * Renew a lease: *ok, and whether the job was cancelled or the attempt is
 * asked to yield (every column, so that a server before time slices, whose
 * answer has no yield_requested, is read as never asking).
 */
bool
remora_call_renew(int64_t job, const char *attempt, int64_t token, bool *ok,
				  bool *cancelled, bool *yield)
{
	RemoraRows res;

	*ok = *cancelled = *yield = false;
	if (!attempt_call("renewing the lease", job,
					  "SELECT * FROM "
					  "remora.renew($1::pg_catalog.uuid, $2::pg_catalog.int8)",
					  2, attempt, token, NULL, false, &res))
		return false;
	if (res.nrows == 1)
	{
		*ok = col_bool(&res, 0, "ok");
		*cancelled = col_bool(&res, 0, "cancel_requested");
		*yield = col_bool(&res, 0, "yield_requested");
	}
	remora_rows_free(&res);
	return true;
}

/*
 * The byte-rate caps of n running attempts (remora.rate_limits), in one
 * call: caps[i] in bytes a second (0: none) and known[i] true for each
 * attempt the answer names; one it does not name (no longer running) is
 * left alone.  False when the call failed: nothing is set then.
 */
bool
remora_call_rate_limits(int n, const char *const *attempts, int64_t *caps,
						bool *known)
{
	char       *ids = malloc((size_t) n * REMORA_UUID_LEN + 3);
	const char *params[1] = {ids};
	RemoraRows  res;
	size_t      len = 0;
	bool        ran;

	if (ids == NULL)
		return false;
	/* an array literal: attempt ids are uuids, nothing to quote */
	ids[len++] = '{';
	for (int i = 0; i < n; i++)
		len += sprintf(ids + len, "%s%s", i ? "," : "", attempts[i]);
	ids[len++] = '}';
	ids[len] = '\0';
	ran = query("reading the byte-rate caps",
				"SELECT r.attempt_id, r.max_bytes_per_second FROM "
				"remora.rate_limits($1::pg_catalog.uuid[]) r",
				1, params, &res);
	free(ids);
	if (!ran)
		return false;
	for (int i = 0; i < n; i++)
	{
		caps[i] = 0;
		known[i] = false;
	}
	for (int r = 0; r < res.nrows; r++)
	{
		const char *att = col(&res, r, "attempt_id");

		for (int i = 0; att && i < n; i++)
			if (strcmp(att, attempts[i]) == 0)
			{
				known[i] = true;
				caps[i] = col_int(&res, r, "max_bytes_per_second");
			}
	}
	remora_rows_free(&res);
	return true;
}

bool
remora_call_checkpoint(int64_t job, const char *attempt, int64_t token,
					   const char *doc, bool *ok)
{
	return attempt_ok("checkpointing", job,
					  "SELECT remora.checkpoint($1::pg_catalog.uuid, "
					  "$2::pg_catalog.int8, $3::pg_catalog.jsonb) AS ok",
					  attempt, token, doc, ok);
}

bool
remora_call_commit(int64_t job, const char *attempt, int64_t token,
				   const char *doc, bool *ok)
{
	return attempt_ok("committing a result", job,
					  "SELECT remora.commit($1::pg_catalog.uuid, "
					  "$2::pg_catalog.int8, $3::pg_catalog.jsonb) AS ok",
					  attempt, token, doc, ok);
}

/*
 * Commit several results in one call and one transaction
 * (remora.commit_many): ok[i] false when item i was refused.  False when
 * the call failed; nothing was committed then.  The items travel as one
 * JSON array ({"a": attempt, "t": token, "m": descriptor}, docs[i] being
 * JSON texts already), which the statement unpacks into the arrays.
 */
bool
remora_call_commit_many(int n, const char *const *attempts,
						const int64_t *tokens, const char *const *docs,
						bool *ok)
{
	size_t      len = 3;
	size_t      at = 0;
	char       *items;
	const char *params[1];
	RemoraRows  res;
	bool        called;

	for (int i = 0; i < n; i++)
	{
		ok[i] = false;
		len += strlen(attempts[i]) + strlen(docs[i]) + 64;
	}
	if ((items = malloc(len)) == NULL)
		return false;
	items[at++] = '[';
	for (int i = 0; i < n; i++)
		at += (size_t) snprintf(items + at, len - at,
								"%s{\"a\":\"%s\",\"t\":%" PRId64 ",\"m\":%s}",
								i ? "," : "", attempts[i], tokens[i], docs[i]);
	snprintf(items + at, len - at, "]");
	params[0] = items;
	called = query(
		"committing results",
		"SELECT c.committed FROM (SELECT "
		"pg_catalog.array_agg((x.e OPERATOR(pg_catalog.->>) "
		"'a')::pg_catalog.uuid "
		"ORDER BY x.o) AS a, "
		"pg_catalog.array_agg((x.e OPERATOR(pg_catalog.->>) "
		"'t')::pg_catalog.int8 "
		"ORDER BY x.o) AS t, "
		"pg_catalog.array_agg(x.e OPERATOR(pg_catalog.->) 'm' ORDER BY x.o) "
		"AS m "
		"FROM pg_catalog.jsonb_array_elements($1::pg_catalog.jsonb) "
		"WITH ORDINALITY x(e, o)) s, "
		"remora.commit_many(s.a, s.t, s.m) c",
		1, params, &res);
	free(items);
	if (!called)
		return false;
	for (int r = 0; r < res.nrows && r < n; r++)
		ok[r] = col_bool(&res, r, "committed");
	remora_rows_free(&res);
	return true;
}

/* The job's resulting state (malloc'd), or NULL if the call failed. */
char *
remora_call_fail(int64_t job, const char *attempt, int64_t token,
				 const char *error, bool retryable)
{
	RemoraRows res;
	char      *state;

	if (error == NULL)
		return NULL;
	if (!attempt_call("reporting a failed attempt", job,
					  "SELECT remora.fail($1::pg_catalog.uuid, "
					  "$2::pg_catalog.int8, $3::pg_catalog.jsonb, "
					  "$4::pg_catalog.bool) AS state",
					  4, attempt, token, error, retryable, &res))
		return NULL;
	state =
		strdup(res.nrows == 1 && col(&res, 0, "state") ? col(&res, 0, "state")
													   : "unknown");
	remora_rows_free(&res);
	return state;
}

/* Hand the attempt's job back (remora.yield): the job's state, malloc'd,
 * or NULL when the call failed. */
char *
remora_call_yield(int64_t job, const char *attempt, int64_t token)
{
	RemoraRows res;
	char      *state;

	if (!attempt_call("yielding an attempt", job,
					  "SELECT remora.yield($1::pg_catalog.uuid, "
					  "$2::pg_catalog.int8) AS state",
					  2, attempt, token, NULL, false, &res))
		return NULL;
	state =
		strdup(res.nrows == 1 && col(&res, 0, "state") ? col(&res, 0, "state")
													   : "unknown");
	remora_rows_free(&res);
	return state;
}

/* ------------------------------------------------------ member lookup */

/*
 * Members an earlier attempt of the job completed (out[i] for paths[i]);
 * false (nothing found) when the call failed or a value does not fit: the
 * members are then transferred again.
 */
bool
remora_call_lookup(int64_t job, const char *attempt, const char *const *paths,
				   int n, RemoraPrior *out)
{
	char        jobtext[24];
	char        label[96];
	char       *array = remora_codec_string_array(paths, n);
	const char *params[3] = {jobtext, attempt, array};
	RemoraRows  res;
	bool        ok = true;

	for (int i = 0; i < n; i++)
		out[i].found = false;
	if (n == 0)
	{
		free(array);
		return true;
	}
	if (array == NULL)
		return false;
	snprintf(jobtext, sizeof(jobtext), "%" PRId64, job);
	snprintf(label, sizeof(label), "job %" PRId64 ": %s", job,
			 "looking up members of earlier attempts");
	/* the newest attempt's copy of each path */
	ok = query(label,
			   "SELECT pos, key, etag, sha256, size, "
			   "source::pg_catalog.text AS source, from_job "
			   "FROM remora.earlier_members($1::pg_catalog.int8, "
			   "$2::pg_catalog.uuid, ARRAY(SELECT t.path FROM "
			   "pg_catalog.jsonb_array_elements_text($3::pg_catalog.jsonb) "
			   "WITH ORDINALITY t(path, pos) ORDER BY t.pos))",
			   3, params, &res);
	free(array);
	if (!ok)
		return false;
	for (int r = 0; r < res.nrows && ok; r++)
	{
		int64_t i = col_int(&res, r, "pos") - 1;

		if (i < 0 || i >= n)
			continue;
		ok = remora_codec_prior(&out[i], col(&res, r, "key"),
								col(&res, r, "etag"), col(&res, r, "sha256"),
								col_int(&res, r, "size"),
								col(&res, r, "source"));
		out[i].from_job = col_int(&res, r, "from_job");
	}
	remora_rows_free(&res);
	if (!ok)
		for (int i = 0; i < n; i++)
			out[i].found = false;
	return ok;
}

/* ------------------------------------------------ an export's members */

/*
 * The next page of an export's members (remora.export_members), added to
 * the lookup one by one; false when the call failed or the engine refused
 * a member (logged): the export then fails, retryably.  A page with fewer
 * members than asked is the engine's to judge.
 */
bool
remora_call_export_members(int64_t job, const char *attempt, int64_t token,
						   RemoraLookup *l)
{
	char        tok[24], max[16], label[96];
	const char *params[4] = {attempt, tok, l->after, max};
	RemoraRows  res;
	bool        ok = true;
	char        err[256];

	snprintf(tok, sizeof(tok), "%" PRId64, token);
	snprintf(max, sizeof(max), "%d", l->max);
	snprintf(label, sizeof(label), "job %" PRId64 ": %s", job,
			 "reading an export's members");
	if (!query(label,
			   "SELECT path, bucket, key, size, sha256, etag, ref_etag, "
			   "may_overwrite FROM remora.export_members("
			   "$1::pg_catalog.uuid, $2::pg_catalog.int8, "
			   "$3::pg_catalog.text, $4::pg_catalog.int4)",
			   4, params, &res))
		return false;
	for (int r = 0; r < res.nrows && ok; r++)
	{
		RemoraExportMember m = {
			col(&res, r, "path"),
			col(&res, r, "bucket"),
			col(&res, r, "key"),
			col(&res, r, "etag"),
			col(&res, r, "sha256"),
			col(&res, r, "size") ? col_int(&res, r, "size") : -1,
			col(&res, r, "ref_etag"),
			col_bool(&res, r, "may_overwrite")};

		ok = remora_lookup_add_member(l, &m, err, sizeof(err));
		if (!ok)
			remora_rlog("%s failed: invalid export member: %s", label, err);
	}
	remora_rows_free(&res);
	return ok;
}

/* ----------------------------------------------------------- endpoint */

void
remora_endpoint_free(RemoraEndpoint *e)
{
	for (int i = 0; i < (int) (sizeof(e->strings) / sizeof(e->strings[0])); i++)
	{
		if (e->strings[i])
			memset(e->strings[i], 0, strlen(e->strings[i]));
		free(e->strings[i]);
	}
	memset(e, 0, sizeof(*e));
}

/* The registered endpoint an s3 source names; *found false if none. */
bool
remora_call_endpoint(const char *name, RemoraEndpoint *out, bool *found)
{
	const char *params[1] = {name};
	RemoraRows  res;

	memset(out, 0, sizeof(*out));
	*found = false;
	if (!query(
			"reading a source endpoint",
			"SELECT url, region, path_style::pg_catalog.text, access_key_id, "
			"secret_access_key, ca_pem, session_token, credentials, "
			"role_arn, external_id "
			"FROM remora.source_endpoint_settings($1::pg_catalog.text)",
			1, params, &res))
		return false;
	if (res.nrows == 1 && col(&res, 0, "url"))
	{
		const char *cols[10] = {
			"url",      "region",     "access_key_id", "secret_access_key",
			"ca_pem",   "path_style", "session_token", "credentials",
			"role_arn", "external_id"};

		for (int i = 0; i < 10; i++)
			out->strings[i] = dup_str(col(&res, 0, cols[i]));
		out->cfg.endpoint = out->strings[0];
		out->cfg.region = out->strings[1] ? out->strings[1] : "";
		out->cfg.access_key_id = out->strings[2];
		out->cfg.secret_access_key = out->strings[3];
		out->cfg.ca_pem = out->strings[4];
		out->cfg.path_style = out->strings[5] && out->strings[5][0] == 't';
		out->cfg.session_token = out->strings[6];
		out->cfg.credentials = out->strings[7];
		out->cfg.role_arn = out->strings[8];
		out->cfg.external_id = out->strings[9];
		/* STS in the endpoint's region, the session named as the target's */
		/* registered without credentials: read anonymously, never with
		 * the target's keys (doc/operator-guide.md, "Source endpoints") */
		out->cfg.anonymous =
			out->strings[7] && strcmp(out->strings[7], "anonymous") == 0;
		*found = out->strings[0] != NULL;
	}
	remora_rows_wipe(&res);
	return true;
}

/* ------------------------------------------------------------ cleanup */

/*
 * The next objects to delete: an attempt's staging (attempt_id set), or
 * a hard-deleted job's objects (attempt_id "").  False if none, or the
 * call failed.
 */
bool
remora_call_next_cleanup(char *attempt_id, int64_t *job, char **bucket,
						 char **prefix)
{
	const char *params[1] = {"1"};
	RemoraRows  res;
	bool        found = false;

	attempt_id[0] = '\0';
	if (!query("looking for objects to delete",
			   "SELECT attempt_id, job_id, bucket, prefix FROM "
			   "remora.staging_to_clean($1::pg_catalog.int4)",
			   1, params, &res))
		return false;
	if (res.nrows > 0 && col(&res, 0, "bucket") && col(&res, 0, "prefix") &&
		col(&res, 0, "job_id"))
	{
		const char *att = col(&res, 0, "attempt_id");

		snprintf(attempt_id, REMORA_UUID_LEN, "%s", att ? att : "");
		*job = col_int(&res, 0, "job_id");
		*bucket = dup_str(col(&res, 0, "bucket"));
		*prefix = dup_str(col(&res, 0, "prefix"));
		found = *bucket && *prefix;
	}
	remora_rows_free(&res);
	return found;
}

/* Record a cleanup's end; if this fails it is found and done again. */
void
remora_call_cleanup_done(const char *attempt_id, int64_t job, bool ok)
{
	char        jobtext[24];
	const char *params[2] = {attempt_id[0] ? attempt_id : jobtext,
							 ok ? "t" : "f"};

	snprintf(jobtext, sizeof(jobtext), "%" PRId64, job);
	(void) run("recording a cleanup",
			   attempt_id[0]
				   ? "SELECT remora.staging_cleaned($1::pg_catalog.uuid, "
					 "$2::pg_catalog.bool)"
				   : "SELECT remora.job_objects_deleted($1::pg_catalog.int8, "
					 "$2::pg_catalog.bool)",
			   2, params);
}

/* ------------------------------------------------------------ results */

bool
remora_rows_init(RemoraRows *r, int nrows, int ncols)
{
	memset(r, 0, sizeof(*r));
	r->names = calloc(ncols > 0 ? ncols : 1, sizeof(char *));
	r->values =
		calloc((size_t) (nrows > 0 ? nrows : 1) * (ncols > 0 ? ncols : 1),
			   sizeof(char *));
	if (r->names == NULL || r->values == NULL)
	{
		free(r->names);
		free(r->values);
		memset(r, 0, sizeof(*r));
		return false;
	}
	r->nrows = nrows;
	r->ncols = ncols;
	return true;
}

bool
remora_rows_set_name(RemoraRows *r, int col, const char *s)
{
	return (r->names[col] = strdup(s)) != NULL;
}

/* A value (NULL: SQL NULL); false when out of memory. */
bool
remora_rows_set(RemoraRows *r, int row, int col, const char *s)
{
	char **v = &r->values[(size_t) row * r->ncols + col];

	if (s == NULL)
		return true;
	return (*v = strdup(s)) != NULL;
}

/* A column's value by name; NULL if NULL or absent. */
const char *
remora_rows_get(const RemoraRows *r, int row, const char *name)
{
	if (row < 0 || row >= r->nrows)
		return NULL;
	for (int c = 0; c < r->ncols; c++)
		if (r->names[c] && strcmp(r->names[c], name) == 0)
			return r->values[(size_t) row * r->ncols + c];
	return NULL;
}

static void
rows_release(RemoraRows *r, bool wipe)
{
	size_t n = (size_t) r->nrows * r->ncols;

	for (size_t i = 0; r->values && i < n; i++)
	{
		if (wipe && r->values[i])
			memset(r->values[i], 0, strlen(r->values[i]));
		free(r->values[i]);
	}
	for (int c = 0; r->names && c < r->ncols; c++)
		free(r->names[c]);
	free(r->values);
	free(r->names);
	memset(r, 0, sizeof(*r));
}

void
remora_rows_free(RemoraRows *r)
{
	rows_release(r, false);
}

/* Free rows that held a secret, zeroed first. */
void
remora_rows_wipe(RemoraRows *r)
{
	rows_release(r, true);
}

/* ----------------------------------------------------------- webhooks */

/* hex digits into out; false unless exactly outlen bytes */
static bool
unhex(const char *s, unsigned char *out, size_t outlen)
{
	if (s == NULL || strlen(s) != 2 * outlen ||
		strspn(s, "0123456789abcdef") != 2 * outlen)
		return false;
	for (size_t i = 0; i < outlen; i++)
	{
		unsigned int b;

		if (sscanf(s + 2 * i, "%2x", &b) != 1)
			return false;
		out[i] = (unsigned char) b;
	}
	return true;
}

/*
 * Up to room webhooks due now (remora.webhooks_due), claimed for this
 * incarnation, each with its job owner's key; -1 when the call failed.
 * A row whose key cannot be read is left to lapse (and logged).
 */
int
remora_call_webhooks_due(const char *inc, int room, RemoraWebhookRow *out)
{
	char        n[16];
	const char *params[2] = {inc, n};
	RemoraRows  res;
	int         got = 0;

	snprintf(n, sizeof(n), "%d", room);
	if (!query("claiming webhooks",
			   "SELECT w.webhook_id, w.job_id, w.url, w.body, "
			   "pg_catalog.encode(w.secret, 'hex') AS secret, "
			   "w.attempt, w.timeout_ms FROM "
			   "remora.webhooks_due($1::pg_catalog.uuid, $2::pg_catalog.int4) "
			   "w",
			   2, params, &res))
		return -1;
	for (int i = 0; i < res.nrows && got < room; i++)
	{
		RemoraWebhookRow *r = &out[got];

		memset(r, 0, sizeof(*r));
		r->job_id = col_int(&res, i, "job_id");
		r->attempt = (int) col_int(&res, i, "attempt");
		r->timeout_ms = (long) col_int(&res, i, "timeout_ms");
		r->id = dup_str(col(&res, i, "webhook_id"));
		r->url = dup_str(col(&res, i, "url"));
		r->body = dup_str(col(&res, i, "body"));
		if (!unhex(col(&res, i, "secret"), r->key, sizeof(r->key)) ||
			r->id == NULL || r->url == NULL || r->body == NULL)
		{
			remora_rlog("job %" PRId64 ": webhook not readable", r->job_id);
			remora_webhook_row_free(r);
			continue;
		}
		got++;
	}
	remora_rows_wipe(&res); /* it held secrets */
	return got;
}

void
remora_webhook_row_free(RemoraWebhookRow *r)
{
	free(r->id);
	free(r->url);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* Record a try (remora.webhook_tried); false when the call failed. */
bool
remora_call_webhook_tried(int64_t job, const char *id, int attempt, long status,
						  const char *error, bool retry)
{
	char        att[16];
	char        st[24];
	char        label[64];
	const char *params[5] = {id, att, status > 0 ? st : NULL,
							 error && error[0] ? error : NULL,
							 retry ? "t" : "f"};

	snprintf(att, sizeof(att), "%d", attempt);
	snprintf(st, sizeof(st), "%ld", status);
	snprintf(label, sizeof(label), "job %" PRId64 ": recording a webhook", job);
	return run(label,
			   "SELECT remora.webhook_tried($1::pg_catalog.text, "
			   "$2::pg_catalog.int4, $3::pg_catalog.int4, $4::pg_catalog.text, "
			   "$5::pg_catalog.bool)",
			   5, params);
}
