/*-------------------------------------------------------------------------
 *
 * s3xml_body.c
 *	  S3's XML request bodies: DeleteObjects and CompleteMultipartUpload.
 *
 * The builders escape everything XML gives a meaning to, and the line
 * ends and tabs as character references (as S3's documentation asks: a
 * literal CR would reach the server as LF, naming another key), and refuse
 * strings that XML 1.0 cannot carry at all: C0 controls, invalid UTF-8,
 * surrogates, U+FFFE and U+FFFF.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/s3/s3xml.h"
#include "engine/common/util.h"

#include <stdio.h>
#include <string.h>

/*
 * S3's limits: DeleteObjects takes 1000 keys, an upload 10000 parts
 * (REMORA_MAX_PARTS; a store's own may be lower: the callers size parts to
 * remora.max_upload_parts).
 */
#define MAX_DELETE_KEYS 1000
#define MAX_PARTS       REMORA_MAX_PARTS

/*
 * Length of the UTF-8 sequence at s (before end) if it encodes an XML 1.0
 * Char (#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
 * [#x10000-#x10FFFF]), else 0.
 */
static int
xml_char_length(const unsigned char *s, const unsigned char *end)
{
	unsigned int cp;
	int          n = remora_utf8_decode(s, end, &cp);

	if (n == 0)
		return 0;
	if (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r')
		return 0;
	if (cp == 0xFFFE || cp == 0xFFFF)
		return 0;
	return n;
}

/* Can s be carried as XML element text?  (Empty strings are refused too.) */
static bool
xml_text_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *) s;
	const unsigned char *end;

	if (s == NULL || *s == '\0')
		return false;
	end = p + strlen(s);
	while (p < end)
	{
		int n = xml_char_length(p, end);

		if (n == 0)
			return false;
		p += n;
	}
	return true;
}

/* Append s (already checked by xml_text_ok) escaped as element text. */
static void
buf_escaped(RemoraBuf *b, const char *s)
{
	static const char        special[] = "&<>\"'\t\n\r";
	static const char *const refs[] = {"&amp;",  "&lt;", "&gt;",  "&quot;",
									   "&apos;", "&#9;", "&#10;", "&#13;"};

	for (; *s != '\0'; s++)
	{
		const char *at = strchr(special, *s);

		if (at != NULL)
			remora_buf_puts(b, refs[at - special]);
		else
			remora_buf_append(b, s, 1);
	}
}

/* Are there n strings, 1 <= n <= max, each fit for XML text? */
static bool
all_xml_text(const char *const *strings, int n, int max)
{
	int i;

	if (strings == NULL || n < 1 || n > max)
		return false;
	for (i = 0; i < n; i++)
		if (!xml_text_ok(strings[i]))
			return false;
	return true;
}

char *
remora_s3xml_delete_body(const char *const *keys, int nkeys, size_t *len)
{
	RemoraBuf b = {0};
	int       i;

	if (!all_xml_text(keys, nkeys, MAX_DELETE_KEYS))
		return NULL;
	remora_buf_puts(&b, "<Delete><Quiet>true</Quiet>");
	for (i = 0; i < nkeys; i++)
	{
		remora_buf_puts(&b, "<Object><Key>");
		buf_escaped(&b, keys[i]);
		remora_buf_puts(&b, "</Key></Object>");
	}
	remora_buf_puts(&b, "</Delete>");
	return remora_buf_release(&b, len);
}

/* 1..MAX_PARTS slots, some ETag, each one fit for XML text or NULL. */
static bool
parts_xml_text(const char *const *etags, int n)
{
	bool some = false;

	if (etags == NULL || n < 1 || n > MAX_PARTS)
		return false;
	for (int i = 0; i < n; i++)
		if (etags[i] != NULL)
		{
			if (!xml_text_ok(etags[i]))
				return false;
			some = true;
		}
	return some;
}

char *
remora_s3xml_complete_body(const char *const *etags, int nparts, size_t *len)
{
	RemoraBuf b = {0};
	char      number[16];
	int       i;

	if (!parts_xml_text(etags, nparts))
		return NULL;
	remora_buf_puts(&b, "<CompleteMultipartUpload>");
	for (i = 0; i < nparts; i++)
	{
		if (etags[i] == NULL)
			continue; /* a gap in the upload's part numbers */
		snprintf(number, sizeof(number), "%d", i + 1);
		remora_buf_puts(&b, "<Part><PartNumber>");
		remora_buf_puts(&b, number);
		remora_buf_puts(&b, "</PartNumber><ETag>");
		buf_escaped(&b, etags[i]);
		remora_buf_puts(&b, "</ETag></Part>");
	}
	remora_buf_puts(&b, "</CompleteMultipartUpload>");
	return remora_buf_release(&b, len);
}
