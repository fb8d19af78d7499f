/*-------------------------------------------------------------------------
 *
 * submit.c
 *	  The user entry points remora_submit, remora_cancel, remora_delete and
 *	  remora_retry.
 *
 * These are SECURITY INVOKER C functions.  They validate everything the
 * caller passed, then call the matching SECURITY DEFINER function in schema
 * remora directly through fmgr, passing the caller's role.  Users hold no
 * EXECUTE right on those internal functions, so the role they act for
 * cannot be forged, and the caller is the current user at the point of the
 * call (also inside another role's SECURITY DEFINER function).
 *
 * remora_submit writes nothing until every field is valid.  Each bad field
 * is reported with SQLSTATE 22023 and a message naming the field; the
 * source itself is never echoed, since a URL may carry credentials.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "engine/common/netpolicy.h"
#include "engine/common/source_uri.h"
#include "pg/guc.h"
#include "pg/jobdef.h"
#include "pg/shmem.h"
#include "pg/submit.h"

PG_FUNCTION_INFO_V1(remora_submit);
PG_FUNCTION_INFO_V1(remora_cancel);
PG_FUNCTION_INFO_V1(remora_delete);
PG_FUNCTION_INFO_V1(remora_retry);
PG_FUNCTION_INFO_V1(remora_webhook_secret);
PG_FUNCTION_INFO_V1(remora_rotate_webhook_secret);

#define MAX_PATTERNS       256
#define MAX_PATTERN_LEN    1024
#define MAX_LABEL_LEN      256
#define MAX_IDEM_KEY_LEN   256
#define MAX_PRIORITY       1000
#define MAX_NOTIFY_URL_LEN 2048

static Datum webhook_secret(bool rotate);

static const char *const option_names =
	"max_attempts, priority, include, exclude, endpoint, expected_sha256, "
	"label, connections, max_bytes_per_second, notify_url, storage_class, "
	"reuse_from, dry_run";

static void
bad_option(const char *key, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid option \"%.64s\"", key), errdetail("%s", detail)));
}

static bool
has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char) *s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

static char *
option_string(const char *key, JsonbValue *v)
{
	if (v->type != jbvString)
		bad_option(key, "The value must be a string.");
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static int
option_int(const char *key, JsonbValue *v, int min, int max)
{
	char *txt;
	char *p;
	long  val;

	if (v->type != jbvNumeric)
		bad_option(key, "The value must be an integer.");
	txt = DatumGetCString(
		DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	p = txt + (txt[0] == '-');
	if (*p == '\0' || strspn(p, "0123456789") != strlen(p) || strlen(p) > 9)
		bad_option(key,
				   psprintf("The value must be an integer between %d and %d.",
							min, max));
	val = strtol(txt, NULL, 10);
	if (val < min || val > max)
		bad_option(key,
				   psprintf("The value must be an integer between %d and %d.",
							min, max));
	return (int) val;
}

/* A positive bigint (a byte rate): 1 to PG_INT64_MAX. */
static int64
option_positive_int64(const char *key, JsonbValue *v, const char *range)
{
	char *txt;
	int64 val;

	if (v->type != jbvNumeric)
		bad_option(key, range);
	txt = DatumGetCString(
		DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	/* digits only, 19 at most; a sign, a fraction or an exponent is refused */
	if (*txt == '\0' || strspn(txt, "0123456789") != strlen(txt) ||
		strlen(txt) > 19)
		bad_option(key, range);
	errno = 0;
	val = strtoll(txt, NULL, 10);
	if (errno == ERANGE || val < 1)
		bad_option(key, range);
	return val;
}

/*
 * A byte-rate cap below remora.min_bytes_per_second would let a job hold
 * a worker for ever (doc/operator-guide.md, "Time slices"): refused, naming
 * the setting.
 */
static void
below_min_rate(const char *key, int64 rate)
{
	if (rate < remora_min_bytes_per_second)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid option \"%s\"", key),
				 errdetail("The cap %lld is below remora.min_bytes_per_second "
						   "(%d).",
						   (long long) rate, remora_min_bytes_per_second),
				 errhint("Cap the job at remora.min_bytes_per_second or more, "
						 "or ask an administrator to lower it.")));
}

/* A glob list: a JSON array of non-empty strings. */
static char **
option_patterns(const char *key, JsonbValue *v, int *n)
{
	JsonbIterator     *it;
	JsonbValue         elem;
	JsonbIteratorToken tok;
	char             **out;

	if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		bad_option(key, "The value must be an array of glob patterns.");
	out = palloc0(sizeof(char *) * (JsonContainerSize(v->val.binary.data) + 1));
	*n = 0;
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &elem, true)) != WJB_DONE)
	{
		char *pat;

		if (tok != WJB_ELEM)
			continue;
		if (elem.type != jbvString)
			bad_option(key, "Every pattern must be a string.");
		pat = pnstrdup(elem.val.string.val, elem.val.string.len);
		if (pat[0] == '\0' || strlen(pat) > MAX_PATTERN_LEN || has_control(pat))
			bad_option(key, psprintf("A pattern must be 1 to %d bytes without "
									 "control characters.",
									 MAX_PATTERN_LEN));
		if (*n >= MAX_PATTERNS)
			bad_option(key, psprintf("At most %d patterns are allowed.",
									 MAX_PATTERNS));
		out[(*n)++] = pat;
	}
	return out;
}

static void
parse_options(Jsonb *jb, RemoraSourceKind kind, RemoraJobOptions *o)
{
	JsonbIterator     *it;
	JsonbValue         v;
	JsonbIteratorToken tok;
	bool               set_kind =
		(kind == REMORA_SOURCE_S3_PREFIX || kind == REMORA_SOURCE_HF);
	bool single =
		(kind == REMORA_SOURCE_HTTP || kind == REMORA_SOURCE_S3_OBJECT);

	memset(o, 0, sizeof(*o));
	if (jb == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("invalid options"),
						errdetail("options must be a JSON object, such as "
								  "'{\"priority\": 5}'.")));

	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char *key;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(v.val.string.val, v.val.string.len);
		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_VALUE);

		if (strcmp(key, "connections") == 0)
		{
			o->has_connections = true;
			o->connections = option_int(key, &v, 1, 64);
		}
		else if (strcmp(key, "max_bytes_per_second") == 0)
		{
			o->has_max_bytes_per_second = true;
			o->max_bytes_per_second = option_positive_int64(
				key, &v,
				"The value must be a whole number of bytes per second from 1 "
				"to 9223372036854775807.");
			below_min_rate(key, o->max_bytes_per_second);
		}
		else if (strcmp(key, "max_attempts") == 0)
		{
			o->has_max_attempts = true;
			o->max_attempts = option_int(key, &v, 1, 100);
		}
		else if (strcmp(key, "priority") == 0)
		{
			o->has_priority = true;
			o->priority = option_int(key, &v, -MAX_PRIORITY, MAX_PRIORITY);
		}
		else if (strcmp(key, "include") == 0 || strcmp(key, "exclude") == 0)
		{
			int    n;
			char **pats = option_patterns(key, &v, &n);

			if (!set_kind)
				bad_option(key, "include and exclude apply only to s3:// "
								"prefix sources and hf:// sources.");
			if (key[0] == 'i')
			{
				o->has_include = true;
				o->include = pats;
				o->ninclude = n;
			}
			else
			{
				o->has_exclude = true;
				o->exclude = pats;
				o->nexclude = n;
			}
		}
		else if (strcmp(key, "endpoint") == 0)
		{
			char *e = option_string(key, &v);

			if (kind != REMORA_SOURCE_S3_OBJECT &&
				kind != REMORA_SOURCE_S3_PREFIX)
				bad_option(key, "endpoint applies only to s3:// sources.");
			if (strlen(e) < 1 || strlen(e) > 63 ||
				!islower((unsigned char) e[0]) ||
				strspn(e, "abcdefghijklmnopqrstuvwxyz0123456789_-") !=
					strlen(e))
				bad_option(key,
						   "An endpoint name is 1 to 63 lower-case letters, "
						   "digits, '_' or '-', beginning with a letter.");
			o->endpoint = e;
		}
		else if (strcmp(key, "expected_sha256") == 0)
		{
			char *h = option_string(key, &v);

			if (!single)
				bad_option(
					key,
					"expected_sha256 applies only to single-object sources.");
			if (strlen(h) != 64 || strspn(h, "0123456789abcdefABCDEF") != 64)
				bad_option(key, "The value must be 64 hexadecimal digits.");
			for (char *p = h; *p; p++)
				*p = tolower((unsigned char) *p);
			o->expected_sha256 = h;
		}
		else if (strcmp(key, "label") == 0)
		{
			char *l = option_string(key, &v);

			if (strlen(l) > MAX_LABEL_LEN || has_control(l))
				bad_option(key, psprintf("A label is at most %d bytes without "
										 "control characters.",
										 MAX_LABEL_LEN));
			o->label = l;
		}
		else if (strcmp(key, "notify_url") == 0)
			o->notify_url = remora_notify_url(option_string(key, &v));
		else if (strcmp(key, "reuse_from") == 0)
		{
			const char *what = "reuse_from is the id of an earlier job, or "
							   "\"latest\" (the newest job of yours that "
							   "succeeded with the same source and bucket).";

			if (v.type == jbvString)
			{
				if (strcmp(option_string(key, &v), "latest") != 0)
					bad_option(key, what);
				o->reuse_latest = true;
			}
			else
				o->reuse_from = option_positive_int64(key, &v, what);
		}
		else if (strcmp(key, "dry_run") == 0)
		{
			if (v.type != jbvBool)
				bad_option(key, "dry_run is true or false.");
			o->dry_run = v.val.boolean;
		}
		else if (strcmp(key, "storage_class") == 0)
		{
			char *c = option_string(key, &v);

			if (!remora_storage_class_valid(c))
				bad_option(key,
						   "A storage class is one S3 names: STANDARD, "
						   "REDUCED_REDUNDANCY, STANDARD_IA, ONEZONE_IA, "
						   "INTELLIGENT_TIERING, GLACIER, DEEP_ARCHIVE, "
						   "OUTPOSTS, GLACIER_IR, SNOW or EXPRESS_ONEZONE.");
			o->storage_class = c;
		}
		else
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("unknown option \"%.64s\"", key),
							errhint("Valid options are: %s.", option_names)));
	}
}

/* The internal function is missing: say whether the schema is absent or old. */
static void
missing_internal(void)
{
	char *version = NULL;

	SPI_connect();
	if (SPI_execute("SELECT extversion FROM pg_catalog.pg_extension WHERE "
					"extname = 'remora'",
					true, 1) >= 0 &&
		SPI_processed > 0)
		version = MemoryContextStrdup(
			CurTransactionContext,
			SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	if (version && strcmp(version, REMORA_VERSION) != 0)
		ereport(
			ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg(
				 "remora's SQL objects are at version %s, the library is at %s",
				 version, REMORA_VERSION),
			 errhint("Run ALTER EXTENSION remora UPDATE.")));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_FUNCTION),
			 errmsg("extension \"remora\" is not installed in this database"),
			 errhint("Run CREATE EXTENSION remora.")));
}

/*
 * Call remora.<name>(caller, args...) as its owner.  The function is looked
 * up on every call: the extension may have been dropped and created again.
 */
static Datum
call_internal(const char *name, int nargs, const Oid *argtypes,
			  const Datum *args, const bool *nulls, bool *resnull)
{
	String  *schema = makeString("remora");
	String  *fn = makeString(pstrdup(name));
	List    *fname = lappend(list_make1(schema), fn);
	Oid      fnoid = LookupFuncName(fname, nargs, argtypes, true);
	FmgrInfo flinfo;
	Datum    result;

	/* cppcheck-suppress unusedStructMember */
	LOCAL_FCINFO(fcinfo, 6);

	if (!OidIsValid(fnoid))
		missing_internal();
	Assert(nargs <= 6);
	fmgr_info(fnoid, &flinfo);
	InitFunctionCallInfoData(*fcinfo, &flinfo, nargs, InvalidOid, NULL, NULL);
	for (int i = 0; i < nargs; i++)
	{
		fcinfo->args[i].value = args[i];
		fcinfo->args[i].isnull = nulls[i];
	}
	result = FunctionCallInvoke(fcinfo);
	*resnull = fcinfo->isnull;
	return result;
}

/* The same, for the other user entry points (export_call.c). */
Datum
remora_call_internal(const char *name, int nargs, const Oid *argtypes,
					 const Datum *args, const bool *nulls, bool *resnull)
{
	return call_internal(name, nargs, argtypes, args, nulls, resnull);
}

static void
invalid_field(const char *field, const char *detail, const char *hint)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("invalid %s", field), errdetail("%s", detail),
					hint ? errhint("%s", hint) : 0));
}

/* The engine's error phrase as an errdetail sentence. */
static char *
sentence(const char *s)
{
	char *r = psprintf("%s.", s);

	r[0] = toupper((unsigned char) r[0]);
	return r;
}

/*
 * Is the source's host and port one of Remora's own (remora._blocked_origins:
 * the target store, a registered endpoint, a listener), which no source may
 * be, whatever remora.allow_networks says (doc/security.md)?  A palloc'd
 * reason, or NULL.  As written here; the worker judges the address it
 * reaches too.  Between a restart with this library and ALTER EXTENSION
 * UPDATE the schema of 0.5.0 has no such function: submits are still taken
 * then, judged as 0.5.0 judged them ("Upgrading without downtime").
 */
static char *
own_origin(const RemoraSourceUri *uri)
{
	List *fname = lappend(list_make1(makeString("remora")),
						  makeString("_blocked_origins"));
	bool  isnull;
	Datum list;
	char *origin;
	char *bracketed;
	char *all;

	if (!OidIsValid(LookupFuncName(fname, 0, NULL, true)))
		return NULL;
	list = call_internal("_blocked_origins", 0, NULL, NULL, NULL, &isnull);
	if (isnull)
		return NULL;
	all = psprintf(",%s,", TextDatumGetCString(list));
	origin = psprintf(",%s:%d,", asc_tolower(uri->host, strlen(uri->host)),
					  uri->port);
	bracketed = psprintf(",[%s]:%d,", asc_tolower(uri->host, strlen(uri->host)),
						 uri->port);
	if (strstr(all, origin) == NULL && strstr(all, bracketed) == NULL)
		return NULL;
	return psprintf("%s:%d is Remora's own target store, a registered source "
					"endpoint or one of Remora's listeners, which no source "
					"or webhook may reach.",
					uri->host, uri->port);
}

/*
 * Does the outbound-source policy refuse this source already, by its port
 * or its address literal (numeric spellings are normalised by the URL
 * parser)?  A palloc'd reason, or NULL.  Names are judged when the worker
 * connects, on the address actually reached.
 */
static char *
policy_denial(const RemoraSourceUri *uri)
{
	char             err[REMORA_ERRBUF_LEN];
	char             why[REMORA_ERRBUF_LEN];
	RemoraNetPolicy *policy;
	char            *reason = NULL;

	if ((reason = own_origin(uri)) != NULL)
		return reason;
	policy = remora_netpolicy_new(remora_allow_networks, remora_deny_networks,
								  remora_allow_ports, err, sizeof(err));
	if (policy == NULL)
		return psprintf("The outbound-source policy cannot be read: %s.", err);
	if (!remora_netpolicy_port_allowed(policy, uri->port))
		reason = psprintf("Port %d is not in remora.allow_ports.", uri->port);
	else if (!remora_netpolicy_allows_text(policy, uri->host, why, sizeof(why)))
		reason = psprintf("The address %s is denied: %s.", uri->host, why);
	remora_netpolicy_free(policy);
	return reason;
}

/*
 * A job's options.notify_url (submit and export), judged as an http(s)
 * source is: parsed by the engine's URL parser, its port and address
 * literal by the outbound-source policy (ERROR 22023 for a bad URL,
 * RM001 for one the policy refuses).  A host name is judged again when the
 * worker connects, on the address it reaches.  Returns the canonical URL,
 * palloc'd.
 */
char *
remora_notify_url(const char *url)
{
	char            err[REMORA_ERRBUF_LEN];
	RemoraSourceUri uri;
	char *volatile canonical = NULL; /* set in PG_TRY */
	char *volatile denied = NULL;

	if (strlen(url) > MAX_NOTIFY_URL_LEN || has_control(url))
		bad_option("notify_url",
				   psprintf("A notify_url is at most %d bytes without control "
							"characters.",
							MAX_NOTIFY_URL_LEN));
	if (pg_strncasecmp(url, "http://", 7) != 0 &&
		pg_strncasecmp(url, "https://", 8) != 0)
		bad_option("notify_url", "A notify_url is an http:// or https:// URL.");
	if (!remora_http_url_parse(url, &uri, err, sizeof(err)))
		bad_option("notify_url", sentence(err));
	PG_TRY();
	{
		canonical = pstrdup(uri.canonical);
		denied = policy_denial(&uri);
	}
	PG_FINALLY();
	{
		remora_source_uri_free(&uri);
	}
	PG_END_TRY();
	if (denied)
		ereport(
			ERROR,
			(errcode(ERRCODE_REMORA_POLICY_DENIED),
			 errmsg("the outbound-source policy does not allow this "
					"notify_url"),
			 errdetail("%s", denied),
			 errhint("An administrator can allow other addresses with "
					 "remora.allow_networks or remora.allow_ports; Remora's "
					 "own store, endpoints and listeners never.")));
	/* a webhook owed must have a secret to be signed with */
	(void) webhook_secret(false);
	return canonical;
}

/*
 * remora_submit(source, bucket, prefix, options, idempotency_key) -> job id
 */
Datum
remora_submit(PG_FUNCTION_ARGS)
{
	Oid             caller = GetUserId();
	char            err[REMORA_ERRBUF_LEN];
	RemoraSourceUri uri;
	char           *bucket_arg =
        PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	char *prefix_arg =
		PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	Jsonb *options = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	char *idem = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));
	const char      *bucket;
	char            *prefix = NULL;
	RemoraSourceKind kind;
	char            *source_url = NULL;
	char            *denied = NULL;
	RemoraJobOptions opts;
	RemoraJobOptions req_opts;
	Jsonb           *source = NULL;
	RemoraJobOptions resolved;
	Oid   argtypes[5] = {OIDOID, JSONBOID, JSONBOID, TEXTOID, TEXTOID};
	Datum args[5];
	bool  nulls[5] = {false, false, false, false, false};
	bool  resnull;
	Datum job;

	if (PG_ARGISNULL(0))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("source must not be null")));
	if (!remora_source_uri_parse(text_to_cstring(PG_GETARG_TEXT_PP(0)), &uri,
								 err, sizeof(err)))
		invalid_field("source", sentence(err),
					  "Use an http(s):// URL, s3://bucket/key, "
					  "s3://bucket/prefix/, hf://owner/name[@revision] or "
					  "hf://datasets/owner/name[@revision].");

	/*
	 * Copy the engine's malloc'd result into palloc'd memory at once, so that
	 * an error below cannot leak it.
	 */
	kind = uri.kind;
	PG_TRY();
	{
		source = remora_jobspec_source(&uri);
		/* the whole URL only where it differs from what users see */
		if (strcmp(uri.canonical, uri.display) != 0)
			source_url = pstrdup(uri.canonical);
		if (kind == REMORA_SOURCE_HTTP)
			denied = policy_denial(&uri);
	}
	PG_FINALLY();
	{
		remora_source_uri_free(&uri);
	}
	PG_END_TRY();
	if (denied)
		ereport(
			ERROR,
			(errcode(ERRCODE_REMORA_POLICY_DENIED),
			 errmsg("the outbound-source policy does not allow this source"),
			 errdetail("%s", denied),
			 errhint(
				 "An administrator can allow other addresses with "
				 "remora.allow_networks or remora.allow_ports; Remora's own "
				 "store, endpoints and listeners never.")));

	bucket = bucket_arg ? bucket_arg : remora_default_bucket;
	if (bucket == NULL || bucket[0] == '\0')
		invalid_field(
			"bucket",
			"No target bucket was given and remora.default_bucket is not set.",
			"Pass a bucket, or have an administrator set "
			"remora.default_bucket.");
	if (!remora_bucket_name_valid(bucket, err, sizeof(err)))
		invalid_field("bucket", sentence(err), NULL);

	{
		const char *p = prefix_arg ? prefix_arg : remora_default_prefix;
		char *norm = remora_prefix_normalize(p ? p : "", err, sizeof(err));

		if (norm == NULL)
			invalid_field("prefix", sentence(err), NULL);
		prefix = pstrdup(norm);
		free(norm);
	}

	parse_options(options, kind, &opts);

	if (idem != NULL && (idem[0] == '\0' || strlen(idem) > MAX_IDEM_KEY_LEN ||
						 has_control(idem)))
		invalid_field("idempotency_key",
					  psprintf("An idempotency key is 1 to %d bytes without "
							   "control characters.",
							   MAX_IDEM_KEY_LEN),
					  NULL);

	/*
	 * The canonical request: what the caller asked for, normalised.  A value
	 * equal to its default is the same request as an omitted one, so that
	 * resubmitting it with the same idempotency key finds the job.  Not
	 * connections: a given count is pinned, an omitted one adapts from the
	 * setting's, so the two differ even when the numbers are equal.
	 */
	req_opts = opts;
	if (req_opts.has_max_attempts &&
		req_opts.max_attempts == remora_max_attempts)
		req_opts.has_max_attempts = false;
	if (req_opts.has_priority && req_opts.priority == 0)
		req_opts.has_priority = false;
	if (bucket_arg && remora_default_bucket &&
		strcmp(bucket_arg, remora_default_bucket) == 0)
		bucket_arg = NULL;
	if (prefix_arg)
	{
		char *def = remora_prefix_normalize(
			remora_default_prefix ? remora_default_prefix : "", err,
			sizeof(err));

		if (def != NULL && strcmp(def, prefix) == 0)
			prefix_arg = NULL;
		free(def);
	}
	/* the job definition: the request with every default resolved */
	resolved = opts;
	resolved.max_attempts =
		opts.has_max_attempts ? opts.max_attempts : remora_max_attempts;
	resolved.has_max_attempts = true;
	resolved.has_priority = true;

	args[0] = ObjectIdGetDatum(caller);
	args[1] = JsonbPGetDatum(
		remora_jobspec_definition(source, bucket, prefix, &resolved));
	args[2] = JsonbPGetDatum(remora_jobspec_request(
		source, source_url, bucket_arg, prefix_arg ? prefix : NULL, &req_opts));
	args[3] = idem ? CStringGetTextDatum(idem) : (Datum) 0;
	nulls[3] = idem == NULL;
	args[4] = source_url ? CStringGetTextDatum(source_url) : (Datum) 0;
	nulls[4] = source_url == NULL;
	job = call_internal("_submit", 5, argtypes, args, nulls, &resnull);
	if (resnull)
		elog(ERROR, "remora._submit returned null");
	remora_note_submit(); /* workers hear of it at commit */
	PG_RETURN_DATUM(job);
}

static int64
job_arg(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("job must not be null")));
	return PG_GETARG_INT64(0);
}

/*
 * remora_cancel(job) -> the job's resulting state
 */
Datum
remora_cancel(PG_FUNCTION_ARGS)
{
	Oid   argtypes[2] = {OIDOID, INT8OID};
	Datum args[2];
	bool  nulls[2] = {false, false};
	bool  resnull;
	Datum state;

	args[0] = ObjectIdGetDatum(GetUserId());
	args[1] = Int64GetDatum(job_arg(fcinfo));
	state = call_internal("_cancel", 2, argtypes, args, nulls, &resnull);
	remora_note_cancel();
	if (resnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(state);
}

/*
 * remora_delete(job, hard) -> void
 */
Datum
remora_delete(PG_FUNCTION_ARGS)
{
	Oid   argtypes[3] = {OIDOID, INT8OID, BOOLOID};
	Datum args[3];
	bool  nulls[3] = {false, false, false};
	bool  resnull;

	args[0] = ObjectIdGetDatum(GetUserId());
	args[1] = Int64GetDatum(job_arg(fcinfo));
	if (PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("hard must not be null")));
	args[2] = BoolGetDatum(PG_GETARG_BOOL(1));
	call_internal("_delete", 3, argtypes, args, nulls, &resnull);
	remora_note_cancel();
	PG_RETURN_VOID();
}

/*
 * remora_retry(job) -> the new job's id
 */
Datum
remora_retry(PG_FUNCTION_ARGS)
{
	Oid   argtypes[2] = {OIDOID, INT8OID};
	Datum args[2];
	bool  nulls[2] = {false, false};
	bool  resnull;
	Datum job;

	args[0] = ObjectIdGetDatum(GetUserId());
	args[1] = Int64GetDatum(job_arg(fcinfo));
	job = call_internal("_retry", 2, argtypes, args, nulls, &resnull);
	remora_note_submit(); /* workers hear of it at commit */
	PG_RETURN_DATUM(job);
}

/* ---------------------------------------------------- webhook secrets */

#define WEBHOOK_SECRET_LEN 32

/*
 * The caller's webhook secret (doc/user-guide.md, "Webhooks"), created
 * (rotate false) or replaced (rotate true) with 32 bytes from
 * pg_strong_random, the HMAC key of the caller's webhooks; users see it as
 * 'whsec_' and their base64.
 * remora._webhook_secret keeps it (sql/functions/97_events.sql).  ERROR if
 * the system has no strong randomness.
 */
static Datum
webhook_secret(bool rotate)
{
	bytea *fresh = palloc(VARHDRSZ + WEBHOOK_SECRET_LEN);
	Oid    argtypes[3] = {OIDOID, BYTEAOID, BOOLOID};
	Datum  args[3];
	bool   nulls[3] = {false, false, false};
	bool   resnull;
	Datum  secret;

	SET_VARSIZE(fresh, VARHDRSZ + WEBHOOK_SECRET_LEN);
	if (!pg_strong_random(VARDATA(fresh), WEBHOOK_SECRET_LEN))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a webhook secret"),
				 errdetail("The system's strong random source failed.")));
	args[0] = ObjectIdGetDatum(GetUserId());
	args[1] = PointerGetDatum(fresh);
	args[2] = BoolGetDatum(rotate);
	secret =
		call_internal("_webhook_secret", 3, argtypes, args, nulls, &resnull);
	if (resnull)
		elog(ERROR, "remora._webhook_secret returned null");
	return secret;
}

/* remora_webhook_secret() -> 'whsec_...', created on first use */
Datum
remora_webhook_secret(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(webhook_secret(false));
}

/* remora_rotate_webhook_secret() -> the new 'whsec_...' */
Datum
remora_rotate_webhook_secret(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(webhook_secret(true));
}
