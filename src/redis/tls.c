/* SPDX-License-Identifier: MIT */
/* TLS for a rediss URL's connections (tls.h). */
#include <stdio.h>
#include <string.h>
#include "ratelimit.h"
#include "redis/tls.h"
#include "base/errors.h"

#ifdef RL_HAVE_TLS
#include <arpa/inet.h>
#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* OpenSSL's reason for its last error, and the queue emptied (it is the
 * thread's: a stale entry would explain the next failure wrongly). */
static const char *ossl_reason(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_last_error();
    ERR_clear_error();
    if (e == 0)
        return "no reason given";
    ERR_error_string_n(e, buf, cap);
    return buf;
}

/* An encrypted key would make OpenSSL ask for its passphrase on the
 * terminal: refused instead. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return 0;
}

static SSL_CTX *make_ctx(const rl_redistls_t *t, char *err, size_t errlen)
{
    char why[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        rl__errf(err, errlen, RL_ENOMEM, "TLS: no context: %s", ossl_reason(why, sizeof why));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    const char *file = t->ca_file[0] != '\0' ? t->ca_file : NULL;
    const char *dir = t->ca_dir[0] != '\0' ? t->ca_dir : NULL;
    int ok = file != NULL || dir != NULL ? SSL_CTX_load_verify_locations(ctx, file, dir)
                                         : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) {
        rl__errf(err, errlen, RL_ERANGE, "redis_url: %s %s: cannot load the CAs: %s",
                 file != NULL ? "tls_ca_file" : dir != NULL ? "tls_ca_dir" : "system store",
                 file != NULL ? file : dir != NULL ? dir : "", ossl_reason(why, sizeof why));
        goto fail;
    }
    if (t->cert[0] != '\0') {
        if (SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1) {
            rl__errf(err, errlen, RL_ERANGE, "redis_url: tls_cert %s: cannot load: %s",
                     t->cert, ossl_reason(why, sizeof why));
            goto fail;
        }
        int loaded = SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM);
        if (loaded != 1 && ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
            rl__errf(err, errlen, RL_ERANGE, "redis_url: tls_key %s is not the key of tls_cert "
                     "%s", t->key, t->cert);
            ERR_clear_error();
            goto fail;
        }
        if (loaded != 1) {
            rl__errf(err, errlen, RL_ERANGE, "redis_url: tls_key %s: cannot load (a PEM key "
                     "without a passphrase): %s", t->key, ossl_reason(why, sizeof why));
            goto fail;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            rl__errf(err, errlen, RL_ERANGE, "redis_url: tls_key %s is not the key of tls_cert "
                     "%s", t->key, t->cert);
            ERR_clear_error();
            goto fail;
        }
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

int rl__redis_tls_check(const rl_redistls_t *t, char *err, size_t errlen)
{
    SSL_CTX *ctx = make_ctx(t, err, errlen);
    if (ctx == NULL)
        return RL_ERANGE;
    SSL_CTX_free(ctx);
    return 0;
}

static int is_ip(const char *name)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}

/* The name the certificate must hold; SNI carries a DNS name only (RFC
 * 6066), an address is matched against the certificate's IP entries. */
static int set_name(SSL *ssl, const char *name)
{
    if (is_ip(name))
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name);
    return SSL_set_tlsext_host_name(ssl, name) == 1 && SSL_set1_host(ssl, name) == 1;
}

void *rl__redis_tls_start(redisContext *c, const rl_redistls_t *t, const char *host, int port,
                          char *err, size_t errlen)
{
    char why[256];
    SSL_CTX *ctx = make_ctx(t, err, errlen);
    if (ctx == NULL)
        return NULL;
    SSL *ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL object holds its own reference */
    const char *name = t->server_name[0] != '\0' ? t->server_name : host;
    if (ssl == NULL || !set_name(ssl, name)) {
        rl__errf(err, errlen, RL_ENOMEM, "TLS with %s:%d: cannot set up (name %s): %s", host,
                 port, name, ossl_reason(why, sizeof why));
        SSL_free(ssl);
        return NULL;
    }
    if (redisInitiateSSL(c, ssl) != REDIS_OK) {
        /* A blocking context's whole handshake failed here (a connecting
         * one's fails later, on its events). Not taken: hiredict owns the
         * object only once it succeeds. */
        rl__redis_tls_why(ssl, c, t, host, port, err, errlen);
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

int rl__redis_tls_done(const void *ssl) { return SSL_is_init_finished(ssl); }

/* What to do about a verification failure, after OpenSSL's words. */
static const char *verify_hint(long v)
{
    switch (v) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
        return "the server's certificate expired: renew it";
    case X509_V_ERR_CERT_NOT_YET_VALID:
        return "the server's certificate is not valid yet (check both clocks)";
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return "the certificate names another host: connect by a name it holds, or set "
               "tls_server_name";
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        return "unknown CA: the certificate is not signed by a CA of tls_ca_file, tls_ca_dir "
               "or the system's store";
    default:
        return "the server's certificate was refused";
    }
}

void rl__redis_tls_why(const void *ssl, const redisContext *c, const rl_redistls_t *t,
                       const char *host, int port, char *buf, size_t cap)
{
    char why[256];
    /* A server that requires a client certificate says so in an alert,
     * which a reset may discard before it is read. */
    const char *hint = t->cert[0] == '\0' ? " (if the server requires a client certificate, "
                                            "set tls_cert and tls_key)"
                                          : "";
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
        ERR_clear_error();
        snprintf(buf, cap, "TLS with %s:%d: certificate verify failed: %s (%s)", host, port,
                 X509_verify_cert_error_string(v), verify_hint(v));
        return;
    }
    if (ERR_peek_last_error() != 0) {
        snprintf(buf, cap, "TLS with %s:%d: handshake failed: %s%s", host, port,
                 ossl_reason(why, sizeof why), hint);
        return;
    }
    snprintf(buf, cap, "TLS with %s:%d: %s%s", host, port,
             c != NULL && c->errstr[0] != '\0' ? c->errstr : "connection closed in the handshake",
             hint);
}

#else /* no TLS in this build: url.c refuses rediss before any of these */

static const char no_tls[] = "this build has no TLS (hiredis 0.14; -DRL_TLS=ON builds on "
                             "hiredict)";

int rl__redis_tls_check(const rl_redistls_t *t, char *err, size_t errlen)
{
    (void)t;
    return rl__errf(err, errlen, RL_ERANGE, "redis_url: %s", no_tls);
}

void *rl__redis_tls_start(redisContext *c, const rl_redistls_t *t, const char *host, int port,
                          char *err, size_t errlen)
{
    (void)c, (void)t;
    rl__errf(err, errlen, RL_ERANGE, "TLS with %s:%d: %s", host, port, no_tls);
    return NULL;
}

int rl__redis_tls_done(const void *ssl) { return ssl == NULL; }

void rl__redis_tls_why(const void *ssl, const redisContext *c, const rl_redistls_t *t,
                       const char *host, int port, char *buf, size_t cap)
{
    (void)ssl, (void)c, (void)t;
    snprintf(buf, cap, "TLS with %s:%d: %s", host, port, no_tls);
}
#endif
