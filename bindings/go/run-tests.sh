#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Go binding's tests (and, with RL_GO_BENCH=1, the comparison with
# golang.org/x/time/rate in its own module, xtimebench/) against a
# libratelimit build, offline:
#
#   bash bindings/go/run-tests.sh BUILD_DIR [go test arguments]
#
# The build is installed into a temporary prefix and found as a user finds
# it: PKG_CONFIG_PATH for cgo's pkg-config, an rpath for the run. Nothing is
# downloaded (GOPROXY=off). First the binding module alone, as a consumer
# builds it (no go.work): it must need nothing outside the standard library.
# Then the comparison module, whose golang.org/x/time comes from Debian's
# golang-golang-x-time-dev (/usr/share/gocode) through a temporary go.work.
# ctest runs this as go_binding. Exit 77 (skipped) when go is missing and
# RL_SKIP_GO=1.
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
export GOPROXY=off GOSUMDB=off GOFLAGS= GO111MODULE=on
export PKG_CONFIG_PATH=$libdir/pkgconfig CGO_ENABLED=1
export CGO_LDFLAGS="-Wl,-rpath,$libdir${CGO_LDFLAGS:+ $CGO_LDFLAGS}"
# The build directory holds Go's caches, so a run writes nothing in $HOME.
export GOCACHE=${GOCACHE:-$build/go/cache} GOPATH=${GOPATH:-$build/go/path}
cd "$here"

# The binding as a consumer's `go mod tidy` sees it: its own go.mod, no
# workspace, no network. Every package it and its tests import must be the
# standard library's or its own.
export GOWORK=off
deps=$(go list -deps -test -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./...) \
  || { echo "go_binding: the binding module does not resolve offline on its own" >&2; exit 1; }
foreign=$(grep -v '^libratelimit/go\($\|[/. ]\)' <<<"$deps" || true)
if [[ -n $foreign ]]; then
  echo "go_binding: the binding module depends on packages outside the standard library:" >&2
  echo "$foreign" >&2
  exit 1
fi
go vet ./...
go test -count=1 "$@" ./...

# The comparison with golang.org/x/time/rate, its own module.
cat >"$tmp/go.work" <<WORK
go 1.19

use $here
use $here/xtimebench

replace golang.org/x/time => $xtime
WORK
export GOWORK=$tmp/go.work
cd "$here/xtimebench"
go vet ./...
go test -count=1 "$@" ./...
