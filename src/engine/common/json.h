/*-------------------------------------------------------------------------
 *
 * json.h
 *	  A small JSON reader for the Hugging Face Hub API's answers.
 *
 * The engine may not use PostgreSQL's jsonb, and none of its libraries
 * (libcurl, OpenSSL, libxml2) reads JSON; the Hub's answers are small
 * (a page of a tree listing) and only read, so a strict reader of RFC 8259
 * with limits is enough: input at most REMORA_JSON_MAX_INPUT bytes, nesting
 * at most REMORA_JSON_MAX_DEPTH, strings decoded to UTF-8 (escapes
 * included, unpaired surrogates and NUL refused).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_JSON_H
#define REMORA_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REMORA_JSON_MAX_INPUT (4 * 1024 * 1024)
#define REMORA_JSON_MAX_DEPTH 32

typedef enum RemoraJsonType
{
	RJ_NULL,
	RJ_BOOL,
	RJ_NUMBER,
	RJ_STRING,
	RJ_ARRAY,
	RJ_OBJECT
} RemoraJsonType;

typedef struct RemoraJson RemoraJson;
struct RemoraJson
{
	RemoraJsonType type;
	char          *key;     /* the member name, inside an object */
	char          *string;  /* RJ_STRING: decoded; RJ_NUMBER: as written */
	bool           boolean; /* RJ_BOOL */
	RemoraJson    *child;   /* RJ_ARRAY, RJ_OBJECT: first element */
	RemoraJson    *next;    /* the next sibling */
};

extern RemoraJson *remora_json_parse(const char *text, size_t len, char *errbuf,
									 size_t errlen);
extern void        remora_json_free(RemoraJson *value);

/* The member of an object by name, or NULL. */
extern const RemoraJson *remora_json_get(const RemoraJson *object,
										 const char       *key);

/* A member's string value, or NULL if absent or not a string. */
extern const char *remora_json_string(const RemoraJson *object,
									  const char       *key);

/* A member's value as a non-negative integer that fits int64, or -1. */
extern int64_t remora_json_int(const RemoraJson *object, const char *key);

#endif /* REMORA_JSON_H */
