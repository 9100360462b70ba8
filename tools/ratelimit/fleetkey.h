/* SPDX-License-Identifier: MIT */
/*
 * A fleet's names for a key: the key_secret (from a file or hex), and the
 * Redis name of a (limit, key) pair computed by the library's own functions
 * (rl__keyhash_init, rl__keyhash, rl__redis_key_name), so the tool can never
 * disagree with the nodes about where a key lives.
 */
#ifndef RL_CLI_FLEETKEY_H
#define RL_CLI_FLEETKEY_H

#include <stddef.h>

#define FLEET_SECRET_MIN 16
#define FLEET_SECRET_MAX 4096

/*
 * The secret from exactly one of file or hex. A file's bytes are the secret
 * less one final line ending ("\n" or "\r\n"), the rule every component
 * that reads a secret file follows (docs/fleet.md, "The secret file").
 * 0, or -1 with a message in err. The caller frees *out.
 */
int fleet_secret_load(const char *file, const char *hex, unsigned char **out, size_t *len,
                      char *err, size_t errlen);

/* The length of a secret file's n bytes without one final "\n" or "\r\n". */
size_t fleet_secret_trim(const unsigned char *p, size_t n);

/* Bytes from hex ("6b6579"): 0, or -1 if s is not whole bytes of hex. */
int fleet_hex_decode(const char *s, unsigned char *out, size_t cap, size_t *len);

/* Lower-case hex of bytes (2 * n + 1 bytes of room). */
void fleet_hex_encode(const unsigned char *p, size_t n, char *out);

/* The key's hash name: {prefix:v1:limit:vshard}:k:<32 hex>. snprintf-style. */
int fleet_key_name(const unsigned char *secret, size_t secret_len, const char *prefix,
                   const char *limit, const void *key, size_t key_len, char *buf, size_t cap);

#endif
