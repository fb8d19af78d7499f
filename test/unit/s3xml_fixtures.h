/*
 * s3xml_fixtures.h: what the S3 XML unit tests share: the parsers called on
 * a C string, and whether a refused parse left its output cleared.
 *
 * Its functions are static, so that their cases count in the including
 * program's unit.h counters; each is used by both s3xml_documents_test.c
 * and s3xml_hostile_test.c.
 */
#ifndef REMORA_S3XML_FIXTURES_H
#define REMORA_S3XML_FIXTURES_H

#include <stdbool.h>
#include <string.h>

#include "engine/s3/s3xml.h"
#include "unit.h"

static bool
error_doc(const char *xml, RemoraS3Error *e)
{
	return remora_s3xml_error(xml, strlen(xml), e);
}

static char *
text_of(const char *xml, const char *name, char **root)
{
	return remora_s3xml_text(xml, strlen(xml), name, root);
}

static bool
listing(const char *xml, RemoraS3Listing *l)
{
	return remora_s3xml_listing(xml, strlen(xml), l);
}

static bool
error_cleared(const RemoraS3Error *e)
{
	return e->code == NULL && e->message == NULL && e->request_id == NULL;
}

static bool
listing_cleared(const RemoraS3Listing *l)
{
	return l->objects == NULL && l->nobjects == 0 &&
		   l->common_prefixes == NULL && l->nprefixes == 0 && !l->truncated &&
		   l->next_token == NULL;
}

#endif
