/*-------------------------------------------------------------------------
 *
 * s3xml.c
 *	  Parsing of S3 XML responses, and building of S3 XML request bodies.
 *
 * Responses come from a server we do not trust, so the parser is shut down
 * to the subset of XML that S3 actually sends:
 *
 * - Options are NONET | NOERROR | NOWARNING | NOBLANKS and nothing else:
 *	 never NOENT (entity substitution), DTDLOAD, DTDATTR or HUGE, so
 *	 libxml2's own depth and size limits stay in force (libxml2 2.9 refuses
 *	 elements nested deeper than about 256 levels).
 * - A DOCTYPE stops the parser as soon as its name and external identifier
 *	 are read, before the internal subset: entity declarations (billion laughs,
 *external entities, parameter entities, external DTDs) are never even parsed.
 *	 The resulting document is then refused, as is any tree that holds
 *	 anything but elements, text, CDATA, comments and processing
 *	 instructions (entity references in particular).
 * - Bodies that are empty, larger than REMORA_S3XML_MAX_BODY, or that hold a
 *	 NUL byte (UTF-16/32, or a truncated C string) are refused unparsed.
 * - Parse errors go to a per-parser no-op handler: nothing is printed and
 *	 the host's global libxml2 error handlers (PostgreSQL installs its own)
 *	 are neither called nor changed.  xmlCleanupParser() is never called:
 *	 libxml2's global state belongs to the host process.
 *
 * Elements are matched by local name, whatever their namespace: s3rver,
 * real S3 and other stores disagree on it.  Text is read from direct text
 * and CDATA children only.  Keys and prefixes are taken verbatim (an S3 key
 * may begin or end with a space); other values are trimmed.
 *
 * The request builders escape everything XML gives a meaning to, and the
 * line ends and tabs as character references (as S3's documentation asks:
 * a literal CR would reach the server as LF, naming another key), and
 * refuse strings that XML 1.0 cannot carry at all: C0 controls, invalid
 * UTF-8, surrogates, U+FFFE and U+FFFF.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/s3xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/SAX2.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#define PARSE_OPTIONS                                                          \
	(XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |               \
	 XML_PARSE_NOBLANKS)

/* S3's limits: DeleteObjects takes 1000 keys, an upload 10000 parts. */
#define MAX_DELETE_KEYS 1000
#define MAX_PARTS       10000

/* libxml2 2.12 made the structured error handler's argument const. */
#if LIBXML_VERSION >= 21200
typedef const xmlError *ErrorArg;
#else
typedef xmlErrorPtr ErrorArg;
#endif

/* ---------------------------------------------------------------------
 * Parsing
 * ---------------------------------------------------------------------
 */

/* Errors are reported by the return values, never printed. */
static void
ignore_error(void *ctx, ErrorArg error)
{
	(void) ctx;
	(void) error;
}

/*
 * SAX hook for "<!DOCTYPE name ...": record the DTD node (so that the
 * document shows one and is refused) and stop before the internal subset,
 * so that no entity or parameter entity is ever declared, let alone
 * expanded, and no external subset is ever looked at.
 */
static void
stop_at_doctype(void *ctx, const xmlChar *name, const xmlChar *external_id,
				const xmlChar *system_id)
{
	xmlSAX2InternalSubset(ctx, name, external_id, system_id);
	xmlStopParser((xmlParserCtxtPtr) ctx);
}

/*
 * The next node after node in document order, within top, or NULL.  An
 * iterative walk: no recursion, whatever the depth.
 */
static xmlNodePtr
next_node(xmlNodePtr node, xmlNodePtr top)
{
	if (node->type == XML_ELEMENT_NODE && node->children != NULL)
		return node->children;
	while (node != top && node->next == NULL)
		node = node->parent;
	return node == top ? NULL : node->next;
}

/*
 * Is the document made only of what S3 sends: one root element, and
 * elements, text, CDATA, comments and processing instructions?  No DTD,
 * no entity reference or declaration, no XInclude marker.
 */
static bool
acceptable_tree(xmlDocPtr doc)
{
	xmlNodePtr node;

	if (doc->intSubset != NULL || doc->extSubset != NULL)
		return false;
	if (xmlDocGetRootElement(doc) == NULL)
		return false;
	for (node = doc->children; node != NULL;
		 node = next_node(node, (xmlNodePtr) doc))
	{
		switch (node->type)
		{
			case XML_ELEMENT_NODE:
			case XML_TEXT_NODE:
			case XML_CDATA_SECTION_NODE:
			case XML_COMMENT_NODE:
			case XML_PI_NODE:
				break;
			default:
				return false;
		}
	}
	return true;
}

/*
 * Parse body under the rules in the file header.  Returns a document with
 * a root element, or NULL when refused or not well-formed.
 */
static xmlDocPtr
parse_body(const char *body, size_t len)
{
	xmlParserCtxtPtr ctxt;
	xmlDocPtr        doc;
	bool             well_formed;

	if (body == NULL || len == 0 || len > REMORA_S3XML_MAX_BODY)
		return NULL;
	if (memchr(body, '\0', len) != NULL)
		return NULL;

	xmlInitParser();
	ctxt = xmlNewParserCtxt();
	if (ctxt == NULL)
		return NULL;
	if (ctxt->sax == NULL)
	{
		xmlFreeParserCtxt(ctxt);
		return NULL;
	}
	ctxt->sax->internalSubset = stop_at_doctype;
	ctxt->sax->serror = ignore_error;

	doc = xmlCtxtReadMemory(ctxt, body, (int) len, NULL, NULL, PARSE_OPTIONS);
	well_formed = ctxt->wellFormed && ctxt->nsWellFormed &&
				  ctxt->errNo != XML_ERR_USER_STOP;
	xmlFreeParserCtxt(ctxt);

	if (doc != NULL && (!well_formed || !acceptable_tree(doc)))
	{
		xmlFreeDoc(doc);
		doc = NULL;
	}
	return doc;
}

/* Is node an element with this local name (namespace ignored)? */
static bool
name_is(xmlNodePtr node, const char *name)
{
	return node != NULL && node->type == XML_ELEMENT_NODE &&
		   strcmp((const char *) node->name, name) == 0;
}

/*
 * The first direct child element of parent named name, or NULL.  If
 * duplicated is not NULL, it tells whether another such child follows.
 */
static xmlNodePtr
find_child(xmlNodePtr parent, const char *name, bool *duplicated)
{
	xmlNodePtr found = NULL;
	xmlNodePtr child;

	if (duplicated != NULL)
		*duplicated = false;
	for (child = parent->children; child != NULL; child = child->next)
	{
		if (!name_is(child, name))
			continue;
		if (found == NULL)
			found = child;
		else
		{
			if (duplicated != NULL)
				*duplicated = true;
			break;
		}
	}
	return found;
}

static bool
is_xml_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Strip XML whitespace from both ends of s (of length len), in place. */
static void
trim_in_place(char *s, size_t len)
{
	size_t start = 0;

	while (len > 0 && is_xml_space(s[len - 1]))
		len--;
	while (start < len && is_xml_space(s[start]))
		start++;
	memmove(s, s + start, len - start);
	s[len - start] = '\0';
}

/* Is node character data: text or CDATA (never an entity reference)? */
static bool
is_text(xmlNodePtr node)
{
	return (node->type == XML_TEXT_NODE ||
			node->type == XML_CDATA_SECTION_NODE) &&
		   node->content != NULL;
}

/*
 * The direct text and CDATA children of el, concatenated into a malloc'd
 * string, optionally trimmed of surrounding whitespace.  Only direct text
 * is read: nothing under a child element, nothing through a reference.
 * NULL only when out of memory.
 */
static char *
element_text(xmlNodePtr el, bool trim)
{
	xmlNodePtr child;
	size_t     total = 0;
	char      *text;

	for (child = el->children; child != NULL; child = child->next)
		if (is_text(child))
			total += strlen((const char *) child->content);

	text = malloc(total + 1);
	if (text == NULL)
		return NULL;
	total = 0;
	for (child = el->children; child != NULL; child = child->next)
		if (is_text(child))
		{
			size_t n = strlen((const char *) child->content);

			memcpy(text + total, child->content, n);
			total += n;
		}
	text[total] = '\0';

	if (trim)
		trim_in_place(text, total);
	return text;
}

/*
 * *out = the text of el, or NULL when el is NULL.  Returns false only when
 * out of memory.
 */
static bool
copy_text(xmlNodePtr el, bool trim, char **out)
{
	*out = NULL;
	if (el == NULL)
		return true;
	*out = element_text(el, trim);
	return *out != NULL;
}

/*
 * *out = the text of parent's only child element named name, or NULL if it
 * has none.  False if it has several (an ambiguous document) or when out of
 * memory.
 */
static bool
unique_child_text(xmlNodePtr parent, const char *name, bool trim, char **out)
{
	bool       duplicated;
	xmlNodePtr el = find_child(parent, name, &duplicated);

	*out = NULL;
	if (duplicated)
		return false;
	return copy_text(el, trim, out);
}

/* ---------------------------------------------------------------------
 * Error documents
 * ---------------------------------------------------------------------
 */

bool
remora_s3xml_error(const char *body, size_t len, RemoraS3Error *out)
{
	xmlDocPtr  doc;
	xmlNodePtr root;
	bool       ok;

	if (out == NULL)
		return false;
	memset(out, 0, sizeof(*out));

	doc = parse_body(body, len);
	if (doc == NULL)
		return false;
	root = xmlDocGetRootElement(doc);

	/* Informational only: the first of each field will do. */
	ok = name_is(root, "Error") &&
		 copy_text(find_child(root, "Code", NULL), true, &out->code) &&
		 copy_text(find_child(root, "Message", NULL), true, &out->message) &&
		 copy_text(find_child(root, "RequestId", NULL), true, &out->request_id);
	xmlFreeDoc(doc);

	if (!ok)
		remora_s3xml_error_free(out);
	return ok;
}

void
remora_s3xml_error_free(RemoraS3Error *e)
{
	if (e == NULL)
		return;
	free(e->code);
	free(e->message);
	free(e->request_id);
	memset(e, 0, sizeof(*e));
}

/* ---------------------------------------------------------------------
 * A single value
 * ---------------------------------------------------------------------
 */

char *
remora_s3xml_text(const char *body, size_t len, const char *local_name,
				  char **root_name)
{
	xmlDocPtr  doc;
	xmlNodePtr root;
	xmlNodePtr node;
	char      *text = NULL;

	if (root_name != NULL)
		*root_name = NULL;
	doc = parse_body(body, len);
	if (doc == NULL)
		return NULL;
	root = xmlDocGetRootElement(doc);

	if (root_name != NULL)
	{
		*root_name = strdup((const char *) root->name);
		if (*root_name == NULL)
		{
			xmlFreeDoc(doc);
			return NULL;
		}
	}

	if (local_name != NULL)
	{
		for (node = root; node != NULL;
			 node = next_node(node, (xmlNodePtr) doc))
			if (name_is(node, local_name))
			{
				text = element_text(node, true);
				break;
			}
	}
	xmlFreeDoc(doc);
	return text;
}

/* ---------------------------------------------------------------------
 * ListObjectsV2
 * ---------------------------------------------------------------------
 */

/*
 * A Size: decimal digits only (no sign, exponent or inner space), at least
 * one, within int64.
 */
static bool
parse_size(const char *s, int64_t *out)
{
	int64_t v = 0;

	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++)
	{
		int d;

		if (*s < '0' || *s > '9')
			return false;
		d = *s - '0';
		if (v > (INT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/*
 * One <Contents>.  Key is required, non-empty and kept verbatim; Size is
 * required.  Any field given twice makes the entry ambiguous, hence
 * invalid.
 */
static bool
read_object(xmlNodePtr contents, RemoraS3Object *obj)
{
	char *size_text;
	bool  ok;

	if (!unique_child_text(contents, "Key", false, &obj->key) ||
		obj->key == NULL || obj->key[0] == '\0')
		return false;
	if (!unique_child_text(contents, "Size", true, &size_text) ||
		size_text == NULL)
		return false;
	ok = parse_size(size_text, &obj->size);
	free(size_text);
	return ok && unique_child_text(contents, "ETag", true, &obj->etag) &&
		   unique_child_text(contents, "LastModified", true,
							 &obj->last_modified);
}

/* One <CommonPrefixes>: its Prefix is required and kept verbatim. */
static bool
read_prefix(xmlNodePtr common, char **prefix)
{
	return unique_child_text(common, "Prefix", false, prefix) &&
		   *prefix != NULL && (*prefix)[0] != '\0';
}

/* <IsTruncated>: absent means false; anything but true/false is invalid. */
static bool
read_truncated(xmlNodePtr root, bool *truncated)
{
	char *text;
	bool  ok = true;

	*truncated = false;
	if (!unique_child_text(root, "IsTruncated", true, &text))
		return false;
	if (text == NULL)
		return true;
	if (strcmp(text, "true") == 0)
		*truncated = true;
	else if (strcmp(text, "false") != 0)
		ok = false;
	free(text);
	return ok;
}

/* Allocate zeroed arrays sized for root's Contents and CommonPrefixes. */
static bool
allocate_listing(xmlNodePtr root, RemoraS3Listing *out)
{
	xmlNodePtr child;
	size_t     nobjects = 0;
	size_t     nprefixes = 0;

	for (child = root->children; child != NULL; child = child->next)
	{
		if (name_is(child, "Contents"))
			nobjects++;
		else if (name_is(child, "CommonPrefixes"))
			nprefixes++;
	}
	if (nobjects > 0)
	{
		out->objects = calloc(nobjects, sizeof(RemoraS3Object));
		if (out->objects == NULL)
			return false;
	}
	if (nprefixes > 0)
	{
		out->common_prefixes = calloc(nprefixes, sizeof(char *));
		if (out->common_prefixes == NULL)
			return false;
	}
	return true;
}

/*
 * Fill out from a <ListBucketResult>.  Counts are raised one entry at a
 * time so that a failure half-way leaves a listing that frees cleanly.
 */
static bool
read_listing(xmlNodePtr root, RemoraS3Listing *out)
{
	xmlNodePtr child;

	if (!allocate_listing(root, out))
		return false;
	for (child = root->children; child != NULL; child = child->next)
	{
		if (name_is(child, "Contents"))
		{
			if (!read_object(child, &out->objects[out->nobjects++]))
				return false;
		}
		else if (name_is(child, "CommonPrefixes"))
		{
			if (!read_prefix(child, &out->common_prefixes[out->nprefixes++]))
				return false;
		}
	}
	return read_truncated(root, &out->truncated) &&
		   unique_child_text(root, "NextContinuationToken", true,
							 &out->next_token);
}

bool
remora_s3xml_listing(const char *body, size_t len, RemoraS3Listing *out)
{
	xmlDocPtr  doc;
	xmlNodePtr root;
	bool       ok;

	if (out == NULL)
		return false;
	memset(out, 0, sizeof(*out));

	doc = parse_body(body, len);
	if (doc == NULL)
		return false;
	root = xmlDocGetRootElement(doc);
	ok = name_is(root, "ListBucketResult") && read_listing(root, out);
	xmlFreeDoc(doc);

	if (!ok)
		remora_s3xml_listing_free(out);
	return ok;
}

void
remora_s3xml_listing_free(RemoraS3Listing *l)
{
	int i;

	if (l == NULL)
		return;
	for (i = 0; i < l->nobjects; i++)
	{
		free(l->objects[i].key);
		free(l->objects[i].etag);
		free(l->objects[i].last_modified);
	}
	free(l->objects);
	for (i = 0; i < l->nprefixes; i++)
		free(l->common_prefixes[i]);
	free(l->common_prefixes);
	free(l->next_token);
	memset(l, 0, sizeof(*l));
}

/* ---------------------------------------------------------------------
 * ListMultipartUploads
 * ---------------------------------------------------------------------
 */

/* One <Upload>: Key and UploadId, both required, non-empty, unique. */
static bool
read_upload(xmlNodePtr upload, RemoraS3Upload *u)
{
	return unique_child_text(upload, "Key", false, &u->key) && u->key &&
		   u->key[0] &&
		   unique_child_text(upload, "UploadId", true, &u->upload_id) &&
		   u->upload_id && u->upload_id[0];
}

static bool
read_uploads(xmlNodePtr root, RemoraS3Uploads *out)
{
	xmlNodePtr child;
	size_t     n = 0;

	for (child = root->children; child != NULL; child = child->next)
		if (name_is(child, "Upload"))
			n++;
	if (n > 0 && (out->uploads = calloc(n, sizeof(RemoraS3Upload))) == NULL)
		return false;
	for (child = root->children; child != NULL; child = child->next)
		if (name_is(child, "Upload") &&
			!read_upload(child, &out->uploads[out->nuploads++]))
			return false;
	return read_truncated(root, &out->truncated) &&
		   unique_child_text(root, "NextKeyMarker", false,
							 &out->next_key_marker) &&
		   unique_child_text(root, "NextUploadIdMarker", true,
							 &out->next_upload_id_marker);
}

bool
remora_s3xml_uploads(const char *body, size_t len, RemoraS3Uploads *out)
{
	xmlDocPtr  doc;
	xmlNodePtr root;
	bool       ok;

	if (out == NULL)
		return false;
	memset(out, 0, sizeof(*out));
	doc = parse_body(body, len);
	if (doc == NULL)
		return false;
	root = xmlDocGetRootElement(doc);
	ok = name_is(root, "ListMultipartUploadsResult") && read_uploads(root, out);
	xmlFreeDoc(doc);
	if (!ok)
		remora_s3xml_uploads_free(out);
	return ok;
}

void
remora_s3xml_uploads_free(RemoraS3Uploads *u)
{
	if (u == NULL)
		return;
	for (int i = 0; i < u->nuploads; i++)
	{
		free(u->uploads[i].key);
		free(u->uploads[i].upload_id);
	}
	free(u->uploads);
	free(u->next_key_marker);
	free(u->next_upload_id_marker);
	memset(u, 0, sizeof(*u));
}

/* ---------------------------------------------------------------------
 * Request bodies
 * ---------------------------------------------------------------------
 */

/*
 * Length of the UTF-8 sequence at s if it encodes an XML 1.0 Char
 * (#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]),
 * else 0.  Overlong forms are refused.
 */
static size_t
xml_char_length(const unsigned char *s)
{
	uint32_t cp;
	size_t   n;
	size_t   i;

	if (s[0] < 0x80)
		return (s[0] >= 0x20 || s[0] == '\t' || s[0] == '\n' || s[0] == '\r')
				   ? 1
				   : 0;
	if (s[0] >= 0xC2 && s[0] <= 0xDF)
	{
		n = 2;
		cp = s[0] & 0x1F;
	}
	else if (s[0] >= 0xE0 && s[0] <= 0xEF)
	{
		n = 3;
		cp = s[0] & 0x0F;
	}
	else if (s[0] >= 0xF0 && s[0] <= 0xF4)
	{
		n = 4;
		cp = s[0] & 0x07;
	}
	else
		return 0;
	for (i = 1; i < n; i++)
	{
		/* stops at the terminating NUL too */
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF)
		return 0;
	if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF)
		return 0;
	return n;
}

/* Can s be carried as XML element text?  (Empty strings are refused too.) */
static bool
xml_text_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *) s;

	if (s == NULL || *s == '\0')
		return false;
	while (*p != '\0')
	{
		size_t n = xml_char_length(p);

		if (n == 0)
			return false;
		p += n;
	}
	return true;
}

/* A growing output buffer; once failed, appends are ignored. */
typedef struct Buf
{
	char  *data;
	size_t len;
	size_t cap;
	bool   failed;
} Buf;

static void
buf_append(Buf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (n >= b->cap - b->len)
	{
		size_t cap = b->cap > 0 ? b->cap : 256;
		char  *data;

		while (n >= cap - b->len)
		{
			if (cap > SIZE_MAX / 2)
			{
				b->failed = true;
				return;
			}
			cap *= 2;
		}
		data = realloc(b->data, cap);
		if (data == NULL)
		{
			b->failed = true;
			return;
		}
		b->data = data;
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static void
buf_puts(Buf *b, const char *s)
{
	buf_append(b, s, strlen(s));
}

/* Append s (already checked by xml_text_ok) escaped as element text. */
static void
buf_escaped(Buf *b, const char *s)
{
	for (; *s != '\0'; s++)
	{
		switch (*s)
		{
			case '&':
				buf_puts(b, "&amp;");
				break;
			case '<':
				buf_puts(b, "&lt;");
				break;
			case '>':
				buf_puts(b, "&gt;");
				break;
			case '"':
				buf_puts(b, "&quot;");
				break;
			case '\'':
				buf_puts(b, "&apos;");
				break;
			case '\t':
				buf_puts(b, "&#9;");
				break;
			case '\n':
				buf_puts(b, "&#10;");
				break;
			case '\r':
				buf_puts(b, "&#13;");
				break;
			default:
				buf_append(b, s, 1);
				break;
		}
	}
}

/* The finished string (length in *len), or NULL if anything failed. */
static char *
buf_finish(Buf *b, size_t *len)
{
	if (b->failed)
	{
		free(b->data);
		return NULL;
	}
	if (len != NULL)
		*len = b->len;
	return b->data;
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
	Buf b = {0};
	int i;

	if (!all_xml_text(keys, nkeys, MAX_DELETE_KEYS))
		return NULL;
	buf_puts(&b, "<Delete><Quiet>true</Quiet>");
	for (i = 0; i < nkeys; i++)
	{
		buf_puts(&b, "<Object><Key>");
		buf_escaped(&b, keys[i]);
		buf_puts(&b, "</Key></Object>");
	}
	buf_puts(&b, "</Delete>");
	return buf_finish(&b, len);
}

char *
remora_s3xml_complete_body(const char *const *etags, int nparts, size_t *len)
{
	Buf  b = {0};
	char number[16];
	int  i;

	if (!all_xml_text(etags, nparts, MAX_PARTS))
		return NULL;
	buf_puts(&b, "<CompleteMultipartUpload>");
	for (i = 0; i < nparts; i++)
	{
		snprintf(number, sizeof(number), "%d", i + 1);
		buf_puts(&b, "<Part><PartNumber>");
		buf_puts(&b, number);
		buf_puts(&b, "</PartNumber><ETag>");
		buf_escaped(&b, etags[i]);
		buf_puts(&b, "</ETag></Part>");
	}
	buf_puts(&b, "</CompleteMultipartUpload>");
	return buf_finish(&b, len);
}
