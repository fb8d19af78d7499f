/*-------------------------------------------------------------------------
 *
 * export_call.c
 *	  The user entry points remora_export and remora_export_resolve.
 *
 * Like remora_submit (submit.c), these are SECURITY INVOKER C functions:
 * they check what only C checks well (the bucket name, the prefix, the
 * idempotency key), then call the SECURITY DEFINER functions
 * remora._export and remora._export_resolve with the caller's role, so
 * that the role cannot be forged.  The options, the job, the target grant
 * and the idempotency key's request are judged there
 * (sql/functions/60_export.sql).
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "engine/common/source_uri.h"
#include "pg/guc.h"
#include "pg/shmem.h"
#include "pg/submit.h"

PG_FUNCTION_INFO_V1(remora_export);
PG_FUNCTION_INFO_V1(remora_export_resolve);

#define MAX_IDEM_KEY_LEN 256

static void
invalid(const char *field, const char *detail)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("invalid %s", field), errdetail("%s", detail)));
}

/* The engine's error phrase as an errdetail sentence. */
static char *
sentence(const char *s)
{
	char *r = psprintf("%s.", s);

	r[0] = (char) toupper((unsigned char) r[0]);
	return r;
}

static void
not_null(FunctionCallInfo fcinfo, int arg, const char *name)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("%s must not be null", name)));
}

/*
 * The options with a string notify_url replaced by its canonical form,
 * once judged like a source (remora_notify_url); any other value is left
 * for remora._export to refuse.
 */
static Jsonb *
with_notify_url(Jsonb *options)
{
	JsonbValue      *v;
	JsonbParseState *state = NULL;
	JsonbValue       key;
	JsonbValue       url;

	if (!JB_ROOT_IS_OBJECT(options) || JB_ROOT_IS_SCALAR(options))
		return options;
	v = getKeyJsonValueFromContainer(&options->root, "notify_url",
									 strlen("notify_url"), NULL);
	if (v == NULL || v->type != jbvString)
		return options;
	url.type = jbvString;
	url.val.string.val =
		remora_notify_url(pnstrdup(v->val.string.val, v->val.string.len));
	url.val.string.len = strlen(url.val.string.val);
	key.type = jbvString;
	key.val.string.val = "notify_url";
	key.val.string.len = strlen("notify_url");
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pushJsonbValue(&state, WJB_KEY, &key);
	pushJsonbValue(&state, WJB_VALUE, &url);
	return DatumGetJsonbP(DirectFunctionCall2(
		jsonb_concat, JsonbPGetDatum(options),
		JsonbPGetDatum(
			JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL)))));
}

/*
 * remora_export(job, bucket, prefix, options, idempotency_key) -> export id
 */
Datum
remora_export(PG_FUNCTION_ARGS)
{
	Oid   argtypes[6] = {OIDOID, INT8OID, TEXTOID, TEXTOID, JSONBOID, TEXTOID};
	Datum args[6];
	bool  nulls[6] = {false, false, false, false, false, false};
	bool  resnull;
	const char *bucket;
	char       *norm;
	char       *idem;
	char        err[256];
	Datum       id;

	not_null(fcinfo, 0, "job");
	bucket = PG_ARGISNULL(1) ? remora_default_bucket
							 : text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (bucket == NULL || bucket[0] == '\0')
		invalid("bucket", "No target bucket was given and "
						  "remora.default_bucket is not set.");
	if (!remora_bucket_name_valid(bucket, err, sizeof(err)))
		invalid("bucket", sentence(err));
	if (PG_ARGISNULL(2))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("prefix must not be null"),
						errhint("An export needs a target prefix, such as "
								"'exports/today'.")));
	norm = remora_prefix_normalize(text_to_cstring(PG_GETARG_TEXT_PP(2)), err,
								   sizeof(err));
	if (norm == NULL)
		invalid("prefix", sentence(err));
	else if (norm[0] == '\0')
	{
		/* a form's empty field must not become the bucket's root */
		free(norm);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid prefix"),
				 errdetail("An export writes under a prefix: the bucket's "
						   "root ('' or '/') is refused."),
				 errhint("Give a prefix, such as 'exports/today'.")));
	}
	idem = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));
	if (idem != NULL)
	{
		bool bad = idem[0] == '\0' || strlen(idem) > MAX_IDEM_KEY_LEN;

		for (const char *c = idem; *c && !bad; c++)
			bad = (unsigned char) *c < 0x20 || *c == 0x7f;
		if (bad)
		{
			free(norm);
			invalid("idempotency_key",
					psprintf("An idempotency key is 1 to %d bytes without "
							 "control characters.",
							 MAX_IDEM_KEY_LEN));
		}
	}

	args[0] = ObjectIdGetDatum(GetUserId());
	args[1] = PG_GETARG_DATUM(0);
	args[2] = CStringGetTextDatum(bucket);
	args[3] = CStringGetTextDatum(norm);
	free(norm);
	args[4] = PG_ARGISNULL(3)
				  ? (Datum) 0
				  : JsonbPGetDatum(with_notify_url(PG_GETARG_JSONB_P(3)));
	nulls[4] = PG_ARGISNULL(3);
	args[5] = idem ? CStringGetTextDatum(idem) : (Datum) 0;
	nulls[5] = idem == NULL;
	id = remora_call_internal("_export", 6, argtypes, args, nulls, &resnull);
	if (resnull)
		elog(ERROR, "remora._export returned null");
	remora_note_submit(); /* workers hear of it at commit */
	PG_RETURN_DATUM(id);
}

/*
 * remora_export_resolve(export, action) -> the export's state
 */
Datum
remora_export_resolve(PG_FUNCTION_ARGS)
{
	Oid   argtypes[3] = {OIDOID, INT8OID, TEXTOID};
	Datum args[3];
	bool  nulls[3] = {false, false, false};
	bool  resnull;
	Datum state;

	not_null(fcinfo, 0, "export");
	not_null(fcinfo, 1, "action");
	args[0] = ObjectIdGetDatum(GetUserId());
	args[1] = PG_GETARG_DATUM(0);
	args[2] = PG_GETARG_DATUM(1);
	state = remora_call_internal("_export_resolve", 3, argtypes, args, nulls,
								 &resnull);
	remora_note_submit(); /* a verify or retry was queued */
	if (resnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(state);
}
