/*-------------------------------------------------------------------------
 *
 * util.c
 *	  String copies, error records, growable buffers and the JSON string
 *	  writer shared by every file of the engine.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/source_uri.h"
#include "engine/util.h"

char *
remora_xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

void
remora_error_vset(RemoraTaskError *err, const char *class, bool retryable,
				  long http_status, const char *fmt, va_list ap)
{
	memset(err, 0, sizeof(*err));
	err->class = class;
	err->retryable = retryable;
	err->http_status = http_status;
	err->retry_after = -1;
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	remora_utf8_scrub(err->message);
}

void
remora_error_set(RemoraTaskError *err, const char *class, bool retryable,
				 long http_status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	remora_error_vset(err, class, retryable, http_status, fmt, ap);
	va_end(ap);
}

void
remora_vfail(RemoraJobStatus *st, const char *class, bool retryable,
			 long http_status, const char *fmt, va_list ap)
{
	if (st->state != REMORA_TASK_RUNNING)
		return;
	remora_error_vset(&st->error, class, retryable, http_status, fmt, ap);
	st->state = REMORA_TASK_FAILED;
}

void
remora_fail(RemoraJobStatus *st, const char *class, bool retryable,
			long http_status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	remora_vfail(st, class, retryable, http_status, fmt, ap);
	va_end(ap);
}

void
remora_fail_with(RemoraJobStatus *st, const RemoraTaskError *err)
{
	if (st->state != REMORA_TASK_RUNNING)
		return;
	st->error = *err;
	remora_utf8_scrub(st->error.message);
	remora_utf8_scrub(st->error.s3_code);
	st->state = REMORA_TASK_FAILED;
}

/* Room for n more bytes and the terminating NUL. */
static bool
reserve(RemoraBuf *b, size_t n)
{
	size_t cap;
	char  *grown;

	if (b->failed)
		return false;
	if (b->len + n + 1 <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1)
	{
		if (cap > ((size_t) -1) / 2)
		{
			b->failed = true;
			return false;
		}
		cap *= 2;
	}
	grown = realloc(b->data, cap);
	if (grown == NULL)
	{
		b->failed = true;
		return false;
	}
	b->data = grown;
	b->cap = cap;
	return true;
}

bool
remora_buf_append(RemoraBuf *b, const char *s, size_t n)
{
	if (!reserve(b, n))
		return false;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
	return true;
}

bool
remora_buf_puts(RemoraBuf *b, const char *s)
{
	return remora_buf_append(b, s, strlen(s));
}

bool
remora_buf_printf(RemoraBuf *b, const char *fmt, ...)
{
	va_list ap;
	int     n;

	if (b->failed)
		return false;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !reserve(b, (size_t) n))
	{
		b->failed = true;
		return false;
	}
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t) n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t) n;
	return true;
}

bool
remora_buf_json_string(RemoraBuf *b, const char *s)
{
	if (!remora_buf_append(b, "\"", 1))
		return false;
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;
		char          esc[8];

		if (c == '"' || c == '\\')
		{
			esc[0] = '\\';
			esc[1] = (char) c;
			remora_buf_append(b, esc, 2);
		}
		else if (c < 0x20)
		{
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			remora_buf_append(b, esc, 6);
		}
		else
			remora_buf_append(b, (const char *) &c, 1);
	}
	return remora_buf_append(b, "\"", 1);
}

char *
remora_buf_release(RemoraBuf *b, size_t *len)
{
	char *out = b->failed ? NULL : b->data;

	if (out == NULL)
	{
		free(b->data);
		out = b->failed ? NULL : strdup("");
	}
	if (len)
		*len = out ? b->len : 0;
	memset(b, 0, sizeof(*b));
	return out;
}

void
remora_buf_free(RemoraBuf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}
