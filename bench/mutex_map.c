/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>
#include "mutex_map.h"

/* One cache line per entry, like the library's slots, so the comparison is
 * about synchronisation and layout of work, not about footprint. */
typedef struct mm_entry {
    uint64_t hash; /* 0: empty; a key hashing to 0 is stored as 1 */
    double tokens;
    uint64_t last_ns;
    uint32_t key_len;
    char key[MM_KEY_MAX];
} mm_entry_t;

_Static_assert(sizeof(mm_entry_t) == 64, "one entry per cache line");

struct mm {
    pthread_mutex_t lock;
    mm_entry_t *e;
    size_t mask;
    size_t used;
    double per_ns; /* tokens per nanosecond */
    double burst;
};

mm_t *mm_open(size_t max_keys, uint64_t rate_count, uint64_t period_ms, uint64_t burst)
{
    mm_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    /* Power-of-two capacity at a load factor <= 2/3, as a textbook map. */
    size_t cap = 16;
    while (cap < max_keys + max_keys / 2)
        cap <<= 1;
    m->e = aligned_alloc(64, cap * sizeof *m->e);
    if (m->e == NULL) {
        free(m);
        return NULL;
    }
    memset(m->e, 0, cap * sizeof *m->e);
    m->mask = cap - 1;
    m->per_ns = (double)rate_count / ((double)period_ms * 1e6);
    m->burst = (double)burst;
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

void mm_close(mm_t *m)
{
    if (m == NULL)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m->e);
    free(m);
}

size_t mm_bytes(const mm_t *m) { return (m->mask + 1) * sizeof *m->e; }

int mm_check(mm_t *m, const void *key, size_t len, uint32_t cost)
{
    if (len > MM_KEY_MAX)
        return -1;
    uint64_t h = XXH3_64bits(key, len);
    if (h == 0)
        h = 1;
    /* The clock is read outside the lock: the obvious code would not hold a
     * lock across a call it does not need to. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    int rc = -1;
    pthread_mutex_lock(&m->lock);
    for (size_t i = h & m->mask, n = 0; n <= m->mask; i = (i + 1) & m->mask, n++) {
        mm_entry_t *e = &m->e[i];
        if (e->hash == 0) {
            if (m->used + 1 > m->mask - m->mask / 3)
                break; /* full at 2/3: refuse rather than degrade */
            m->used++;
            e->hash = h;
            e->key_len = (uint32_t)len;
            memcpy(e->key, key, len);
            e->tokens = m->burst;
            e->last_ns = now;
        } else if (e->hash != h || e->key_len != len || memcmp(e->key, key, len) != 0) {
            continue;
        }
        /* Refill on read; another thread may have stored a later time. */
        if (now > e->last_ns) {
            double t = e->tokens + (double)(now - e->last_ns) * m->per_ns;
            e->tokens = t < m->burst ? t : m->burst;
            e->last_ns = now;
        }
        rc = e->tokens >= (double)cost;
        if (rc)
            e->tokens -= (double)cost;
        break;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}
