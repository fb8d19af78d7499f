/*-------------------------------------------------------------------------
 *
 * hash.h
 *	  SHA-256 whose state can be saved at a block boundary (hash.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_HASH_H
#define REMORA_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct RemoraSha256 RemoraSha256;

extern RemoraSha256 *remora_sha256_new(void);
extern void          remora_sha256_free(RemoraSha256 *s);
extern void          remora_sha256_reset(RemoraSha256 *s);
extern void remora_sha256_update(RemoraSha256 *s, const void *data, size_t len);
extern void remora_sha256_final_hex(RemoraSha256 *s, char out[65]);
extern bool remora_sha256_save(const RemoraSha256 *s, char *out, size_t outlen);
extern bool remora_sha256_restore(RemoraSha256 *s, const char *saved);
extern int64_t remora_sha256_bytes(const RemoraSha256 *s);

#endif /* REMORA_HASH_H */
