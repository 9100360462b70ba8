#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The walls of src/, checked against the one place they are written down.

    python3 scripts/check-layers.py [--src DIR] [--build BUILD_DIR] [--bites]

src/README.md has one section per folder of src/ (and one for the root).
Each section says which folders (or single headers) its files may include,
on a line "May include: `a/`, `b/`, `core.h`." or "May include: anything.",
and lists its files in a table, `name.c` or `name.[ch]` in the first column.
This script fails (exit 1, every finding printed) when:

1. a section names a folder that does not exist, or a folder of src/ has no
   section: the map and the tree disagree;
2. a file of a folder is missing from its section's table, or the table
   lists a file that is not there;
3. a file includes a header of a folder (or a root header) its section does
   not allow, or a header by a path that does not name its folder;
4. with --build, an object of a folder calls a function defined in a folder
   (or a root file) it may not include: the calls, not only the include
   lines, obey the walls (nm -u against every object's nm --defined-only);
5. the folders' include-and-call graph has a cycle other than the ones the
   README allows (the root and shm/: the two constructors, rl_open and
   rl_open_shared, call each other's folder).

With --bites, it plants three such violations in copies of the tree and
fails unless each one is found.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = 'root'


def expand(name):
    """`table.[ch]` -> table.c, table.h; `a.c`, `a.h` as themselves."""
    m = re.fullmatch(r'(.*)\.\[([a-z]+)\]', name)
    if m:
        return [m.group(1) + '.' + e for e in m.group(2)]
    return [name]


def parse_readme(path):
    """{unit: {'allow': set or None (anything), 'files': set, 'line': n}}"""
    units, cur = {}, None
    head = re.compile(r'^## `(?:src/)?([a-z_]*(?:\.h)?)/?`')
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        m = head.match(line)
        if m:
            cur = m.group(1) or ROOT
            units[cur] = {'allow': set(), 'files': set(), 'line': n, 'allow_seen': False}
            continue
        if line.startswith('## '):
            cur = None
            continue
        if cur is None:
            continue
        u = units[cur]
        if line.startswith('May include:'):
            u['allow_seen'] = True
            if 'anything' in line:
                u['allow'] = None
            else:
                u['allow'] = set(t.rstrip('/') for t in re.findall(r'`([^`]+)`', line))
            continue
        m = re.match(r'^\|\s*((?:`[^`]+`(?:,\s*)?)+)\s*\|', line)
        if m:
            for name in re.findall(r'`([^`]+)`', m.group(1)):
                if name == 'README.md':
                    continue
                for f in expand(name):
                    u['files'].add(f)
    return units


FILE_UNITS = set()  # root headers with a section of their own (core.h)


def unit_of(rel):
    """src-relative path -> its unit: a folder, a root header with a
    section of its own, or the root."""
    if rel in FILE_UNITS:
        return rel
    return rel.split('/')[0] if '/' in rel else ROOT


def allowed(units, src_unit, target_rel):
    """May a file of src_unit include/call into target_rel (src-relative)?"""
    t_unit = unit_of(target_rel)
    if t_unit == src_unit:
        return True
    allow = units.get(src_unit, {}).get('allow', set())
    if allow is None:
        return True
    if t_unit in allow or target_rel in allow:
        return True
    # a header token (local/keyhash.h) also allows the file it declares
    if target_rel.endswith('.c') and target_rel[:-2] + '.h' in allow:
        return True
    # a root header token (core.h) also allows the root file of its name
    stem = os.path.splitext(target_rel)[0]
    return t_unit == ROOT and (stem + '.h') in allow


def source_files(src):
    out = []
    for dp, dns, fns in os.walk(src):
        dns.sort()
        for fn in sorted(fns):
            if fn.endswith(('.c', '.h', '.lua')):
                out.append(os.path.relpath(os.path.join(dp, fn), src))
    return out


INC = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def check_tree(src, units, fail, edges):
    files = source_files(src)
    folders = sorted({unit_of(f) for f in files} - {ROOT})
    for f in folders:
        if f not in units:
            fail(f'src/{f}/: no section in src/README.md')
    for u, d in units.items():
        if u.endswith('.h'):
            if u not in files:
                fail(f'src/README.md:{d["line"]}: section for src/{u}, which does not exist')
            continue
        if u != ROOT and u not in folders:
            fail(f'src/README.md:{d["line"]}: section for src/{u}/, which does not exist')
        if not d['allow_seen']:
            fail(f'src/README.md:{d["line"]}: section {u} has no "May include:" line')
    present = set(files)
    for u, d in units.items():
        for name in sorted(d['files']):
            rel = name if u in (ROOT,) or u.endswith('.h') else f'{u}/{name}'
            if rel not in present:
                fail(f'src/README.md:{d["line"]}: lists {rel}, which is not in src/')
    for rel in files:
        u = unit_of(rel)
        name = rel if u == ROOT or u.endswith('.h') else rel[len(u) + 1:]
        if u in units and name not in units[u]['files'] and not rel.endswith('README.md'):
            fail(f'src/{rel}: not in its section of src/README.md')
        if not rel.endswith(('.c', '.h')):
            continue
        for n, line in enumerate(open(os.path.join(src, rel), encoding='utf-8',
                                      errors='replace'), 1):
            m = INC.match(line)
            if not m:
                continue
            inc = m.group(1)
            if inc == 'ratelimit.h':
                continue
            if inc not in present:
                # a quote include that resolves only next to the file
                if os.path.exists(os.path.join(src, os.path.dirname(rel), inc)):
                    fail(f'src/{rel}:{n}: includes "{inc}" without its folder')
                else:
                    fail(f'src/{rel}:{n}: includes "{inc}", which is not in src/')
                continue
            t = unit_of(inc)
            if t != u:
                edges.setdefault(u, set()).add(t)
            if not allowed(units, u, inc):
                fail(f'src/{rel}:{n}: includes "{inc}" ({t} is above {u}, or beside it)')
    return present


def nm_symbols(obj, *flags):
    r = subprocess.run(['nm'] + list(flags) + [obj], capture_output=True, text=True)
    return [l.split()[-1] for l in r.stdout.splitlines() if l.strip()]


def check_objects(build, src, units, fail, edges):
    objs = []
    for dp, _, fns in os.walk(build):
        if 'rl_objects.dir' not in dp:
            continue
        for fn in fns:
            if fn.endswith('.o'):
                objs.append(os.path.join(dp, fn))
    if not objs:
        fail(f'no library objects under {build}')
        return
    def rel_of(obj):
        p = obj.split('rl_objects.dir' + os.sep, 1)[1][:-2]
        if p.startswith('src' + os.sep):
            return p[4:]
        return 'lua/' + os.path.basename(p)  # the generated script table
    where = {}
    for o in objs:
        for s in nm_symbols(o, '--defined-only', '--extern-only'):
            where[s] = rel_of(o)
    for o in sorted(objs):
        rel = rel_of(o)
        u = unit_of(rel)
        for s in nm_symbols(o, '-u'):
            t = where.get(s)
            if t is None or unit_of(t) == u:
                continue
            edges.setdefault(u, set()).add(unit_of(t))
            if not allowed(units, u, t):
                fail(f'src/{rel}: calls {s} (src/{t}: {unit_of(t)} is above {u}, or beside it)')


def check_cycles(edges, allowed_cycles, fail):
    # Tarjan's strongly connected components over the folder graph.
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop(); on.discard(w); comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)
    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    for c in comps:
        if c not in allowed_cycles:
            fail('folder cycle: ' + ' <-> '.join(sorted(c)))


def bites(src):
    """The check must fail on a tree with a wall broken: an upward include
    in the local tier, a header named without its folder, and a file the
    map does not list. Each planted in a fresh copy; 0 when all are found."""
    import shutil
    import tempfile
    plants = [
        ('local/table.c', '#include "sync/sync.h"\n', 'includes "sync/sync.h"'),
        ('local/limits.c', '#include "table.h"\n', 'without its folder'),
        ('text/planted.c', '/* a file the map does not list */\n', 'not in its section'),
    ]
    missed = 0
    for rel, text, expect in plants:
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, 'src')
            shutil.copytree(src, copy)
            path = os.path.join(copy, rel)
            with open(path, 'a', encoding='utf-8') as f:
                f.write(text)
            r = subprocess.run([sys.executable, os.path.abspath(__file__), '--src', copy],
                               capture_output=True, text=True)
            if r.returncode == 0 or expect not in r.stderr:
                print(f'layers: a planted {rel!r} ({expect}) was not caught', file=sys.stderr)
                missed += 1
    if missed == 0:
        print(f'layers: all {len(plants)} planted violations caught')
    return 1 if missed else 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument('--src', default=os.path.join(here, '..', 'src'))
    ap.add_argument('--build')
    ap.add_argument('--bites', action='store_true',
                    help='plant violations in a copy of the tree and fail unless each is found')
    a = ap.parse_args()
    src = os.path.abspath(a.src)
    if a.bites:
        return bites(src)
    findings = []
    fail = findings.append
    readme = os.path.join(src, 'README.md')
    if not os.path.exists(readme):
        print('layers: no src/README.md', file=sys.stderr)
        return 1
    units = parse_readme(readme)
    FILE_UNITS.update(u for u in units if u.endswith('.h'))
    edges = {}
    check_tree(src, units, fail, edges)
    if a.build:
        check_objects(a.build, src, units, fail, edges)
    check_cycles(edges, [{ROOT, 'shm'}], fail)
    for f in findings:
        print('layers: ' + f, file=sys.stderr)
    if findings:
        return 1
    print(f'layers: ok ({len(units)} sections'
          f'{", objects checked" if a.build else ""})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
