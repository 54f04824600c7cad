#!/usr/bin/env python3
"""Prints the ninja targets that `meson test` would build for a selection of tests.

    scripts/test_targets.py BUILD_DIR [--suite S]... [--no-suite S]... [TEST_NAME...]

One path per line, relative to BUILD_DIR, as ninja takes them. The selection reads as meson
test's does: a test is chosen when its name is one of TEST_NAME, or when one of its suites
matches a --suite and none matches a --no-suite (a suite matches "S" and "project:S" alike).
With neither names nor --suite, every test not in a --no-suite is chosen.

scripts/test.sh uses it to build the sanitizer trees at the lowest CPU priority while the
main suite runs (its tests mostly wait on deadlines), so that `meson test` on those trees
afterwards finds nothing left to build. Building the same list meson test would build keeps
the sanitizer builds as narrow as before: only what the chosen tests need.
"""

import argparse
import json
import os
import subprocess
import sys


def introspect(build_dir, what):
    out = subprocess.run(["meson", "introspect", build_dir, what], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def suite_matches(test_suites, wanted):
    for full in test_suites:
        short = full.split(":", 1)[-1]
        if wanted in (full, short):
            return True
    return False


def chosen(test, names, suites, no_suites):
    if any(suite_matches(test["suite"], s) for s in no_suites):
        return False
    if not names and not suites:
        return True
    if test["name"] in names:
        return True
    return any(suite_matches(test["suite"], s) for s in suites)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("--suite", action="append", default=[])
    parser.add_argument("--no-suite", action="append", default=[])
    parser.add_argument("names", nargs="*")
    args = parser.parse_intermixed_args()

    tests = introspect(args.build_dir, "--tests")
    known = {t["name"] for t in tests}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        print(f"test_targets.py: no test named {', '.join(unknown)} in {args.build_dir}",
              file=sys.stderr)
        return 2
    files = {t["id"]: t["filename"] for t in introspect(args.build_dir, "--targets")}
    build_dir = os.path.abspath(args.build_dir)
    out = set()
    for test in tests:
        if not chosen(test, set(args.names), args.suite, args.no_suite):
            continue
        for dep in test["depends"]:
            for path in files.get(dep, []):
                out.add(os.path.relpath(path, build_dir))
    for path in sorted(out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
