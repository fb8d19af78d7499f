/*
 * libFuzzer target: SigV4 canonicalisation.  The input is split at NUL
 * bytes into a path, query keys and values, and a header value; signing
 * and presigning must not crash or leak, must be deterministic, and the
 * secret must never appear in what they return.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/s3/sigv4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECRET "fuzz-secret-key-0123456789"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char              *buf;
	char              *parts[6] = {"/", "k", "v", "k2", "", "value"};
	int                n = 0;
	RemoraKV           query[2];
	RemoraKV           headers[2];
	RemoraSigV4Creds   creds = {"AKIDFUZZ", SECRET, "us-east-1", "s3", NULL};
	RemoraSigV4Request req;
	RemoraSigV4Result  a, b;
	char               err[256];
	char              *url;
	char              *enc;

	if (size > 8192 || memmem(data, size, "secret", 6) != NULL)
		return 0; /* inputs may not carry the secret themselves */
	buf = malloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = '\0';
	for (char *p = buf; n < 6 && p <= buf + size; p += strlen(p) + 1)
		parts[n++] = p;

	enc = remora_uri_encode(parts[0], strlen(parts[0]), true);
	free(enc);
	query[0] = (RemoraKV){parts[1], parts[2]};
	query[1] = (RemoraKV){parts[3], parts[4]};
	headers[0] = (RemoraKV){"host", "bucket.s3.amazonaws.com"};
	headers[1] = (RemoraKV){"x-amz-meta-fuzz", parts[5]};
	req = (RemoraSigV4Request){"GET", parts[0],          query, 2, headers,
							   2,     "UNSIGNED-PAYLOAD"};
	if (remora_sigv4_sign(&req, &creds, 1369353600, &a, err, sizeof(err)))
	{
		if (!remora_sigv4_sign(&req, &creds, 1369353600, &b, err,
							   sizeof(err)) ||
			strcmp(a.authorization, b.authorization) != 0 ||
			strstr(a.authorization, SECRET) != NULL)
			abort();
	}
	else if (strstr(err, SECRET) != NULL)
		abort();
	url =
		remora_sigv4_presign(&req, &creds, 1369353600, 3600, err, sizeof(err));
	if ((url && strstr(url, SECRET)) || (!url && strstr(err, SECRET)))
		abort();
	free(url);
	free(buf);
	return 0;
}
