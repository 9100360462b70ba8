/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* program_invocation_short_name: the suite's name */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "redis_fixture.h"
#include "testutil.h"
#include "instance.h"
#include "sync/sync.h"

/* One server per suite process: the fixtures of a suite's cases run one
 * after another in the runner, and each forked test inherits the copy. */
static rl_test_redis_t srv;
static int srv_mode;
static const char *const *srv_extra; /* a plain server's extra arguments */
static int srv_skipped;
static char srv_url[64];

static void fixture_start(void)
{
    char err[1024];
    int rc = srv_extra != NULL ? rl_test_redis_start_args(&srv, srv_extra, err, sizeof err)
                               : rl_test_redis_start_as(&srv, srv_mode, 0, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", program_invocation_short_name, err);
        exit(1);
    }
    srv_skipped = rc == 1;
    if (srv_skipped)
        printf("%s: %s\n", program_invocation_short_name, err);
    snprintf(srv_url, sizeof srv_url, "redis://127.0.0.1:%d", srv.port);
}

static void fixture_stop(void) { rl_test_redis_stop(&srv); }

void rl_test_redis_fixture_as(TCase *tc, int mode)
{
    srv_mode = mode;
    tcase_add_unchecked_fixture(tc, fixture_start, fixture_stop);
}

void rl_test_redis_fixture(TCase *tc) { rl_test_redis_fixture_as(tc, RL_TEST_REDIS_PLAIN); }

void rl_test_redis_fixture_args(TCase *tc, const char *const *extra)
{
    srv_extra = extra;
    rl_test_redis_fixture_as(tc, RL_TEST_REDIS_PLAIN);
}

rl_test_redis_t *rl_test_redis(void) { return &srv; }

const char *rl_test_redis_url(void) { return srv_url; }

int rl_test_redis_skipped(void) { return srv_skipped; }

static void free_client(void *r) { redisFree(r); }

redisContext *rl_test_redis_client(int port)
{
    redisContext *r = redisConnect("127.0.0.1", port != 0 ? port : srv.port);
    ck_assert_ptr_nonnull(r);
    rl_test_hold(r, free_client);
    ck_assert_int_eq(r->err, 0);
    return r;
}

void rl_test_redis_flushall(void)
{
    redisContext *r = rl_test_redis_client(0);
    freeReplyObject(redisCommand(r, "FLUSHALL"));
    rl_test_release(r);
}

int rl_test_sync_connected(rl_t *rl)
{
    rl_sync_counters_t c;
    rl__sync_counters(rl->sync, &c);
    return c.connected == 1;
}

void rl_test_wait_sync_connected(rl_t *const *nodes, int n)
{
    for (int i = 0; i < n; i++)
        WAIT_FOR(rl_test_sync_connected(nodes[i]));
}

/* ------------------------------------------------------------------ TLS */

static char tls_dir[64];
static rl_test_tls_args_t tls_args;
static char tls_url[512];

/* One openssl(1) run; its output into err when it fails. */
static int openssl(const char *const *argv, char *err, size_t errlen)
{
    char out[512];
    int rc = rl_test_run_prog(argv, 20000, out, sizeof out);
    if (rc != 0)
        snprintf(err, errlen, "openssl %s: exit %d: %.300s", argv[1], rc, out);
    return rc == 0 ? 0 : -1;
}

/* <dir>/<name>.crt for san, signed by <dir>/<ca>.crt, valid days (-1: its
 * notAfter a day past). */
static int leaf(const char *dir, const char *name, const char *san, const char *ca,
                const char *days, char *err, size_t errlen)
{
    char key[128], csr[128], crt[128], ext[128], cacrt[128], cakey[128], subj[96];
    snprintf(key, sizeof key, "%s/%s.key", dir, name);
    snprintf(csr, sizeof csr, "%s/%s.csr", dir, name);
    snprintf(crt, sizeof crt, "%s/%s.crt", dir, name);
    snprintf(ext, sizeof ext, "%s/%s.ext", dir, name);
    snprintf(cacrt, sizeof cacrt, "%s/%s.crt", dir, ca);
    snprintf(cakey, sizeof cakey, "%s/%s.key", dir, ca);
    snprintf(subj, sizeof subj, "/CN=rl-test-%s", name);
    FILE *f = fopen(ext, "w");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", ext, strerror(errno));
        return -1;
    }
    fprintf(f, "basicConstraints=CA:FALSE\nsubjectAltName=%s\n", san);
    fclose(f);
    const char *req[] = {"openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                         "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", csr,
                         "-subj", subj, NULL};
    const char *sign[] = {"openssl", "x509", "-req", "-in", csr, "-CA", cacrt, "-CAkey", cakey,
                          "-CAcreateserial", "-out", crt, "-days", days, "-extfile", ext, NULL};
    return openssl(req, err, errlen) != 0 ? -1 : openssl(sign, err, errlen);
}

static int ca(const char *dir, const char *name, char *err, size_t errlen)
{
    char key[128], crt[128], subj[96];
    snprintf(key, sizeof key, "%s/%s.key", dir, name);
    snprintf(crt, sizeof crt, "%s/%s.crt", dir, name);
    snprintf(subj, sizeof subj, "/CN=rl-test-%s", name);
    const char *argv[] = {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                          "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", crt,
                          "-days", "2", "-subj", subj, NULL};
    return openssl(argv, err, errlen);
}

int rl_test_tls_certs(const char *dir, char *err, size_t errlen)
{
    static const char names[] = "DNS:localhost,IP:127.0.0.1";
    if (ca(dir, "ca", err, errlen) != 0 || ca(dir, "otherca", err, errlen) != 0)
        return -1;
    const struct {
        const char *name, *san, *ca, *days;
    } leaves[] = {
        {"server", names, "ca", "2"},          {"server2", names, "ca", "2"},
        {"client", "DNS:rl-test-client", "ca", "2"}, {"expired", names, "ca", "-1"},
        {"wronghost", "DNS:wrong.example", "ca", "2"}, {"unknownca", names, "otherca", "2"},
    };
    for (size_t i = 0; i < sizeof leaves / sizeof leaves[0]; i++)
        if (leaf(dir, leaves[i].name, leaves[i].san, leaves[i].ca, leaves[i].days, err,
                 errlen) != 0)
            return -1;
    return 0;
}

static void tls_paths(rl_test_tls_args_t *a, const char *dir, const char *cert)
{
    snprintf(a->cert, sizeof a->cert, "%s/%s.crt", dir, cert);
    snprintf(a->key, sizeof a->key, "%s/%s.key", dir, cert);
}

int rl_test_tls_server_start(rl_test_redis_t *s, rl_test_tls_args_t *a, const char *dir,
                             const char *cert, int require_client, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->port = rl_test_free_port();
    snprintf(a->port_s, sizeof a->port_s, "%d", a->port);
    tls_paths(a, dir, cert);
    snprintf(a->ca, sizeof a->ca, "%s/ca.crt", dir);
    const char *argv[] = {"--tls-port", a->port_s, "--tls-cert-file", a->cert, "--tls-key-file",
                          a->key, "--tls-ca-cert-file", a->ca, "--tls-auth-clients",
                          require_client ? "yes" : "optional", "--appendonly", "yes",
                          "--appendfsync", "always", NULL};
    memcpy(a->argv, argv, sizeof argv);
    return rl_test_redis_start_args(s, a->argv, err, errlen);
}

int rl_test_tls_server_rotate(rl_test_redis_t *s, rl_test_tls_args_t *a, const char *dir,
                              const char *cert, char *err, size_t errlen)
{
    rl_test_redis_kill(s);
    tls_paths(a, dir, cert); /* the arguments point at these buffers */
    return rl_test_redis_restart(s, err, errlen);
}

static void tls_fixture_start(void)
{
    char err[1024];
    snprintf(tls_dir, sizeof tls_dir, "/tmp/rl-tls-XXXXXX");
    if (mkdtemp(tls_dir) == NULL || rl_test_tls_certs(tls_dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s: certificates: %s\n", program_invocation_short_name,
                tls_dir[0] != '\0' ? err : strerror(errno));
        exit(1);
    }
    int rc = rl_test_tls_server_start(&srv, &tls_args, tls_dir, "server", 0, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", program_invocation_short_name, err);
        exit(1);
    }
    srv_skipped = rc == 1;
    snprintf(srv_url, sizeof srv_url, "redis://127.0.0.1:%d", srv.port);
    snprintf(tls_url, sizeof tls_url,
             "rediss://127.0.0.1:%d?tls_ca_file=%s/ca.crt&tls_cert=%s/client.crt&"
             "tls_key=%s/client.key",
             tls_args.port, tls_dir, tls_dir, tls_dir);
}

static void tls_fixture_stop(void)
{
    rl_test_redis_stop(&srv);
    const char *argv[] = {"rm", "-rf", tls_dir, NULL};
    char out[128];
    if (tls_dir[0] != '\0')
        rl_test_run_prog(argv, 10000, out, sizeof out);
}

void rl_test_redis_fixture_tls(TCase *tc)
{
    tcase_add_unchecked_fixture(tc, tls_fixture_start, tls_fixture_stop);
}

const char *rl_test_tls_dir(void) { return tls_dir; }

rl_test_tls_args_t *rl_test_tls_args(void) { return &tls_args; }

const char *rl_test_redis_tls_url(void) { return tls_url; }
