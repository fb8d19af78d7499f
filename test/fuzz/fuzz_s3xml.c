/*
 * libFuzzer target: every S3 XML parser on the same bytes.  Nothing may
 * crash, leak, or take long; a listing that parses must be self-consistent.
 */
#include <stdint.h>
#include <stdlib.h>

#include "engine/s3/s3xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char     *body = (const char *) data;
	RemoraS3Error   e;
	RemoraS3Listing l;
	RemoraS3Uploads u;
	char           *root = NULL;
	char           *text;

	if (remora_s3xml_error(body, size, &e))
		remora_s3xml_error_free(&e);
	text = remora_s3xml_text(body, size, "UploadId", &root);
	free(text);
	free(root);
	if (remora_s3xml_listing(body, size, &l))
	{
		for (int i = 0; i < l.nobjects; i++)
			if (l.objects[i].key == NULL || l.objects[i].size < 0)
				abort();
		remora_s3xml_listing_free(&l);
	}
	if (remora_s3xml_uploads(body, size, &u))
	{
		for (int i = 0; i < u.nuploads; i++)
			if (u.uploads[i].key == NULL || u.uploads[i].upload_id == NULL)
				abort();
		remora_s3xml_uploads_free(&u);
	}
	return 0;
}
