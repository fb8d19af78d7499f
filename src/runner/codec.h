/*-------------------------------------------------------------------------
 *
 * codec.h
 *	  The one codec between the worker protocol's JSON text and the
 *	  engine's structs: reading (decode.c) and writing (encode.c), for
 *	  both hosts of the runner.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_RUNNER_CODEC_H
#define REMORA_RUNNER_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/common/json.h"

/* The kinds of work an attempt does. */
typedef enum RemoraWorkKind
{
	REMORA_WORK_OBJECT, /* one http(s) object */
	REMORA_WORK_SET,    /* an s3 object or prefix, or a Hub snapshot */
	REMORA_WORK_EXPORT  /* a committed result published to stable keys */
} RemoraWorkKind;

/*
 * A claimed attempt's work, decoded from the spec remora.claim hands out:
 * a tagged union of the engine's specs.  Its strings point into doc (or
 * into arrays of its own), so it lives until remora_codec_work_free.  The
 * runner fills in what is not in the spec (ids, the source store, the Hub,
 * the resume).
 */
typedef struct RemoraWork
{
	RemoraWorkKind kind;
	const char    *source_kind; /* "http", "s3_object", "s3_prefix", "hf",
								 * "export" */
	int64_t     attempt_no;     /* 0 if the spec omits it */
	int64_t     owner;          /* the owner's oid; 0 if the spec omits it */
	const char *bucket;
	const char *file_name;     /* "" when there is none */
	const char *endpoint;      /* options.endpoint, or NULL */
	const char *prefix;        /* an export's target prefix */
	int64_t     connections;   /* options.connections; 0 if not given */
	const char *storage_class; /* options.storage_class; NULL: the engine's */
	int64_t     reuse_from;    /* options.reuse_from, resolved at submit to
								* an earlier job's id; 0: none */
	bool dry_run;              /* options.dry_run */
	union
	{
		RemoraTaskSpec object;
		RemoraSetSpec  set;
		RemoraExportSpec export;
	} u;
	RemoraJson  *doc;
	const char **include;
	const char **exclude;
} RemoraWork;

/* A list of JSON documents (members, references), malloc'd texts. */
typedef struct RemoraDocs
{
	char **items;
	int    n;
	int    cap;
} RemoraDocs;

extern bool remora_docs_add(RemoraDocs *d, char *doc);
extern void remora_docs_clear(RemoraDocs *d);

/* decode.c */
extern bool          remora_codec_decode_spec(const char *text, RemoraWork *out,
											  char *err, size_t errlen);
extern void          remora_codec_work_free(RemoraWork *work);
extern RemoraResume *remora_codec_decode_resume(const char  *text,
												const char **why);
extern bool          remora_codec_prior(RemoraPrior *out, const char *key,
										const char *etag, const char *sha256,
										int64_t size, const char *source_json);

/* encode.c: malloc'd JSON text, NULL when out of memory */
extern char *remora_codec_error(const char *class, const char *message,
								long http_status, int curl_code,
								const char *s3_code, long retry_after);
extern char *remora_codec_task_error(const RemoraTaskError *e);
extern char *remora_codec_member(const char *bucket, const RemoraSetMember *m);
extern char *remora_codec_ref(const RemoraExportRef *r);
extern char *remora_codec_checkpoint(const RemoraTaskCheckpoint *cp,
									 bool is_set, const char *restart_reason,
									 const RemoraDocs *members);
extern char *remora_codec_export_checkpoint(const RemoraTaskCheckpoint *cp,
											const RemoraDocs           *refs);
extern char *remora_codec_object_descriptor(const RemoraTaskResult *r,
											const char             *bucket,
											const char             *file_name);
extern char *remora_codec_set_descriptor(const RemoraTaskResult *r,
										 const RemoraDocs       *members);
extern char *remora_codec_export_descriptor(const RemoraTaskResult *r,
											const RemoraDocs       *refs);
extern char *remora_codec_string_array(const char *const *s, int n);

#endif /* REMORA_RUNNER_CODEC_H */
