#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fail unless README.md's API table names every function include/ratelimit.h
# exports (RL_EXTERN) and nothing else but the header's static inline
# wrappers, and unless every rl_* name the README mentions exists: an
# exported or inline function, a type of the header, or a program this
# build makes. ctest runs it as docs_readme_api (beside docs_api_current).
#
#   bash scripts/check-readme-api.sh   exit 0: current; 1: the names at
#                                      fault are printed; 77: no python3
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
  echo "check-readme-api: $python not found (skipped)" >&2
  exit 77
fi
exec "$python" - "$root" <<'PY'
import glob
import os
import re
import sys

root = sys.argv[1]
header = open(os.path.join(root, "include", "ratelimit.h")).read()
# Comments out first, so a name in prose is not a declaration.
code = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
code = re.sub(r"//[^\n]*", " ", code)
exported = set(re.findall(r"\bRL_EXTERN\b[^;{}]*?\b(rl_[a-z0-9_]+)\s*\(", code, re.S))
inline = set(re.findall(r"\bstatic\s+inline\b[^;{}]*?\b(rl_[a-z0-9_]+)\s*\(", code, re.S))
types = set(re.findall(r"\b(rl_(?:[a-z0-9_]+_)?t)\b", code))
programs = set()
for cm in glob.glob(os.path.join(root, "**", "CMakeLists.txt"), recursive=True):
    if os.path.relpath(cm, root).startswith("build"):
        continue  # build directories
    programs |= set(re.findall(r"add_executable\(\s*(rl_[a-z0-9_]+)", open(cm).read()))
if not exported:
    sys.exit("check-readme-api: found no RL_EXTERN function in include/ratelimit.h")

readme = open(os.path.join(root, "README.md")).read()
if "\n## API\n" not in readme:
    sys.exit("check-readme-api: README.md has no '## API' section")
section = readme.split("\n## API\n", 1)[1].split("\n## ", 1)[0]
table = set()
for line in section.split("\n"):
    if line.startswith("| `rl_"):
        first = line.split("|")[1]
        table |= set(re.findall(r"`(rl_[a-z0-9_]+)`", first))

bad = []
for name in sorted(exported - table):
    bad.append(f"{name}: exported by include/ratelimit.h, missing from README.md's API table")
for name in sorted(table - exported - inline):
    bad.append(f"{name}: in README.md's API table, but not a function of include/ratelimit.h")
known = exported | inline | types | programs
for name in sorted(set(re.findall(r"\b(rl_[a-z0-9_]*[a-z0-9])\b", readme))):
    if name not in known and not name.startswith("rl__"):
        bad.append(f"{name}: README.md names it, but the header declares no such function "
                   f"or type and no CMakeLists.txt builds such a program")
if bad:
    print("check-readme-api:\n  " + "\n  ".join(bad), file=sys.stderr)
    sys.exit(1)
print(f"README.md's API table lists the header's {len(exported)} exported functions")
PY
