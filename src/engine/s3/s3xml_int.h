/*-------------------------------------------------------------------------
 *
 * s3xml_int.h
 *	  What s3xml_parse.c lends the readers of S3's longer answers
 *	  (s3xml_list.c): a document read under the safe parser's rules, and
 *	  the text of an element's children.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_S3XML_INT_H
#define REMORA_S3XML_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <libxml/tree.h>

/* Fill out from the document's root element; false if it does not fit. */
typedef bool (*RemoraS3xmlReader)(xmlNodePtr root, void *out);

/*
 * Parse body under the safe parser's rules and, if its root element has
 * the local name root_name, hand the root to read.  False when the body is
 * refused, not well-formed, has another root, or read fails.
 */
extern bool remora_s3xml_read_doc(const char *body, size_t len,
								  const char *root_name, RemoraS3xmlReader read,
								  void *out);

/* Is node an element with this local name (namespace ignored)? */
extern bool remora_s3xml_name_is(xmlNodePtr node, const char *name);

/*
 * *out = the text of parent's only child element named name (direct text
 * and CDATA, optionally trimmed), or NULL if it has none.  False if it has
 * several (an ambiguous document) or when out of memory.
 */
extern bool remora_s3xml_child_text(xmlNodePtr parent, const char *name,
									bool trim, char **out);

#endif /* REMORA_S3XML_INT_H */
