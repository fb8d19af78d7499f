/*-------------------------------------------------------------------------
 *
 * util.h
 *	  Small helpers every engine file may use: string copies, error
 *	  messages and the error record of a job, UTF-8 checks, growable
 *	  buffers and the engine's one JSON string writer.
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

/* The first n bytes of s as a malloc'd string (NULL when out of memory). */
extern char *remora_xstrndup(const char *s, size_t n);

/* n bytes as 2n lower-case hex digits and a NUL into out */
extern void remora_hex_encode(const unsigned char *bytes, size_t n, char *out);
extern int  remora_hex_value(char c);

/*
 * Write a one-sentence message into a caller's error buffer (printf-style,
 * truncated to errlen).  Nothing happens when errbuf is NULL or errlen 0.
 */
extern void remora_errbuf_set(char *errbuf, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
extern void remora_errbuf_vset(char *errbuf, size_t errlen, const char *fmt,
							   va_list ap)
	__attribute__((format(printf, 3, 0)));

/*
 * Length of the UTF-8 sequence at p (before end) if it is valid, else 0;
 * its code point in *cp.  Strict: no overlong forms, no surrogates,
 * nothing past U+10FFFF.
 */
extern int  remora_utf8_decode(const unsigned char *p, const unsigned char *end,
							   unsigned int *cp);
extern bool remora_utf8_valid(const char *s, size_t len);

/*
 * Make s, in place, valid UTF-8 without control characters: each byte of
 * an invalid sequence and each control character becomes '?'.  For text a
 * server chose (headers, error messages) on its way into jsonb and logs.
 */
extern void remora_utf8_scrub(char *s);

/* Does s contain a C0 control character, DEL, or (unless allowed) a space? */
extern bool remora_has_ctrl(const char *s, bool space_allowed);

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
 * Room for one more item in the malloc'd array items, which holds n of
 * *cap items of size bytes: items itself while n < *cap, else the array
 * grown (doubled, at least 8 items; *cap updated, the new items zeroed).
 * NULL when out of memory, with items and *cap unchanged.
 */
extern void *remora_array_grow(void *items, int n, int *cap, size_t size);

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
extern bool remora_buf_putc(RemoraBuf *b, char c);
extern bool remora_buf_printf(RemoraBuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* s as a JSON string, quotes included (the engine's one JSON writer) */
extern bool remora_buf_json_string(RemoraBuf *b, const char *s);
/* the same, also escaping <, > and &, and NULL as null (for a browser) */
extern bool remora_buf_json_string_html(RemoraBuf *b, const char *s);

/* Drop the first n bytes (at most len) of the buffer, keeping the rest. */
extern void remora_buf_consume(RemoraBuf *b, size_t n);

/*
 * Take the text out of the buffer (the caller frees it; "" for an empty
 * one); resets b.  NULL, with b freed, if any append failed.
 */
extern char *remora_buf_release(RemoraBuf *b, size_t *len);
extern void  remora_buf_free(RemoraBuf *b);

#endif /* REMORA_UTIL_H */
