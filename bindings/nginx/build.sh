#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build ngx_http_ratelimit_module.so against the installed nginx's module kit
# (Debian 12: nginx-dev, /usr/share/nginx/src), with the same configure
# signature as the installed nginx (its conf_flags, --with-compat), linked
# against libratelimit's static library so the module needs nothing of the
# build tree at run time.
#
#   bash bindings/nginx/build.sh LIB_BUILD_DIR OUT_DIR
#
# LIB_BUILD_DIR holds libratelimit.a (a CMake build directory); the module
# lands in OUT_DIR/ngx_http_ratelimit_module.so. NGX_SRC overrides the kit's
# location.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
lib_build=$(cd "${1:?usage: build.sh LIB_BUILD_DIR OUT_DIR}" && pwd)
out=${2:?usage: build.sh LIB_BUILD_DIR OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
ngx_src=${NGX_SRC:-/usr/share/nginx/src}

die() {
  echo "build.sh: error: $*" >&2
  exit 1
}
[[ -f $ngx_src/conf_flags && -x $ngx_src/configure ]] \
  || die "no nginx module kit at $ngx_src (Debian: apt-get install nginx-dev)"
[[ -f $lib_build/libratelimit.a ]] || die "no libratelimit.a in $lib_build"

# The kit is read-only and configure writes objs/ next to it: work on a copy.
work="$out/nginx-kit"
rm -rf "$work"
cp -r "$ngx_src" "$work"
# shellcheck disable=SC1091
. "$work/conf_flags" # NGX_CONF_FLAGS: the installed nginx's configure flags

export RL_NGX_INC="$root/include"
# A TLS build (-DRL_TLS=ON) links hiredict and OpenSSL in place of hiredis,
# as shared libraries: LGPL-3.0's terms for a dynamically linked hiredict
# (docs/deployment.md, "The client library, and its licence").
client_pc=hiredis
if grep -qs '^RL_TLS:BOOL=ON$' "$lib_build/CMakeCache.txt"; then
  client_pc="hiredict_ssl hiredict libssl libcrypto"
fi
# shellcheck disable=SC2086 # one word per package
RL_NGX_LIBS="$lib_build/libratelimit.a $(pkg-config --libs $client_pc libuv libxxhash) -lpthread"
export RL_NGX_LIBS

cd "$work"
./configure "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$here" \
  --with-cc-opt="-g -O2 -Wall -Werror" >"$out/configure.log" 2>&1 \
  || { tail -30 "$out/configure.log" >&2; die "configure failed (log: $out/configure.log)"; }
make -f objs/Makefile modules >"$out/make.log" 2>&1 \
  || { grep -E 'error|warning' "$out/make.log" >&2 || tail -30 "$out/make.log" >&2; die "make failed (log: $out/make.log)"; }
cp objs/ngx_http_ratelimit_module.so "$out/"
echo "build.sh: $out/ngx_http_ratelimit_module.so"
