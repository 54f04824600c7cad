#!/usr/bin/env python3
"""Fails when a comment or doc names a repo path that does not exist.

Scans every text file git tracks or would (git ls-files --cached --others --exclude-standard;
fuzz corpora and LICENSE left out) for words that look like paths of this repository and checks
that each exists there:
  - a path starting with a top-level folder (cli/, runtime/, docs/, test/, ...) or naming a
    top-level file (README.md, CONTRIBUTING.md), resolved against the repo root;
  - `../shared/...`, the folder beside the repo, checked only when that folder exists here;
  - `folder/file.ext` written inside cli/ or runtime/ (or their tests under test/), where
    `folder` is a subfolder of it (`spawn/supervisor.h` in a comment under cli/), resolved
    against that top-level folder or, as test folders mirror those, against the folder of the
    file naming it; an #include <...> is a library's header and not checked.
A `path:line` suffix and trailing punctuation are dropped. Placeholders stand for any name:
an upper-case word (`NAME`, `fuzz/NAME_fuzz.cc`), `<...>`, `*`, and `{a,b}` expands to each
choice; a path with `...` in it is not checked. Not repo paths: what .gitignore covers (build/,
build-asan/, crash inputs), an executable's path in a build folder (`bench/rendezvous_bench`,
declared in bench/meson.build), paths inside others (/dev/shm, build/cli/horarun, $OUT/test/x).

A line holding `check_paths: ignore` is not checked, nor a file holding `check_paths: fixture`
in its first 10 lines (a test that writes made-up trees).

Prints `file:line: names PATH, which does not exist` for each, and exits 1 if there was any.
    python3 scripts/check_paths.py [REPO]     # default: the repo holding this script
"""
import fnmatch
import glob
import os
import re
import subprocess
import sys

TOP_FOLDERS = ("cli", "runtime", "rendezvous", "ssh", "common", "python", "examples", "test",
               "fuzz", "bench", "scripts", "docs", ".ci")
TOP_FILES = ("README.md", "CONTRIBUTING.md")
# Folders whose subfolders may be named without the top-level prefix by files inside them; not
# those named like a library whose own headers comments name (gloo/transport/tcp/pair.h).
NESTED_ROOTS = ("cli", "runtime")
NESTED_NOT = ("runtime/gloo", "runtime/nccl")
SKIP_FILES = re.compile(r"^(fuzz/corpus/|LICENSE$|\.gitignore$|\.clang-format$)")
TEXT = re.compile(r"\.(cc|h|hpp|cpp|c|md|sh|py|build|txt|supp|awk|toml|cfg|ini|yml|yaml)$|"
                  r"(^|/)(run|meson\.build|meson_options\.txt)$")

# A path-ish word: letters, digits and the characters that appear in paths and placeholders.
WORD = r"[\w.\-/*{},<>+]"
# Not preceded by a path character, so /dev/shm, build/cli/x, $DIR/test/x and a.b/c are skipped.
BEFORE = r"(?<![\w./\-$~@%])"
# `<...>`, `{name}` (an f-string's), or an upper-case word of 2 or more letters (NAME, CASE_NAME;
# README.md is looked up as it is first).
PLACEHOLDER = re.compile(r"<[^<>/]*>|\{[^{},]*\}|"
                         r"(?<![A-Za-z0-9])[A-Z][A-Z0-9_]*[A-Z0-9](?![a-z0-9])")


def git_files(repo):
    out = subprocess.run(["git", "-C", repo, "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], check=True, capture_output=True).stdout
    return sorted({f for f in out.decode().split("\0") if f})


def clean(token):
    """Drops a `:line` suffix and trailing punctuation; None when not a checkable path."""
    token = token.split(":", 1)[0]
    if "..." in token:
        return None
    while token and (token[-1] in ".,;)'\"`" or
                     token[-1] == ">" and token.count(">") > token.count("<")):
        token = token[:-1]
    if not token:
        return None
    if token.count("{") != token.count("}"):
        token = token.split("{", 1)[0]
    return token


def expand_braces(path):
    m = re.search(r"\{([^{}]*,[^{}]*)\}", path)
    if not m:
        return [path]
    return [p for choice in m.group(1).split(",")
            for p in expand_braces(path[:m.start()] + choice + path[m.end():])]


class Tree:
    def __init__(self, root, files):
        self.root = root
        self.files = set(files)
        self.dirs = set()
        for f in files:
            parts = f.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))
        self.entries = sorted(self.files | self.dirs)

    def exists(self, path):
        path = path.rstrip("/")
        if path in self.files or path in self.dirs:
            return True
        if path.startswith("../"):
            return os.path.exists(os.path.join(self.root, path))
        return False

    def matches(self, pattern):
        pattern = pattern.rstrip("/")
        if pattern.startswith("../"):
            return bool(glob.glob(os.path.join(self.root, pattern)))
        return any(fnmatch.fnmatchcase(e, pattern) for e in self.entries)

    def build_target(self, path):
        """True for `bench/rendezvous_bench`: an executable that dir/meson.build declares, named
        by its path in a build folder (`name`, or `prefix + '_suffix'` in a loop)."""
        d, _, name = path.rstrip("/").rpartition("/")
        if "." in name or not os.path.isfile(os.path.join(self.root, d, "meson.build")):
            return False
        with open(os.path.join(self.root, d, "meson.build"), encoding="utf-8") as fh:
            code = re.sub(r"#.*", "", fh.read())  # comments' apostrophes would pair up quotes
        words = set(re.findall(r"'([^'\\]*)'", code))
        return name in words or any(
            s and name.endswith(s) and name[:-len(s)] in words for s in words)

    def found(self, path):
        for p in expand_braces(path):
            if self.exists(p):
                continue
            pattern = PLACEHOLDER.sub("*", p)
            if "*" in pattern and self.matches(pattern):
                continue
            return False
        return True


def ignored(repo, paths):
    """The paths that .gitignore covers (build folders, crash inputs): not repo paths."""
    paths = [p for p in paths if not p.startswith("../")]
    if not paths:
        return set()
    out = subprocess.run(["git", "-C", repo, "check-ignore", "--no-index", "--stdin", "-z"],
                         input="\0".join(paths).encode(), capture_output=True).stdout
    return {p for p in out.decode().split("\0") if p}


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    files = [f for f in git_files(repo) if os.path.isfile(os.path.join(repo, f))]
    tree = Tree(repo, files)
    shared = os.path.isdir(os.path.join(repo, "..", "shared"))
    tops = "|".join(re.escape(t) for t in TOP_FOLDERS)
    top_re = re.compile(BEFORE + r"((?:\.\./shared/|(?:" + tops + r")/)" + WORD + r"*|" +
                        "|".join(re.escape(t) for t in TOP_FILES) + r")")
    nested = {}
    for root in NESTED_ROOTS:
        subs = sorted(d for d in tree.dirs
                      if d.count("/") == 1 and d.startswith(root + "/") and d not in NESTED_NOT)
        names = "|".join(re.escape(d.split("/")[1]) for d in subs)
        if names:
            nested[root] = re.compile(BEFORE + r"(?<!<)((?:" + names + r")/" + WORD +
                                      r"*\.[a-z]+)\b")

    problems = []
    for f in files:
        if SKIP_FILES.search(f) or not TEXT.search(f):
            continue
        top = f.split("/")[0]
        if top == "test" and f.count("/") >= 2:
            top = f.split("/")[1]
        own = nested.get(top)
        try:
            with open(os.path.join(repo, f), encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except UnicodeDecodeError:
            continue
        if any("check_paths: fixture" in line for line in lines[:10]):
            continue
        for n, line in enumerate(lines, 1):
            if "check_paths: ignore" in line:
                continue
            seen = set()
            for m in top_re.finditer(line):
                path = clean(m.group(1))
                if path is None or path in seen:
                    continue
                seen.add(path)
                if path.startswith("../shared/") and not shared:
                    continue
                if not tree.found(path):
                    problems.append((f, n, path, path))
            if own is None:
                continue
            for m in own.finditer(line):
                path = clean(m.group(1))
                if path is None or path in seen:
                    continue
                seen.add(path)
                full = top + "/" + path
                # A test folder mirrors its source folder, so a test's meson.build may also name
                # its own subfolders (`api/reinit_test.cc` in test/runtime/meson.build).
                if not tree.found(full) and not tree.found(os.path.dirname(f) + "/" + path):
                    problems.append((f, n, path, full))
    skip = ignored(repo, [full for _, _, _, full in problems])
    problems = [(f, n, path, full) for f, n, path, full in problems
                if full not in skip and not tree.build_target(full)]
    for f, n, path, full in problems:
        print(f"{f}:{n}: names {path}" + ("" if path == full else f" ({full})") +
              ", which does not exist")
    if problems:
        print(f"check_paths: {len(problems)} reference(s) to paths that do not exist")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
