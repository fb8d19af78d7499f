/*-------------------------------------------------------------------------
 *
 * s3xml_parse.c
 *	  The safe reading of S3's XML answers, and the answers of one value:
 *	  error documents and single elements.  The listings are read in
 *	  s3xml_list.c, request bodies built in s3xml_body.c.
 *
 * Responses come from a server we do not trust, so the parser is shut down
 * to the subset of XML that S3 actually sends:
 *
 * - Options are NONET | NOERROR | NOWARNING | NOBLANKS and nothing else:
 *	 never NOENT (entity substitution), DTDLOAD, DTDATTR or HUGE, so
 *	 libxml2's own depth and size limits stay in force (libxml2 2.9 refuses
 *	 elements nested deeper than about 256 levels).
 * - A DOCTYPE stops the parser as soon as its name and external identifier
 *	 are read, before the internal subset: entity declarations (billion
 *	 laughs, external entities, parameter entities, external DTDs) are
 *	 never even parsed.
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
 *-------------------------------------------------------------------------
 */
#include "engine/s3/s3xml.h"
#include "engine/s3/s3xml_int.h"

#include <stdlib.h>
#include <string.h>

#include <libxml/SAX2.h>
#include <libxml/parser.h>
#include <libxml/xmlerror.h>

#define PARSE_OPTIONS                                                          \
	(XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |               \
	 XML_PARSE_NOBLANKS)

/* libxml2 2.12 made the structured error handler's argument const. */
#if LIBXML_VERSION >= 21200
typedef const xmlError *ErrorArg;
#else
typedef xmlErrorPtr ErrorArg;
#endif

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
bool
remora_s3xml_name_is(xmlNodePtr node, const char *name)
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
		if (!remora_s3xml_name_is(child, name))
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
bool
remora_s3xml_child_text(xmlNodePtr parent, const char *name, bool trim,
						char **out)
{
	bool       duplicated;
	xmlNodePtr el = find_child(parent, name, &duplicated);

	*out = NULL;
	if (duplicated)
		return false;
	return copy_text(el, trim, out);
}

bool
remora_s3xml_read_doc(const char *body, size_t len, const char *root_name,
					  RemoraS3xmlReader read, void *out)
{
	xmlDocPtr  doc;
	xmlNodePtr root;
	bool       ok;

	doc = parse_body(body, len);
	if (doc == NULL)
		return false;
	root = xmlDocGetRootElement(doc);
	ok = remora_s3xml_name_is(root, root_name) && read(root, out);
	xmlFreeDoc(doc);
	return ok;
}

/* ---------------------------------------------------------------------
 * Error documents
 * ---------------------------------------------------------------------
 */

/* Informational only: the first of each field will do. */
static bool
read_error(xmlNodePtr root, void *arg)
{
	RemoraS3Error *out = arg;

	return copy_text(find_child(root, "Code", NULL), true, &out->code) &&
		   copy_text(find_child(root, "Message", NULL), true, &out->message) &&
		   copy_text(find_child(root, "RequestId", NULL), true,
					 &out->request_id) &&
		   copy_text(find_child(root, "Region", NULL), true, &out->region) &&
		   copy_text(find_child(root, "Endpoint", NULL), true, &out->endpoint);
}

bool
remora_s3xml_error(const char *body, size_t len, RemoraS3Error *out)
{
	if (out == NULL)
		return false;
	memset(out, 0, sizeof(*out));
	if (remora_s3xml_read_doc(body, len, "Error", read_error, out))
		return true;
	remora_s3xml_error_free(out);
	return false;
}

void
remora_s3xml_error_free(RemoraS3Error *e)
{
	if (e == NULL)
		return;
	free(e->code);
	free(e->message);
	free(e->request_id);
	free(e->region);
	free(e->endpoint);
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
			if (remora_s3xml_name_is(node, local_name))
			{
				text = element_text(node, true);
				break;
			}
	}
	xmlFreeDoc(doc);
	return text;
}
