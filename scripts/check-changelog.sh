#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CHANGELOG.md is kept with every release: fail unless it has an
# "## Unreleased" section and a "## X.Y.Z - YYYY-MM-DD" entry for the version
# include/ratelimit.h declares, and unless the Python package carries that
# version too. ctest runs it as docs_changelog.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ver=$(for p in MAJOR MINOR PATCH; do
        sed -n "s/^#define RL_VERSION_$p \([0-9]*\)$/\1/p" "$root/include/ratelimit.h"
      done | paste -sd.)
fail() { echo "check-changelog: $*" >&2; exit 1; }
[[ $ver =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "cannot read RL_VERSION_* from include/ratelimit.h"
grep -q '^## Unreleased$' "$root/CHANGELOG.md" || fail "CHANGELOG.md has no '## Unreleased' section"
grep -Eq "^## ${ver//./\\.} - [0-9]{4}-[0-9]{2}-[0-9]{2}$" "$root/CHANGELOG.md" \
  || fail "CHANGELOG.md has no '## $ver - DATE' entry for the header's version"
grep -q "^version = \"$ver\"$" "$root/bindings/python/pyproject.toml" \
  || fail "bindings/python/pyproject.toml does not say version = \"$ver\""
echo "CHANGELOG.md and the Python package are at $ver"
