/*-------------------------------------------------------------------------
 *
 * s3xml_list.c
 *	  S3's listing answers: ListObjectsV2 (<ListBucketResult>),
 *	  ListMultipartUploads (<ListMultipartUploadsResult>) and ListParts
 *	  (<ListPartsResult>).
 *
 * Documents are read by s3xml_parse.c's safe parser.  Keys and prefixes
 * are taken verbatim, other values trimmed; a required field that is
 * missing, and any field given twice, refuse the whole page, so that a
 * listing is never half understood.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/s3/s3xml.h"
#include "engine/s3/s3xml_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

	if (!remora_s3xml_child_text(contents, "Key", false, &obj->key) ||
		obj->key == NULL || obj->key[0] == '\0')
		return false;
	if (!remora_s3xml_child_text(contents, "Size", true, &size_text) ||
		size_text == NULL)
		return false;
	ok = parse_size(size_text, &obj->size);
	free(size_text);
	return ok && remora_s3xml_child_text(contents, "ETag", true, &obj->etag) &&
		   remora_s3xml_child_text(contents, "LastModified", true,
								   &obj->last_modified);
}

/* One <CommonPrefixes>: its Prefix is required and kept verbatim. */
static bool
read_prefix(xmlNodePtr common, char **prefix)
{
	return remora_s3xml_child_text(common, "Prefix", false, prefix) &&
		   *prefix != NULL && (*prefix)[0] != '\0';
}

/* <IsTruncated>: absent means false; anything but true/false is invalid. */
static bool
read_truncated(xmlNodePtr root, bool *truncated)
{
	char *text;
	bool  ok = true;

	*truncated = false;
	if (!remora_s3xml_child_text(root, "IsTruncated", true, &text))
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
		if (remora_s3xml_name_is(child, "Contents"))
			nobjects++;
		else if (remora_s3xml_name_is(child, "CommonPrefixes"))
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
read_listing(xmlNodePtr root, void *arg)
{
	RemoraS3Listing *out = arg;
	xmlNodePtr       child;

	if (!allocate_listing(root, out))
		return false;
	for (child = root->children; child != NULL; child = child->next)
	{
		if (remora_s3xml_name_is(child, "Contents"))
		{
			if (!read_object(child, &out->objects[out->nobjects++]))
				return false;
		}
		else if (remora_s3xml_name_is(child, "CommonPrefixes"))
		{
			if (!read_prefix(child, &out->common_prefixes[out->nprefixes++]))
				return false;
		}
	}
	return read_truncated(root, &out->truncated) &&
		   remora_s3xml_child_text(root, "NextContinuationToken", true,
								   &out->next_token);
}

bool
remora_s3xml_listing(const char *body, size_t len, RemoraS3Listing *out)
{
	if (out == NULL)
		return false;
	memset(out, 0, sizeof(*out));
	if (remora_s3xml_read_doc(body, len, "ListBucketResult", read_listing, out))
		return true;
	remora_s3xml_listing_free(out);
	return false;
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
	return remora_s3xml_child_text(upload, "Key", false, &u->key) && u->key &&
		   u->key[0] &&
		   remora_s3xml_child_text(upload, "UploadId", true, &u->upload_id) &&
		   u->upload_id && u->upload_id[0];
}

static bool
read_uploads(xmlNodePtr root, void *arg)
{
	RemoraS3Uploads *out = arg;
	xmlNodePtr       child;
	size_t           n = 0;

	for (child = root->children; child != NULL; child = child->next)
		if (remora_s3xml_name_is(child, "Upload"))
			n++;
	if (n > 0 && (out->uploads = calloc(n, sizeof(RemoraS3Upload))) == NULL)
		return false;
	for (child = root->children; child != NULL; child = child->next)
		if (remora_s3xml_name_is(child, "Upload") &&
			!read_upload(child, &out->uploads[out->nuploads++]))
			return false;
	return read_truncated(root, &out->truncated) &&
		   remora_s3xml_child_text(root, "NextKeyMarker", false,
								   &out->next_key_marker) &&
		   remora_s3xml_child_text(root, "NextUploadIdMarker", true,
								   &out->next_upload_id_marker);
}

bool
remora_s3xml_uploads(const char *body, size_t len, RemoraS3Uploads *out)
{
	if (out == NULL)
		return false;
	memset(out, 0, sizeof(*out));
	if (remora_s3xml_read_doc(body, len, "ListMultipartUploadsResult",
							  read_uploads, out))
		return true;
	remora_s3xml_uploads_free(out);
	return false;
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
 * ListParts
 * ---------------------------------------------------------------------
 */

/* A part number: 1..10000, decimal digits only. */
static bool
parse_partno(const char *s, int *out)
{
	int64_t v;

	if (s == NULL || !parse_size(s, &v) || v < 1 || v > 10000)
		return false;
	*out = (int) v;
	return true;
}

/* One <Part>: PartNumber, ETag and Size, all required. */
static bool
read_part(xmlNodePtr part, RemoraS3Part *p)
{
	char *number = NULL, *size = NULL;
	bool  ok;

	ok = remora_s3xml_child_text(part, "PartNumber", true, &number) &&
		 parse_partno(number, &p->number) &&
		 remora_s3xml_child_text(part, "Size", true, &size) && size &&
		 parse_size(size, &p->size) &&
		 remora_s3xml_child_text(part, "ETag", true, &p->etag) && p->etag &&
		 p->etag[0];
	free(number);
	free(size);
	return ok;
}

/* Parts in ascending order of number, as S3 lists them, each once. */
static bool
read_parts(xmlNodePtr root, void *arg)
{
	RemoraS3Parts *out = arg;
	xmlNodePtr     child;
	size_t         n = 0;
	char          *marker = NULL;
	bool           ok;

	for (child = root->children; child != NULL; child = child->next)
		if (remora_s3xml_name_is(child, "Part"))
			n++;
	if (n > 0 && (out->parts = calloc(n, sizeof(RemoraS3Part))) == NULL)
		return false;
	for (child = root->children; child != NULL; child = child->next)
		if (remora_s3xml_name_is(child, "Part"))
		{
			RemoraS3Part *p = &out->parts[out->nparts++];

			if (!read_part(child, p) ||
				(out->nparts > 1 && p[-1].number >= p->number))
				return false;
		}
	if (!read_truncated(root, &out->truncated) ||
		!remora_s3xml_child_text(root, "NextPartNumberMarker", true, &marker))
		return false;
	ok = !out->truncated || parse_partno(marker, &out->next_marker);
	free(marker);
	return ok;
}

bool
remora_s3xml_parts(const char *body, size_t len, RemoraS3Parts *out)
{
	if (out == NULL)
		return false;
	memset(out, 0, sizeof(*out));
	if (remora_s3xml_read_doc(body, len, "ListPartsResult", read_parts, out))
		return true;
	remora_s3xml_parts_free(out);
	return false;
}

void
remora_s3xml_parts_free(RemoraS3Parts *p)
{
	if (p == NULL)
		return;
	for (int i = 0; i < p->nparts; i++)
		free(p->parts[i].etag);
	free(p->parts);
	memset(p, 0, sizeof(*p));
}
