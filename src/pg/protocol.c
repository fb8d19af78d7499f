/*-------------------------------------------------------------------------
 *
 * protocol.c
 *	  Every SQL statement the launcher and the workers run, and the one
 *	  transaction helper they run in.
 *
 * A call is a short transaction of its own (no transaction is ever open
 * across network I/O), with SPI, and the protocol function inside it runs
 * in a subtransaction, as PL/pgSQL runs a block with an exception handler:
 *
 *	  remora_tx_call(what, job, fn, arg)
 *	    remora_tx_begin     StartTransactionCommand, SPI_connect, snapshot
 *	      remora_tx_guarded BeginInternalSubTransaction
 *	        fn(arg)         the statements; may ERROR
 *	      an ERROR here     logged ("remora job N: <what> failed: ..."),
 *	                        the subtransaction rolled back alone
 *	    remora_tx_end       SPI_finish, CommitTransactionCommand
 *	  an ERROR here         (a commit that fails) logged, the transaction
 *	                        aborted (remora_tx_abort)
 *
 * so that a call that waits on a row a user holds, times out or raises
 * fails alone and returns false; the caller tries again later.  Several
 * guarded calls may share one transaction (the checkpoints of one round).
 *
 * Each statement calls a remora.* function (the launcher's checks read
 * pg_catalog): the worker role holds no privilege on any table.
 *
 * Nothing a user does can subvert these statements: the session's
 * search_path is pg_catalog, pg_temp (remora_pin_session), and every
 * operator and function below is named with its schema, so no object a
 * user creates is ever called; each statement runs with lock_timeout and a
 * statement timeout derived from remora.lease_duration
 * (remora_spi_execute).  Results are read by column name, and documents
 * through the codec (jobspec.c), by key.
 *
 * Memory: results are copied into the memory context that was current at
 * remora_tx_begin (the caller's); SPI's memory goes with the transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

#include "pg/protocol.h"

/* operators, always from pg_catalog (see the file header) */
#define OP_EQ " OPERATOR(pg_catalog.=) "

/* ----------------------------------------------------------- transactions */

static MemoryContext         caller_cxt;
static volatile sig_atomic_t in_call = false;

/*
 * Is a protocol call running?  (For a SIGTERM handler: it may cancel the
 * statement in progress.)
 */
bool
remora_tx_in_progress(void)
{
	return in_call;
}

/*
 * Start a short transaction with SPI.  what ("claiming") is shown in
 * pg_stat_activity as "remora: claiming".  Results the caller keeps must be
 * copied into its context (see keep_str) before remora_tx_end.
 */
void
remora_tx_begin(const char *what)
{
	char activity[128];

	caller_cxt = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	snprintf(activity, sizeof(activity), "remora: %s", what);
	pgstat_report_activity(STATE_RUNNING, activity);
	in_call = true;
}

/* Commit; back in the caller's context (committing leaves another). */
void
remora_tx_end(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	in_call = false;
	MemoryContextSwitchTo(caller_cxt);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * After an ERROR left a transaction open (the caller has caught and
 * flushed it): abort it, and SPI with it.  Harmless with none open.
 */
void
remora_tx_abort(void)
{
	disable_timeout(STATEMENT_TIMEOUT, false);
	AbortCurrentTransaction();
	SPI_finish();
	in_call = false;
	QueryCancelPending = false;
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * The outer error boundary, in a PG_CATCH: report the ERROR caught, abort
 * the transaction it left open (if any), and go back to cxt.
 */
void
remora_tx_recover(MemoryContext cxt)
{
	MemoryContextSwitchTo(cxt);
	EmitErrorReport();
	FlushErrorState();
	remora_tx_abort();
	MemoryContextSwitchTo(cxt);
}

/*
 * Run fn(arg) in a subtransaction of the open transaction: an ERROR in it
 * (a timeout, a refused argument, a trigger that raises) is logged, for
 * job_id when it is not 0, and rolled back alone, and false returned; the
 * transaction and SPI stay usable for the next call.  Memory fn allocates
 * in the caller's context is kept either way.  The message of the last
 * ERROR caught is kept (last_error), for a claim to say why it refuses.
 */
static char *last_error;

bool
remora_tx_guarded(const char *what, int64 job_id, RemoraCallFn fn, void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		const char *who =
			MyBgworkerEntry ? MyBgworkerEntry->bgw_type : "remora";

		disable_timeout(STATEMENT_TIMEOUT, false);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		QueryCancelPending = false;
		ereport(LOG,
				(errcode(edata->sqlerrcode),
				 job_id
					 ? errmsg("remora job " INT64_FORMAT ": %s failed: %s",
							  job_id, what, edata->message)
					 : errmsg("%s: %s failed: %s", who, what, edata->message),
				 edata->detail ? errdetail("%s", edata->detail) : 0,
				 errhint("The call is tried again later.")));
		last_error = MemoryContextStrdup(
			caller_cxt ? caller_cxt : cxt,
			edata->detail ? psprintf("%s: %s", edata->message, edata->detail)
						  : edata->message);
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return ok;
}

/*
 * A short transaction inside the error boundary: fn(arg) runs between
 * remora_tx_begin and remora_tx_end and makes its calls with
 * remora_tx_guarded.  False when an ERROR escaped fn or the commit: it is
 * reported and the transaction aborted.
 */
bool
remora_tx_run(const char *what, RemoraCallFn fn, void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = false;

	PG_TRY();
	{
		remora_tx_begin(what);
		fn(arg);
		remora_tx_end();
		ok = true;
	}
	PG_CATCH();
	{
		remora_tx_recover(cxt);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	return ok;
}

typedef struct GuardedCall
{
	const char  *what;
	int64        job_id;
	RemoraCallFn fn;
	void        *arg;
	bool         ok;
} GuardedCall;

static void
guarded_call(void *arg)
{
	GuardedCall *g = arg;

	g->ok = remora_tx_guarded(g->what, g->job_id, g->fn, g->arg);
}

/*
 * One call in a transaction of its own, inside the error boundary: false
 * when it failed (logged), whether in fn or at commit.
 */
bool
remora_tx_call(const char *what, int64 job_id, RemoraCallFn fn, void *arg)
{
	GuardedCall g = {what, job_id, fn, arg, false};

	return remora_tx_run(what, guarded_call, &g) && g.ok;
}

/* ---------------------------------------------------------------- helpers */

/* A copy in the caller's context of a value read inside the transaction. */
static char *
keep_str(const char *s)
{
	return s ? MemoryContextStrdup(caller_cxt, s) : NULL;
}

static void
sql(const char *query, int nargs, Oid *types, Datum *values, const char *nulls)
{
	if (remora_spi_execute(query, nargs, types, values, nulls, false, 0) < 0)
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
						errmsg("remora: a protocol statement failed"),
						errdetail("Statement: %s", query)));
}

/* The number of a column of the last result, by name. */
static int
col_no(const char *name)
{
	int n = SPI_fnumber(SPI_tuptable->tupdesc, name);

	if (n <= 0)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
						errmsg("remora: the protocol's result has no column "
							   "\"%s\"",
							   name)));
	return n;
}

static char *
col_text(uint64 row, const char *name)
{
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						col_no(name));
}

static Datum
col_value(uint64 row, const char *name, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 col_no(name), isnull);
}

/* A boolean column; false when NULL. */
static bool
col_bool(uint64 row, const char *name)
{
	bool  isnull;
	Datum d = col_value(row, name, &isnull);

	return !isnull && DatumGetBool(d);
}

/* A jsonb column copied into the caller's context, or NULL. */
static Jsonb *
col_jsonb(uint64 row, const char *name)
{
	bool          isnull;
	Datum         d = col_value(row, name, &isnull);
	MemoryContext old;
	Jsonb        *j;

	if (isnull)
		return NULL;
	old = MemoryContextSwitchTo(caller_cxt);
	j = DatumGetJsonbPCopy(d);
	MemoryContextSwitchTo(old);
	return j;
}

static Datum
uuid_datum(const char *text)
{
	return DirectFunctionCall1(uuid_in, CStringGetDatum(text));
}

/* One statement and no result. */
typedef struct PlainCall
{
	const char *query;
	int         nargs;
	Oid        *types;
	Datum      *values;
} PlainCall;

static void
plain_call(void *arg)
{
	PlainCall *c = arg;

	sql(c->query, c->nargs, c->types, c->values, NULL);
}

/* One statement whose first row's column "n" (an integer) is returned. */
typedef struct CountCall
{
	PlainCall q;
	int64     n;
} CountCall;

static void
count_call(void *arg)
{
	CountCall *c = arg;
	bool       isnull;
	Datum      d;

	plain_call(&c->q);
	c->n = 0;
	if (SPI_processed == 0)
		return;
	d = col_value(0, "n", &isnull);
	if (!isnull)
		c->n = DatumGetInt32(d);
}

/* ------------------------------------------------------ incarnations */

/* Record a new worker incarnation; ERRORs (the worker cannot run without). */
void
remora_protocol_start_incarnation(const pg_uuid_t *incarnation)
{
	Oid   types[2] = {UUIDOID, INT4OID};
	Datum values[2] = {UUIDPGetDatum(incarnation), Int32GetDatum(MyProcPid)};
	PlainCall c = {"SELECT remora.start_incarnation($1, $2, 'worker', NULL, "
				   "NULL, '" REMORA_VERSION "')",
				   2, types, values};

	if (!remora_tx_call("recording the incarnation", 0, plain_call, &c))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("remora worker could not record its incarnation"),
				 errhint("The launcher starts the worker again.")));
}

/* Record the end of an incarnation, unless already recorded. */
void
remora_protocol_end_incarnation(const pg_uuid_t *incarnation)
{
	Oid       types[1] = {UUIDOID};
	Datum     values[1] = {UUIDPGetDatum(incarnation)};
	PlainCall c = {"SELECT remora.end_incarnation($1)", 1, types, values};

	(void) remora_tx_call("recording the end of an incarnation", 0, plain_call,
						  &c);
}

bool
remora_protocol_heartbeat(const pg_uuid_t *incarnation)
{
	Oid       types[1] = {UUIDOID};
	Datum     values[1] = {UUIDPGetDatum(incarnation)};
	PlainCall c = {"SELECT remora.heartbeat($1)", 1, types, values};

	return remora_tx_call("recording the heartbeat", 0, plain_call, &c);
}

/* ---------------------------------------------------------------- claim */

typedef struct ClaimCall
{
	const pg_uuid_t *incarnation;
	int              room;
	RemoraClaim     *out;
	Jsonb          **spec;
	Jsonb          **resume;
	int              n;
} ClaimCall;

static void
claim_call(void *arg)
{
	ClaimCall *c = arg;
	Oid        types[2] = {UUIDOID, INT4OID};
	Datum      values[2];

	values[0] = UUIDPGetDatum(c->incarnation);
	values[1] = Int32GetDatum(c->room);
	sql("SELECT c.job_id, c.attempt_id, c.fencing_token, c.spec, c.resume "
		"FROM remora.claim($1, $2) c",
		2, types, values, NULL);
	for (uint64 i = 0; i < SPI_processed && i < (uint64) c->room; i++)
	{
		bool         isnull;
		RemoraClaim *cl = &c->out[c->n];

		cl->job.job_id = DatumGetInt64(col_value(i, "job_id", &isnull));
		cl->job.attempt_id = keep_str(col_text(i, "attempt_id"));
		cl->job.fencing_token =
			DatumGetInt64(col_value(i, "fencing_token", &isnull));
		c->spec[c->n] = col_jsonb(i, "spec");
		c->resume[c->n] = col_jsonb(i, "resume");
		c->n++;
	}
}

typedef struct DecodeCall
{
	RemoraClaim *cl;
	Jsonb       *doc;
} DecodeCall;

/* The spec, by key, into the caller's context (keeping the claim's ids). */
static void
decode_spec(void *arg)
{
	DecodeCall   *d = arg;
	RemoraJobSpec job;
	MemoryContext old = MemoryContextSwitchTo(caller_cxt);

	if (d->doc == NULL)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("invalid job specification"),
						errdetail("The claim handed out no specification.")));
	remora_jobspec_decode(d->doc, &job);
	job.job_id = d->cl->job.job_id;
	job.attempt_id = d->cl->job.attempt_id;
	job.fencing_token = d->cl->job.fencing_token;
	d->cl->job = job;
	MemoryContextSwitchTo(old);
}

/* The registered endpoint an s3 source names (its secret stays in memory). */
static void
read_endpoint(void *arg)
{
	RemoraClaim *cl = arg;
	Oid          types[1] = {TEXTOID};
	Datum        values[1];
	char        *region;

	values[0] = CStringGetTextDatum(cl->job.endpoint);
	sql("SELECT url, region, path_style, access_key_id, secret_access_key, "
		"ca_pem FROM remora.source_endpoint_settings($1)",
		1, types, values, NULL);
	if (SPI_processed != 1 || col_text(0, "url") == NULL)
		return;
	cl->endpoint_found = true;
	cl->endpoint.endpoint = keep_str(col_text(0, "url"));
	region = col_text(0, "region");
	cl->endpoint.region = keep_str(region ? region : "");
	cl->endpoint.path_style = col_bool(0, "path_style");
	cl->endpoint.access_key_id = keep_str(col_text(0, "access_key_id"));
	cl->endpoint.secret_access_key = keep_str(col_text(0, "secret_access_key"));
	/* its own CAs, if any (NULL: remora.ca_file alone) */
	cl->endpoint.ca_pem = keep_str(col_text(0, "ca_pem"));
}

static void
decode_resume(void *arg)
{
	DecodeCall *d = arg;

	d->cl->resume = remora_jobspec_decode_resume(d->doc, &d->cl->why_restart);
}

/*
 * Claim up to room attempts for the incarnation, in one transaction, and
 * decode each (out[], palloc'd by the caller, filled in its context).  A
 * claimed attempt whose spec cannot be read has broken set (the reason);
 * one whose checkpoint cannot be used has why_restart set, and no resume.
 * Returns how many were claimed (0 also when the call failed).
 */
/* In the claim's transaction: claim, then decode each row in its own call. */
static void
claim_and_decode(void *arg)
{
	ClaimCall *c = arg;

	if (!remora_tx_guarded("claiming", 0, claim_call, c))
	{
		c->n = 0; /* rolled back with the call */
		return;
	}
	for (int i = 0; i < c->n; i++)
	{
		RemoraClaim *cl = &c->out[i];
		DecodeCall   d = {cl, c->spec[i]};

		/* a spec a submit cannot have made is refused, not run */
		if (!remora_tx_guarded("reading a claimed job's specification",
							   cl->job.job_id, decode_spec, &d))
		{
			cl->broken = last_error;
			continue;
		}
		if (cl->job.endpoint && cl->job.is_set &&
			cl->job.set.kind == REMORA_SET_S3 &&
			!remora_tx_guarded("reading a claimed job's endpoint",
							   cl->job.job_id, read_endpoint, cl))
		{
			cl->broken = last_error;
			continue;
		}
		if (cl->job.is_set || c->resume[i] == NULL)
			continue;
		d.doc = c->resume[i];
		if (!remora_tx_guarded("reading a claimed job's checkpoint",
							   cl->job.job_id, decode_resume, &d))
			cl->why_restart = "the checkpoint it was offered is malformed";
		if (cl->why_restart)
			ereport(LOG, (errmsg("remora job " INT64_FORMAT
								 " attempt %s starts from zero: %s",
								 cl->job.job_id, cl->job.attempt_id,
								 cl->why_restart)));
	}
}

/*
 * Claim up to room attempts for the incarnation, in one transaction, and
 * decode each (out[], palloc'd by the caller, filled in its context).  A
 * claimed attempt whose spec cannot be read has broken set (the reason);
 * one whose checkpoint cannot be used has why_restart set, and no resume.
 * Returns how many were claimed (0 also when the call failed).
 */
int
remora_protocol_claim(const pg_uuid_t *incarnation, int room, RemoraClaim *out)
{
	ClaimCall c = {incarnation, room, out};

	c.spec = palloc0(sizeof(Jsonb *) * room);
	c.resume = palloc0(sizeof(Jsonb *) * room);
	if (remora_tx_run("claiming", claim_and_decode, &c))
		return c.n;
	/* the claims were rolled back */
	for (int i = 0; i < c.n; i++)
		remora_resume_free(out[i].resume);
	return 0;
}

/* ------------------------------------------------------ attempt calls */

/*
 * One call of the protocol on an attempt: query takes $1 the attempt id,
 * $2 its fencing token and, as it needs them, $3 a document and $4 whether
 * the failure is retryable; the result columns it names ok,
 * cancel_requested or state are read.
 */
typedef struct AttemptCall
{
	const char *query;
	int         nargs;
	const char *attempt_id;
	int64       token;
	Jsonb      *doc;
	bool        retryable;
	bool        ok;
	bool        cancelled;
	char       *state;
} AttemptCall;

static void
attempt_call(void *arg)
{
	AttemptCall *c = arg;
	Oid          types[4] = {UUIDOID, INT8OID, JSONBOID, BOOLOID};
	Datum        values[4];

	values[0] = uuid_datum(c->attempt_id);
	values[1] = Int64GetDatum(c->token);
	values[2] = c->doc ? JsonbPGetDatum(c->doc) : (Datum) 0;
	values[3] = BoolGetDatum(c->retryable);
	sql(c->query, c->nargs, types, values, NULL);
	if (SPI_processed != 1)
		return;
	if (SPI_fnumber(SPI_tuptable->tupdesc, "ok") > 0)
		c->ok = col_bool(0, "ok");
	if (SPI_fnumber(SPI_tuptable->tupdesc, "cancel_requested") > 0)
		c->cancelled = col_bool(0, "cancel_requested");
	if (SPI_fnumber(SPI_tuptable->tupdesc, "state") > 0)
		c->state = keep_str(col_text(0, "state"));
}

/*
 * Renew the attempt's lease, in a transaction of its own: *ok when it still
 * holds its job, *cancelled when the job has a cancel request.  False when
 * the call failed (it can then not be told).
 */
bool
remora_protocol_renew(int64 job_id, const char *attempt_id, int64 token,
					  bool *ok, bool *cancelled)
{
	AttemptCall c = {"SELECT ok, cancel_requested FROM remora.renew($1, $2)", 2,
					 attempt_id, token};
	bool        called =
		remora_tx_call("renewing the lease", job_id, attempt_call, &c);

	*ok = called && c.ok;
	*cancelled = called && c.cancelled;
	return called;
}

/*
 * Record a checkpoint, in the transaction the caller opened (one for the
 * checkpoints of a round): *ok false when it was refused.  False when the
 * call failed; it is then rolled back alone.
 */
bool
remora_protocol_checkpoint(int64 job_id, const char *attempt_id, int64 token,
						   Jsonb *checkpoint, bool *ok)
{
	AttemptCall c = {"SELECT remora.checkpoint($1, $2, $3) AS ok", 3,
					 attempt_id, token, checkpoint};
	bool called = remora_tx_guarded("checkpointing", job_id, attempt_call, &c);

	*ok = called && c.ok;
	return called;
}

/*
 * Commit a result, in a transaction of its own: *ok false when it was
 * refused.  False when the call failed: try again with the same descriptor.
 */
bool
remora_protocol_commit(int64 job_id, const char *attempt_id, int64 token,
					   Jsonb *descriptor, bool *ok)
{
	AttemptCall c = {"SELECT remora.commit($1, $2, $3) AS ok", 3, attempt_id,
					 token, descriptor};
	bool        called =
		remora_tx_call("committing a result", job_id, attempt_call, &c);

	*ok = called && c.ok;
	return called;
}

/* Several commits, one call: ok[i] for item i (rows come back in order). */
typedef struct CommitManyCall
{
	int                n;
	const char *const *attempt_ids;
	const int64       *tokens;
	Jsonb *const      *docs;
	bool              *ok;
} CommitManyCall;

static void
commit_many_call(void *arg)
{
	CommitManyCall *c = arg;
	Oid             types[3] = {UUIDARRAYOID, INT8ARRAYOID, JSONBARRAYOID};
	Datum           values[3];
	Datum          *ids = palloc(sizeof(Datum) * c->n);
	Datum          *tokens = palloc(sizeof(Datum) * c->n);
	Datum          *docs = palloc(sizeof(Datum) * c->n);

	for (int i = 0; i < c->n; i++)
	{
		ids[i] = uuid_datum(c->attempt_ids[i]);
		tokens[i] = Int64GetDatum(c->tokens[i]);
		docs[i] = JsonbPGetDatum(c->docs[i]);
	}
	values[0] = PointerGetDatum(
		construct_array(ids, c->n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR));
	values[1] =
		PointerGetDatum(construct_array(tokens, c->n, INT8OID, sizeof(int64),
										FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(
		construct_array(docs, c->n, JSONBOID, -1, false, TYPALIGN_INT));
	sql("SELECT committed FROM remora.commit_many($1, $2, $3)", 3, types,
		values, NULL);
	for (uint64 r = 0; r < SPI_processed && r < (uint64) c->n; r++)
		c->ok[r] = col_bool(r, "committed");
}

/*
 * Commit several results in one call and one transaction
 * (remora.commit_many): ok[i] false when item i was refused.  False when
 * the call failed; nothing was committed then.
 */
bool
remora_protocol_commit_many(int n, const char *const *attempt_ids,
							const int64 *tokens, Jsonb *const *docs, bool *ok)
{
	CommitManyCall c = {n, attempt_ids, tokens, docs, ok};

	for (int i = 0; i < n; i++)
		ok[i] = false;
	return remora_tx_call("committing results", 0, commit_many_call, &c);
}

/*
 * Report a failed attempt (error: a remora_jobspec_error document).
 * Returns the job's resulting state (in the caller's context), or NULL if
 * the call failed: the caller tries again.
 */
char *
remora_protocol_fail(int64 job_id, const char *attempt_id, int64 token,
					 Jsonb *error, bool retryable)
{
	AttemptCall c = {"SELECT remora.fail($1, $2, $3, $4) AS state",
					 4,
					 attempt_id,
					 token,
					 error,
					 retryable};

	if (!remora_tx_call("reporting a failed attempt", job_id, attempt_call, &c))
		return NULL;
	return c.state ? c.state : pstrdup("unknown");
}

/* ------------------------------------------------------- member lookup */

typedef struct LookupCall
{
	int64              job_id;
	const char        *attempt_id;
	const char *const *paths;
	int                n;
	RemoraPrior       *out;
} LookupCall;

static void
lookup_call(void *arg)
{
	LookupCall *c = arg;
	Oid         types[3] = {INT8OID, UUIDOID, TEXTARRAYOID};
	Datum       values[3];
	Datum      *elems = palloc(sizeof(Datum) * c->n);

	for (int i = 0; i < c->n; i++)
		elems[i] = CStringGetTextDatum(c->paths[i]);
	values[0] = Int64GetDatum(c->job_id);
	values[1] = uuid_datum(c->attempt_id);
	values[2] = PointerGetDatum(
		construct_array(elems, c->n, TEXTOID, -1, false, TYPALIGN_INT));
	/* the newest attempt's copy of each path */
	sql("SELECT pos, key, etag, sha256, size, source "
		"FROM remora.earlier_members($1, $2, $3)",
		3, types, values, NULL);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool  isnull;
		Datum pos = col_value(r, "pos", &isnull);
		int   i = isnull ? -1 : DatumGetInt32(pos) - 1;

		if (i < 0 || i >= c->n)
			continue;
		remora_jobspec_prior(&c->out[i], col_text(r, "key"),
							 col_text(r, "etag"), col_text(r, "sha256"),
							 DatumGetInt64(col_value(r, "size", &isnull)),
							 col_jsonb(r, "source"));
	}
}

/*
 * Members an earlier attempt of the job completed, for a replacement to
 * reuse: out[i] for paths[i] (found false where none).  Its own short
 * transaction inside the error boundary: false (logged, and nothing found)
 * on an error, a value too long for the engine included; the members are
 * then transferred again.
 */
bool
remora_protocol_lookup_members(int64 job_id, const char *attempt_id,
							   const char *const *paths, int n,
							   RemoraPrior *out)
{
	LookupCall c = {job_id, attempt_id, paths, n, out};

	for (int i = 0; i < n; i++)
		out[i].found = false;
	if (n == 0)
		return true;
	if (remora_tx_call("looking up members of earlier attempts", job_id,
					   lookup_call, &c))
		return true;
	for (int i = 0; i < n; i++)
		out[i].found = false;
	return false;
}

/* ------------------------------------------------- an export's members */

typedef struct PageCall
{
	const char   *attempt_id;
	int64         token;
	RemoraLookup *lookup;
} PageCall;

static void
page_call(void *arg)
{
	PageCall     *c = arg;
	RemoraLookup *l = c->lookup;
	Oid           types[4] = {UUIDOID, INT8OID, TEXTOID, INT4OID};
	Datum         values[4];
	char          nulls[5] = "    ";
	char          err[256];

	values[0] = uuid_datum(c->attempt_id);
	values[1] = Int64GetDatum(c->token);
	if (l->after)
		values[2] = CStringGetTextDatum(l->after);
	else
	{
		values[2] = (Datum) 0;
		nulls[2] = 'n';
	}
	values[3] = Int32GetDatum(l->max);
	sql("SELECT path, bucket, key, size, sha256, etag, ref_etag, "
		"may_overwrite FROM remora.export_members($1, $2, $3, $4)",
		4, types, values, nulls);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool  isnull;
		bool  overwrite_null;
		Datum size = col_value(r, "size", &isnull);
		Datum overwrite = col_value(r, "may_overwrite", &overwrite_null);
		RemoraExportMember m = {col_text(r, "path"),
								col_text(r, "bucket"),
								col_text(r, "key"),
								col_text(r, "etag"),
								col_text(r, "sha256"),
								isnull ? -1 : DatumGetInt64(size),
								col_text(r, "ref_etag"),
								!overwrite_null && DatumGetBool(overwrite)};

		if (!remora_lookup_add_member(l, &m, err, sizeof(err)))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid export member"), errdetail("%s.", err)));
	}
}

/*
 * The next page of an export's members (remora.export_members), added to
 * the lookup one by one.  Its own short transaction inside the error
 * boundary: false (logged) on an error, a member the engine refuses
 * included; the export then fails, retryably.  A page with fewer members
 * than asked (the attempt lost its authority) is the engine's to judge.
 */
bool
remora_protocol_export_members(int64 job_id, const char *attempt_id,
							   int64 token, RemoraLookup *lookup)
{
	PageCall c = {attempt_id, token, lookup};

	return remora_tx_call("reading an export's members", job_id, page_call, &c);
}

/* --------------------------------------------------------------- cleanup */

typedef struct CleanupCall
{
	char  *attempt_id; /* REMORA_UUID_TEXT_LEN bytes */
	int64 *job_id;
	char **bucket;
	char **prefix;
	bool   found;
} CleanupCall;

static void
next_cleanup_call(void *arg)
{
	CleanupCall *c = arg;
	Oid          types[1] = {INT4OID};
	Datum        values[1] = {Int32GetDatum(1)};
	char        *att;
	bool         isnull;
	Datum        job;

	sql("SELECT attempt_id, job_id, bucket, prefix FROM "
		"remora.staging_to_clean($1)",
		1, types, values, NULL);
	if (SPI_processed == 0 || col_text(0, "bucket") == NULL ||
		col_text(0, "prefix") == NULL)
		return;
	job = col_value(0, "job_id", &isnull);
	if (isnull)
		return;
	att = col_text(0, "attempt_id");
	snprintf(c->attempt_id, REMORA_UUID_TEXT_LEN, "%s", att ? att : "");
	*c->job_id = DatumGetInt64(job);
	*c->bucket = keep_str(col_text(0, "bucket"));
	*c->prefix = keep_str(col_text(0, "prefix"));
	c->found = true;
}

/*
 * The next objects to delete: the staging of an attempt that can no longer
 * commit (attempt_id set), or a hard-deleted job's objects (attempt_id "").
 * False when there is none, or the call failed.
 */
bool
remora_protocol_next_cleanup(char *attempt_id, int64 *job_id, char **bucket,
							 char **prefix)
{
	CleanupCall c = {attempt_id, job_id, bucket, prefix, false};

	attempt_id[0] = '\0';
	return remora_tx_call("looking for objects to delete", 0, next_cleanup_call,
						  &c) &&
		   c.found;
}

/* Record a cleanup's end; if this fails, it is simply found and done again. */
void
remora_protocol_cleanup_done(const char *attempt_id, int64 job_id, bool ok)
{
	Oid   types[2] = {attempt_id[0] ? UUIDOID : INT8OID, BOOLOID};
	Datum values[2] = {attempt_id[0] ? uuid_datum(attempt_id)
									 : Int64GetDatum(job_id),
					   BoolGetDatum(ok)};
	PlainCall c = {attempt_id[0] ? "SELECT remora.staging_cleaned($1, $2)"
								 : "SELECT remora.job_objects_deleted($1, $2)",
				   2, types, values};

	(void) remora_tx_call("recording a cleanup", job_id, plain_call, &c);
}

/* ------------------------------------------------------ launcher calls */

static void
version_call(void *arg)
{
	char **version = arg;

	sql("SELECT extversion FROM pg_catalog.pg_extension "
		"WHERE extname" OP_EQ "'remora'",
		0, NULL, NULL, NULL);
	if (SPI_processed > 0)
		*version = keep_str(col_text(0, "extversion"));
}

/* The installed version of the extension, or NULL (none, or the call failed).
 */
char *
remora_protocol_extension_version(void)
{
	char *version = NULL;

	if (!remora_tx_call("checking the extension", 0, version_call, &version))
		return NULL;
	return version;
}

typedef struct RoleCall
{
	const char *role;
	const char *why;
} RoleCall;

static void
role_call(void *arg)
{
	RoleCall *c = arg;
	Oid       types[1] = {TEXTOID};
	Datum     values[1] = {CStringGetTextDatum(c->role)};

	sql("SELECT r.rolcanlogin AS login, pg_catalog.pg_has_role(r.oid, "
		"'remora_worker', 'MEMBER') AS member, r.rolsuper AS super "
		"FROM pg_catalog.pg_roles r WHERE r.rolname" OP_EQ "$1",
		1, types, values, NULL);
	if (SPI_processed != 1)
		c->why = "The role does not exist.";
	else if (!col_bool(0, "login"))
		c->why = "The role has no LOGIN attribute.";
	else if (!col_bool(0, "member"))
		c->why = "The role is not a member of remora_worker.";
	else if (col_bool(0, "super"))
		c->why = "The role is a superuser.";
}

/*
 * Can the workers run as role?  *why (a sentence) when they cannot.  False
 * when the call failed and it cannot be told.
 */
bool
remora_protocol_check_role(const char *role, const char **why)
{
	RoleCall c = {role, NULL};

	*why = NULL;
	if (!remora_tx_call("checking remora.worker_role", 0, role_call, &c))
		return false;
	*why = c.why;
	return true;
}

/* Every worker incarnation of the previous server lifetime has ended. */
void
remora_protocol_end_previous_lifetime(void)
{
	PlainCall c = {"SELECT remora.end_previous_lifetime()", 0, NULL, NULL};

	(void) remora_tx_call("recording workers of the previous server lifetime",
						  0, plain_call, &c);
}

/* remora.reconcile(): false when the call failed. */
bool
remora_protocol_reconcile(int64 *repairs)
{
	CountCall c = {{"SELECT remora.reconcile() AS n", 0, NULL, NULL}, 0};
	bool      ok = remora_tx_call("reconciling", 0, count_call, &c);

	*repairs = c.n;
	return ok;
}

/* remora.prune(limit): false when the call failed. */
bool
remora_protocol_prune(int limit, int64 *pruned)
{
	Oid       types[1] = {INT4OID};
	Datum     values[1] = {Int32GetDatum(limit)};
	CountCall c = {{"SELECT remora.prune($1) AS n", 1, types, values}, 0};
	bool      ok = remora_tx_call("pruning old history", 0, count_call, &c);

	*pruned = c.n;
	return ok;
}
