/* SPDX-License-Identifier: MIT */
/* Hot keys' token leases: the lines' memory and the CPU hint (local/lease.h). */
#define _GNU_SOURCE
#include <sched.h>
#include <unistd.h>
#include "local/lease.h"
#include "base/alloc.h"

int rl__leases_init(rl_leases_t *l, const rl_allocator_t *a)
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    unsigned s = 1, shift = 2;
    while (s < RL_LEASE_STRIPES_MAX && (long)s < n) {
        s <<= 1;
        shift++;
    }
    l->stripes = s;
    l->shift = shift;
    l->line = rl__calloc(a, (size_t)RL_LEASE_GROUPS * s * sizeof *l->line, 64);
    return l->line != NULL ? 0 : RL_ENOMEM;
}

void rl__leases_destroy(rl_leases_t *l, const rl_allocator_t *a)
{
    if (l->line != NULL)
        rl__free(a, l->line, (size_t)RL_LEASE_GROUPS * l->stripes * sizeof *l->line, 64);
    l->line = NULL;
}

unsigned rl__lease_cpu_slow(void)
{
    /* the vDSO's getcpu when the thread has no rseq area (valgrind, older
     * kernels or C libraries) */
    int c = sched_getcpu();
    return c > 0 ? (unsigned)c : 0;
}
