/* SPDX-License-Identifier: MIT */
#include "redis/uv.h"
#include "base/alloc.h"

typedef struct uvev {
    redisAsyncContext *ac; /* NULL once hiredis has let go of the context */
    uv_poll_t poll;
    int events; /* what hiredis waits for: UV_READABLE | UV_WRITABLE */
    const rl_allocator_t *alloc;
} uvev_t;

static void on_poll(uv_poll_t *handle, int status, int events)
{
    uvev_t *e = handle->data;
    /* An error carries no events: let hiredis find it where it was looking
     * (a pending connect is a wait for writable). */
    int ev = status < 0 ? e->events : events;
    /* Each handler may end the context (cleanup clears e->ac); e itself is
     * freed only by the close callback, later in the loop. */
    if (e->ac != NULL && (ev & UV_READABLE))
        redisAsyncHandleRead(e->ac);
    if (e->ac != NULL && (ev & UV_WRITABLE))
        redisAsyncHandleWrite(e->ac);
}

static void set_events(uvev_t *e, int events)
{
    e->events = events;
    if (events != 0)
        uv_poll_start(&e->poll, events, on_poll);
    else
        uv_poll_stop(&e->poll);
}

static void add_read(void *p) { set_events(p, ((uvev_t *)p)->events | UV_READABLE); }
static void del_read(void *p) { set_events(p, ((uvev_t *)p)->events & ~UV_READABLE); }
static void add_write(void *p) { set_events(p, ((uvev_t *)p)->events | UV_WRITABLE); }
static void del_write(void *p) { set_events(p, ((uvev_t *)p)->events & ~UV_WRITABLE); }

static void on_closed(uv_handle_t *handle)
{
    uvev_t *e = handle->data;
    rl__free(e->alloc, e, sizeof *e, _Alignof(uvev_t));
}

static void cleanup(void *p)
{
    uvev_t *e = p;
    e->ac = NULL;
    uv_close((uv_handle_t *)&e->poll, on_closed);
}

int rl__redisuv_attach(redisAsyncContext *ac, uv_loop_t *loop, const rl_allocator_t *alloc)
{
    if (ac->ev.data != NULL)
        return REDIS_ERR;
    uvev_t *e = rl__calloc(alloc, sizeof *e, _Alignof(uvev_t));
    if (e == NULL)
        return REDIS_ERR;
    if (uv_poll_init(loop, &e->poll, ac->c.fd) != 0) {
        rl__free(alloc, e, sizeof *e, _Alignof(uvev_t));
        return REDIS_ERR;
    }
    e->ac = ac;
    e->alloc = alloc;
    e->poll.data = e;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    ac->ev.data = e;
    return REDIS_OK;
}
