#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ABI check of the shared library against the committed baseline.
#
#   bash scripts/abi-check.sh            compare with abi/<soname>.abi and,
#                                        when the repository has a v* tag,
#                                        with the library built from that tag
#   bash scripts/abi-check.sh --update   write abi/<soname>.abi from this tree
#                                        (the step when cutting a release)
#
# Builds libratelimit.so (RelWithDebInfo, so with DWARF) in build-abi/ (or
# RL_ABI_BUILD_DIR), describes it with abidw restricted to the types of
# include/ (--headers-dir: internal types never count), and compares with
# abidiff. Exits 1 when a function or variable was removed or changed, a
# public type changed other than by members appended to a sized struct (see
# sized_structs), or abidiff itself finds an incompatible change; additions
# are reported and pass. Installs abigail-tools when abidw or abidiff is
# missing (root, like scripts/deps.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build_dir=${RL_ABI_BUILD_DIR:-$root/build-abi}
update=0

case "${1:-}" in
  "") ;;
  --update) update=1 ;;
  -h | --help) sed -n '3,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "abi-check.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
esac

log() { echo "==> abi-check.sh: $*"; }
die() { echo "abi-check.sh: $*" >&2; exit 1; }

bash "$here/deps.sh"
if ! command -v abidw >/dev/null 2>&1 || ! command -v abidiff >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "abidw/abidiff missing and no apt-get (install libabigail)"
  [[ $(id -u) -eq 0 ]] || die "must run as root to install abigail-tools"
  log "installing abigail-tools"
  export DEBIAN_FRONTEND=noninteractive
  apt_log=$(mktemp)
  if ! { apt-get update && apt-get install -y --no-install-recommends abigail-tools; } >"$apt_log" 2>&1; then
    tail -20 "$apt_log" >&2
    rm -f "$apt_log"
    die "apt-get install abigail-tools failed"
  fi
  rm -f "$apt_log"
fi

# build_lib SRC_DIR BUILD_DIR: configure and build the shared library only;
# prints the path of the real file (libratelimit.so.X.Y.Z).
build_lib() {
  local src=$1 out=$2
  mkdir -p "$out"
  cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRL_WERROR=ON -DRL_ASAN=OFF -DRL_TSAN=OFF \
    -DRL_BUILD_TESTS=OFF -DRL_BUILD_EXAMPLES=OFF -DRL_BUILD_BENCH=OFF >"$out/configure.log" 2>&1 \
    || { tail -30 "$out/configure.log" >&2; die "configure of $src failed"; }
  cmake --build "$out" --target ratelimit -j "$(nproc 2>/dev/null || echo 2)" >"$out/build.log" 2>&1 \
    || { tail -30 "$out/build.log" >&2; die "build of $src failed"; }
  readlink -f "$out/libratelimit.so"
}

# dump LIB HEADERS_DIR OUT: the ABI description: the exported functions and
# the public types they reach. --exported-interfaces-only also matters for
# correctness: with the internal functions in the XML, libabigail 2.2 misses
# a struct that grew (rl_stats_t, compared XML to XML). No paths of this
# checkout in it (the baseline is compared from any clone), locations by
# file name.
dump() {
  abidw --headers-dir "$2" --drop-private-types --exported-interfaces-only --no-corpus-path \
    --no-comp-dir-path --short-locs --out-file "$3" "$1" || die "abidw failed on $1"
}

soname_of() {
  objdump -p "$1" | awk '$1 == "SONAME" { print $2 }'
}

# Structs that begin with a `size` field set by their initialiser and only
# grow at the end (STYLE.md 3, ratelimit.h's "appended fields"): the library
# reads and writes only the part that fits the caller's `size`, so members
# appended past the old end are compatible. A struct without a size field
# (rl_allocator_t, rl_rate_t) is not listed: one that grows moves the members
# of the structs that embed it. Add a new sized struct here when it first
# crosses the ABI.
sized_structs='rl_(config|limit|request|decision|stats_s|limit_stats_s|reservation|reserve_stats|retry_config)'

# classify < abidiff --leaf-changes-only report: prints one line per
# incompatible change and exits 1 if there is any. Compatible: added
# functions and variables, and a sized struct whose only change is members
# inserted at or past its old size (which then grows). Anything else in a
# changed type's report, a removed or changed function or variable, fails.
classify() {
  awk -v sized="^struct $sized_structs at " '
    function fail(msg) { print "  incompatible: " (type != "" ? type ": " : "") msg; bad = 1 }
    /summary:/ {
      for (i = 2; i <= NF; i++)
        if ($i ~ /^(Removed|Changed),?$/ && $(i - 1) + 0 > 0) fail($0)
      next
    }
    /^[0-9]+ Added / { type = ""; part = "added"; next }
    /^\x27.*\x27 changed:$/ {
      type = substr($0, 2); sub(/\x27 changed:$/, "", type)
      old = -1; part = ""
      if (type !~ sized) fail("changed, and it is not a sized struct")
      next
    }
    /^[^ ]/ { type = ""; part = ""; next }
    /^  / && part == "added" { next }
    /^  type size changed from [0-9]+ to [0-9]+ \(in bits\)$/ { old = $5 + 0; part = ""; next }
    /^  ([0-9]+|one) data member insertions?:$/ { part = "insert"; next }
    /^  ([0-9]+|one) impacted interfaces?:?$/ { part = "impact"; next }
    /^    / && part == "impact" { next }
    /^    \x27.*\x27, at offset [0-9]+ \(in bits\)/ && part == "insert" {
      off = $0; sub(/.*\x27, at offset /, "", off); off += 0
      if (old < 0 || off < old) fail("member inserted inside the old size: " substr($0, 5))
      next
    }
    /^  / { fail(substr($0, 3)); part = "" }
    END { exit bad }
  '
}

# compare OLD.abi NEW.abi LABEL: 0 if compatible, 1 if not.
compare() {
  local old=$1 new=$2 label=$3 rc=0 report verdict
  report=$(abidiff --leaf-changes-only --impacted-interfaces "$old" "$new") || rc=$?
  if (( rc & 3 )); then
    echo "$report" >&2
    die "abidiff failed (exit $rc) comparing with $label"
  fi
  if (( rc == 0 )); then
    log "compatible with $label: no change"
    return 0
  fi
  echo "$report"
  # Bit 3 (8): abidiff itself calls it incompatible (e.g. a removed symbol).
  if verdict=$(echo "$report" | classify) && (( !(rc & 8) )); then
    log "compatible with $label: additions only (listed above)"
    return 0
  fi
  echo "$verdict"
  echo "abi-check.sh: INCOMPATIBLE with $label (abidiff exit $rc)" >&2
  return 1
}

log "build libratelimit.so in $build_dir"
mkdir -p "$build_dir"
lib=$(build_lib "$root" "$build_dir")
soname=$(soname_of "$lib")
[[ -n $soname ]] || die "no SONAME in $lib"
baseline=$root/abi/$soname.abi
current=$build_dir/$soname.abi
dump "$lib" "$root/include" "$current"

if [[ $update -eq 1 ]]; then
  cp "$current" "$baseline"
  log "wrote ${baseline#"$root"/} from this tree ($lib)"
  exit 0
fi

failed=0
if [[ -f $baseline ]]; then
  log "compare with the baseline ${baseline#"$root"/}"
  compare "$baseline" "$current" "the baseline ${baseline#"$root"/}" || failed=1
else
  echo "abi-check.sh: no baseline $baseline for this SONAME: a new major version starts one with --update" >&2
  failed=1
fi

# The last release tag, built from `git archive` (no worktree: the
# checkout's git state is left alone).
tag=""
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  tag=$(git -C "$root" describe --tags --abbrev=0 --match 'v*' 2>/dev/null || true)
fi
if [[ -n $tag ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  log "build $tag (git archive) in $tmp"
  mkdir -p "$tmp/src"
  git -C "$root" archive "$tag" | tar -x -C "$tmp/src"
  tag_lib=$(build_lib "$tmp/src" "$tmp/build")
  tag_soname=$(soname_of "$tag_lib")
  if [[ $tag_soname != "$soname" ]]; then
    log "$tag has SONAME $tag_soname, this tree $soname: a new major version, not compared"
  else
    dump "$tag_lib" "$tmp/src/include" "$tmp/$tag.abi"
    compare "$tmp/$tag.abi" "$current" "$tag" || failed=1
  fi
else
  log "no v* tag: compared with the committed baseline only"
fi

[[ $failed -eq 0 ]] || exit 1
log "OK"
