#!/usr/bin/env python3
"""Checks that cli/'s folders include each other in one direction only.

cli/ is built as one static library per folder, in the order given on the command line
(cli/meson.build's `cli_layers`, lowest first). A file may include headers of its own folder and
of the folders before it, never of a folder after it: an include against that order fails the
build with the file, the line and the layer order. Files directly in cli/ (main.cc) are above
every folder. Paths are `#include "cli/FOLDER/..."`, as everywhere in hora.

Meson runs this as a custom target that every cli library waits for; the depfile lists every
file read, so ninja runs it again whenever one changes.

Usage: check_layers.py --root SRC --out STAMP.h --depfile FILE.d LAYER [LAYER ...]
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"cli/([^"]+)"')


def layer_of(relative, order):
    """The layer of a path relative to cli/: its folder, or 'main' for files directly in cli/."""
    parts = relative.split("/")
    if len(parts) == 1:
        return "main"
    return parts[0] if parts[0] in order else None


def check(root, layers):
    order = {name: i for i, name in enumerate(layers)}
    order["main"] = len(layers)
    cli = os.path.join(root, "cli")
    errors, read = [], []
    for folder, _, names in sorted(os.walk(cli)):
        for name in sorted(names):
            if not name.endswith((".h", ".cc")):
                continue
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, cli).replace(os.sep, "/")
            read.append(path)
            source = layer_of(relative, order)
            if source is None:
                errors.append(f"cli/{relative}: folder is not a layer; add it to cli_layers in "
                              "cli/meson.build (and docs/architecture.md)")
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = layer_of(m.group(1), order)
                    if target is None or order[target] > order[source]:
                        errors.append(
                            f"cli/{relative}:{number}: includes cli/{m.group(1)}, but layer "
                            f"'{source}' may use only {', '.join(layers[:order[source] + 1]) or '-'}"
                            f" (cli/ layers, lowest first: {' < '.join(layers)} < main; "
                            "docs/architecture.md)")
    return errors, read


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--out")
    parser.add_argument("--depfile")
    parser.add_argument("layers", nargs="+")
    args = parser.parse_args()
    errors, read = check(args.root, args.layers)
    if args.depfile:
        with open(args.depfile, "w") as f:
            deps = " ".join(p.replace(" ", "\\ ") for p in read + [__file__])
            f.write(f"{args.out or 'stamp'}: {deps}\n")
    if errors:
        for e in errors:
            print(f"check_layers: {e}", file=sys.stderr)
        return 1
    if args.out:
        with open(args.out, "w") as f:
            f.write("// Written by scripts/check_layers.py: cli/'s includes follow its layers.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
