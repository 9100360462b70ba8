/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: rl_limit_parse on arbitrary bytes.
 *
 * Specs come from config files and, in some deployments, from requests, so
 * the parser must survive any byte string. Input layout:
 *   byte 0      errlen selector (0..255; 0 also tests "no buffer")
 *   bytes 1..   the spec (copied into a fresh NUL-terminated heap buffer, so
 *               ASan sees any read past its end)
 * Checks: the code is 0 or one the header lists for rl_limit_parse; the
 * message buffer is NUL-terminated within errlen and nothing is written past
 * it (exact-size heap buffer); a success yields a limit that rl_limit_add
 * accepts (the parser never hands out a limit the registry would refuse).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ratelimit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rl_t *inst;

static int known_parse_code(int rc)
{
    return rc == 0 || rc == RL_ESPEC || rc == RL_ERANGE || rc == RL_ENAME || rc == RL_EMODE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t errlen = data[0];
    char *spec = malloc(size); /* size - 1 bytes of spec + NUL */
    if (spec == NULL)
        return 0;
    memcpy(spec, data + 1, size - 1);
    spec[size - 1] = '\0';
    /* An exact-size buffer (malloc(0) is fine: never written when errlen 0). */
    char *err = malloc(errlen ? errlen : 1);
    if (err == NULL) {
        free(spec);
        return 0;
    }
    if (errlen > 0)
        memset(err, 'Z', errlen); /* no stale NUL to hide a missing one */

    rl_limit_t lim;
    int rc = rl_limit_parse(&lim, spec, errlen ? err : NULL, errlen);
    if (!known_parse_code(rc))
        abort();
    if (errlen > 0) {
        if (memchr(err, '\0', errlen) == NULL)
            abort();
        /* A success clears any message; a failure explains itself when
         * there is room for more than the NUL. */
        if (rc == 0 && err[0] != '\0')
            abort();
        if (rc != 0 && errlen > 1 && err[0] == '\0')
            abort();
    }
    if (rc == 0) {
        if (lim.size != sizeof lim || lim.name[0] == '\0' ||
            memchr(lim.name, '\0', sizeof lim.name) == NULL)
            abort();
        if (inst == NULL && rl_open(&inst, NULL) != 0)
            abort();
        int id = rl_limit_add(inst, &lim);
        if (id == RL_ELIMITS) {
            /* Ids carry a generation, so after ~10^8 add/remove pairs the
             * registry runs out of fresh ids: start over. */
            rl_close(inst);
            if (rl_open(&inst, NULL) != 0)
                abort();
            id = rl_limit_add(inst, &lim);
        }
        if (id < 0 || rl_limit_remove(inst, id) != 0)
            abort();
        /* A removed in-flight limit's block is kept until rl_close (up to
         * ~100 MB for max_keys 10^6): start over rather than hold them all. */
        if (lim.kind == RL_KIND_INFLIGHT) {
            rl_close(inst);
            inst = NULL;
        }
    }
    /* The NULL-argument contract, on every input: cheap and never flaky. */
    if (rl_limit_parse(NULL, spec, NULL, 0) != RL_EINVAL ||
        rl_limit_parse(&lim, NULL, NULL, 0) != RL_EINVAL)
        abort();
    free(err);
    free(spec);
    return 0;
}
