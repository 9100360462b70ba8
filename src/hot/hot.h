/* SPDX-License-Identifier: MIT */
/*
 * An instance's hot keys (rl_hotkeys): two Space-Saving sketches
 * (hot/sketch.h), the key-bytes capture (local/hotcap.h) and the hot marks.
 * - `round`: synced limits' keys, fed by the sync thread as it harvests
 *   each round (rl__hot_round_begin / _feed / _end), so a round costs the
 *   check path nothing and the sketch follows the fleet's sync cadence.
 * - `req`: local limits' keys (every limit of a local-only instance), fed
 *   when rl_hotkeys is called: it walks the table and folds the slots'
 *   counters into their limits' totals, as a sync round or a retire does.
 * Both under one mutex (control path only: the sync thread once a round,
 * rl_hotkeys callers). A key marked hot carries RL_SHAREWORD_HOT in its
 * slot's share word; the sync thread marks synced keys (it writes their
 * share words anyway), rl_hotkeys marks local ones (their share word holds
 * nothing else).
 */
#ifndef RL_HOT_H
#define RL_HOT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "hot/sketch.h"
#include "local/hotcap.h"
#include "ratelimit.h"

struct rl;

/* Log lines of one locked section, written once the mutex is released. */
#define RL_HOT_LOG_MAX 16
typedef struct rl_hot_logs {
    unsigned n, dropped;
    char line[RL_HOT_LOG_MAX][384];
} rl_hot_logs_t;

typedef struct rl_hot {
    pthread_mutex_t mu;
    rl_hotkeys_t round; /* synced limits; k = 0 (unused) when local-only */
    rl_hotkeys_t req;   /* local limits */
    rl_hotcap_t *cap;
    uint64_t round_last_fp;  /* the instance clock at the last round's end */
    uint64_t req_last_fp;   /* the instance clock at the last request's harvest */
    rl_hot_logs_t logs;     /* under mu */
    size_t k;               /* keys a sketch reports (rl_config_t.hotkeys_k) */
    /* Scratch of k x RL_HOTKEYS_SLACK entry pointers each (under mu): the
     * entries by demand, off the stack, whose size K would set. */
    rl_hk_entry_t **by_a, **by_b;
} rl_hot_t;

/* At rl_open, after the table and limits: sets rl->hot and the table's
 * capture; each sketch reports k keys (1..RL_HOTKEYS_K_MAX, x
 * RL_HOTKEYS_SLACK counters). A shared instance (shared) has none: its
 * rl_hotkeys answers RL_ENOTSUP. 0 or RL_ENOMEM. */
int rl__hot_init(struct rl *rl, int synced, int shared, size_t k);
void rl__hot_destroy(struct rl *rl);

/* Sync thread, each round: begin (takes the mutex), feed every harvested
 * key of a synced limit with its new offered count (w > 0) and the fleet
 * usage of its last reply (Q24 of the rate), end (evaluates the marks,
 * asks for key bytes, releases the mutex). */
void rl__hot_round_begin(struct rl *rl);
void rl__hot_feed(struct rl *rl, size_t slot, uint32_t lref, uint64_t id_lo, uint64_t id_hi,
                  uint64_t w, uint64_t usage_q);
void rl__hot_round_end(struct rl *rl);

/*
 * The hot word of a node's record in the registry (sync/nodes.h): at most
 * RL_HOT_WORD_ITEMS items, busiest first, comma-separated, each
 * LIMIT/KEYHEX/KEYLEN/DEMAND/FLEET/HOT: the limit's name, the key's first
 * bytes (at most 64) in lowercase hex, its full length, this node's demand
 * and the fleet rate it was marked by in thousandths per second, and 1 if
 * marked hot. The codec is pure (any thread; the CLI reads it too).
 */
#define RL_HOT_WORD_ITEMS 8
#define RL_HOT_WORD_TEXT_MAX (RL_HOT_WORD_ITEMS * 256) /* the longest value */

/* One item of a hot word. */
typedef struct rl_hot_item {
    char limit[64];              /* RL_NAME_MAX */
    unsigned char key[64];       /* the key's first bytes */
    size_t kept;                 /* bytes of key */
    uint64_t key_len;            /* the key's full length */
    uint64_t demand_mps;         /* thousandths per second */
    uint64_t fleet_mps;
    int hot;
} rl_hot_item_t;

/* Format one item (into buf, snprintf-style). The limit name must be valid. */
int rl__hot_item_format(const rl_hot_item_t *h, char *buf, size_t cap);

/*
 * The next item of a hot word's value [*p, end): 1 and *out filled, with *p
 * past it; 0 at the end. A malformed item (a reader must not trust a record
 * another version or a stranger wrote) is skipped.
 */
int rl__hot_item_next(const char **p, const char *end, rl_hot_item_t *out);

/* This node's hot word: the busiest keys of synced limits whose bytes are
 * kept, formatted into buf (NUL-terminated). Returns its length. Sync
 * thread, at the heartbeat. */
size_t rl__hot_publish(struct rl *rl, char *buf, size_t cap);

/* rl_hotkeys, but the local limits' keys are harvested (an interval closed)
 * only when the last harvest is min_age_ms old or more; otherwise they are
 * reported as of it (rl_metrics_text: scrapes in quick succession read the
 * same figures). */
int rl__hot_report(struct rl *rl, int limit, rl_hotkey_t *out, size_t n, uint64_t min_age_ms);

#endif
