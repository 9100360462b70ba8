/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "fleetkey.h"
#include "local/keyhash.h"
#include "sync/sync.h"

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int fleet_hex_decode(const char *s, unsigned char *out, size_t cap, size_t *len)
{
    size_t n = strlen(s);
    if (n % 2 != 0 || n / 2 > cap)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_val(s[i]), lo = hex_val(s[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    *len = n / 2;
    return 0;
}

void fleet_hex_encode(const unsigned char *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

size_t fleet_secret_trim(const unsigned char *p, size_t n)
{
    if (n > 0 && p[n - 1] == '\n')
        n -= n > 1 && p[n - 2] == '\r' ? 2 : 1;
    return n;
}

int fleet_secret_load(const char *file, const char *hex, unsigned char **out, size_t *len,
                      char *err, size_t errlen)
{
    *out = NULL;
    if ((file == NULL) == (hex == NULL)) {
        snprintf(err, errlen, "give the fleet's key_secret with exactly one of --secret-file F "
                              "or --secret HEX");
        return -1;
    }
    if (file != NULL) {
        char *text;
        /* Room for the line ending the rule drops. */
        if (cli_read_file(file, FLEET_SECRET_MAX + 2, &text, len) != 0) {
            snprintf(err, errlen, "cannot read the secret file %s: %s", file,
                     errno == EFBIG ? "longer than 4096 bytes" : strerror(errno));
            return -1;
        }
        *out = (unsigned char *)text;
        *len = fleet_secret_trim(*out, *len);
        if (*len > FLEET_SECRET_MAX) {
            snprintf(err, errlen, "the secret file %s: longer than 4096 bytes", file);
            free(*out);
            *out = NULL;
            return -1;
        }
    } else {
        unsigned char *buf = malloc(FLEET_SECRET_MAX);
        if (buf == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        if (fleet_hex_decode(hex, buf, FLEET_SECRET_MAX, len) != 0) {
            free(buf);
            snprintf(err, errlen, "--secret: not hex, or longer than %d bytes",
                     FLEET_SECRET_MAX);
            return -1;
        }
        *out = buf;
    }
    if (*len < FLEET_SECRET_MIN) {
        snprintf(err, errlen, "the key secret is %zu bytes; a fleet's key_secret has at least %d",
                 *len, FLEET_SECRET_MIN);
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

int fleet_key_name(const unsigned char *secret, size_t secret_len, const char *prefix,
                   const char *limit, const void *key, size_t key_len, char *buf, size_t cap)
{
    rl_keyhash_t kh;
    rl__keyhash_init(&kh, secret, secret_len);
    rl_keyid_t id = rl__keyhash(&kh, key, key_len);
    int n = rl__redis_key_name(&kh, prefix, limit, id, buf, cap);
    /* The derived keys are as secret as the secret itself. */
    memset(&kh, 0, sizeof kh);
    __asm__ __volatile__("" : : "r"(&kh) : "memory");
    return n;
}
