/* SPDX-License-Identifier: MIT */
/*
 * An out-of-tree program using an installed libratelimit: open, parse a
 * limit, add it, check twice, close. Exits 0 only on the expected results:
 * a 1/minute limit with burst 1 admits the first check and denies the second.
 */
#include <stdio.h>
#include <string.h>

#include <ratelimit.h>

int main(void)
{
    if ((rl_version_hex() >> 16) != RL_VERSION_MAJOR) {
        fprintf(stderr, "header %d.x but library %s\n", RL_VERSION_MAJOR, rl_version());
        return 1;
    }
    rl_limit_t lim;
    char err[128];
    int rc = rl_limit_parse(&lim, "name=consumer rate=1/m burst=1 mode=local", err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "rl_limit_parse: %s: %s\n", rl_err_name(rc), err);
        return 1;
    }
    rl_t *rl;
    if ((rc = rl_open(&rl, NULL)) < 0) {
        fprintf(stderr, "rl_open: %s\n", rl_strerror(rc));
        return 1;
    }
    int id = rl_limit_add(rl, &lim);
    if (id < 0) {
        fprintf(stderr, "rl_limit_add: %s\n", rl_strerror(id));
        rl_close(rl);
        return 1;
    }
    const char *key = "client-1";
    rl_decision_t d1, d2;
    rl_decision_init(&d1);
    rl_decision_init(&d2);
    int first = rl_check(rl, id, key, strlen(key), 1, &d1);
    int second = rl_check(rl, id, key, strlen(key), 1, &d2);
    rl_close(rl);
    if (first != RL_ALLOW || second != RL_DENY || d2.retry_after_ms == 0) {
        fprintf(stderr, "unexpected: first %d (%s), second %d (%s), retry_after_ms %llu\n",
                first, rl_err_name(first), second, rl_err_name(second),
                (unsigned long long)d2.retry_after_ms);
        return 1;
    }
    printf("consumer OK: libratelimit %s, allow then deny (retry in %llu ms)\n", rl_version(),
           (unsigned long long)d2.retry_after_ms);
    return 0;
}
