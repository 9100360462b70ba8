#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fail unless README.md's quickstart (the first ```c block after the
# "## Quickstart" heading) is examples/quickstart.c, byte for byte. Run by
# ctest as example_readme_quickstart.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readme=$root/README.md
example=$root/examples/quickstart.c

block=$(awk '
  /^## Quickstart/ { section = 1; next }
  section && !inside && /^```c$/ { inside = 1; next }
  inside && /^```$/ { exit }
  inside { print }
' "$readme")

if [[ -z "$block" ]]; then
  echo "check-readme-quickstart: no \`\`\`c block under \"## Quickstart\" in README.md" >&2
  exit 1
fi
if ! diff -u "$example" <(printf '%s\n' "$block"); then
  echo "check-readme-quickstart: README.md's quickstart differs from examples/quickstart.c" >&2
  exit 1
fi
echo "README quickstart matches examples/quickstart.c"
