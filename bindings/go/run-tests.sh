#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Go binding's tests (and, with RL_GO_BENCH=1, the comparison with
# golang.org/x/time/rate) against a libratelimit build, offline:
#
#   bash bindings/go/run-tests.sh BUILD_DIR [go test arguments]
#
# The build is installed into a temporary prefix and found as a user finds
# it: PKG_CONFIG_PATH for cgo's pkg-config, an rpath for the run. Nothing is
# downloaded: golang.org/x/time comes from Debian's golang-golang-x-time-dev
# (/usr/share/gocode) through a temporary go.work, GOPROXY=off. ctest runs
# this as go_binding. Exit 77 (skipped) when go is missing and RL_SKIP_GO=1.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: run-tests.sh BUILD_DIR [go test args]}" && pwd)
shift
if ! command -v go >/dev/null 2>&1; then
  [[ ${RL_SKIP_GO:-0} == 1 ]] && { echo "go_binding: go not installed: skipped"; exit 77; }
  echo "go_binding: go is needed (apt-get install golang-go golang-golang-x-time-dev; scripts/deps.sh does)" >&2
  exit 1
fi
xtime=${RL_GO_XTIME:-/usr/share/gocode/src/golang.org/x/time}
[[ -f $xtime/go.mod ]] || { echo "go_binding: no golang.org/x/time at $xtime (golang-golang-x-time-dev)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-go.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log" >&2; exit 1; }
libdir=$(dirname "$(find "$tmp/prefix" -name ratelimit.pc -path '*/pkgconfig/*' | head -n 1)")
libdir=$(dirname "$libdir")
cat >"$tmp/go.work" <<WORK
go 1.19

use $here

replace golang.org/x/time => $xtime
WORK

export GOWORK=$tmp/go.work GOPROXY=off GOSUMDB=off GOFLAGS= GO111MODULE=on
export PKG_CONFIG_PATH=$libdir/pkgconfig CGO_ENABLED=1
export CGO_LDFLAGS="-Wl,-rpath,$libdir${CGO_LDFLAGS:+ $CGO_LDFLAGS}"
# The build directory holds Go's caches, so a run writes nothing in $HOME.
export GOCACHE=${GOCACHE:-$build/go/cache} GOPATH=${GOPATH:-$build/go/path}
cd "$here"
go vet ./...
go test -count=1 "$@" ./...
