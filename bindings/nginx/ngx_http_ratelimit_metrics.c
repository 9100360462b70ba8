/* SPDX-License-Identifier: MIT */
/*
 * One scrape answers for every worker of the host.
 *
 * Local-only, the workers share one instance (rl_open_shared): its text is
 * already the host's, and the location serves it as it is. With a Redis,
 * each worker has its own instance, and their texts are merged: each worker
 * owns a slot of a shared zone ("ratelimit_metrics") and writes
 * its own rl_metrics_text there once a second (and right before it answers
 * a scrape). The location reads every slot and merges them into one valid
 * Prometheus exposition: each family's # HELP / # TYPE once, then every
 * worker's samples with a worker="N" label. A slot is a seqlock: one writer
 * (the worker of that number; during a reload the old and new worker of one
 * number exclude each other with a CAS), readers retry a torn copy. Nothing
 * is locked across processes, so a worker dying mid-write blocks nobody: its
 * slot stays unreadable until its successor, which resets a slot whose
 * writer is dead.
 */
#include "ngx_http_ratelimit.h"

#include <signal.h>
#include <stdatomic.h>

#define RL_NGX_METRICS_MAGIC 0x726c6d6574726963ull /* "rlmetric" */
#define RL_NGX_METRICS_HEAD 4096

typedef struct {
    _Atomic uint64_t magic;
    _Atomic uint64_t slots;     /* fixed at creation */
    _Atomic uint64_t slot_size; /* bytes per slot, header included */
} rl_ngx_metrics_head_t;

typedef struct {
    _Atomic uint64_t seq;       /* odd while written */
    _Atomic int64_t pid;        /* the last writer */
    _Atomic uint64_t len;       /* bytes of text */
    _Atomic uint64_t too_big;   /* the text did not fit the slot */
    _Atomic uint64_t words[];   /* the text, 8 bytes per word */
} rl_ngx_metrics_slot_t;

typedef struct {
    rl_ngx_metrics_head_t *head;
    char *buf;                  /* this worker's rendering buffer */
    size_t cap;                 /* text bytes a slot holds */
} rl_ngx_metrics_t;

/* Per worker: set in init_process, read by the timer and the handler. */
static rl_ngx_metrics_t rl_ngx_metrics;

static rl_ngx_metrics_slot_t *
rl_ngx_slot(rl_ngx_metrics_head_t *head, uint64_t i)
{
    /* relaxed: fixed at creation, before any worker was forked */
    uint64_t size = atomic_load_explicit(&head->slot_size, memory_order_relaxed);

    return (rl_ngx_metrics_slot_t *) ((u_char *) head + RL_NGX_METRICS_HEAD + i * size);
}

static ngx_int_t
rl_ngx_metrics_init_zone(ngx_shm_zone_t *zone, void *data)
{
    ngx_http_ratelimit_main_conf_t *mcf = zone->data;
    rl_ngx_metrics_head_t *head;
    size_t slot_size;

    if (data != NULL) {
        /* A reload with the same zone: the old workers' figures stay
         * readable until the new ones overwrite them. */
        zone->data = data;
        return NGX_OK;
    }
    head = (rl_ngx_metrics_head_t *) zone->shm.addr;
    slot_size = ngx_align(sizeof(rl_ngx_metrics_slot_t) + mcf->metrics_slot, 64);
    /* relaxed: no worker exists yet; fork() publishes the zone to them */
    atomic_store_explicit(&head->slot_size, slot_size, memory_order_relaxed);
    atomic_store_explicit(&head->slots, (zone->shm.size - RL_NGX_METRICS_HEAD) / slot_size,
                          memory_order_relaxed);
    atomic_store_explicit(&head->magic, RL_NGX_METRICS_MAGIC, memory_order_relaxed);
    zone->data = head;
    return NGX_OK;
}

char *
ngx_http_ratelimit_metrics_zone(ngx_conf_t *cf, ngx_http_ratelimit_main_conf_t *mcf)
{
    ngx_str_t name = ngx_string("ratelimit_metrics");
    ngx_core_conf_t *ccf;
    ngx_int_t workers;
    size_t slot;

    ccf = (ngx_core_conf_t *) ngx_get_conf(cf->cycle->conf_ctx, ngx_core_module);
    workers = ccf->worker_processes == NGX_CONF_UNSET ? 1 : ccf->worker_processes;
    slot = mcf->metrics_slot == NGX_CONF_UNSET_SIZE ? 256 * 1024 : mcf->metrics_slot;
    mcf->metrics_slot = slot;
    mcf->metrics_zone = ngx_shared_memory_add(
        cf, &name,
        RL_NGX_METRICS_HEAD + (size_t) workers * ngx_align(sizeof(rl_ngx_metrics_slot_t) + slot, 64),
        &ngx_http_ratelimit_module);
    if (mcf->metrics_zone == NULL) {
        return NGX_CONF_ERROR;
    }
    mcf->metrics_zone->init = rl_ngx_metrics_init_zone;
    mcf->metrics_zone->data = mcf;
    return NGX_CONF_OK;
}

void
ngx_http_ratelimit_metrics_publish(ngx_http_ratelimit_main_conf_t *mcf, ngx_log_t *log)
{
    rl_ngx_metrics_t *m = &rl_ngx_metrics;
    rl_ngx_metrics_slot_t *slot;
    uint64_t seq, w, words;
    int len;

    if (m->head == NULL || mcf->rl == NULL
        || ngx_worker >= atomic_load_explicit(&m->head->slots, memory_order_relaxed))
    {
        return;
    }
    len = rl_metrics_text(mcf->rl, m->buf, m->cap + 1);
    if (len < 0) {
        ngx_log_error(NGX_LOG_ERR, log, 0, "ratelimit: rl_metrics_text: %s", rl_strerror(len));
        return;
    }
    /* The module's own gauge: what no instance counts (a test reads it to
     * see a worker serve while its exact checks wait). */
    if (mcf->exact != NULL && (size_t) len + 256 <= m->cap) {
        len = (int) (ngx_snprintf((u_char *) m->buf + len, 256,
                                  "# HELP ratelimit_nginx_exact_pending Requests of this worker "
                                  "waiting for Redis (an exact limit or a quota).\n"
                                  "# TYPE ratelimit_nginx_exact_pending gauge\n"
                                  "ratelimit_nginx_exact_pending %ui\n", mcf->exact_pending)
                     - (u_char *) m->buf);
    }
    slot = rl_ngx_slot(m->head, ngx_worker);
    /* relaxed: the CAS only claims the slot; the fence below orders it */
    seq = atomic_load_explicit(&slot->seq, memory_order_relaxed);
    if ((seq & 1)
        || !atomic_compare_exchange_strong_explicit(&slot->seq, &seq, seq + 1,
                                                    memory_order_relaxed, memory_order_relaxed))
    {
        return; /* the other worker of this number is writing */
    }
    /* release fence: the odd seq is visible before any text store */
    atomic_thread_fence(memory_order_release);
    if ((size_t) len > m->cap) {
        atomic_store_explicit(&slot->too_big, 1, memory_order_relaxed);
        len = 0;
    } else {
        atomic_store_explicit(&slot->too_big, 0, memory_order_relaxed);
    }
    words = ((uint64_t) len + 7) / 8;
    ngx_memzero(m->buf + len, words * 8 - (uint64_t) len);
    for (w = 0; w < words; w++) {
        uint64_t v;

        ngx_memcpy(&v, m->buf + w * 8, 8);
        /* relaxed: published by the release store of the even seq */
        atomic_store_explicit(&slot->words[w], v, memory_order_relaxed);
    }
    atomic_store_explicit(&slot->len, (uint64_t) len, memory_order_relaxed);
    atomic_store_explicit(&slot->pid, (int64_t) ngx_pid, memory_order_relaxed);
    /* release: a reader that sees the even seq sees the whole text */
    atomic_store_explicit(&slot->seq, seq + 2, memory_order_release);
}

static void
rl_ngx_metrics_tick(ngx_event_t *ev)
{
    ngx_http_ratelimit_main_conf_t *mcf = ev->data;

    /* An old worker draining after a reload leaves its slot to its successor. */
    if (ngx_exiting || ngx_quit || ngx_terminate) {
        return;
    }
    ngx_http_ratelimit_metrics_publish(mcf, ev->log);
    ngx_add_timer(ev, 1000);
}

void
ngx_http_ratelimit_metrics_start(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf)
{
    rl_ngx_metrics_t *m = &rl_ngx_metrics;
    rl_ngx_metrics_head_t *head = mcf->metrics_zone->data;
    rl_ngx_metrics_slot_t *slot;
    uint64_t seq;
    int64_t pid;

    /* relaxed: written once in the master before the fork */
    if (atomic_load_explicit(&head->magic, memory_order_relaxed) != RL_NGX_METRICS_MAGIC) {
        return;
    }
    m->head = head;
    m->cap = atomic_load_explicit(&head->slot_size, memory_order_relaxed)
             - sizeof(rl_ngx_metrics_slot_t);
    m->buf = ngx_alloc(m->cap + 8, cycle->log);
    if (m->buf == NULL) {
        m->head = NULL;
        return;
    }
    if (ngx_worker < atomic_load_explicit(&head->slots, memory_order_relaxed)) {
        slot = rl_ngx_slot(head, ngx_worker);
        /* relaxed: a stale view only delays the reset to the next start */
        seq = atomic_load_explicit(&slot->seq, memory_order_relaxed);
        pid = atomic_load_explicit(&slot->pid, memory_order_relaxed);
        if ((seq & 1) && pid > 0 && kill((pid_t) pid, 0) == -1 && errno == ESRCH) {
            /* Its writer died mid-write: nobody else will finish it. */
            atomic_compare_exchange_strong_explicit(&slot->seq, &seq, seq + 1,
                                                    memory_order_relaxed, memory_order_relaxed);
        }
    }
    ngx_memzero(&mcf->publish, sizeof(mcf->publish));
    mcf->publish.handler = rl_ngx_metrics_tick;
    mcf->publish.data = mcf;
    mcf->publish.log = cycle->log;
    mcf->publish.cancelable = 1; /* never holds a graceful shutdown */
    ngx_http_ratelimit_metrics_publish(mcf, cycle->log);
    ngx_add_timer(&mcf->publish, 1000);
}

/* A consistent copy of one slot's text, or NULL if it stays torn. */
static u_char *
rl_ngx_snapshot(ngx_pool_t *pool, rl_ngx_metrics_slot_t *slot, size_t cap, size_t *len,
                ngx_flag_t *too_big)
{
    u_char *buf = ngx_pnalloc(pool, cap + 8);
    uint64_t s1, s2, n, w;
    int tries;

    if (buf == NULL) {
        return NULL;
    }
    for (tries = 0; tries < 1000; tries++) {
        /* acquire: pairs with the writer's release store of the even seq */
        s1 = atomic_load_explicit(&slot->seq, memory_order_acquire);
        if (s1 & 1) {
            ngx_cpu_pause();
            continue;
        }
        n = atomic_load_explicit(&slot->len, memory_order_relaxed);
        *too_big = atomic_load_explicit(&slot->too_big, memory_order_relaxed) != 0;
        if (n > cap) {
            continue;
        }
        for (w = 0; w < (n + 7) / 8; w++) {
            /* relaxed: validated by the seq re-read below */
            uint64_t v = atomic_load_explicit(&slot->words[w], memory_order_relaxed);

            ngx_memcpy(buf + w * 8, &v, 8);
        }
        /* acquire fence: the text loads above happen before the re-read */
        atomic_thread_fence(memory_order_acquire);
        s2 = atomic_load_explicit(&slot->seq, memory_order_relaxed);
        if (s1 == s2) {
            *len = (size_t) n;
            return buf;
        }
    }
    return NULL;
}

typedef struct {
    u_char *text;
    size_t len;
} rl_ngx_text_t;

/* The name of the family a "# HELP name ..." line introduces. */
static ngx_str_t
rl_ngx_family(u_char *line, u_char *eol)
{
    ngx_str_t name;

    name.data = line + 7;
    name.len = 0;
    while (name.data + name.len < eol && name.data[name.len] != ' ') {
        name.len++;
    }
    return name;
}

/* Where the family `name` starts in t (at its # HELP line), or NULL. */
static u_char *
rl_ngx_find_family(rl_ngx_text_t *t, ngx_str_t *name)
{
    u_char *p = t->text, *end = t->text + t->len, *eol;
    ngx_str_t f;

    while (p < end) {
        eol = ngx_strlchr(p, end, '\n');
        if (eol == NULL) {
            eol = end;
        }
        if (eol - p > 7 && ngx_strncmp(p, "# HELP ", 7) == 0) {
            f = rl_ngx_family(p, eol);
            if (f.len == name->len && ngx_strncmp(f.data, name->data, f.len) == 0) {
                return p;
            }
        }
        p = eol + 1;
    }
    return NULL;
}

/* Copy one worker's samples of the family starting at `p`, labelled. */
static u_char *
rl_ngx_copy_samples(u_char *o, u_char *p, u_char *end, ngx_uint_t worker, ngx_flag_t header)
{
    u_char *eol, *brace, *space;
    ngx_flag_t first = 1;

    while (p < end) {
        eol = ngx_strlchr(p, end, '\n');
        if (eol == NULL) {
            eol = end;
        }
        if (*p == '#') {
            if (!first && eol - p > 7 && ngx_strncmp(p, "# HELP ", 7) == 0) {
                break; /* the next family */
            }
            if (header) {
                o = ngx_cpymem(o, p, eol - p);
                *o++ = '\n';
            }
        } else if (eol > p) {
            brace = ngx_strlchr(p, eol, '{');
            space = ngx_strlchr(p, eol, ' ');
            if (brace != NULL && (space == NULL || brace < space)) {
                o = ngx_cpymem(o, p, brace + 1 - p);
                o = ngx_sprintf(o, "worker=\"%ui\",", worker);
                o = ngx_cpymem(o, brace + 1, eol - brace - 1);
            } else if (space != NULL) {
                o = ngx_cpymem(o, p, space - p);
                o = ngx_sprintf(o, "{worker=\"%ui\"}", worker);
                o = ngx_cpymem(o, space, eol - space);
            } else {
                o = ngx_cpymem(o, p, eol - p);
            }
            *o++ = '\n';
        }
        first = 0;
        p = eol + 1;
    }
    return o;
}

ngx_int_t
ngx_http_ratelimit_metrics_handler(ngx_http_request_t *r)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    rl_ngx_metrics_head_t *head = rl_ngx_metrics.head;
    rl_ngx_text_t *texts;
    ngx_flag_t too_big;
    uint64_t slots, i, j;
    size_t total = 256, len;
    u_char *o, *out, *p, *end, *eol, *start;
    ngx_str_t fam;
    ngx_chain_t cl;
    ngx_buf_t *b;
    ngx_int_t rc;

    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }
    mcf = ngx_http_get_module_main_conf(r, ngx_http_ratelimit_module);
    if (mcf->shared) {
        /* One instance for the whole host: its text is every worker's. */
        int n = rl_metrics_text(mcf->rl, NULL, 0);

        for (;;) {
            if (n < 0) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
            total = (size_t) n + 4096; /* it may grow between two calls */
            out = ngx_pnalloc(r->pool, total);
            if (out == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
            n = rl_metrics_text(mcf->rl, (char *) out, total);
            if (n >= 0 && (size_t) n < total) {
                break;
            }
        }
        o = out + n;
        /* The answering worker's own gauge, what no instance counts (a
         * test reads it to see a worker serve while its checks wait). */
        if (mcf->exact != NULL && (size_t) n + 256 <= total) {
            o = ngx_snprintf(o, 256, "# HELP ratelimit_nginx_exact_pending Requests of the "
                             "answering worker waiting for Redis (an exact limit or a "
                             "quota).\n"
                             "# TYPE ratelimit_nginx_exact_pending gauge\n"
                             "ratelimit_nginx_exact_pending %ui\n", mcf->exact_pending);
        }
        goto send;
    }
    if (head == NULL) {
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }
    ngx_http_ratelimit_metrics_publish(mcf, r->connection->log);
    /* relaxed: fixed at creation */
    slots = atomic_load_explicit(&head->slots, memory_order_relaxed);
    texts = ngx_pcalloc(r->pool, sizeof(*texts) * (slots ? slots : 1));
    if (texts == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    for (i = 0; i < slots; i++) {
        too_big = 0;
        texts[i].text = rl_ngx_snapshot(r->pool, rl_ngx_slot(head, i), rl_ngx_metrics.cap,
                                        &texts[i].len, &too_big);
        if (texts[i].text == NULL) {
            texts[i].len = 0;
        }
        total += 64 + texts[i].len;
        /* Each sample line gains at most worker="N", (30 bytes). */
        for (j = 0; j < texts[i].len; j++) {
            total += texts[i].text[j] == '\n' ? 30 : 0;
        }
        if (too_big) {
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                          "ratelimit: worker %uL's metrics exceed ratelimit_metrics_slot", i);
        }
    }
    out = ngx_pnalloc(r->pool, total);
    if (out == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    o = out;
    /* Families in first-seen order; each worker's samples under one header. */
    for (i = 0; i < slots; i++) {
        p = texts[i].text;
        end = p + texts[i].len;
        while (p != NULL && p < end) {
            eol = ngx_strlchr(p, end, '\n');
            if (eol == NULL) {
                eol = end;
            }
            if (!(eol - p > 7 && ngx_strncmp(p, "# HELP ", 7) == 0)) {
                p = eol + 1;
                continue;
            }
            fam = rl_ngx_family(p, eol);
            for (j = 0; j < i; j++) {
                if (texts[j].text != NULL && rl_ngx_find_family(&texts[j], &fam) != NULL) {
                    break;
                }
            }
            if (j == i) { /* not emitted yet */
                o = rl_ngx_copy_samples(o, p, end, i, 1);
                for (j = i + 1; j < slots; j++) {
                    start = texts[j].text ? rl_ngx_find_family(&texts[j], &fam) : NULL;
                    if (start != NULL) {
                        o = rl_ngx_copy_samples(o, start, texts[j].text + texts[j].len, j, 0);
                    }
                }
            }
            p = eol + 1;
        }
    }
send:
    len = o - out;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = (off_t) len;
    ngx_str_set(&r->headers_out.content_type, "text/plain; version=0.0.4");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only || len == 0) {
        return rc == NGX_OK && len == 0 ? ngx_http_send_special(r, NGX_HTTP_LAST) : rc;
    }
    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    b->pos = out;
    b->last = o;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    cl.buf = b;
    cl.next = NULL;
    return ngx_http_output_filter(r, &cl);
}
