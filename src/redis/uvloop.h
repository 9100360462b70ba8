/* SPDX-License-Identifier: MIT */
/*
 * uv_loop_close, told to ThreadSanitizer. libuv closes a loop's epoll and
 * eventfd descriptors with a raw close system call (uv__close_nocancel:
 * syscall(SYS_close) on Linux unless libuv itself is built with TSan), which
 * TSan's interceptors never see. TSan then thinks those descriptor numbers
 * are still open, and when another thread's socket() or epoll_create1()
 * gets one of them back it reports a data race between the two creations
 * (the fresh-clone CI's TSan stage, test_api: a sync thread's socket() against
 * an earlier instance's exact loop). Under TSan this announces the two
 * closes through the sanitizer's syscall hooks just before libuv makes
 * them; elsewhere it is uv_loop_close.
 */
#ifndef RL_UVLOOP_H
#define RL_UVLOOP_H

#include <uv.h>

#if defined(__SANITIZE_THREAD__) && defined(__linux__)
/* The runtime's close hook (what <sanitizer/linux_syscall_hooks.h>'s
 * __sanitizer_syscall_pre_close expands to); GCC 12 ships libtsan with the
 * symbol but not that header. */
void __sanitizer_syscall_pre_impl_close(long fd);
#endif

static inline int rl__uv_loop_close(uv_loop_t *loop)
{
#if defined(__SANITIZE_THREAD__) && defined(__linux__)
    /* Only a loop that will close (no handle left) closes its descriptors. */
    if (!uv_loop_alive(loop)) {
        int backend = uv_backend_fd(loop);
        int async_fd = loop->async_io_watcher.fd, async_wfd = loop->async_wfd;
        if (async_wfd >= 0 && async_wfd != async_fd)
            __sanitizer_syscall_pre_impl_close(async_wfd);
        if (async_fd >= 0)
            __sanitizer_syscall_pre_impl_close(async_fd);
        if (backend >= 0)
            __sanitizer_syscall_pre_impl_close(backend);
    }
#endif
    return uv_loop_close(loop);
}

#endif
