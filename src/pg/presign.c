/*-------------------------------------------------------------------------
 *
 * presign.c
 *	  remora_presign(job, path, ttl): a time-limited URL for one committed
 *	  member.
 *
 * The function runs as the caller: row-level security decides whether the
 * job exists for them, and only members of the committed manifest can be
 * presigned.  The URL is signed with the target credentials (which the
 * caller never sees) using SigV4 query authentication; it is returned, not
 * stored or logged.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include <time.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "engine/engine.h"
#include "pg/guc.h"

PG_FUNCTION_INFO_V1(remora_presign);

/* An interval as seconds, months counting 30 days as PostgreSQL does. */
static double
interval_seconds(const Interval *iv)
{
	return iv->time / (double) USECS_PER_SEC + (double) iv->day * SECS_PER_DAY +
		   (double) iv->month * DAYS_PER_MONTH * SECS_PER_DAY;
}

Datum
remora_presign(PG_FUNCTION_ARGS)
{
	int64              job;
	char              *path;
	double             ttl;
	Oid                types[2] = {INT8OID, TEXTOID};
	Datum              values[2];
	char              *bucket = NULL;
	char              *key = NULL;
	bool               exists;
	bool               planned = false;
	RemoraTargetConfig target;
	char               err[256];
	char              *url;
	text              *result;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", PG_ARGISNULL(0)   ? "job"
											   : PG_ARGISNULL(1) ? "path"
																 : "ttl")));
	job = PG_GETARG_INT64(0);
	path = text_to_cstring(PG_GETARG_TEXT_PP(1));
	ttl = interval_seconds(PG_GETARG_INTERVAL_P(2));
	if (ttl < 1)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("invalid ttl"),
						errdetail("The ttl must be at least one second.")));
	if (ttl > remora_presign_max_ttl_s)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("invalid ttl"),
						errdetail("The ttl must be at most %d seconds.",
								  remora_presign_max_ttl_s),
						errhint("An administrator sets the limit with "
								"remora.presign_max_ttl.")));

	values[0] = Int64GetDatum(job);
	values[1] = CStringGetTextDatum(path);
	SPI_connect();
	SPI_execute_with_args("SELECT 1 FROM remora.jobs WHERE job_id = $1", 1,
						  types, values, NULL, true, 1);
	exists = SPI_processed > 0;
	if (exists)
	{
		SPI_execute_with_args(
			"SELECT m.bucket, m.key FROM remora.jobs j "
			"JOIN remora.results r ON r.job_id = j.job_id "
			"JOIN remora.members m ON m.attempt_id = r.attempt_id "
			"WHERE j.job_id = $1 AND m.path = $2 "
			"AND j.hard_delete_requested_at IS NULL",
			2, types, values, NULL, true, 1);
		if (SPI_processed > 0)
		{
			bucket =
				SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
			key = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
			bucket = MemoryContextStrdup(CurTransactionContext, bucket);
			/* a dry run's member: a plan, with no object */
			planned = key == NULL;
			if (key)
				key = MemoryContextStrdup(CurTransactionContext, key);
		}
	}
	SPI_finish();
	if (!exists)
		ereport(ERROR, (errcode(ERRCODE_NO_DATA_FOUND),
						errmsg("job " INT64_FORMAT " does not exist", job)));
	if (planned)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("job " INT64_FORMAT " was a dry run", job),
				 errdetail("Its member \"%s\" is a plan: no object was "
						   "written for it.",
						   path),
				 errhint("Submit the job again without options.dry_run.")));
	if (key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("job " INT64_FORMAT " has no committed member \"%s\"",
						job, path),
				 errhint("remora_result(job) lists the members of a committed "
						 "result.")));

	/*
	 * An SSE-C object is read only with its key's headers, which a URL
	 * cannot carry: a presigned GET would hand out a URL that fails.
	 */
	if (remora_s3_sse && strcmp(remora_s3_sse, "customer") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("remora_presign cannot sign a URL for an object "
						"encrypted with a customer key"),
				 errdetail("remora.s3_sse is 'customer' (SSE-C): the object "
						   "is read only with its key's headers, which a "
						   "URL cannot carry."),
				 errhint("Read the object with the key, or export it to a "
						 "store without SSE-C.")));
	remora_target_config(&target);
	url = remora_s3_presign_get(&target, bucket, key, time(NULL), (int) ttl,
								err, sizeof(err));
	if (url == NULL)
		ereport(
			ERROR,
			(errcode(ERRCODE_CONFIG_FILE_ERROR),
			 errmsg("could not presign a URL for job " INT64_FORMAT, job),
			 errdetail("%s", err),
			 errhint("Check remora.s3_endpoint and the target credentials.")));
	result = cstring_to_text(url);
	free(url);
	PG_RETURN_TEXT_P(result);
}
