#!/usr/bin/env python3
"""Fails when the docs' lists drift from the code (scripts/check_paths.py checks the paths).

    python3 scripts/check_docs.py [REPO]     # default: the repo holding this script

Checks, each printing `check_docs: ...` with what to change:
  1. public headers: the headers in runtime/include/hora/ (version.h from version.h.in) are
     exactly the ones docs/architecture.md's `runtime/include/hora/` row names;
  2. environment variables: every HORA_* name that code in cli/, runtime/, rendezvous/, ssh/,
     common/ or python/ spells out is in docs/environment.md, and every HORA_* name there is
     spelled out in that code (HORA_STALL_* stands for the names it prefixes);
  3. getenv in libhora: every file of runtime/ that calls getenv() is named in
     runtime/core/env.h's opening comment, which says where each variable is read;
  4. no "issue N" in code or docs: a comment gives the reason, which a reader can read, not a
     tracker number, which a reader of the code cannot open.
"""
import glob
import os
import re
import sys

CODE_DIRS = ("cli", "runtime", "rendezvous", "ssh", "common", "python")
ISSUE_DIRS = CODE_DIRS + ("docs", "test", "scripts", "bench", "examples", "fuzz")
CODE_EXT = (".cc", ".h", ".py", ".in", ".build", ".sh")
NAME = re.compile(r"\bHORA_[A-Z0-9_]*[A-Z0-9]\b")
# In code, a variable's name is a string literal ("HORA_RANK", 'HORA_RUN_PORT', "HORA_X=1");
# macros (HORA_GUARDED_BY) and build constants (HORA_VERSION) are not variables.
LITERAL = re.compile(r"[\"'](HORA_[A-Z0-9_]*[A-Z0-9])[\"'=]")
ISSUE = re.compile(r"\bissue [0-9]", re.I)


def files(root, dirs, ext):
    for d in dirs:
        for folder, _, names in os.walk(os.path.join(root, d)):
            for name in names:
                if name.endswith(ext):
                    yield os.path.join(folder, name)


def read(path):
    return open(path, encoding="utf-8", errors="replace").read()


def public_headers(root):
    errors = []
    folder = os.path.join(root, "runtime", "include", "hora")
    have = {os.path.basename(p) for p in glob.glob(os.path.join(folder, "*.h"))}
    have |= {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(folder, "*.h.in"))}
    row = [l for l in read(os.path.join(root, "docs", "architecture.md")).splitlines()
           if l.startswith("| `runtime/include/hora/` |")]
    if len(row) != 1:
        return ["check_docs: docs/architecture.md has no single `runtime/include/hora/` row in "
                "its folder table"]
    named = set(re.findall(r"`([a-z_]+\.h)`", row[0]))
    for h in sorted(have - named):
        errors.append("check_docs: docs/architecture.md's public headers leave out %s "
                      "(runtime/include/hora/): add it to the `runtime/include/hora/` row" % h)
    for h in sorted(named - have):
        errors.append("check_docs: docs/architecture.md names the public header %s, which is "
                      "not in runtime/include/hora/: take it out" % h)
    return errors


def environment(root):
    errors = []
    in_code = {}
    for path in files(root, CODE_DIRS, (".cc", ".h", ".py")):
        for n in LITERAL.findall(read(path)):
            in_code.setdefault(n, os.path.relpath(path, root))
    doc = read(os.path.join(root, "docs", "environment.md"))
    in_doc = set(NAME.findall(doc))
    prefixes = {m[:-1] for m in re.findall(r"\bHORA_[A-Z0-9_]+_\*", doc)}
    for n in sorted(set(in_code) - in_doc):
        if not any(n.startswith(p) for p in prefixes):
            errors.append("check_docs: %s is read or set in %s but docs/environment.md does not "
                          "say what it does: add a row" % (n, in_code[n]))
    for n in sorted(in_doc - set(in_code)):
        errors.append("check_docs: docs/environment.md describes %s, which no code in %s spells "
                      "out: take the row out or fix the name" % (n, ", ".join(CODE_DIRS)))
    return errors


def getenv_callers(root):
    errors = []
    env_h = os.path.join(root, "runtime", "core", "env.h")
    comment = read(env_h).split("#pragma once")[0]
    for path in files(root, ("runtime",), (".cc", ".h")):
        if path == env_h or "getenv(" not in read(path):
            continue
        rel = os.path.relpath(path, os.path.join(root, "runtime"))
        if rel not in comment:
            errors.append("check_docs: runtime/%s calls getenv() but runtime/core/env.h's "
                          "comment does not name it: say there which variables it reads" % rel)
    return errors


def issue_numbers(root):
    errors = []
    me = os.path.abspath(__file__)
    for path in files(root, ISSUE_DIRS, CODE_EXT + (".md", ".txt", ".toml")):
        if os.path.abspath(path) == me:
            continue
        for i, line in enumerate(read(path).splitlines(), 1):
            if ISSUE.search(line):
                errors.append("check_docs: %s:%d: says \"%s\": write the reason instead of the "
                              "issue's number" % (os.path.relpath(path, root), i,
                                                  ISSUE.search(line).group(0) + "..."))
    for top in ("README.md", "CONTRIBUTING.md"):
        for i, line in enumerate(read(os.path.join(root, top)).splitlines(), 1):
            if ISSUE.search(line):
                errors.append("check_docs: %s:%d: names an issue number: write the reason"
                              % (top, i))
    return errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    errors = public_headers(root) + environment(root) + getenv_callers(root) + issue_numbers(root)
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
