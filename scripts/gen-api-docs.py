#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the API reference from include/ratelimit.h.

    python3 scripts/gen-api-docs.py              write docs/api.md and
                                                 docs/man/ratelimit.3
    python3 scripts/gen-api-docs.py --out-dir D  write D/api.md, D/man/ratelimit.3
    python3 scripts/gen-api-docs.py --gaps       also list, on stderr, the
                                                 declarations whose doc block
                                                 says nothing about a topic

The header is the specification (every public symbol has a doc block), so
this script only arranges what the doc blocks say: it never adds a claim of
its own. From the doc blocks it extracts, per function, what they state
about each parameter, the return value, the errors (with the circumstances
the block names), thread-safety and ownership; the block itself is printed
too, verbatim, because a sentence taken out of its paragraph can lose a
condition. Where a block is silent on a topic the page says so.

Standard library only, and deterministic: the output depends on the header
alone (no dates, no paths, no locale), so scripts/check-api-docs.sh can
diff a fresh run against the committed files.

The parser knows the header's layout, not C: doc comments directly above a
declaration (no blank line between), trailing field/member comments,
section dividers "/* ---- name */" each followed by the section's intro (a
comment and a blank line), #defines (with continuations), anonymous enums,
typedef'd structs, function-pointer typedefs, RL_EXTERN prototypes, the
static inline initialisers, and the RL_EXPERIMENTAL marker on a line of its
own above a declaration, a struct field or an enum member. Anything else at
file scope is an error, so a new kind of declaration cannot silently go
missing from the page.

It also keeps the header organised: the sections must be SECTIONS, in that
order, each with an intro, and within a section every constant and type
comes before the first function (a function-like macro standing for a
function is one of the functions).
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER_REL = "include/ratelimit.h"
GENERATOR_REL = "scripts/gen-api-docs.py"

# The header's sections, in the order a program meets them: (divider name,
# title on the page).
SECTIONS = [
    ("conventions", "Conventions, versions and errors"),
    ("instance", "The instance and its hooks"),
    ("shared", "Shared instances"),
    ("limits", "Limits"),
    ("checks", "Checks"),
    ("stats", "Statistics and metrics"),
    ("quotas", "Quotas"),
    ("hot keys", "Hot keys"),
    ("in-flight limits", "In-flight limits"),
    ("reservations and waits", "Reservations and waits"),
    ("client retry", "Client retry"),
]
SECTION_TITLES = dict(SECTIONS)
MARKER = "RL_EXPERIMENTAL"
EXPERIMENTAL_NOTE = ("*Experimental* (`RL_EXPERIMENTAL`): not yet frozen; a minor release "
                     "may still change it (see the macro's doc block).")


class HeaderError(Exception):
    pass


# ----------------------------------------------------------------- lexing


def comment_text(raw):
    """The text of a /* ... */ comment, one string per line, with the
    comment markers and the ' * ' gutter removed and the indentation that
    follows the gutter kept (it carries lists and aligned tables)."""
    body = raw.strip()
    assert body.startswith("/*") and body.endswith("*/")
    body = body[2:-2]
    out = []
    for i, line in enumerate(body.split("\n")):
        s = line.strip() if i == 0 else line.lstrip()
        if i > 0 and s.startswith("*"):
            s = s[1:]
            s = s[1:] if s.startswith(" ") else s
        elif i > 0:
            s = s.strip()  # a trailing comment's continuation lines: no gutter
        out.append(s.rstrip())
    while out and out[0] == "":
        out.pop(0)
    while out and out[-1] == "":
        out.pop()
    return out


def split_top(text, sep=","):
    """Split on `sep` outside parentheses and brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def squash(code):
    """One line of C with single spaces and no space inside parentheses."""
    s = re.sub(r"\s+", " ", code).strip()
    return s.replace("( ", "(").replace(" )", ")")


def parse_params(arglist):
    if arglist.strip() in ("", "void"):
        return []
    params = []
    for p in split_top(arglist):
        m = re.match(r"^(.*?)(\w+)$", p)
        if not m:
            raise HeaderError("cannot parse parameter %r" % p)
        params.append((squash(m.group(1)), m.group(2)))
    return params


def strip_marker(text):
    """(text without a leading RL_EXPERIMENTAL, whether it had one)."""
    m = re.match(r"^%s\s+" % MARKER, text)
    return (text[m.end():], True) if m else (text, False)


def parse_body_items(body, sep):
    """Fields of a struct or members of an enum, with their comments.

    Returns a list of ('note', lines) for a comment on its own line(s) and
    ('item', text, trailing_lines) for a declaration; a comment that starts
    on the same line as the declaration before it is that one's trailing
    comment."""
    items = []
    pos = 0
    token = re.compile(r"/\*.*?\*/|[^%s/]+%s|[^%s/]+(?=/\*|$)" % (sep, sep, sep), re.S)
    for m in token.finditer(body):
        tok = m.group(0)
        if not tok.strip():
            continue  # whitespace between a declaration and a comment
        between = body[pos:m.start()]
        if between.strip():
            raise HeaderError("cannot parse %r" % between.strip())
        pos = m.end()
        if tok.startswith("/*"):
            trailing = "\n" not in between and items and items[-1][0] == "item"
            if trailing:
                items[-1] = ("item", items[-1][1], items[-1][2] + comment_text(tok))
            else:
                items.append(("note", comment_text(tok)))
        else:
            text = tok.strip().rstrip(sep).strip()
            if text:
                items.append(("item", text, []))
    if body[pos:].strip():
        raise HeaderError("cannot parse %r" % body[pos:].strip())
    return items


class Block:
    """Consecutive declarations under one doc comment."""

    def __init__(self, doc, section, line):
        self.doc = doc  # list of lines, or [] when the header has none
        self.section = section
        self.line = line
        self.decls = []

    def experimental(self):
        return any(getattr(d, "experimental", False) for d in self.decls)


class Decl:
    def __init__(self, kind, name, **kw):
        self.kind = kind  # define, enum, struct, opaque, fnptr, func, inline, export
        self.name = name
        self.__dict__.update(kw)


def parse_header(text):
    lines = text.split("\n")
    n = len(lines)
    i = 0
    intro = None
    section = None
    pending_doc = None  # the doc comment's lines, while directly above
    block = None
    blocks = []
    errors = None
    section_intros = {}  # divider name -> the intro's lines
    expect_intro = False
    in_functions = False  # a function of the current section seen
    marked = None  # the line of an RL_EXPERIMENTAL waiting for its declaration

    def start_block(lineno, kind="type"):
        nonlocal block, pending_doc, in_functions, marked
        if section is None:
            raise HeaderError("line %d: a declaration before the first section divider" % lineno)
        if kind == "func":
            in_functions = True
        elif in_functions:
            raise HeaderError("line %d: a constant or type after the functions of section "
                              "'%s': each section has its constants and types first" %
                              (lineno, section))
        if block is None:
            doc = pending_doc or []
            block = Block(doc, section, lineno)
            blocks.append(block)
            pending_doc = None
        return block

    def add_decl(b, d):
        nonlocal marked
        d.experimental = marked is not None
        marked = None
        b.decls.append(d)

    def read_comment(k):
        buf = [lines[k]]
        while "*/" not in lines[k]:
            k += 1
            if k >= n:
                raise HeaderError("unterminated comment")
            buf.append(lines[k])
        return "\n".join(buf), k + 1

    def read_until(k, stop):
        """Lines from k through the first that makes stop(text) true."""
        buf = []
        while k < n:
            buf.append(lines[k])
            k += 1
            if stop("\n".join(buf)):
                return "\n".join(buf), k
        raise HeaderError("unterminated declaration at line %d" % (k + 1))

    while i < n:
        line = lines[i]
        s = line.strip()
        lineno = i + 1
        if s == "":
            # A blank line ends a block; a comment followed by one documents
            # nothing (but a section's intro).
            if marked is not None:
                raise HeaderError("line %d: %s above a blank line" % (marked, MARKER))
            block = None
            pending_doc = None
            i += 1
            continue
        if expect_intro and not s.startswith("/*"):
            raise HeaderError("line %d: section '%s' has no intro comment after its divider"
                              % (lineno, section))
        if s == MARKER:
            marked = lineno
            i += 1
            continue
        if s.startswith("/*"):
            raw, i = read_comment(i)
            if re.match(r"^/\*\s*SPDX-License-Identifier:[^*]*\*/$", raw.strip()):
                continue  # the license tag, not documentation
            divider = re.match(r"^/\*\s*-{3,}\s*(\w[\w -]*?)\s*\*/$", raw.strip())
            if divider:
                section = divider.group(1)
                names = [x[0] for x in SECTIONS]
                if section not in names:
                    raise HeaderError("line %d: unknown section '%s' (SECTIONS in %s)"
                                      % (lineno, section, GENERATOR_REL))
                want = names[len(section_intros)] if len(section_intros) < len(names) else None
                if section != want:
                    raise HeaderError("line %d: section '%s' where '%s' belongs (the order is %s)"
                                      % (lineno, section, want, ", ".join(names)))
                section_intros[section] = None
                expect_intro = True
                in_functions = False
                block = None
                pending_doc = None
                continue
            if expect_intro:
                if i < n and lines[i].strip() != "":
                    raise HeaderError("line %d: section '%s''s intro must be followed by a "
                                      "blank line" % (lineno, section))
                section_intros[section] = comment_text(raw)
                expect_intro = False
                continue
            if intro is None and not blocks:
                intro = comment_text(raw)
                continue
            block = None
            pending_doc = comment_text(raw)
            continue
        if re.match(r"#(ifndef|define)\s+RATELIMIT_H\b", s) or s.startswith("#endif") \
                or s.startswith("#include") or s in ('extern "C" {', "}") \
                or re.match(r"#ifdef\s+__cplusplus", s):
            i += 1
            continue
        if s.startswith("#if"):
            # Conditional definitions (the export macro): shown as code.
            raw, i = read_until(i, lambda t: t.rstrip().endswith("#endif"))
            names = sorted(set(re.findall(r"#define\s+(\w+)", raw)))
            cond = sorted(set(re.findall(r"defined\((\w+)\)", raw)) - {"__GNUC__", "__clang__"})
            b = start_block(lineno)
            add_decl(b, Decl("export", names[0], code=raw.strip(), names=names, controls=cond))
            block = None
            continue
        if s.startswith("#define"):
            raw, i = read_until(i, lambda t: not t.rstrip().endswith("\\"))
            joined = re.sub(r"\\\n", "\n", raw)
            trailing = []
            m = re.search(r"/\*(.*?)\*/\s*$", joined, re.S)
            if m and "\n" not in joined.strip():
                # A comment at the end of a one-line #define is its doc.
                trailing = comment_text(m.group(0))
                joined = joined[:m.start()]
            m = re.match(r"#define\s+(\w+)(\([^)]*\))?\s*(.*)$", joined.strip(), re.S)
            name, args, value = m.group(1), m.group(2), m.group(3)
            # A function-like macro standing for a function (rl_limit_parse)
            # belongs with the functions.
            b = start_block(lineno, "func" if args and re.match(r"rl_[a-z]", name) else "type")
            if name == "RL_ERRNO_MAP":
                errors = []
                for em in re.finditer(r'XX\((\w+),\s*(-?\d+),\s*"((?:[^"\\]|\\.)*)"\)', value):
                    errors.append(("RL_" + em.group(1), int(em.group(2)), em.group(3)))
                if not errors:
                    raise HeaderError("RL_ERRNO_MAP has no XX(...) entries")
                add_decl(b, Decl("errmap", name, code=raw.strip(), errors=errors))
            else:
                add_decl(b, Decl("define", name, args=args, value=squash(value),
                                 trailing=trailing))
            continue
        if s.startswith("enum"):
            raw, i = read_until(i, lambda t: re.search(r"}\s*;", t) is not None)
            body = raw[raw.index("{") + 1:raw.rindex("}")]
            b = start_block(lineno)
            if "RL_ERRNO_MAP" in body:
                add_decl(b, Decl("errenum", "RL_E*"))
            else:
                members = []
                note = []
                for it in parse_body_items(body, ","):
                    if it[0] == "note":
                        note = it[1]
                        continue
                    text, exp = strip_marker(squash(it[1]))
                    mm = re.match(r"^(\w+)\s*=\s*(.+)$", text)
                    if not mm:
                        raise HeaderError("enum member without a value at line %d" % lineno)
                    members.append((mm.group(1), mm.group(2).strip(), note + it[2], exp))
                    note = []
                add_decl(b, Decl("enum", members[0][0], members=members))
            continue
        m = re.match(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;$", s)
        if m:
            b = start_block(lineno)
            add_decl(b, Decl("opaque", m.group(2), tag=m.group(1), code=s))
            i += 1
            continue
        if re.match(r"typedef\s+struct\s+\w+\s*{", s):
            raw, i = read_until(i, lambda t: re.search(r"}\s*\w+\s*;\s*$", t) is not None)
            tag = re.match(r"typedef\s+struct\s+(\w+)", s).group(1)
            name = re.search(r"}\s*(\w+)\s*;\s*$", raw).group(1)
            body = raw[raw.index("{") + 1:raw.rindex("}")]
            fields = []
            for it in parse_body_items(body, ";"):
                if it[0] == "note":
                    fields.append(("note", it[1]))
                    continue
                decl, exp = strip_marker(squash(it[1]))
                fm = re.match(r"^(.*?)\(\*(\w+)\)\((.*)\)$", decl)
                if fm:
                    ret = squash(fm.group(1))
                    ftype = "%s(*)(%s)" % (ret if ret.endswith("*") else ret + " ", fm.group(3))
                    fields.append(("field", ftype, fm.group(2), it[2], exp))
                    continue
                fm = re.match(r"^(.*?)(\w+)(\[[^\]]*\])?$", decl)
                if not fm:
                    raise HeaderError("cannot parse field %r" % decl)
                ftype = squash(fm.group(1)) + (" " + fm.group(3) if fm.group(3) else "")
                fields.append(("field", ftype, fm.group(2), it[2], exp))
            b = start_block(lineno)
            add_decl(b, Decl("struct", name, tag=tag, fields=fields))
            continue
        m = re.match(r"typedef\s+(.+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)\s*;$", s)
        if m:
            b = start_block(lineno)
            add_decl(b, Decl("fnptr", m.group(2), ret=squash(m.group(1)),
                             params=parse_params(m.group(3)), code=squash(s)))
            i += 1
            continue
        if s.startswith("RL_EXTERN"):
            raw, i = read_until(i, lambda t: t.rstrip().endswith(";"))
            sig = squash(raw)[len("RL_EXTERN"):].strip().rstrip(";").strip()
            fm = re.match(r"^(.*?)\b(\w+)\s*\((.*)\)$", sig)
            if not fm:
                raise HeaderError("cannot parse prototype at line %d" % lineno)
            b = start_block(lineno, "func")
            add_decl(b, Decl("func", fm.group(2), ret=squash(fm.group(1)),
                             params=parse_params(fm.group(3)), code=sig + ";"))
            continue
        if s.startswith("static inline"):
            raw, i = read_until(i, lambda t: t.count("{") > 0 and t.count("{") == t.count("}"))
            code = squash(raw)
            fm = re.match(r"^static inline (.*?)\b(\w+)\s*\(([^)]*)\)", code)
            if not fm:
                raise HeaderError("cannot parse inline function at line %d" % lineno)
            b = start_block(lineno, "func")
            add_decl(b, Decl("inline", fm.group(2), ret=squash(fm.group(1)),
                             params=parse_params(fm.group(3)), code=code))
            continue
        if s.startswith("#undef"):
            i += 1
            continue
        raise HeaderError("line %d: unrecognised declaration: %s" % (lineno, s))

    if intro is None:
        raise HeaderError("no introductory comment at the top of the header")
    if errors is None:
        raise HeaderError("no RL_ERRNO_MAP")
    if marked is not None:
        raise HeaderError("line %d: %s marks no declaration" % (marked, MARKER))
    missing = [x[0] for x in SECTIONS if x[0] not in section_intros]
    if missing:
        raise HeaderError("missing sections: %s" % ", ".join(missing))
    return intro, blocks, errors, section_intros


# ------------------------------------------------------------ doc blocks


def doc_parts(lines):
    """A doc comment as paragraphs, bullet lists and preformatted runs.

    Rules (the header's own layout): a blank line ends a paragraph; "- "
    at the margin starts a bullet whose continuation lines are indented by
    two spaces; any other line indented at least two spaces, outside a
    bullet, belongs to a preformatted run (aligned error tables, grammar
    examples, nested enumerations), kept as written."""
    parts = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if line.strip() == "":
            i += 1
            continue
        if line.startswith("- "):
            items = []
            while i < n and lines[i].startswith("- "):
                cur = [lines[i][2:].strip()]
                i += 1
                while i < n and lines[i].startswith("  ") and not lines[i].startswith("- ") \
                        and lines[i].strip():
                    cur.append(lines[i].strip())
                    i += 1
                items.append(" ".join(cur))
            parts.append(("bullets", items))
            continue
        if line.startswith("  "):
            run = []
            while i < n and lines[i].startswith("  "):
                run.append(lines[i])
                i += 1
            indent = min(len(x) - len(x.lstrip()) for x in run)
            parts.append(("pre", [x[indent:] for x in run]))
            continue
        para = []
        while i < n and lines[i].strip() and not lines[i].startswith("  ") \
                and not lines[i].startswith("- "):
            para.append(lines[i].strip())
            i += 1
        parts.append(("para", " ".join(para)))
    return parts


SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"`*]|rl_|RL_)")


class Unit:
    """A sentence of a paragraph or bullet, or one entry of a preformatted
    run (a line at the run's margin and the deeper-indented lines that
    continue it, e.g. "RL_EINVAL  out is NULL")."""

    def __init__(self, text, pre):
        self.text = re.sub(r"\s+", " ", text).strip()
        self.pre = pre

    def error_entry(self):
        """The code, if this is an entry of an aligned error list."""
        m = re.match(r"^(RL_E[A-Z]+)\s", self.text)
        return m.group(1) if m and self.pre else None


def doc_units(lines):
    units = []
    for kind, val in doc_parts(lines):
        if kind in ("para", "bullets"):
            for chunk in ([val] if kind == "para" else val):
                units.extend(Unit(s, False) for s in SENTENCE_END.split(chunk) if s.strip())
            continue
        cur = None
        for line in val:
            if line.startswith(" ") and cur is not None:
                cur += " " + line
                continue
            if cur is not None:
                units.append(Unit(cur, True))
            cur = line
        if cur is not None:
            units.append(Unit(cur, True))
    return units


THREAD_RE = re.compile(r"\b(thread\w*|concurren\w*|lock-free|locks?|race|racing|"
                       r"signals?|fork)\b", re.I)
OWNERSHIP_RE = re.compile(r"\b(cop(y|ies|ied)|owned|owner|outlive|points? into|valid until|"
                          r"kept by pointer|allocat\w*|(?<!-)free[sd]?|caller-owned|"
                          r"lifetime|leak\w*)\b", re.I)
RETURN_RE = re.compile(r"\b([Rr]eturns|[Rr]eturned)\b|^Returns?\b")


def errors_region(lines):
    """The lines of a doc block that list its errors: from the first
    "Error(s)" or "an error" on (the first line cut at that word). Codes
    named before it describe other calls ("a stale id answers
    RL_ENOTFOUND" in rl_limit_add's block is about later calls)."""
    for i, line in enumerate(lines):
        m = re.search(r"\bErrors?\b|\ban error\b", line)
        if m:
            return [line[m.start():]] + lines[i + 1:]
    return []


# --------------------------------------------------------------- markdown

MD_SPECIAL = re.compile(r"([\\*~])")


def md_escape(text):
    text = MD_SPECIAL.sub(r"\\\1", text)
    text = re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)
    return text


class Linker:
    """Turns identifiers in prose into code spans, linked when public."""

    IDENT = re.compile(r"(?:\*(?=_))?[A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*)*(?:(?<=_)\*)?(?:\(\))?")

    def __init__(self, anchors):
        self.anchors = anchors  # name -> anchor

    def inline(self, text, here=()):
        out = []
        # Existing code spans stay as they are.
        for k, piece in enumerate(re.split(r"(`[^`]*`)", text)):
            if k % 2 == 1:
                name = piece.strip("`")
                if name in self.anchors and name not in here:
                    out.append("[%s](#%s)" % (piece, self.anchors[name]))
                else:
                    out.append(piece)
                continue
            pos = 0
            res = []
            for m in self.IDENT.finditer(piece):
                tok = m.group(0)
                base = tok[:-2] if tok.endswith("()") else tok
                base = base.strip("*")
                codey = "_" in base or "->" in base or base in self.anchors
                if not codey or (m.start() > 0 and piece[m.start() - 1].isalnum()):
                    continue
                res.append(md_escape(piece[pos:m.start()]))
                if base in self.anchors and base not in here:
                    res.append("[`%s`](#%s)" % (tok, self.anchors[base]))
                else:
                    res.append("`%s`" % tok)
                pos = m.end()
            res.append(md_escape(piece[pos:]))
            out.append("".join(res))
        return "".join(out)


def slugify(title, used):
    """GitHub's heading anchor: lower case, punctuation but - and _ dropped,
    spaces to hyphens, -1, -2... for repeats."""
    s = title.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    s = s.replace(" ", "-")
    base, k = s, 0
    while s in used:
        k += 1
        s = "%s-%d" % (base, k)
    used.add(s)
    return s


def cell(text):
    return text.replace("|", "\\|")


class Page:
    def __init__(self):
        self.out = []

    def add(self, *lines):
        self.out.extend(lines)

    def text(self):
        # One blank line between blocks, one newline at the end.
        joined = "\n".join(self.out)
        joined = re.sub(r"\n{3,}", "\n\n", joined)
        return joined.strip("\n") + "\n"


def render_doc(page, lines, link, here=()):
    if not lines:
        page.add("*No doc block in the header.*", "")
        return
    for kind, val in doc_parts(lines):
        if kind == "para":
            page.add(link.inline(val, here), "")
        elif kind == "bullets":
            page.add(*["- " + link.inline(item, here) for item in val])
            page.add("")
        else:
            page.add("```text", *val, "```", "")


# ------------------------------------------------------------ the model


class Model:
    def __init__(self, intro, blocks, errors, section_intros):
        self.intro = intro
        self.section_intros = section_intros
        self.blocks = blocks
        self.errors = errors
        self.error_names = {e[0] for e in errors}
        self.funcs = {}
        for b in blocks:
            for d in b.decls:
                if d.kind in ("func", "inline"):
                    self.funcs[d.name] = (b, d)
        self.version = ".".join(self.define_value("RL_VERSION_" + p)
                                for p in ("MAJOR", "MINOR", "PATCH"))
        self._codes = {}

    def define_value(self, name):
        for b in self.blocks:
            for d in b.decls:
                if d.kind == "define" and d.name == name:
                    return d.value
        raise HeaderError("no #define %s" % name)

    def block_errors(self, block, seen=()):
        """{code: [(source, circumstance)]} for the codes a block's errors
        region names, including those of another function it points to
        ("those of rl_x", minus a following "but RL_E..."). source is None
        for the block's own words, else the function they come from;
        circumstance is "" when the block names the code without saying
        when."""
        key = id(block)
        if key in self._codes:
            return self._codes[key]
        region_lines = errors_region(block.doc)
        region = re.sub(r"\s+", " ", " ".join(region_lines))
        units = doc_units(region_lines)
        codes = {}
        excluded = set()
        for ref in re.finditer(r"those of (rl_\w+)((?:\s+but\s+RL_E\w+(?:(?:,\s*|\s+and\s+)RL_E\w+)*)?)",
                               region):
            other = ref.group(1)
            if other not in self.funcs or other in seen:
                continue
            but = set(re.findall(r"RL_E\w+", ref.group(2)))
            excluded |= but
            inherited = self.block_errors(self.funcs[other][0], seen + (other,))
            for code, whys in inherited.items():
                if code in but:
                    continue
                for src, why in whys or [(None, "")]:
                    codes.setdefault(code, []).append((src or other, why))
        for m in re.finditer(r"\bRL_E[A-Z]+\b", region):
            code = m.group(0)
            if code not in self.error_names or code in excluded:
                continue
            codes.setdefault(code, [])
            why = self._circumstance(code, region[m.end():], units)
            if why and (None, why) not in codes[code]:
                codes[code].append((None, why))
        self._codes[key] = codes
        return codes

    @staticmethod
    def _circumstance(code, after, units):
        """When the block says `code` is returned: the parenthesis right
        after it ("RL_EINVAL (d NULL, ...)"), the rest of its entry in an
        aligned list ("RL_EINVAL  out is NULL"), or a clause starting with
        if/when ("RL_ENAME if the name differs")."""
        m = re.match(r"\s*\(", after)
        if m:
            depth = 0
            for j in range(m.end() - 1, len(after)):
                depth += {"(": 1, ")": -1}.get(after[j], 0)
                if depth == 0:
                    return after[m.end():j].strip()
        for u in units:
            if u.error_entry() == code:
                rest = u.text[len(code):].strip()
                # Consume repeated entries one at a time ("RL_ERANGE ... /
                # RL_ERANGE also: ..."): the caller dedups, each is kept.
                if after.strip().startswith(rest[:20]):
                    return rest
        m = re.match(r"\s+((?:if|when|for)\b[^.;,]*)", after)
        if m:
            return m.group(1).strip()
        return ""


# ---------------------------------------------------------------- api.md


def render_markdown(model):
    page = Page()
    used = set()
    anchors = {}
    # Anchors first, so prose can link forward.
    plan = []  # (level, title, names)
    plan.append((2, "Conventions", []))
    plan.append((2, "Error codes", []))
    plan.append((2, "Constants", []))
    enums = [(b, d) for b in model.blocks for d in b.decls if d.kind == "enum"]
    types = [(b, d) for b in model.blocks for d in b.decls
             if d.kind in ("opaque", "struct", "fnptr")]
    plan.append((2, "Enumerations", []))
    for b, d in enums:
        plan.append((3, enum_title(d), [m[0] for m in d.members]))
    plan.append((2, "Types", []))
    for b, d in types:
        plan.append((3, d.name, [d.name]))
    plan.append((2, "Functions", []))
    fblocks = [b for b in model.blocks if any(d.kind in ("func", "inline") for d in b.decls)]
    sections = []
    for b in fblocks:
        if b.section not in sections:
            sections.append(b.section)
    for sec in sections:
        plan.append((3, SECTION_TITLES.get(sec, (sec or "other").capitalize()), []))
        for b in fblocks:
            if b.section == sec:
                names = [d.name for d in b.decls if d.kind in ("func", "inline")]
                plan.append((4, ", ".join(names), names))
    plan.append((2, "Declarations by name", []))
    slugs = []
    for level, title, names in plan:
        slug = slugify(title, used)
        slugs.append(slug)
        for nm in names:
            anchors.setdefault(nm, slug)
    link = Linker(anchors)
    slug_of = {(level, title): slug for (level, title, _), slug in zip(plan, slugs)}

    page.add("# libratelimit API reference", "")
    page.add("Version %s. Generated by `%s` from `%s`, the specification: do not edit "
             "this file; edit the header's doc blocks and run `python3 %s` "
             "(ctest `docs_api_current` fails while this page is stale). Every "
             "statement below is the header's own; the summaries under each function "
             "(parameters, errors, thread-safety, ownership) gather the sentences of its "
             "doc block on each topic, and say so where the block is silent."
             % (model.version, GENERATOR_REL, HEADER_REL, GENERATOR_REL), "")
    page.add("## Contents", "")
    for (level, title, names), slug in zip(plan, slugs):
        indent = "  " * (level - 2)
        label = ("`%s`" % title) if level >= 3 and re.match(r"^[\w*, ]+$", title) \
            and ("_" in title) else title
        if level == 4:
            label = ", ".join("`%s`" % x for x in names)
        page.add("%s- [%s](#%s)" % (indent, label, slug))
    page.add("")

    # Conventions: the header's opening comment.
    page.add("## Conventions", "")
    render_doc(page, model.intro, link)

    # Error codes.
    page.add("## Error codes", "")
    errblock = next(b for b in model.blocks for d in b.decls if d.kind == "errmap")
    render_doc(page, errblock.doc, link)
    documented_by = {}
    for b in fblocks:
        codes = model.block_errors(b)
        for code in codes:
            for d in b.decls:
                if d.kind in ("func", "inline") and d.kind == "func":
                    documented_by.setdefault(code, []).append(d.name)
    page.add("Values are `int`s; `rl_strerror` returns the message, `rl_err_name` the name. "
             "\"Named by\" lists the functions whose doc block names the code among its "
             "errors.", "")
    page.add("| Code | Value | Meaning | Named by |", "| --- | ---: | --- | --- |")
    for name, value, msg in model.errors:
        users = documented_by.get(name, [])
        page.add("| `%s` | %d | %s | %s |" % (
            name, value, cell(md_escape(msg)),
            cell(", ".join("[`%s`](#%s)" % (u, anchors[u]) for u in users)) or "—"))
    page.add("")

    # Constants.
    page.add("## Constants", "")
    page.add("| Macro | Value | Meaning |", "| --- | --- | --- |")
    for b in model.blocks:
        for d in b.decls:
            if d.kind != "define":
                continue
            doc = " ".join(d.trailing) if d.trailing else " ".join(b.doc)
            value = d.value if not d.args else "%s → %s" % (d.args, d.value)
            shown = "`%s`" % cell(value) if value else "*(nothing)*"
            page.add("| `%s` | %s | %s |" % (d.name, shown,
                                                cell(link.inline(doc)) or "*No doc block.*"))
    page.add("")
    for b in model.blocks:
        for d in b.decls:
            if d.kind == "export":
                page.add("Export macro%s %s (controlled by %s):" % (
                    "s" if len(d.names) > 1 else "",
                    ", ".join("`%s`" % x for x in d.names),
                    ", ".join("`%s`" % x for x in d.controls) or "the compiler"), "")
                page.add("```c", d.code, "```", "")
                render_doc(page, b.doc, link)

    # Enumerations.
    page.add("## Enumerations", "")
    page.add("Anonymous enums: the fields that hold them are `int32_t` on the ABI.", "")
    for b, d in enums:
        page.add("### %s" % enum_title(d), "")
        render_doc(page, b.doc, link)
        page.add("| Name | Value | Meaning |", "| --- | ---: | --- |")
        for name, value, doc, exp in d.members:
            meaning = cell(link.inline(" ".join(doc))) or "—"
            page.add("| `%s` | %s | %s |" % (name, cell(value),
                                              ("*Experimental.* " + meaning) if exp else meaning))
        page.add("")

    # Types.
    page.add("## Types", "")
    for b, d in types:
        page.add("### %s" % d.name, "")
        if d.kind == "opaque":
            page.add("```c", d.code, "```", "")
            render_doc(page, b.doc, link, (d.name,))
        elif d.kind == "fnptr":
            page.add("```c", d.code, "```", "")
            if d.experimental:
                page.add(EXPERIMENTAL_NOTE, "")
            render_doc(page, b.doc, link, (d.name,))
            render_params(page, d, b, link)
        else:
            page.add("`typedef struct %s { ... } %s;`" % (d.tag, d.name), "")
            render_doc(page, b.doc, link, (d.name,))
            render_fields(page, d, link)

    # Functions.
    page.add("## Functions", "")
    page.add("By section of the header, in its order; each section's intro comes first.", "")
    for sec in sections:
        page.add("### %s" % SECTION_TITLES.get(sec, (sec or "other").capitalize()), "")
        render_doc(page, model.section_intros.get(sec) or [], link)
        for b in fblocks:
            if b.section != sec:
                continue
            decls = [d for d in b.decls if d.kind in ("func", "inline")]
            names = [d.name for d in decls]
            page.add("#### %s" % ", ".join(names), "")
            page.add("```c", *[d.code for d in decls], "```", "")
            if b.experimental():
                page.add(EXPERIMENTAL_NOTE, "")
            inl = [d.name for d in decls if d.kind == "inline"]
            if inl:
                page.add("%s: `static inline` in the header, so no exported symbol: "
                         "FFI callers use the `_sized` form." % ", ".join(
                             "`%s`" % x for x in inl), "")
            render_doc(page, b.doc, link, tuple(names))
            render_summary(page, model, b, decls, link)

    # Index.
    page.add("## Declarations by name", "")
    page.add("| Name | Kind | Section |", "| --- | --- | --- |")
    index = []
    for b in model.blocks:
        for d in b.decls:
            kinds = {"define": "macro", "enum": "enum constant", "struct": "struct",
                     "opaque": "opaque type", "fnptr": "function pointer type",
                     "func": "function", "inline": "inline function", "export": "macro",
                     "errmap": "macro (X-macro)", "errenum": "error constants"}
            if d.kind == "enum":
                for m in d.members:
                    index.append((m[0], "enum constant" + (", experimental" if m[3] else ""),
                                  enum_title(d)))
            elif d.kind == "export":
                for nm in d.names:
                    index.append((nm, "macro", "Constants"))
            elif d.kind == "errenum":
                for name, _, _ in model.errors:
                    index.append((name, "error code", "Error codes"))
            elif d.kind == "errmap":
                index.append((d.name, kinds[d.kind], "Error codes"))
            elif d.kind == "define":
                index.append((d.name, "macro", "Constants"))
            elif d.kind in ("func", "inline"):
                index.append((d.name, kinds[d.kind] + (", experimental" if d.experimental or (
                    d.kind == "inline" and b.experimental()) else ""), ", ".join(
                    x.name for x in b.decls if x.kind in ("func", "inline"))))
            else:
                index.append((d.name, kinds[d.kind] + (", experimental" if d.experimental
                                                       else ""), d.name))
    target = {}
    for level, title, names in plan:
        target[title] = slug_of[(level, title)]
    for name, kind, where in sorted(index, key=lambda t: t[0].lower()):
        anchor = target.get(where)
        page.add("| `%s` | %s | %s |" % (name, kind,
                                          "[%s](#%s)" % (md_escape(where), anchor) if anchor
                                          else md_escape(where)))
    page.add("")
    return page.text()


def enum_title(d):
    names = [m[0] for m in d.members]
    prefix = os.path.commonprefix(names)
    prefix = prefix[:prefix.rfind("_") + 1] if "_" in prefix else prefix
    return prefix + "*"


def render_fields(page, d, link):
    rows = []

    def flush():
        if rows:
            page.add("| Field | Type | Meaning |", "| --- | --- | --- |", *rows, "")
            del rows[:]

    for f in d.fields:
        if f[0] == "note":
            flush()
            text = " ".join(f[1])
            if re.match(r"^-+.*-+$", text):
                page.add("*%s:*" % md_escape(text.strip("- ").capitalize()), "")
            else:
                render_doc(page, f[1], link)
            continue
        _, ftype, name, doc, exp = f
        meaning = cell(link.inline(" ".join(doc))) or "—"
        rows.append("| `%s` | `%s` | %s |" % (name, cell(ftype),
                                              ("*Experimental.* " + meaning) if exp else meaning))
    flush()


def mentions(units, name):
    pat = re.compile(r"(?<![\w.>-])\*?%s(?![\w(])" % re.escape(name))
    return [u.text for u in units if pat.search(u.text)]


def render_params(page, d, b, link):
    if not d.params:
        return
    units = doc_units(b.doc)
    page.add("| Parameter | Type | What the doc block says about it |", "| --- | --- | --- |")
    for ptype, pname in d.params:
        said = mentions(units, pname)
        page.add("| `%s` | `%s` | %s |" % (pname, cell(ptype), cell(
            "<br>".join(link.inline(s) for s in said)) or "*Not named in the doc block.*"))
    page.add("")


def render_summary(page, model, b, decls, link):
    units = doc_units(b.doc)
    here = tuple(d.name for d in decls)
    # Parameters: of the exported function(s); the inline wrappers take a
    # subset of the same names.
    seen, params = set(), []
    for d in decls:
        for p in d.params:
            if p[1] not in seen:
                seen.add(p[1])
                params.append((p[0], p[1], d.name))
    if params:
        page.add("| Parameter | Type | What the doc block says about it |",
                 "| --- | --- | --- |")
        for ptype, pname, _ in params:
            said = mentions(units, pname)
            page.add("| `%s` | `%s` | %s |" % (pname, cell(ptype), cell(
                "<br>".join(link.inline(s, here) for s in said))
                or "*Not named in the doc block.*"))
        page.add("")
    rets = sorted({d.ret for d in decls})
    ret_units = [u.text for u in units if RETURN_RE.search(u.text)]
    page.add("**Returns** `%s`%s" % ("`, `".join(rets), (": " + " ".join(
        link.inline(u, here) for u in ret_units)) if ret_units else "."), "")
    codes = model.block_errors(b)
    if codes:
        page.add("**Errors**", "")
        page.add("| Code | When (as the doc block states) |", "| --- | --- |")
        order = [e[0] for e in model.errors]
        for code in sorted(codes, key=order.index):
            said = []
            for src, why in codes[code]:
                text = link.inline(why, here) if why else ""
                if src:
                    text = "as for [`%s`](#%s)%s" % (src, link.anchors[src],
                                                     (": " + text) if text else "")
                if text and text not in said:
                    said.append(text)
            text = "; ".join(said)
            if not any(why for _, why in codes[code]):
                generic = next(e[2] for e in model.errors if e[0] == code)
                text += (" — " if text else "") + \
                    "*no circumstance given; the code means:* %s" % md_escape(generic)
            page.add("| `%s` | %s |" % (code, cell(text)))
        page.add("")
    elif any(d.ret == "int" for d in decls):
        page.add("**Errors**: *the doc block lists none.*", "")
    for title, regex in (("Thread-safety", THREAD_RE), ("Ownership and lifetime", OWNERSHIP_RE)):
        # Error entries are in the errors table already.
        said = [u.text for u in units if regex.search(u.text) and not u.error_entry()]
        if said:
            page.add("**%s**" % title, "")
            page.add(*["- " + link.inline(u, here) for u in said])
            page.add("")
        else:
            page.add("**%s**: *the doc block says nothing.*" % title, "")


# ---------------------------------------------------------------- man page


def roff_escape(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fP", text)
    lines = []
    for line in text.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def roff_doc(lines):
    out = []
    for kind, val in doc_parts(lines):
        if kind == "para":
            out += [".PP", roff_escape(val)]
        elif kind == "bullets":
            for item in val:
                out += [".IP \\(bu 2", roff_escape(item)]
        else:
            out += [".PP", ".RS 4", ".nf"] + [roff_escape(x) for x in val] + [".fi", ".RE"]
    return out


MAN_EXPERIMENTAL = ("\\fBExperimental\\fP (RL_EXPERIMENTAL): not yet frozen; a minor "
                    "release may still change it.")


def render_man(model):
    out = [
        '.\\" Generated by %s from %s: do not edit.' % (GENERATOR_REL, HEADER_REL),
        '.TH RATELIMIT 3 "" "libratelimit %s" "libratelimit API"' % roff_escape(model.version),
        ".SH NAME",
        "ratelimit \\- embeddable two\\-tier distributed rate limiter (C API)",
        ".SH SYNOPSIS",
        ".nf",
        ".B #include <ratelimit.h>",
        ".PP",
    ]
    for b in model.blocks:
        for d in b.decls:
            if d.kind == "func":
                out.append(roff_escape(d.code) + ("   /* experimental */" if d.experimental
                                                  else ""))
            elif d.kind == "inline":
                proto = "%s %s(%s);" % (d.ret, d.name, ", ".join(
                    ("%s%s" if t.endswith("*") else "%s %s") % (t, n) for t, n in d.params))
                out.append(roff_escape(proto.replace("* ", "*")) + "   /* static inline */")
    out += [".fi", ".PP", "Link with \\fB\\-lratelimit\\fP "
            "(\\fBpkg\\-config \\-\\-libs ratelimit\\fP).", ".SH DESCRIPTION"]
    out += roff_doc(model.intro)
    out += [".SH ERRORS", ".PP", "Functions return these negative codes; "
            "\\fBrl_strerror\\fP() gives the message and \\fBrl_err_name\\fP() the name."]
    for name, value, msg in model.errors:
        out += [".TP", "\\fB%s\\fP (%d)" % (roff_escape(name), value), roff_escape(msg)]
    out += [".SH FUNCTIONS"]
    sections = []
    for b in model.blocks:
        if any(d.kind in ("func", "inline") for d in b.decls) and b.section not in sections:
            sections.append(b.section)
    for sec in sections:
        for b in model.blocks:
            decls = [d for d in b.decls if d.kind in ("func", "inline")]
            if b.section != sec or not decls:
                continue
            out += [".SS %s" % roff_escape(", ".join(d.name for d in decls)), ".nf"]
            out += [roff_escape(d.code) for d in decls]
            out += [".fi"]
            if b.experimental():
                out += [".PP", MAN_EXPERIMENTAL]
            out += roff_doc(b.doc)
    out += [".SH TYPES"]
    for b in model.blocks:
        for d in b.decls:
            if d.kind == "struct":
                out += [".SS %s" % d.name]
                out += roff_doc(b.doc)
                for f in d.fields:
                    if f[0] == "note":
                        out += [".PP", roff_escape(" ".join(f[1]))]
                    else:
                        out += [".TP", "\\fI%s\\fP \\fB%s\\fP" % (roff_escape(f[1]), f[2]),
                                ("Experimental. " if f[4] else "") +
                                (roff_escape(" ".join(f[3])) or "\\(em")]
            elif d.kind in ("fnptr", "opaque"):
                out += [".SS %s" % d.name, ".nf", roff_escape(d.code), ".fi"]
                if d.experimental:
                    out += [".PP", MAN_EXPERIMENTAL]
                out += roff_doc(b.doc)
    out += [".SH SEE ALSO", "docs/api.md, docs/thread\\-safety.md and docs/operations.md "
            "in the source tree; \\fIinclude/ratelimit.h\\fP is the specification."]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ gaps


def gaps(model):
    """Declarations whose doc block is silent on a topic the header's own
    convention promises ("every public symbol has a doc block saying what it
    does, its thread-safety, who owns what, and every error it returns")."""
    out = []
    for b in model.blocks:
        names = ", ".join(d.name for d in b.decls)
        if not b.doc and not all((d.kind == "define" and d.trailing) or d.kind == "errenum"
                                 for d in b.decls):
            out.append("%s (line %d): no doc block" % (names, b.line))
        decls = [d for d in b.decls if d.kind in ("func", "inline")]
        if not decls:
            continue
        units = doc_units(b.doc)
        if not any(THREAD_RE.search(u.text) for u in units):
            out.append("%s (line %d): says nothing about thread-safety" % (names, b.line))
        if any(d.ret == "int" for d in decls) and not model.block_errors(b):
            out.append("%s (line %d): returns int but lists no error" % (names, b.line))
    return out


# ------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description="Generate the API reference from the header.")
    ap.add_argument("--header", default=os.path.join(ROOT, HEADER_REL))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "docs"),
                    help="writes OUT_DIR/api.md and OUT_DIR/man/ratelimit.3")
    ap.add_argument("--gaps", action="store_true",
                    help="list doc blocks that are silent on a topic (stderr)")
    args = ap.parse_args()
    with open(args.header, encoding="utf-8") as f:
        text = f.read()
    try:
        model = Model(*parse_header(text))
    except HeaderError as e:
        sys.stderr.write("gen-api-docs: %s: %s\n" % (args.header, e))
        return 1
    os.makedirs(os.path.join(args.out_dir, "man"), exist_ok=True)
    outputs = ((os.path.join(args.out_dir, "api.md"), render_markdown(model)),
               (os.path.join(args.out_dir, "man", "ratelimit.3"), render_man(model)))
    for path, content in outputs:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(content)
    if args.gaps:
        for g in gaps(model):
            sys.stderr.write("gap: %s\n" % g)
    return 0


if __name__ == "__main__":
    sys.exit(main())
