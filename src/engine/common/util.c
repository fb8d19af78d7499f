/*-------------------------------------------------------------------------
 *
 * util.c
 *	  String copies, error messages and records, UTF-8 checks, growable
 *	  buffers and the JSON string writer shared by every file of the
 *	  engine.
 *
 *-------------------------------------------------------------------------
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/common/util.h"

char *
remora_xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

char *
remora_xstrndup(const char *s, size_t n)
{
	char *r = malloc(n + 1);

	if (r == NULL)
		return NULL;
	memcpy(r, s, n);
	r[n] = '\0';
	return r;
}

/* The value of one hexadecimal digit, -1 for anything else. */
int
remora_hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void
remora_hex_encode(const unsigned char *bytes, size_t n, char *out)
{
	static const char hexdigits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++)
	{
		out[2 * i] = hexdigits[bytes[i] >> 4];
		out[2 * i + 1] = hexdigits[bytes[i] & 0x0f];
	}
	out[2 * n] = '\0';
}

void
remora_errbuf_vset(char *errbuf, size_t errlen, const char *fmt, va_list ap)
{
	if (errbuf == NULL || errlen == 0)
		return;
	vsnprintf(errbuf, errlen, fmt, ap);
}

void
remora_errbuf_set(char *errbuf, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	remora_errbuf_vset(errbuf, errlen, fmt, ap);
	va_end(ap);
}

int
remora_utf8_decode(const unsigned char *p, const unsigned char *end,
				   unsigned int *cp)
{
	unsigned char c = *p;
	int           n;
	unsigned int  v;

	if (c < 0x80)
	{
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		n = 1, v = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 2, v = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 3, v = c & 0x07;
	else
		return 0;
	if (end - p <= n)
		return 0;
	for (int i = 1; i <= n; i++)
	{
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3f);
	}
	if ((n == 2 && v < 0x800) || (n == 3 && v < 0x10000) || v > 0x10ffff ||
		(v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return n + 1;
}

bool
remora_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;
	const unsigned char *end = p + len;
	unsigned int         cp;

	while (p < end)
	{
		int n = remora_utf8_decode(p, end, &cp);

		if (n == 0)
			return false;
		p += n;
	}
	return true;
}

void
remora_utf8_scrub(char *s)
{
	unsigned char *p = (unsigned char *) s;
	unsigned char *end = p + strlen(s);
	unsigned int   cp;

	while (p < end)
	{
		int n = remora_utf8_decode(p, end, &cp);

		if (n == 0 || *p < 0x20 || *p == 0x7f)
		{
			*p++ = '?';
			continue;
		}
		p += n;
	}
}

bool
remora_has_ctrl(const char *s, bool space_allowed)
{
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c < 0x20 || c == 0x7f || (!space_allowed && c == ' '))
			return true;
	}
	return false;
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

void *
remora_array_grow(void *items, int n, int *cap, size_t size)
{
	int   newcap;
	char *grown;

	if (n < *cap)
		return items;
	if (*cap > INT_MAX / 2)
		return NULL;
	newcap = *cap ? *cap * 2 : 8;
	if ((size_t) newcap > SIZE_MAX / size)
		return NULL;
	grown = realloc(items, (size_t) newcap * size);
	if (grown == NULL)
		return NULL;
	memset(grown + (size_t) *cap * size, 0, (size_t) (newcap - *cap) * size);
	*cap = newcap;
	return grown;
}

/* Room for n more bytes and the terminating NUL. */
static bool
reserve(RemoraBuf *b, size_t n)
{
	size_t cap;
	char  *grown;

	if (b->failed)
		return false;
	if (n > SIZE_MAX - b->len - 1)
	{
		b->failed = true;
		return false;
	}
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
remora_buf_putc(RemoraBuf *b, char c)
{
	return remora_buf_append(b, &c, 1);
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
/*
 * s as a JSON string.  html_safe also writes <, > and & (and DEL) as \u
 * escapes, so that the text is safe wherever a browser might read it, and
 * NULL as null.
 */
static bool
json_string(RemoraBuf *b, const char *s, bool html_safe)
{
	if (s == NULL && html_safe)
		return remora_buf_append(b, "null", 4);
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
		else if (c < 0x20 ||
				 (html_safe && (c == '<' || c == '>' || c == '&' || c == 0x7f)))
		{
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			remora_buf_append(b, esc, 6);
		}
		else
			remora_buf_append(b, (const char *) &c, 1);
	}
	return remora_buf_append(b, "\"", 1);
}

bool
remora_buf_json_string(RemoraBuf *b, const char *s)
{
	return json_string(b, s, false);
}

bool
remora_buf_json_string_html(RemoraBuf *b, const char *s)
{
	return json_string(b, s, true);
}

void
remora_buf_consume(RemoraBuf *b, size_t n)
{
	if (b->data == NULL)
		return;
	if (n > b->len)
		n = b->len;
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
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

/*
 * A store refuses a signature more than 15 minutes off its own clock
 * (RequestTimeTooSkewed); the worker's clock may be wrong where the
 * database server's, which judges every lease, is kept right.  So requests
 * are signed on the server's time, as the runner last measured it.  One
 * engine a process, driven by one thread: a plain static.
 */
static int64_t clock_offset_s;

void
remora_engine_set_clock_offset(int64_t seconds)
{
	clock_offset_s = seconds;
}

time_t
remora_engine_wall_time(void)
{
	return time(NULL) + (time_t) clock_offset_s;
}
