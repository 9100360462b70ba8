#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian 12 packages libratelimit needs to build, test and run its
# demo, when any is missing (RL_WITH_NGINX=1: also nginx, nginx-dev and wrk). Idempotent: silent (and no network, no root
# needed) when everything is already installed. Run as root otherwise.
#
# redis-server is installed for its binary only: the test suites start their
# own servers on free loopback ports and stop them by PID. This script keeps
# the package's postinst from starting the system service (policy-rc.d, see
# below), and nothing in the project relies on that service either way.
# redis-tools (a dependency of redis-server, named for what the suites run)
# gives redis-cli: tests/redis_topology.c builds a Redis Cluster with
# `redis-cli --cluster create` and reshards it; Sentinels are redis-server
# --sentinel, so no redis-sentinel package is needed.
set -euo pipefail

PACKAGES=(
  build-essential
  cmake
  pkg-config
  libhiredis-dev
  libuv1-dev
  libxxhash-dev
  check
  liblua5.4-dev
  redis-server
  redis-tools
  valgrind
  python3
  python3-venv
  golang-go
  golang-golang-x-time-dev
  curl
)
# The nginx module (scripts/test.sh --nginx, -DRL_BUILD_NGINX=ON): nginx's
# module kit, nginx to test against, wrk to load it.
if [[ ${RL_WITH_NGINX:-0} == 1 ]]; then
  PACKAGES+=(nginx nginx-dev wrk)
fi

die() {
  echo "deps.sh: error: $*" >&2
  exit 1
}

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "deps.sh: installing missing packages: ${missing[*]}"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script targets Debian 12"
[[ $(id -u) -eq 0 ]] || die "must run as root to install: ${missing[*]}"

export DEBIAN_FRONTEND=noninteractive

# Keep invoke-rc.d from starting services (redis-server's postinst would
# start the system instance) while we install. Only when no policy-rc.d is
# in place already; ours is removed on exit whatever happens.
policy=/usr/sbin/policy-rc.d
own_policy=0
cleanup() {
  if [[ $own_policy -eq 1 ]]; then
    rm -f "$policy"
  fi
}
trap cleanup EXIT
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\n# temporary, from libratelimit scripts/deps.sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  own_policy=1
fi

apt-get update || die "apt-get update failed"
apt-get install -y --no-install-recommends "${missing[@]}" \
  || die "apt-get install failed for: ${missing[*]}"

# Verify: a package that apt reported installed but dpkg does not know is
# still a failure.
for pkg in "${missing[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || die "$pkg is still not installed"
done
echo "deps.sh: all packages installed"
