#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The TLS build (-DRL_TLS=ON: hiredict in place of hiredis 0.14) in its own
# build directory, build-tls/, and its suites: test_tls (rediss:// against a
# TLS redis-server, certificates made with openssl) and the URL parser, then
# the server suites that show hiredict answers as hiredis did; test_tls also
# under valgrind. Debian 12 ships hiredict in bookworm-backports only: the
# suite is added beside the ones apt already lists, from the same archive,
# and libhiredict-dev (it sits beside libhiredis-dev; its shims package,
# which would replace hiredis's headers, is not installed), libssl-dev and
# openssl are installed when missing (root needed then). The main build
# stays on hiredis 0.14.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

die() {
  echo "tls-test.sh: error: $*" >&2
  exit 1
}

# shellcheck source=scripts/backports.sh
. "$root/scripts/backports.sh"

bash scripts/deps.sh || die "scripts/deps.sh failed"
if ! installed libhiredict-dev || ! installed libssl-dev || ! installed openssl; then
  [[ $(id -u) -eq 0 ]] || die "must run as root to install libhiredict-dev"
  add_backports
  export DEBIAN_FRONTEND=noninteractive
  apt-get update || die "apt-get update failed"
  apt-get install -y --no-install-recommends libssl-dev openssl \
    || die "apt-get install libssl-dev openssl failed"
  apt-get install -y --no-install-recommends -t bookworm-backports libhiredict-dev \
    || die "apt-get install libhiredict-dev failed"
fi
pkg-config --modversion hiredict_ssl

build=$root/build-tls
suites='^test_(tls|redisurl|sync|exact|quota|caller|redisurl_live|unixsock|restricted)$'
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRL_TLS=ON \
  -DRL_BUILD_BENCH=OFF -DRL_BUILD_EXAMPLES=OFF -DRL_BUILD_TOOLS=ON \
  || die "configure failed"
cmake --build "$build" -j "$(nproc)" || die "build failed"
ctest --test-dir "$build" -R "$suites" --output-on-failure --no-tests=error
# Under valgrind as scripts/test.sh --valgrind runs a suite.
RL_VALGRIND=1 CK_FORK=no valgrind --error-exitcode=1 --leak-check=full --fair-sched=yes -q \
  "$build/tests/test_tls"
