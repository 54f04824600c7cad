#!/usr/bin/env python3
"""Prints the longest C++ function bodies of hora's own code and fails on one over the limit.

    scripts/long_functions.py [--limit 120] [--top 10] [DIR ...]   (default: cli runtime
                                                                    rendezvous ssh common)

A function is measured from the line of its opening brace to the line of its closing one,
lambdas and local classes inside it included (they are part of what a reader must hold). A
function longer than --limit fails the run unless scripts/long_functions.allow names it (its
file and name) with the reason it stays long: a table or a state machine's switch reads best
whole, a sequence of steps does not (split it along the steps its header numbers).

The parser is a brace counter over the source with comments, strings and character literals
blanked out: a '{' opens a function when the text before it, since the last ';', '{' or '}',
holds a parameter list and is not a namespace, class or control statement. Constructor
initializer lists with braces (`: a_{x} {`) are followed to the body. It needs no compiler
and sees every build's files, the CUDA and test-only ones too; scripts/test.sh runs it.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOW = os.path.join(ROOT, "scripts", "long_functions.allow")

CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\s*(\(|$)")
RECORD = re.compile(r"\b(class|struct|union|enum)\b")
NAME = re.compile(r"([~\w:<>=!+\-*/&|\[\]]+)\s*\($")


def blank(text):
    """Text with comments, string and character literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator: 1'000'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j, n - 1) + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_name(header):
    """The name before the parameter list of a function header, or None."""
    depth = 0
    # The parameter list is the first top-level '(' ... ')' group after the name.
    for i, c in enumerate(header):
        if c == "(" and depth == 0:
            m = NAME.search(header[:i + 1])
            if m:
                return m.group(1).lstrip("*&")
            return None
        if c == "<":
            depth += 1
        elif c == ">" and depth > 0:
            depth -= 1
    return None


def functions(path):
    """(name, first line, last line) of every function body defined outside another function."""
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    found = []
    stack = []  # kinds: namespace, record, function, init, other
    header_start = 0
    line = 1
    starts = []  # the line of each open brace
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            header = " ".join(text[header_start:i].split())
            inside_function = any(k == "function" for k in stack)
            if inside_function:
                kind = "other"
            elif re.search(r"\bnamespace\b|extern\s*$", header) or header.endswith('extern'):
                kind = "namespace"
            elif RECORD.search(header) and "(" not in header.split(RECORD.search(header).group(0))[0][-1:]:
                kind = "record" if not re.search(r"\)\s*(const)?\s*$", header) else "function"
            elif ")" in header and not CONTROL.search(header) and "=" not in header.split("(")[0]:
                # `Foo::Foo(int x) : a_{x}, b_{y} {`: the braces after an initializer's name.
                after = header[header.rfind(")") + 1:]
                if re.search(r"^\s*(noexcept\s*)?:", after) and re.search(r"[\w>]\s*$", header):
                    kind = "init"
                else:
                    kind = "function"
            else:
                kind = "other"
            stack.append(kind)
            starts.append((line, header))
            if kind != "init":
                header_start = i + 1
        elif c == "}":
            if not stack:
                continue
            kind = stack.pop()
            first, header = starts.pop()
            if kind == "function":
                found.append((function_name(header) or header[-60:], first, line))
            if kind != "init":
                header_start = i + 1
        elif c == ";":
            header_start = i + 1
    return found


def allowed():
    """{(path, name): reason} from the allow file: `path name  # reason` per line."""
    allow = {}
    if not os.path.exists(ALLOW):
        return allow
    for raw in open(ALLOW, encoding="utf-8"):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        spec, _, reason = text.partition("#")
        parts = spec.split()
        if len(parts) != 2 or not reason.strip():
            sys.exit("long_functions: %s: each line is `path name  # reason`: %r" % (ALLOW, raw))
        allow[(parts[0], parts[1])] = reason.strip()
    return allow


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=120)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("dirs", nargs="*", default=["cli", "runtime", "rendezvous", "ssh", "common"])
    args = ap.parse_args()
    rows = []
    for d in args.dirs:
        for folder, _, names in sorted(os.walk(os.path.join(ROOT, d))):
            for name in sorted(names):
                if name.endswith((".cc", ".h", ".cu", ".cpp")):
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, ROOT)
                    for fn, first, last in functions(path):
                        rows.append((last - first + 1, rel, first, fn))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    allow = allowed()
    print("the %d longest functions in %s (lines from brace to brace):" % (args.top,
                                                                           " ".join(args.dirs)))
    for n, rel, first, fn in rows[:args.top]:
        note = "  (allowed: %s)" % allow[(rel, fn)] if (rel, fn) in allow else ""
        print("%5d  %s:%d  %s%s" % (n, rel, first, fn, note))
    over = [r for r in rows if r[0] > args.limit and (r[1], r[3]) not in allow]
    used = {(r[1], r[3]) for r in rows if r[0] > args.limit}
    stale = sorted(k for k in allow if k not in used)
    for rel, fn in stale:
        print("long_functions: %s names %s in %s, which is no longer over %d lines: take it out"
              % (os.path.relpath(ALLOW, ROOT), fn, rel, args.limit))
    for n, rel, first, fn in over:
        print("long_functions: %s:%d: %s is %d lines, over %d: split it along its steps, or list "
              "it with the reason in %s" % (rel, first, fn, n, args.limit,
                                            os.path.relpath(ALLOW, ROOT)))
    return 1 if over or stale else 0


if __name__ == "__main__":
    sys.exit(main())
