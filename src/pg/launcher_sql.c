/*-------------------------------------------------------------------------
 *
 * launcher_sql.c
 *	  The launcher's statements: the extension's version, whether
 *	  remora.worker_role can run the workers, the end of the previous
 *	  lifetime's incarnations, remora.reconcile and remora.prune.
 *
 * Each is a call in a transaction of its own (xact.c).  Every operator
 * and function is named with its schema (the session's search_path is
 * pinned too); results are read by column name.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

#include "pg/launcher_sql.h"
#include "pg/xact.h"

#define OP_EQ " OPERATOR(pg_catalog.=) "

/* ---------------------------------------------------------------- helpers */

/* A copy in the caller's context of a value read inside the transaction. */
static char *
keep_str(const char *s)
{
	return s ? MemoryContextStrdup(remora_tx_caller_cxt, s) : NULL;
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

/* A worker that exited without recording its end: record it. */
void
remora_protocol_end_incarnation(const pg_uuid_t *incarnation)
{
	Oid       types[1] = {UUIDOID};
	Datum     values[1] = {UUIDPGetDatum(incarnation)};
	PlainCall c = {"SELECT remora.end_incarnation($1)", 1, types, values};

	(void) remora_tx_call("recording the end of a worker", 0, plain_call, &c);
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
