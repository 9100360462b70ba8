/* SPDX-License-Identifier: MIT */
/* The fail-open journal's ring (see quota/journal.h). */
#include "quota/journal.h"
#include "base/alloc.h"

int rl__qjournal_init(rl_qjournal_t *j, const rl_allocator_t *a, uint32_t cap)
{
    j->e = NULL;
    j->cap = cap;
    j->head = j->len = 0;
    if (cap == 0)
        return 0;
    j->e = rl__calloc(a, (size_t)cap * sizeof *j->e, 8);
    return j->e != NULL ? 0 : RL_ENOMEM;
}

void rl__qjournal_destroy(rl_qjournal_t *j, const rl_allocator_t *a)
{
    if (j->e != NULL)
        rl__free(a, j->e, (size_t)j->cap * sizeof *j->e, 8);
    j->e = NULL;
    j->len = 0;
}

int rl__qjournal_push(rl_qjournal_t *j, const rl_qjentry_t *e)
{
    if (j->len == j->cap)
        return -1;
    j->e[(j->head + j->len) % j->cap] = *e;
    j->len++;
    return 0;
}

int rl__qjournal_peek(const rl_qjournal_t *j, rl_qjentry_t *out)
{
    if (j->len == 0)
        return -1;
    *out = j->e[j->head];
    return 0;
}

void rl__qjournal_pop(rl_qjournal_t *j)
{
    if (j->len == 0)
        return;
    j->head = (j->head + 1) % j->cap;
    j->len--;
}
