/* SPDX-License-Identifier: MIT */
/*
 * The stage after a request's rate rules admitted it: its in-flight limits
 * (rl_inflight_acquire; full: 503 with Retry-After), its token rules
 * (rl_reserve_multi on the X-Max-Tokens estimate; refused: 429), then the
 * upstream (--upstream; without one the gateway answers itself, as the
 * upstream of a request that reports no usage). When the upstream answers,
 * each reservation is settled at its X-Usage-Tokens (the estimate without
 * one: a larger usage is debt the key pays back by refill, a smaller one is
 * refunded), or released whole when the upstream failed (no answer, or a
 * 5xx); each permit is released with its outcome and latency, which feed an
 * adaptive limit. A refusal at any step undoes the steps before it (the
 * rate rules' charges refunded, permits released unsampled).
 */
#ifndef GATEWAY_PROXY_H
#define GATEWAY_PROXY_H

#include "handler.h"

/* The rules of the stage, and each one's key. */
typedef struct proxy_rules {
    size_t ninflight, ntokens;
    const limit_rule_t *inflight[RL_MULTI_MAX];
    const char *inflight_key[RL_MULTI_MAX];
    const limit_rule_t *tokens[RL_MULTI_MAX];
    const char *tokens_key[RL_MULTI_MAX];
} proxy_rules_t;

/* The request's admitted rate part: to refund on a refusal, and the
 * decision its headers show. */
typedef struct proxy_local {
    const rl_request_t *reqs;
    size_t n;
    const rl_decision_t *shown; /* NULL: none */
    size_t nrules;
} proxy_local_t;

/* 0 with *out ready (refused, or answered without an upstream), or
 * HANDLER_PENDING: g->done(conn, reply) runs later on the loop, once. */
int proxy_start(gateway_t *g, const http_request_t *req, const proxy_rules_t *rules,
                const proxy_local_t *local, const char *path_json, reply_t *out, void *conn);

#endif
