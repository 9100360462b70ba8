/* SPDX-License-Identifier: MIT */
#include <ratelimit.h>
#include <stdio.h>

int main(void)
{
    rl_t *rl;
    rl_limit_t lim;
    if (rl_limit_parse(&lim, "name=api rate=100/s burst=20", NULL, 0) < 0 ||
        rl_open(&rl, NULL) < 0)                    /* no Redis URL: local-only */
        return 1;
    int api = rl_limit_add(rl, &lim);              /* the limit's id, or RL_E* */
    for (int i = 1; i <= 25; i++) {                /* 25 at once: 20 fit the burst */
        rl_decision_t d;
        rl_decision_init(&d);
        int rc = rl_check(rl, api, "user-42", 7, 1, &d); /* key, key length, cost */
        if (rc == RL_ALLOW)
            printf("#%d allowed, %llu left\n", i, (unsigned long long)d.remaining);
        else if (rc == RL_DENY)
            printf("#%d denied, retry in %llu ms\n", i, (unsigned long long)d.retry_after_ms);
        else
            printf("#%d error: %s\n", i, rl_strerror(rc));
    }
    rl_close(rl);
    return 0;
}
