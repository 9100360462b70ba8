/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>
#include "alloc.h"

static void *default_alloc(void *opaque, size_t size, size_t align)
{
    (void)opaque;
    void *p = NULL;
    if (align < sizeof(void *))
        align = sizeof(void *);
    return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

static void default_free(void *opaque, void *ptr, size_t size, size_t align)
{
    (void)opaque;
    (void)size;
    (void)align;
    free(ptr);
}

void rl__alloc_defaults(rl_allocator_t *a)
{
    if (a->alloc == NULL && a->free == NULL) {
        a->alloc = default_alloc;
        a->free = default_free;
        a->opaque = NULL;
    }
}

void *rl__calloc(const rl_allocator_t *a, size_t size, size_t align)
{
    void *p = a->alloc(a->opaque, size, align);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

void rl__free(const rl_allocator_t *a, void *p, size_t size, size_t align)
{
    if (p != NULL)
        a->free(a->opaque, p, size, align);
}

char *rl__strdup(const rl_allocator_t *a, const char *s, int *ok)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = a->alloc(a->opaque, n, 1);
    if (d == NULL) {
        *ok = 0;
        return NULL;
    }
    memcpy(d, s, n);
    return d;
}

void rl__strfree(const rl_allocator_t *a, char *s)
{
    if (s != NULL)
        a->free(a->opaque, s, strlen(s) + 1, 1);
}
