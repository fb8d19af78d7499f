/*-------------------------------------------------------------------------
 *
 * json.c
 *	  A strict, bounded JSON reader (see json.h for why it exists).
 *
 * Recursive descent over the whole text into a small tree of nodes.  Every
 * limit is checked before it is reached: input size, nesting depth.  A
 * malformed document is refused whole, with a reason.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/common/json.h"
#include "engine/common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Parser
{
	const char *p;
	const char *end;
	int         depth;
	char       *errbuf;
	size_t      errlen;
	bool        failed;
} Parser;

static RemoraJson *parse_value(Parser *ps);

static void parse_error(Parser *ps, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The first error stops the parse and is the one reported. */
static void
parse_error(Parser *ps, const char *fmt, ...)
{
	va_list ap;

	if (ps->failed)
		return;
	ps->failed = true;
	va_start(ap, fmt);
	remora_errbuf_vset(ps->errbuf, ps->errlen, fmt, ap);
	va_end(ap);
}

static void
skip_ws(Parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
							   *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static RemoraJson *
node(Parser *ps, RemoraJsonType type)
{
	RemoraJson *n = calloc(1, sizeof(RemoraJson));

	if (n == NULL)
		parse_error(ps, "out of memory");
	else
		n->type = type;
	return n;
}

static bool
read_u4(Parser *ps, unsigned int *out)
{
	unsigned int v = 0;

	if (ps->end - ps->p < 4)
		return false;
	for (int i = 0; i < 4; i++)
	{
		int h = remora_hex_value(ps->p[i]);

		if (h < 0)
			return false;
		v = v * 16 + (unsigned int) h;
	}
	ps->p += 4;
	*out = v;
	return true;
}

static size_t
put_utf8(char *out, unsigned int cp)
{
	if (cp < 0x80)
	{
		out[0] = (char) cp;
		return 1;
	}
	if (cp < 0x800)
	{
		out[0] = (char) (0xc0 | (cp >> 6));
		out[1] = (char) (0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000)
	{
		out[0] = (char) (0xe0 | (cp >> 12));
		out[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char) (0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char) (0xf0 | (cp >> 18));
	out[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char) (0x80 | (cp & 0x3f));
	return 4;
}

/* A string (the opening quote already seen); malloc'd, decoded. */
static char *
parse_string(Parser *ps)
{
	/* the one-letter escapes and what each stands for */
	static const char escapes[] = "\"\\/bfnrt";
	static const char escaped[] = "\"\\/\b\f\n\r\t";
	const char       *esc;
	const char       *start = ps->p;
	char             *out;
	size_t            n = 0;

	/* decoded text is never longer than the escaped text */
	while (ps->p < ps->end && *ps->p != '"')
		ps->p += (*ps->p == '\\' && ps->p + 1 < ps->end) ? 2 : 1;
	if (ps->p >= ps->end)
	{
		parse_error(ps, "an unterminated string");
		return NULL;
	}
	out = malloc(ps->p - start + 1);
	if (out == NULL)
	{
		parse_error(ps, "out of memory");
		return NULL;
	}
	ps->p = start;
	while (*ps->p != '"')
	{
		unsigned char c = (unsigned char) *ps->p++;
		unsigned int  cp;

		if (c < 0x20)
			goto bad;
		if (c != '\\')
		{
			out[n++] = (char) c;
			continue;
		}
		c = (unsigned char) *ps->p++;
		if (c != '\0' && (esc = strchr(escapes, c)) != NULL)
			out[n++] = escaped[esc - escapes];
		else if (c == 'u')
		{
			if (!read_u4(ps, &cp) || cp == 0 || (cp >= 0xdc00 && cp <= 0xdfff))
				goto bad;
			if (cp >= 0xd800 && cp <= 0xdbff)
			{
				unsigned int lo;

				if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u')
					goto bad;
				ps->p += 2;
				if (!read_u4(ps, &lo) || lo < 0xdc00 || lo > 0xdfff)
					goto bad;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			n += put_utf8(out + n, cp);
		}
		else
			goto bad;
	}
	ps->p++;
	out[n] = '\0';
	return out;

bad:
	free(out);
	parse_error(ps, "a malformed string");
	return NULL;
}

/* One or more digits; false (and a parse error) if there is none. */
static bool
digits(Parser *ps)
{
	if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
	{
		parse_error(ps, "a malformed number");
		return false;
	}
	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
		ps->p++;
	return true;
}

static RemoraJson *
parse_number(Parser *ps)
{
	const char *s = ps->p;
	RemoraJson *n;

	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	/* no leading zeros: "0" stands alone */
	if (ps->p < ps->end && *ps->p == '0')
		ps->p++;
	else if (!digits(ps))
		return NULL;
	if (ps->p < ps->end && *ps->p == '.')
	{
		ps->p++;
		if (!digits(ps))
			return NULL;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E'))
	{
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (!digits(ps))
			return NULL;
	}
	n = node(ps, RJ_NUMBER);
	if (n && (n->string = strndup(s, ps->p - s)) == NULL)
	{
		free(n);
		parse_error(ps, "out of memory");
		return NULL;
	}
	return n;
}

static bool
literal(Parser *ps, const char *word)
{
	size_t n = strlen(word);

	if ((size_t) (ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return false;
	ps->p += n;
	return true;
}

/* Elements of an array or members of an object, up to the closing bracket. */
static RemoraJson *
parse_container(Parser *ps, bool object)
{
	RemoraJson  *c = node(ps, object ? RJ_OBJECT : RJ_ARRAY);
	RemoraJson **tail;
	char         close = object ? '}' : ']';

	if (c == NULL)
		return NULL;
	if (++ps->depth > REMORA_JSON_MAX_DEPTH)
	{
		parse_error(ps, "nesting deeper than %d", REMORA_JSON_MAX_DEPTH);
		return c;
	}
	tail = &c->child;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close)
	{
		ps->p++;
		ps->depth--;
		return c;
	}
	while (!ps->failed)
	{
		char       *key = NULL;
		RemoraJson *v;

		skip_ws(ps);
		if (object)
		{
			if (ps->p >= ps->end || *ps->p != '"')
			{
				parse_error(ps, "an object member without a name");
				break;
			}
			ps->p++;
			if ((key = parse_string(ps)) == NULL)
				break;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':')
			{
				free(key);
				parse_error(ps, "a member name without ':'");
				break;
			}
			ps->p++;
		}
		v = parse_value(ps);
		if (v == NULL)
		{
			free(key);
			break;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',')
		{
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close)
		{
			ps->p++;
			break;
		}
		parse_error(ps, "a missing ',' or '%c'", close);
	}
	ps->depth--;
	return c;
}

static RemoraJson *
parse_value(Parser *ps)
{
	RemoraJson *n;

	skip_ws(ps);
	if (ps->p >= ps->end)
	{
		parse_error(ps, "a value is missing");
		return NULL;
	}
	switch (*ps->p)
	{
		case '{':
		case '[':
			ps->p++;
			return parse_container(ps, ps->p[-1] == '{');
		case '"':
			ps->p++;
			n = node(ps, RJ_STRING);
			if (n && (n->string = parse_string(ps)) == NULL)
			{
				free(n);
				return NULL;
			}
			return n;
		case 't':
		case 'f':
			if (literal(ps, "true") || literal(ps, "false"))
			{
				n = node(ps, RJ_BOOL);
				if (n)
					n->boolean = ps->p[-1] == 'e' && ps->p[-2] == 'u';
				return n;
			}
			break;
		case 'n':
			if (literal(ps, "null"))
				return node(ps, RJ_NULL);
			break;
		default:
			return parse_number(ps);
	}
	parse_error(ps, "an unknown literal");
	return NULL;
}

RemoraJson *
remora_json_parse(const char *text, size_t len, char *errbuf, size_t errlen)
{
	Parser      ps = {text, text + len, 0, errbuf, errlen, false};
	RemoraJson *v;

	if (text == NULL || len == 0 || len > REMORA_JSON_MAX_INPUT ||
		memchr(text, '\0', len) != NULL)
	{
		parse_error(&ps,
					"the document is empty, too large or holds a NUL byte");
		return NULL;
	}
	if (!remora_utf8_valid(text, len))
	{
		parse_error(&ps, "the document is not UTF-8");
		return NULL;
	}
	v = parse_value(&ps);
	skip_ws(&ps);
	if (!ps.failed && ps.p != ps.end)
		parse_error(&ps, "text after the document");
	if (ps.failed)
	{
		remora_json_free(v);
		return NULL;
	}
	return v;
}

void
remora_json_free(RemoraJson *value)
{
	while (value)
	{
		RemoraJson *next = value->next;

		remora_json_free(value->child);
		free(value->key);
		free(value->string);
		free(value);
		value = next;
	}
}

const RemoraJson *
remora_json_get(const RemoraJson *object, const char *key)
{
	if (object == NULL || object->type != RJ_OBJECT)
		return NULL;
	for (const RemoraJson *m = object->child; m; m = m->next)
		if (strcmp(m->key, key) == 0)
			return m;
	return NULL;
}

const char *
remora_json_string(const RemoraJson *object, const char *key)
{
	const RemoraJson *v = remora_json_get(object, key);

	return v && v->type == RJ_STRING ? v->string : NULL;
}

int64_t
remora_json_int(const RemoraJson *object, const char *key)
{
	const RemoraJson *v = remora_json_get(object, key);
	const char       *s;
	int64_t           n = 0;

	if (v == NULL || v->type != RJ_NUMBER)
		return -1;
	for (s = v->string; *s; s++)
	{
		if (*s < '0' || *s > '9' || n > (INT64_MAX - 9) / 10)
			return -1;
		n = n * 10 + (*s - '0');
	}
	return n;
}
