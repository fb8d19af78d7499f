/*-------------------------------------------------------------------------
 *
 * hash.c
 *	  SHA-256 of a whole object, with a state that can be saved and
 *	  restored, so that a replacement attempt continues the hash of the
 *	  parts it reuses instead of downloading them again.
 *
 * OpenSSL 3 hides the state of its EVP digests, so this uses the low-level
 * SHA256_CTX (deprecated in OpenSSL 3, still supported, and just as fast:
 * the same SHA-NI code).  Only the chaining value and the length are saved,
 * and only at a 64-byte block boundary, which every part boundary is
 * (remora.part_size is a multiple of 1 kB): a saved state is therefore
 * independent of the struct's layout.
 *
 *-------------------------------------------------------------------------
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/hash.h"

#define SAVE_VERSION "s1:"

struct RemoraSha256
{
	SHA256_CTX ctx;
};

RemoraSha256 *
remora_sha256_new(void)
{
	RemoraSha256 *s = malloc(sizeof(RemoraSha256));

	if (s)
		SHA256_Init(&s->ctx);
	return s;
}

void
remora_sha256_free(RemoraSha256 *s)
{
	free(s);
}

void
remora_sha256_reset(RemoraSha256 *s)
{
	SHA256_Init(&s->ctx);
}

void
remora_sha256_update(RemoraSha256 *s, const void *data, size_t len)
{
	SHA256_Update(&s->ctx, data, len);
}

int64_t
remora_sha256_bytes(const RemoraSha256 *s)
{
	return (int64_t) ((((uint64_t) s->ctx.Nh) << 32 | s->ctx.Nl) / 8);
}

/* Finish on a copy, so that the running state stays usable. */
void
remora_sha256_final_hex(RemoraSha256 *s, char out[65])
{
	SHA256_CTX    copy = s->ctx;
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256_Final(md, &copy);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

/*
 * "s1:" + 8 words of chaining value + ":" + bit length, in hex.  Only at a
 * block boundary; false otherwise.
 */
bool
remora_sha256_save(const RemoraSha256 *s, char *out, size_t outlen)
{
	int n;

	if (s->ctx.num != 0 || outlen < 100)
		return false;
	n = snprintf(out, outlen, SAVE_VERSION);
	for (int i = 0; i < 8; i++)
		n += snprintf(out + n, outlen - n, "%08x", (unsigned int) s->ctx.h[i]);
	snprintf(out + n, outlen - n, ":%016" PRIx64,
			 ((uint64_t) s->ctx.Nh) << 32 | s->ctx.Nl);
	return true;
}

bool
remora_sha256_restore(RemoraSha256 *s, const char *saved)
{
	unsigned int h[8];
	uint64_t     bits;
	int          used = 0;

	if (strncmp(saved, SAVE_VERSION, 3) != 0 ||
		strlen(saved) != 3 + 64 + 1 + 16)
		return false;
	for (int i = 0; i < 8; i++)
		if (sscanf(saved + 3 + 8 * i, "%8x", &h[i]) != 1)
			return false;
	if (sscanf(saved + 3 + 64, ":%16" SCNx64 "%n", &bits, &used) != 1 ||
		used != 17 || bits % 512 != 0)
		return false;
	SHA256_Init(&s->ctx);
	for (int i = 0; i < 8; i++)
		s->ctx.h[i] = h[i];
	s->ctx.Nl = (SHA_LONG) (bits & 0xffffffff);
	s->ctx.Nh = (SHA_LONG) (bits >> 32);
	s->ctx.num = 0;
	return true;
}
