/*-------------------------------------------------------------------------
 *
 * s3_sse.c
 *	  The encryption and storage class of what Remora writes to the target:
 *	  the settings checked once, and the headers each kind of S3 request
 *	  carries (s3.c adds them before it signs).
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "engine/s3/s3.h"
#include "engine/common/util.h"

/* ----------------------------------------------------------------
 * Encryption and storage class of what is written to the target
 * ----------------------------------------------------------------
 */
static const char *const storage_classes[] = {"STANDARD",
											  "REDUCED_REDUNDANCY",
											  "STANDARD_IA",
											  "ONEZONE_IA",
											  "INTELLIGENT_TIERING",
											  "GLACIER",
											  "DEEP_ARCHIVE",
											  "OUTPOSTS",
											  "GLACIER_IR",
											  "SNOW",
											  "EXPRESS_ONEZONE"};

bool
remora_storage_class_valid(const char *name)
{
	for (size_t i = 0; i < sizeof(storage_classes) / sizeof(storage_classes[0]);
		 i++)
		if (name && strcmp(name, storage_classes[i]) == 0)
			return true;
	return false;
}

static bool
given(const char *s)
{
	return s && s[0];
}

S3Sse *
remora_s3_sse_new(const RemoraSseConfig *cfg, char *errbuf, size_t errlen)
{
	S3Sse        *sse = calloc(1, sizeof(S3Sse));
	unsigned char key[64];
	unsigned char md5[EVP_MAX_MD_SIZE];
	unsigned int  md5len = 0;
	int           n;

	if (sse == NULL)
		goto oom;
	if (given(cfg->storage_class) &&
		!remora_storage_class_valid(cfg->storage_class))
	{
		snprintf(errbuf, errlen, "the storage class is not one S3 names");
		goto fail;
	}
	if (given(cfg->storage_class) &&
		(sse->storage_class = strdup(cfg->storage_class)) == NULL)
		goto oom;
	if (!given(cfg->sse))
		return sse;
	if (strcmp(cfg->sse, "AES256") != 0 && strcmp(cfg->sse, "aws:kms") != 0 &&
		strcmp(cfg->sse, "customer") != 0)
	{
		snprintf(errbuf, errlen,
				 "server-side encryption must be AES256, aws:kms or customer");
		goto fail;
	}
	if ((sse->sse = strdup(cfg->sse)) == NULL)
		goto oom;
	if (strcmp(cfg->sse, "aws:kms") == 0 && given(cfg->kms_key_id) &&
		(sse->kms_key_id = strdup(cfg->kms_key_id)) == NULL)
		goto oom;
	if (strcmp(cfg->sse, "customer") != 0)
		return sse;
	/* SSE-C: the base64 of a 256-bit key, and the base64 of its MD5 */
	n = given(cfg->customer_key) && strlen(cfg->customer_key) == 44
			? EVP_DecodeBlock(key, (const unsigned char *) cfg->customer_key,
							  44)
			: -1;
	if (n != 33 || cfg->customer_key[43] != '=' || cfg->customer_key[42] == '=')
	{
		OPENSSL_cleanse(key, sizeof(key));
		snprintf(errbuf, errlen,
				 "the customer key must be the base64 of 32 bytes");
		goto fail;
	}
	if (!EVP_Digest(key, 32, md5, &md5len, EVP_md5(), NULL) ||
		(sse->customer_key = strdup(cfg->customer_key)) == NULL)
	{
		OPENSSL_cleanse(key, sizeof(key));
		goto oom;
	}
	OPENSSL_cleanse(key, sizeof(key));
	EVP_EncodeBlock((unsigned char *) sse->customer_md5, md5, (int) md5len);
	return sse;

oom:
	snprintf(errbuf, errlen, "out of memory");
fail:
	remora_s3_sse_free(sse);
	return NULL;
}

void
remora_s3_sse_free(S3Sse *sse)
{
	if (sse == NULL)
		return;
	free(sse->sse);
	free(sse->kms_key_id);
	if (sse->customer_key)
		OPENSSL_cleanse(sse->customer_key, strlen(sse->customer_key));
	free(sse->customer_key);
	free(sse->storage_class);
	free(sse);
}

static bool
has_query(const S3Call *call, const char *key)
{
	for (int i = 0; i < call->nquery; i++)
		if (strcmp(call->query[i].key, key) == 0)
			return true;
	return false;
}

static bool
has_header(const S3Call *call, const char *name)
{
	for (int i = 0; i < call->nheaders; i++)
		if (strcasecmp(call->headers[i].key, name) == 0)
			return true;
	return false;
}

/*
 * The encryption and storage-class headers call carries to a store with
 * sse, into h (room for 8): what S3 asks of each kind of request.  An
 * object created (PutObject, CopyObject, CreateMultipartUpload) names its
 * encryption and storage class; with SSE-C, every request that writes or
 * reads an object's data sends the key (UploadPart, UploadPartCopy, GET,
 * HEAD), and a copy of an object Remora wrote sends it as the source's
 * key as well.  Listings, deletes, aborts and CompleteMultipartUpload
 * (which S3 does not ask it of) send nothing.
 */
int
remora_s3_sse_headers(const S3Sse *sse, const S3Call *call, RemoraKV *h)
{
	bool copy = has_header(call, "x-amz-copy-source");
	bool part = has_query(call, "partNumber");
	bool creates =
		(strcmp(call->method, "PUT") == 0 && !part) ||
		(strcmp(call->method, "POST") == 0 && has_query(call, "uploads"));
	bool data = creates || part ||
				((strcmp(call->method, "GET") == 0 ||
				  strcmp(call->method, "HEAD") == 0) &&
				 call->key && call->nquery == 0);
	bool customer = sse->sse && strcmp(sse->sse, "customer") == 0;
	int  n = 0;

	if (creates && sse->sse && !customer)
	{
		h[n++] = (RemoraKV){"x-amz-server-side-encryption", sse->sse};
		if (sse->kms_key_id)
			h[n++] = (RemoraKV){"x-amz-server-side-encryption-aws-kms-key-id",
								sse->kms_key_id};
	}
	if (creates && (call->storage_class || sse->storage_class))
		h[n++] = (RemoraKV){"x-amz-storage-class", call->storage_class
													   ? call->storage_class
													   : sse->storage_class};
	if (customer && data)
	{
		h[n++] = (RemoraKV){"x-amz-server-side-encryption-customer-algorithm",
							"AES256"};
		h[n++] = (RemoraKV){"x-amz-server-side-encryption-customer-key",
							sse->customer_key};
		h[n++] = (RemoraKV){"x-amz-server-side-encryption-customer-key-md5",
							sse->customer_md5};
	}
	if (customer && copy && call->copy_source_ours)
	{
		h[n++] = (RemoraKV){
			"x-amz-copy-source-server-side-encryption-customer-algorithm",
			"AES256"};
		h[n++] =
			(RemoraKV){"x-amz-copy-source-server-side-encryption-customer-key",
					   sse->customer_key};
		h[n++] = (RemoraKV){
			"x-amz-copy-source-server-side-encryption-customer-key-md5",
			sse->customer_md5};
	}
	return n;
}
