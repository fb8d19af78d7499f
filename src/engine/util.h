/*-------------------------------------------------------------------------
 *
 * util.h
 *	  Small helpers every engine file may use: string copies, the error
 *	  record of a job, growable buffers and the engine's one JSON string
 *	  writer.
 *
 * A leaf: it includes nothing of the engine but the public engine.h (for
 * RemoraTaskError).  All memory is malloc'd.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_UTIL_H
#define REMORA_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "engine/engine.h"

/* strdup(s), or NULL for NULL (and on failure) */
extern char *remora_xstrdup(const char *s);

/*
 * Record a failure in err: its class, whether it is worth retrying, the
 * HTTP status (0 if none) and a message (printf-style, truncated to the
 * record's size, scrubbed to valid UTF-8).  Other fields are cleared.
 */
extern void remora_error_set(RemoraTaskError *err, const char *class,
							 bool retryable, long http_status, const char *fmt,
							 ...) __attribute__((format(printf, 5, 6)));
extern void remora_error_vset(RemoraTaskError *err, const char *class,
							  bool retryable, long http_status, const char *fmt,
							  va_list ap) __attribute__((format(printf, 5, 0)));

/*
 * Where a job stands: running, or how it ended.  remora_fail records the
 * first failure of a running job (a later one is ignored) and marks it
 * failed.
 */
typedef struct RemoraJobStatus
{
	RemoraTaskState state;
	RemoraTaskError error;
} RemoraJobStatus;

extern void remora_fail(RemoraJobStatus *st, const char *class, bool retryable,
						long http_status, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
extern void remora_vfail(RemoraJobStatus *st, const char *class, bool retryable,
						 long http_status, const char *fmt, va_list ap)
	__attribute__((format(printf, 5, 0)));
extern void remora_fail_with(RemoraJobStatus *st, const RemoraTaskError *err);

/*
 * A growable, NUL-terminated buffer.  Once an append fails (out of
 * memory) the buffer is marked failed and every later append fails too,
 * so that a caller may check once at the end: nothing is ever silently
 * truncated.
 */
typedef struct RemoraBuf
{
	char  *data; /* NULL until the first append */
	size_t len;
	size_t cap;
	bool   failed;
} RemoraBuf;

extern bool remora_buf_append(RemoraBuf *b, const char *s, size_t n);
extern bool remora_buf_puts(RemoraBuf *b, const char *s);
extern bool remora_buf_printf(RemoraBuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* s as a JSON string, quotes included (the engine's one JSON writer) */
extern bool remora_buf_json_string(RemoraBuf *b, const char *s);

/* Take the text out of the buffer (the caller frees it); resets b. */
extern char *remora_buf_release(RemoraBuf *b, size_t *len);
extern void  remora_buf_free(RemoraBuf *b);

#endif /* REMORA_UTIL_H */
