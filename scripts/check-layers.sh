#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The dependency direction of src/ (src/README.md), checked two ways:
#
#   bash scripts/check-layers.sh [BUILD_DIR]
#
# 1. #include lines: a file of the Redis layer (src/redis/) includes only
#    other files of the layer, system headers, and the few leaf headers
#    listed below (never the sync round, the node registry, the policy
#    module, the instance or the check path); the policy module (policy.[ch])
#    includes neither the Redis layer nor the sync thread; the check path
#    (check.c, check_*.c, checkint.h) includes neither.
# 2. With BUILD_DIR (ctest passes it): the undefined symbols of the Redis
#    layer's object files (nm) name no function of those modules.
# Exits 1 listing every violation, 0 when there is none.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-}"
fail=0

# Leaf headers the Redis layer may use: the public header, the allocator,
# the reconnect backoff, the key hash (key naming), error buffers, the
# thread start.
redis_allowed='^(redis/[a-z_]+\.h|ratelimit\.h|alloc\.h|backoff\.h|keyhash\.h|errbuf\.h|thread\.h)$'

check_includes() { # file allowed-regex forbidden-regex
    local f="$1" allow="$2" forbid="$3" inc
    while IFS= read -r inc; do
        if [[ -n "$allow" && ! "$inc" =~ $allow ]] || [[ -n "$forbid" && "$inc" =~ $forbid ]]; then
            echo "layers: ${f#"$root"/} includes \"$inc\"" >&2
            fail=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
}

shopt -s nullglob
redis_files=("$root"/src/redis/*.c "$root"/src/redis/*.h)
if [[ ${#redis_files[@]} -eq 0 ]]; then
    echo "layers: no src/redis/ files" >&2
    exit 1
fi
for f in "${redis_files[@]}"; do
    check_includes "$f" "$redis_allowed" ""
done
for f in "$root"/src/policy.c "$root"/src/policy.h; do
    check_includes "$f" "" '^(redis/|sync|core\.h|instance\.h|table\.h|check)'
done
for f in "$root"/src/check.c "$root"/src/check_*.c "$root"/src/checkint.h; do
    check_includes "$f" "" '^(redis/|sync)'
done

if [[ -n "$build" ]]; then
    objs=()
    while IFS= read -r o; do objs+=("$o"); done < <(find "$build" -path '*rl_objects.dir/src/redis/*.o' | sort)
    if [[ ${#objs[@]} -eq 0 ]]; then
        echo "layers: no Redis layer objects under $build" >&2
        exit 1
    fi
    forbidden_syms='^(rl__sync_|rl__nodes_|rl__policy_|rl__table_|rl__limits?_|rl__params_|rl__stat|rl__check|rl_check|rl__share|rl__bucket_|rl__gcra_)'
    for o in "${objs[@]}"; do
        while IFS= read -r sym; do
            if [[ "$sym" =~ $forbidden_syms ]]; then
                echo "layers: ${o##*/} calls $sym" >&2
                fail=1
            fi
        done < <(nm -u "$o" | awk '{print $NF}')
    done
fi
if [[ $fail -eq 0 ]]; then
    echo "layers: ok (${#redis_files[@]} Redis layer files${build:+, objects checked})"
fi
exit $fail
