/* SPDX-License-Identifier: MIT */
/*
 * A reservation's and a wait's work on a key's bucket: the key resolved
 * (its limit's parameters, its probe, the time), an admission with a slack
 * (a wait's deadline), a debt charged without a test (a settle above the
 * estimate), and tokens given back (below it, or a release). The same
 * bucket words rl_check charges (local/table.h, local/bucket.h), in the
 * same units: a local key's word in its limit's rate, with its epoch bit
 * honoured; a synced key's in its node share's (local/shareword.h).
 */
#ifndef RL_RESERVE_CHARGE_H
#define RL_RESERVE_CHARGE_H

#include "core.h"

typedef struct rl_rkey {
    rl_limit_slot_t *ls;
    rl_limit_params_t p;
    rl_probe_t probe;
    uint64_t now;    /* instance time, the limit's clock source */
    uint64_t health; /* the instance's health word (synced limits) */
} rl_rkey_t;

/* What an admission decided. */
typedef struct rl_radmit {
    int allowed;
    int backed;        /* the tokens are on a bucket (settle and release move them) */
    uint32_t flags;    /* RL_FLAG_* */
    uint64_t remaining, reset_ms, retry_ms;
    uint64_t ready_fp; /* the instant from which the tokens conform (>= now) */
    rl_slot_t *slot;   /* the key's slot, for counting; NULL: none */
    uint32_t cost;     /* the tokens asked for (counted as tokens too) */
} rl_radmit_t;

/* Resolve limit `id` and key id `kid`, read the time: 0, RL_ENOTFOUND, or
 * RL_EMODE (exact or tiered). cost (when not 0) above the burst: RL_ECOST. */
int rl__rkey_resolve(rl_t *rl, int id, rl_keyid_t kid, uint32_t cost, rl_rkey_t *k);
/* The same, exact and tiered limits resolved too (reserve/exact.c). An
 * exact key's bucket word here is its on_failure=local fallback's, at the
 * limit's degraded rate (as rl_check's). */
int rl__rkey_resolve_any(rl_t *rl, int id, rl_keyid_t kid, uint32_t cost, rl_rkey_t *k);

/* Admit `cost` tokens if the bucket conforms within slack_fp of now; an
 * admitted charge's tokens are the caller's from o->ready_fp. */
void rl__rkey_admit(rl_t *rl, rl_rkey_t *k, uint32_t cost, uint64_t slack_fp, rl_radmit_t *o);

/* Count an admission as rl_check counts a check (the slot's counters, or
 * the limit's stripes when it had none; a synced key's tokens beyond its
 * decision for the global tier's report, local/table.h). */
void rl__rkey_count(rl_t *rl, rl_rkey_t *k, const rl_radmit_t *o, const void *key, size_t len);

/* A settle's difference (actual - estimate, either sign), counted in a
 * synced key's tokens for the global tier's report; nothing for a local
 * key or one with no slot. */
void rl__rkey_count_settle(rl_t *rl, rl_rkey_t *k, int64_t tokens);

/* Charge `tokens` without an admission test: the bucket may go into debt
 * (past its burst). 0, or -1 when the key has no slot and none is free
 * (the debt is not charged). */
int rl__rkey_debt(rl_t *rl, rl_rkey_t *k, uint64_t tokens);

/* Give `tokens` back, never past full; a key with no slot is full already.
 * o (may be NULL): its remaining and reset_ms set to the bucket's after. */
void rl__rkey_refund(rl_t *rl, rl_rkey_t *k, uint64_t tokens, rl_radmit_t *o);

/* The decision into the caller's struct (out->size bytes of it), as
 * rl_check writes one; rl__rkey_fail: an error's (a deny, all zero). */
void rl__rkey_decision(rl_decision_t *out, const rl_rkey_t *k, const rl_radmit_t *o);
void rl__rkey_fail(rl_decision_t *out);

#endif
