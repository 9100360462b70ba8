/* SPDX-License-Identifier: MIT */
/*
 * rl_open_shared: an instance whose every byte the check path touches (the
 * rl_t, its key table, limit registry, counters and clock state, and with a
 * redis_url the host's sync state, shm/host.h) lives in one MAP_SHARED
 * anonymous mapping. fork() gives each child
 * the same mapping at the same address, so the instance's pointers hold in
 * every process and the table's lock-free protocol, written for threads,
 * runs unchanged between processes: a CAS on a shared line is the same
 * instruction whichever process issues it.
 *
 * How it is built: the instance is opened twice, first with a measuring
 * allocator (to size the mapping; rl_open allocates the same blocks for the
 * same config), then with an arena allocator that carves the mapping.
 * Once open, the arena is sealed and later allocations (rl_metrics_text's
 * temporary snapshot) come from the calling process's heap; the arena's
 * free ignores blocks inside the mapping. No lock is held across processes
 * on the check path; the limit registry's writers' mutex is process-shared
 * and robust (local/limits.h: rl__limits_lock), so a process that dies holding it
 * blocks nobody.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "shm/shared.h"
#include "instance.h"
#include "base/alloc.h"
#include "base/structsize.h"
#include "base/errors.h"

/* The mapping's first line. Read by every process (rl_metrics_text
 * allocates through the arena): atomic. */
typedef struct rl_arena {
    _Atomic uint64_t size;   /* bytes mapped */
    _Atomic uint64_t used;   /* bytes carved, while unsealed */
    _Atomic uint32_t sealed; /* 1 once rl_open_shared returned */
} __attribute__((aligned(64))) rl_arena_t;

static void *heap_alloc(size_t size, size_t align)
{
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) == 0 ? p
                                                                                         : NULL;
}

static void *arena_alloc(void *opaque, size_t size, size_t align)
{
    rl_arena_t *a = opaque;
    /* relaxed: sealed is set before any fork and never cleared; a process
     * sees it set or was the one opening (single-threaded until return). */
    if (atomic_load_explicit(&a->sealed, memory_order_relaxed))
        return heap_alloc(size, align);
    /* relaxed: only the opening thread carves (see above). */
    uint64_t off = (atomic_load_explicit(&a->used, memory_order_relaxed) + align - 1) &
                   ~(uint64_t)(align - 1);
    if (off > atomic_load_explicit(&a->size, memory_order_relaxed) ||
        size > atomic_load_explicit(&a->size, memory_order_relaxed) - off)
        return NULL;
    atomic_store_explicit(&a->used, off + size, memory_order_relaxed);
    return (char *)a + off;
}

static void arena_free(void *opaque, void *p, size_t size, size_t align)
{
    rl_arena_t *a = opaque;
    (void)size;
    (void)align;
    /* relaxed: fixed when mapped. */
    uint64_t len = atomic_load_explicit(&a->size, memory_order_relaxed);
    if ((char *)p >= (char *)a && (char *)p < (char *)a + len)
        return; /* the mapping goes as a whole */
    free(p);
}

/* The measuring pass: real heap blocks, their worst-case arena footprint summed. */
typedef struct {
    uint64_t bytes;
} rl_measure_t;

static void *measure_alloc(void *opaque, size_t size, size_t align)
{
    rl_measure_t *m = opaque;
    m->bytes += size + align;
    return heap_alloc(size, align);
}

static void measure_free(void *opaque, void *p, size_t size, size_t align)
{
    (void)opaque;
    (void)size;
    (void)align;
    free(p);
}

int rl__alloc_is_shared(const rl_allocator_t *a) { return a->alloc == arena_alloc; }

void rl__shared_close(rl_t *rl)
{
    rl_arena_t *a = rl->alloc.opaque;
    /* relaxed: fixed when mapped. */
    munmap(a, (size_t)atomic_load_explicit(&a->size, memory_order_relaxed));
}

int rl_open_shared(rl_t **out, const rl_config_t *cfg)
{
    if (out == NULL)
        return RL_EINVAL;
    *out = NULL;
    rl_config_t c;
    rl_config_init(&c);
    if (cfg != NULL) {
        /* rl_open's size rule: an older layout, ours, or larger with a zero
         * tail (rl__open, given the copy, reports nothing of the tail). */
        int rc = rl__struct_ok(cfg, cfg->size, RL_CONFIG_SIZE_MIN, sizeof c);
        if (rc == 0 && !rl__config_size_known(cfg->size))
            rc = RL_ESIZE;
        if (rc != 0)
            return rc;
        memcpy(&c, cfg, cfg->size < sizeof c ? cfg->size : sizeof c);
        c.size = sizeof c;
        if (c.err != NULL && c.errlen > 0)
            c.err[0] = '\0';
        if (c.allocator.alloc != NULL || c.allocator.free != NULL)
            return rl__errf(c.err, c.errlen, RL_ENOTSUP,
                            "allocator: a shared instance allocates from its shared mapping");
    }

    rl_measure_t m = {0};
    rl_config_t probe = c;
    probe.allocator.alloc = measure_alloc;
    probe.allocator.free = measure_free;
    probe.allocator.opaque = &m;
    rl_t *rl = NULL;
    int rc = rl__open(&rl, &probe, RL__OPEN_SHARED);
    if (rc != 0)
        return rc;
    rl_close(rl);

    /* Room for the arena line, the fork guard's byte and its alignment. */
    size_t size = (size_t)m.bytes + 3 * sizeof(rl_arena_t) + 64;
    size = (size + RL_PAGE_SIZE - 1) & ~(RL_PAGE_SIZE - 1);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return rl__errf(c.err, c.errlen, RL_ENOMEM, "mmap of %zu bytes (MAP_SHARED) failed: %s",
                        size, strerror(errno));
    rl_arena_t *a = p;
    /* relaxed: nothing else sees the mapping before this returns. */
    atomic_store_explicit(&a->size, size, memory_order_relaxed);
    atomic_store_explicit(&a->used, sizeof *a, memory_order_relaxed);
    atomic_store_explicit(&a->sealed, 0, memory_order_relaxed);

    rl_config_t real = c;
    real.allocator.alloc = arena_alloc;
    real.allocator.free = arena_free;
    real.allocator.opaque = a;
    rc = rl__open(&rl, &real, RL__OPEN_SHARED);
    if (rc != 0) {
        munmap(p, size);
        return rc;
    }
    /* relaxed: published to children by fork(), to this process in order. */
    atomic_store_explicit(&a->sealed, 1, memory_order_relaxed);
    *out = rl;
    return 0;
}
