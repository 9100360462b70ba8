/* SPDX-License-Identifier: MIT */
// libratelimit from C++17: a small RAII wrapper over the C API, then a few
// checks and the response headers of a denial.
//
//   g++ -std=c++17 -Wall -Wextra -Werror -pedantic -Iinclude examples/cpp/example.cpp build/libratelimit.so
//   LD_LIBRARY_PATH=build ./a.out
//
// The wrapper is deliberately thin: the C header is the specification, and
// everything here maps one-to-one onto it. Errors become exceptions at the
// boundary, so no negative code can be mistaken for a verdict.
#include <ratelimit.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace ratelimit {

// An RL_E* code as an exception; code() keeps the number for callers that
// branch on it (e.g. RL_ENOTFOUND after a limit was removed).
class Error : public std::runtime_error {
public:
    Error(int code, const std::string &where, const std::string &detail = {})
        : std::runtime_error(where + ": " + rl_err_name(code) + ": " + rl_strerror(code) +
                             (detail.empty() ? "" : ": " + detail)),
          code_(code)
    {
    }
    int code() const noexcept { return code_; }

private:
    int code_;
};

inline int check_rc(int rc, const char *where)
{
    if (rc < 0)
        throw Error(rc, where);
    return rc;
}

// rl_close through unique_ptr: the instance is freed exactly once, on every
// path out of its scope, exceptions included.
struct Closer {
    void operator()(rl_t *rl) const noexcept { rl_close(rl); }
};
using Handle = std::unique_ptr<rl_t, Closer>;

// One decision, owned by value (rl_decision_t is plain data).
class Decision {
public:
    explicit Decision(const rl_decision_t &d) : d_(d) {}
    bool allowed() const noexcept { return d_.allowed == RL_ALLOW; }
    std::uint64_t remaining() const noexcept { return d_.remaining; }
    std::uint64_t retry_after_ms() const noexcept { return d_.retry_after_ms; }
    const rl_decision_t &raw() const noexcept { return d_; }

    // rl_headers is snprintf-style: ask for the length, then render. Valid
    // while the decision's limit exists (d_.policy points into the instance).
    std::string headers() const
    {
        int n = check_rc(rl_headers(&d_, nullptr, 0), "rl_headers");
        std::string s(static_cast<std::size_t>(n) + 1, '\0');
        check_rc(rl_headers(&d_, s.data(), s.size()), "rl_headers");
        s.resize(static_cast<std::size_t>(n));
        return s;
    }

private:
    rl_decision_t d_;
};

// A limit of an instance: its id and a non-owning pointer to the instance
// (the instance owns its limits). Use it only while its Limiter lives.
class Limit {
public:
    Limit(rl_t *rl, int id) : rl_(rl), id_(id) {}
    int id() const noexcept { return id_; }

    Decision check(std::string_view key, std::uint32_t cost = 1) const
    {
        rl_decision_t d;
        rl_decision_init(&d);
        check_rc(rl_check(rl_, id_, key.data(), key.size(), cost, &d), "rl_check");
        return Decision(d);
    }

    void refund(std::string_view key, std::uint32_t cost = 1) const
    {
        check_rc(rl_refund(rl_, id_, key.data(), key.size(), cost), "rl_refund");
    }

private:
    rl_t *rl_;
    int id_;
};

class Limiter {
public:
    // No Redis URL: local-only, a complete single-node limiter. With one,
    // key_secret (16+ bytes, the same on every node of the fleet) is required.
    explicit Limiter(const char *redis_url = nullptr, const std::string &key_secret = "")
    {
        rl_config_t cfg;
        rl_config_init(&cfg); // inline: passes this program's sizeof
        cfg.redis_url = redis_url;
        if (!key_secret.empty()) {
            cfg.key_secret = key_secret.data();
            cfg.key_secret_len = key_secret.size();
        }
        char err[256];
        cfg.err = err; // rl_open says which field is wrong, and why
        cfg.errlen = sizeof err;
        rl_t *rl = nullptr;
        int rc = rl_open(&rl, &cfg);
        if (rc < 0)
            throw std::runtime_error(std::string("rl_open: ") + rl_err_name(rc) + ": " + err);
        h_.reset(rl);
    }

    // Parse a spec ("name=api rate=100/s burst=20") and add it.
    Limit add(const std::string &spec)
    {
        rl_limit_t lim;
        char err[256] = "";
        int rc = rl_limit_parse(&lim, spec.c_str(), err, sizeof err);
        if (rc < 0)
            throw Error(rc, "rl_limit_parse", err);
        return Limit(h_.get(), check_rc(rl_limit_add(h_.get(), &lim), "rl_limit_add"));
    }

    rl_t *get() const noexcept { return h_.get(); }

private:
    Handle h_;
};

} // namespace ratelimit

int main()
{
    try {
        ratelimit::Limiter limiter;
        // One token a minute: the figures below do not move while it runs.
        ratelimit::Limit api = limiter.add("name=api rate=1/m burst=3");

        std::string first_denial;
        for (const char *key : {"alice", "alice", "bob", "alice", "alice", "bob"}) {
            ratelimit::Decision d = api.check(key);
            if (d.allowed()) {
                std::printf("%-5s allowed, %llu left\n", key,
                            static_cast<unsigned long long>(d.remaining()));
            } else {
                std::printf("%-5s denied, retry in %llu ms\n", key,
                            static_cast<unsigned long long>(d.retry_after_ms()));
                if (first_denial.empty())
                    first_denial = d.headers();
            }
        }
        std::printf("\nHTTP/1.1 429 Too Many Requests\n%s", first_denial.c_str());

        // Errors arrive as exceptions carrying the code and the parser's
        // message, which names the offending word.
        try {
            limiter.add("name=bad rate=10/fortnight");
        } catch (const ratelimit::Error &e) {
            std::printf("\nexpected error (%d): %s\n", e.code(), e.what());
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "example: %s\n", e.what());
        return 1;
    }
    return 0;
}
