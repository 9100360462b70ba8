/* SPDX-License-Identifier: MIT */
/*
 * Key identity under attack: keys are attacker-controlled, so the keyed
 * hash (NH, local/keyhash.h) and the table placement it feeds must not let an
 * attacker who does not know the secret make two keys share a bucket, nor
 * pile keys into one probe window.
 *
 * - crafted collisions: with a secret we know, NH collisions are easy to
 *   build (that is why the secret must stay secret); they must not carry
 *   over to any other secret.
 * - structured near-collision pairs in the style of xxHash issue #1127
 *   (complemented words or 16-byte lanes): never one identity, never one
 *   bucket.
 * - probe distances of a full table, with random and with adversarially
 *   similar keys: the same short distribution for both; the few keys that
 *   find no room in their RL_PROBE_MAX window at full load are counted and
 *   bounded (docs/hardening.md, finding 4).
 *
 * Every random choice comes from a fixed-seed PRNG: a failure reproduces.
 * Sizes shrink under valgrind and the sanitizers (scale()), which run these
 * suites too and are 3-50x slower; the assertions stay the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "instance.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define RL_HAVE_VALGRIND_H 1
#endif
#endif

/* ------------------------------------------------------------ helpers */


static void fill(uint64_t *s, void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        uint64_t v = next_u64(s);
        size_t k = n < 8 ? n : 8;
        memcpy(p, &v, k);
        p += k;
        n -= k;
    }
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int running_on_valgrind(void)
{
#ifdef RL_HAVE_VALGRIND_H
    if (RUNNING_ON_VALGRIND)
        return 1;
#endif
    /* valgrind preloads its vgpreload_*.so into the client. */
    const char *pre = getenv("LD_PRELOAD");
    return pre != NULL && strstr(pre, "vgpreload") != NULL;
}

/* How much to divide the big loops by: valgrind serialises and instruments
 * everything (~50x), TSan ~10x, ASan ~3x. RL_TEST_SCALE=N overrides. */
static unsigned scale(void)
{
    const char *e = getenv("RL_TEST_SCALE");
    if (e != NULL && atoi(e) > 0)
        return (unsigned)atoi(e);
    if (running_on_valgrind())
        return 32;
#if defined(__SANITIZE_THREAD__)
    return 16;
#elif defined(__SANITIZE_ADDRESS__)
    return 4;
#else
    return 1;
#endif
}

static int same_id(rl_keyid_t a, rl_keyid_t b) { return a.lo == b.lo && a.hi == b.hi; }

static void keyhash_from_seed(rl_keyhash_t *kh, uint64_t seed, unsigned char secret[32])
{
    uint64_t s = seed;
    fill(&s, secret, 32);
    rl__keyhash_init(kh, secret, 32);
}

static rl_t *open_with_secret(const unsigned char *secret, size_t len, uint32_t max_keys)
{
    rl_config_t c;
    rl_config_init(&c);
    c.key_secret = secret;
    c.key_secret_len = len;
    c.max_keys = max_keys;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    return rl;
}

static uint64_t peek_remaining(rl_t *rl, int id, const void *key, size_t len)
{
    rl_decision_t d;
    rl_decision_init(&d);
    int rc = rl_check(rl, id, key, len, 0, &d);
    REQUIRE(rc == RL_ALLOW || rc == RL_DENY, "peek: %s", rl_err_name(rc));
    return d.remaining;
}

/* -------------------------------------------- (a) crafted collisions */

/*
 * Given the NH key words of block `blk`, rewrite that block of `key` into
 * its twin: NH adds (m0 + k0)(m1 + k1) per block, so swapping the two
 * factors, m0' = (m1 + k1) - k0 and m1' = (m0 + k0) - k1, keeps the product
 * and changes the key (unless the factors were equal). Returns 0 then.
 */
static int craft_twin(const rl_keyhash_t *kh, unsigned char *key, size_t blk)
{
    const uint64_t k0 = kh->nh[2 * blk], k1 = kh->nh[2 * blk + 1];
    uint64_t m0 = get_le64(key + 16 * blk), m1 = get_le64(key + 16 * blk + 8);
    uint64_t a = m0 + k0, b = m1 + k1;
    if (a == b)
        return 0;
    put_le64(key + 16 * blk, b - k0);
    put_le64(key + 16 * blk + 8, a - k1);
    return 1;
}

START_TEST(crafted_collision_is_secret_specific)
{
    uint64_t s = 0xA11CE;
    unsigned char secret_a[32];
    rl_keyhash_t kh_a;
    keyhash_from_seed(&kh_a, 1, secret_a);

    enum { PAIRS = 64, OTHER_SECRETS = 256 };
    unsigned char k1[PAIRS][48], k2[PAIRS][48];
    size_t len[PAIRS];
    for (int i = 0; i < PAIRS; i++) {
        /* 16, 32 or 48 bytes: whole blocks, so every byte is ours to set;
         * twin one block, or every block (still one identity: NH sums). */
        len[i] = 16 * (size_t)(1 + i % 3);
        fill(&s, k1[i], len[i]);
        memcpy(k2[i], k1[i], len[i]);
        int changed = 0;
        for (size_t b = 0; b < len[i] / 16; b++)
            if (i % 2 == 0 || b == 0)
                changed |= craft_twin(&kh_a, k2[i], b);
        ck_assert(changed);
        ck_assert(memcmp(k1[i], k2[i], len[i]) != 0);
        /* The craft works: under the secret it was built for, one identity. */
        ck_assert(same_id(rl__keyhash(&kh_a, k1[i], len[i]), rl__keyhash(&kh_a, k2[i], len[i])));
    }
    /* ...and under any other secret, two. */
    for (int j = 0; j < OTHER_SECRETS; j++) {
        unsigned char secret_b[32];
        rl_keyhash_t kh_b;
        keyhash_from_seed(&kh_b, 1000 + (uint64_t)j, secret_b);
        for (int i = 0; i < PAIRS; i++)
            REQUIRE(!same_id(rl__keyhash(&kh_b, k1[i], len[i]), rl__keyhash(&kh_b, k2[i], len[i])),
                    "pair %d collides under secret %d too", i, j);
    }

    /* End to end: an instance keyed with secret A puts a crafted pair in one
     * bucket (draining one drains the other); with secret B they are apart. */
    unsigned char secret_b[32];
    rl_keyhash_t kh_b;
    keyhash_from_seed(&kh_b, 2, secret_b);
    rl_t *ra = open_with_secret(secret_a, sizeof secret_a, 1024);
    rl_t *rb = open_with_secret(secret_b, sizeof secret_b, 1024);
    int ia = rl_test_add(ra, "name=t rate=1/h burst=3");
    int ib = rl_test_add(rb, "name=t rate=1/h burst=3");
    for (int i = 0; i < PAIRS; i++) {
        for (int n = 0; n < 3; n++) {
            ck_assert_int_eq(rl_check(ra, ia, k1[i], len[i], 1, NULL), RL_ALLOW);
            ck_assert_int_eq(rl_check(rb, ib, k1[i], len[i], 1, NULL), RL_ALLOW);
        }
        ck_assert_uint_eq(peek_remaining(ra, ia, k2[i], len[i]), 0);
        ck_assert_uint_eq(peek_remaining(rb, ib, k2[i], len[i]), 3);
    }
    rl_close(ra);
    rl_close(rb);
}
END_TEST

/* ------------------------------------- (a') one identity, two forms */

/*
 * rl__keyhash (the check path's, with the one-block keys inline) and
 * rl__keyhash_general (NH's definition) must agree bit for bit on every
 * key: the identity names a key's bucket in every node's table and in
 * Redis, so a difference would split a key in two across versions. Every
 * length 0..RL_MAX_KEY_LEN, random bytes and the all-zero and all-0xff
 * keys, each at the very end of a block of exactly its size, so a read past
 * the key shows under ASan and valgrind.
 */
START_TEST(inline_form_is_the_general_form)
{
    const unsigned per_len = 1024 / scale() + 2;
    uint64_t s = 0x1DE7;
    unsigned char secret[32];
    rl_keyhash_t kh;
    unsigned long compared = 0;
    for (size_t len = 0; len <= RL_MAX_KEY_LEN; len++) {
        unsigned char *key = malloc(len > 0 ? len : 1);
        ck_assert_ptr_nonnull(key);
        for (unsigned j = 0; j < per_len; j++) {
            if (j % 16 == 0) /* a fresh secret now and then */
                keyhash_from_seed(&kh, 0xC0FFEE + len * 131 + j, secret);
            if (j == 0)
                memset(key, 0, len);
            else if (j == 1)
                memset(key, 0xff, len);
            else
                fill(&s, key, len);
            rl_keyid_t a = rl__keyhash(&kh, key, len), b = rl__keyhash_general(&kh, key, len);
            REQUIRE(same_id(a, b), "%zu-byte key %u: %016llx%016llx, general %016llx%016llx", len,
                    j, (unsigned long long)a.hi, (unsigned long long)a.lo,
                    (unsigned long long)b.hi, (unsigned long long)b.lo);
            compared++;
        }
        free(key);
    }
    ck_assert_uint_eq(compared, (RL_MAX_KEY_LEN + 1) * (unsigned long)per_len);
}
END_TEST

/*
 * Known answers: the identities of one fixed secret's keys, as this
 * library's NH has given them since keys were first named in Redis. A key's
 * Redis names are a PRF of its identity, so a change here renames every key
 * of a fleet (and splits it while nodes of two versions run).
 */
START_TEST(identity_known_answers)
{
    static const struct {
        size_t len;
        uint64_t lo, hi;
    } kat[] = {
        {0, UINT64_C(0x9ce54e650928e160), UINT64_C(0x62a91f4784e83f4a)},
        {1, UINT64_C(0x50e5bcfe5ef3b10f), UINT64_C(0xf32a962176250f89)},
        {2, UINT64_C(0xf684e793c3e32115), UINT64_C(0xf32a962176253bec)},
        {3, UINT64_C(0xbe5b015d879c811b), UINT64_C(0xf32a96217673d621)},
        {4, UINT64_C(0xad1320eaa6dee121), UINT64_C(0xf32a9621e7451e21)},
        {5, UINT64_C(0x70a26864e8214127), UINT64_C(0xf32a96b4efa0da38)},
        {7, UINT64_C(0x39ea48cf6aa60133), UINT64_C(0xf402c27794891a6f)},
        {8, UINT64_C(0x39036304abe86139), UINT64_C(0x00f50149594fcf82)},
        {9, UINT64_C(0xed1e20df1dfb34f6), UINT64_C(0x00f50149594fcfa9)},
        {12, UINT64_C(0xdbccd68ce190cd08), UINT64_C(0x00f50149d6274f76)},
        {13, UINT64_C(0x6faeeb7d22d32d0e), UINT64_C(0x00f501e2babf4679)},
        {15, UINT64_C(0x923a9be7a557ed1a), UINT64_C(0x0102c6dfeed7855b)},
        {16, UINT64_C(0x1553b61ce69a4d20), UINT64_C(0x65d01fc12e5c73e2)},
        {17, UINT64_C(0xd94d484ae7044d72), UINT64_C(0xd96744acc84e3e59)},
        {24, UINT64_C(0x17439eb2376e2ad1), UINT64_C(0x2e6198b8d9073e71)},
        {31, UINT64_C(0xbb7439930574af46), UINT64_C(0x2ebc3af5753be15b)},
        {32, UINT64_C(0x4806aed47dc1e12f), UINT64_C(0xbd047c75a4d6f8ff)},
        {33, UINT64_C(0x344187f35caa6e88), UINT64_C(0x2136012ac1656731)},
        {100, UINT64_C(0x902ee661c1ea0c27), UINT64_C(0xb63f1817036e78c7)},
        {511, UINT64_C(0xcd6fd47522671ccd), UINT64_C(0x6de7fd97ff2b469d)},
        {512, UINT64_C(0x8013025cf22cbed3), UINT64_C(0x59272e0625bb21ac)},
    };
    static const char secret[] = "test_keyhash known answers, fixed";
    rl_keyhash_t kh;
    rl__keyhash_init(&kh, secret, sizeof secret - 1);
    unsigned char key[RL_MAX_KEY_LEN];
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (unsigned char)(i * 37 + 11);
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        rl_keyid_t want = {kat[i].lo, kat[i].hi};
        REQUIRE(same_id(rl__keyhash(&kh, key, kat[i].len), want), "%zu-byte key", kat[i].len);
        REQUIRE(same_id(rl__keyhash_general(&kh, key, kat[i].len), want), "%zu-byte key, general",
                kat[i].len);
    }
}
END_TEST

/* ------------------------------------------- (b) structured pairs */

/* Build pair number i: a 32..240-byte message and its structured twin. */
static size_t structured_pair(uint64_t *s, unsigned char *m1, unsigned char *m2, int kind)
{
    size_t len = 32 + (size_t)(next_u64(s) % (240 - 32 + 1));
    fill(s, m1, len);
    memcpy(m2, m1, len);
    switch (kind) {
    case 0: /* first 8-byte words are bitwise complements */
        for (int b = 0; b < 8; b++)
            m2[b] = (unsigned char)~m1[b];
        break;
    case 1: { /* one whole 16-byte lane (an NH block) complemented */
        size_t lane = (size_t)(next_u64(s) % (len / 16));
        for (size_t b = 16 * lane; b < 16 * lane + 16; b++)
            m2[b] = (unsigned char)~m1[b];
        break;
    }
    case 2: { /* two lanes complemented, the second word of each only */
        size_t l1 = (size_t)(next_u64(s) % (len / 16)), l2 = (l1 + 1) % (len / 16);
        for (size_t b = 0; b < 8; b++) {
            m2[16 * l1 + 8 + b] = (unsigned char)~m1[16 * l1 + 8 + b];
            m2[16 * l2 + 8 + b] = (unsigned char)~m1[16 * l2 + 8 + b];
        }
        break;
    }
    default: /* every 16-byte lane complemented */
        for (size_t b = 0; b < len / 16 * 16; b++)
            m2[b] = (unsigned char)~m1[b];
        break;
    }
    return len;
}

START_TEST(structured_pairs_never_collide)
{
    const unsigned pairs = 200000 / scale();
    uint64_t s = 0x1127;
    unsigned char m1[240], m2[240], secret[32];
    rl_keyhash_t kh;
    for (unsigned i = 0; i < pairs; i++) {
        if (i % 64 == 0) /* a fresh secret every 64 pairs */
            keyhash_from_seed(&kh, 0x5EC0000 + i, secret);
        size_t len = structured_pair(&s, m1, m2, (int)(i % 4));
        rl_keyid_t a = rl__keyhash(&kh, m1, len), b = rl__keyhash(&kh, m2, len);
        REQUIRE(!same_id(a, b), "pair %u (kind %u, %zu bytes) collides", i, i % 4, len);
        /* The length block keeps a message and its one-byte-shorter prefix
         * apart too (NH pads the tail with zeros). */
        if (m1[len - 1] == 0)
            REQUIRE(!same_id(a, rl__keyhash(&kh, m1, len - 1)), "pair %u: prefix collides", i);
    }
}
END_TEST

START_TEST(structured_pairs_never_share_a_bucket)
{
    /* Through the public API: drain one key of each pair; its twin stays
     * full. One instance, many pairs, so the table also holds them all. */
    const unsigned pairs = 50000 / scale();
    unsigned char secret[32];
    uint64_t ss = 0xB0C4E7;
    fill(&ss, secret, sizeof secret);
    rl_t *rl = open_with_secret(secret, sizeof secret, 4 * pairs + 1024);
    int id = rl_test_add(rl, "name=pairs rate=1/h burst=1");
    uint64_t s = 0x1127B;
    unsigned char m1[240], m2[240];
    for (unsigned i = 0; i < pairs; i++) {
        size_t len = structured_pair(&s, m1, m2, (int)(i % 4));
        REQUIRE(rl_check(rl, id, m1, len, 1, NULL) == RL_ALLOW, "pair %u: first check", i);
        REQUIRE(rl_check(rl, id, m1, len, 1, NULL) == RL_DENY, "pair %u: second check", i);
        REQUIRE(peek_remaining(rl, id, m2, len) == 1, "pair %u shares a bucket", i);
    }
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    ck_assert_uint_eq(st.keys_live, pairs); /* one slot per drained key */
    ck_assert_uint_eq(st.noslot, 0);
    rl_close(rl);
}
END_TEST

/* --------------------------------------------- (c) probe distances */

typedef struct probe_stats {
    uint64_t hist[RL_PROBE_MAX + 1]; /* [RL_PROBE_MAX]: not found */
    uint64_t n;
} probe_stats_t;

static unsigned percentile(const probe_stats_t *ps, double q)
{
    uint64_t want = (uint64_t)(q * (double)ps->n + 0.5), seen = 0;
    for (unsigned d = 0; d <= RL_PROBE_MAX; d++) {
        seen += ps->hist[d];
        if (seen >= want && seen > 0)
            return d;
    }
    return RL_PROBE_MAX;
}

/* The longest distance of a key that has a slot. */
static unsigned maximum(const probe_stats_t *ps)
{
    for (unsigned d = RL_PROBE_MAX; d-- > 0;)
        if (ps->hist[d] != 0)
            return d;
    return 0;
}

/* Distance from the key's home slot to the live slot holding it. */
static unsigned distance_of(rl_t *rl, int id, const void *key, size_t len)
{
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, id);
    rl_probe_t p;
    rl__probe_init(&p, &rl->table, &rl->kh, rl__keyhash(&rl->kh, key, len), rl__limit_ref(id),
                   ls->salt);
    for (unsigned d = 0; d < RL_PROBE_MAX; d++) {
        rl_slot_t *s = &rl->table.slots[(p.home + d) % rl->table.nslots];
        /* relaxed: single-threaded here; the checks are done. */
        uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_relaxed);
        if (RL_CTRL_STATE(c) == RL_SLOT_LIVE && RL_CTRL_KEYBITS(c) == p.keybits &&
            atomic_load_explicit(&s->id_lo, memory_order_relaxed) == p.id.lo &&
            atomic_load_explicit(&s->id_hi, memory_order_relaxed) == p.id.hi)
            return d;
    }
    return RL_PROBE_MAX;
}

/* Key number i of a family: 0 random 16-byte keys; 1 a 500-byte shared
 * prefix and a counter; 2 one fixed 64-byte key with the counter's bytes
 * spread one per 16-byte lane (keys differing in a byte of several lanes);
 * 3 short decimal ids ("user:123"), the most common real key. */
static size_t family_key(int family, uint64_t seed, uint64_t i, unsigned char *buf)
{
    switch (family) {
    case 0: {
        uint64_t s = seed ^ (i * UINT64_C(0x9e3779b97f4a7c15));
        uint64_t a = next_u64(&s), b = next_u64(&s);
        memcpy(buf, &a, 8);
        memcpy(buf + 8, &b, 8);
        return 16;
    }
    case 1:
        memset(buf, 'p', 500);
        put_le64(buf + 500, i);
        return 508;
    case 2:
        memset(buf, 0xA5, 64);
        for (int b = 0; b < 4; b++)
            buf[16 * b + 7] = (unsigned char)(i >> (8 * b));
        return 64;
    default:
        return (size_t)sprintf((char *)buf, "user:%llu", (unsigned long long)i);
    }
}

static void probe_run(int family, uint32_t nkeys, probe_stats_t *ps)
{
    /* A fixed secret (the default is random) and a clock that never moves
     * (so no key goes idle and is reclaimed): the run is reproducible. */
    rl_test_clock_t clk = {UINT64_C(1000000000), 0};
    static const char secret[] = "test_hash probe secret, fixed";
    rl_config_t c;
    rl_config_init(&c);
    c.clock = rl_test_clock_fn;
    c.clock_ud = &clk;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.max_keys = nkeys;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    int id = rl_test_add(rl, "name=probe rate=1/h burst=1 on_failure=open");
    unsigned char key[512];
    for (uint64_t i = 0; i < nkeys; i++) {
        size_t len = family_key(family, 0xFA11, i, key);
        int rc = rl_check(rl, id, key, len, 1, NULL);
        REQUIRE(rc == RL_ALLOW, "family %d key %llu: %s", family, (unsigned long long)i,
                rl_err_name(rc));
    }
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    memset(ps, 0, sizeof *ps);
    for (uint64_t i = 0; i < nkeys; i++) {
        size_t len = family_key(family, 0xFA11, i, key);
        ps->hist[distance_of(rl, id, key, len)]++;
        ps->n++;
    }
    uint64_t noslot = ps->hist[RL_PROBE_MAX];
    printf("test_keyhash: probe distance, family %d, %u keys in %llu slots (load %.3f): "
           "p50 %u, p99 %u, p99.99 %u, max %u; no slot in the window: %llu keys (%.1f ppm)\n",
           family, nkeys, (unsigned long long)st.table_slots,
           (double)st.keys_live / (double)st.table_slots, percentile(ps, 0.50),
           percentile(ps, 0.99), percentile(ps, 0.9999), maximum(ps), (unsigned long long)noslot,
           1e6 * (double)noslot / (double)nkeys);
    fflush(stdout);
    /* The table and the stats agree on who got a slot. */
    ck_assert_uint_eq(st.noslot, noslot);
    ck_assert_uint_eq(st.keys_live + noslot, nkeys);
    /*
     * A key's probe window is RL_PROBE_MAX slots. At this load (2/3) linear
     * probing's longest clusters passed a 64-slot window for 15-24 keys per
     * million, and a 128-slot one for about 2: those keys found no slot
     * before max_keys was reached. With 256 none does: a full table holds
     * every one of its max_keys (docs/hardening.md has the figures).
     */
    ck_assert_uint_eq(noslot, 0);
    ck_assert_uint_lt(percentile(ps, 0.9999), RL_PROBE_MAX);
    rl_close(rl);
}

START_TEST(probe_distance_full_table)
{
    /* max_keys keys in a table sized for them: the worst load it can have
     * (2/3 of its slots). Random keys first, then the adversarial families:
     * the keyed hash must leave them no worse off (within a generous bound:
     * the tail of a linear-probing distribution is noisy). */
    const uint32_t nkeys = (uint32_t)(1000000u / scale());
    probe_stats_t base, adv;
    probe_run(0, nkeys, &base);
    unsigned p50 = percentile(&base, 0.50), p99 = percentile(&base, 0.99);
    for (int family = 1; family <= 3; family++) {
        probe_run(family, nkeys, &adv);
        ck_assert_uint_le(percentile(&adv, 0.50), p50 + 1);
        ck_assert_uint_le(percentile(&adv, 0.99), 2 * p99 + 2);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("keyhash");
    TCase *tc = tcase_create("identity");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, crafted_collision_is_secret_specific);
    tcase_add_test(tc, inline_form_is_the_general_form);
    tcase_add_test(tc, identity_known_answers);
    tcase_add_test(tc, structured_pairs_never_collide);
    tcase_add_test(tc, structured_pairs_never_share_a_bucket);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("probe");
    tcase_set_timeout(tp, 600);
    tcase_add_test(tp, probe_distance_full_table);
    suite_add_tcase(s, tp);
    return s;
}

int main(void) { return rl_test_run(suite()); }
