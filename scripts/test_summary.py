#!/usr/bin/env python3
"""One plain closing line from Meson's testlog.json files, whatever the runner printed above it.

    scripts/test_summary.py LABEL [--one-more passed|failed] TESTLOG.json...

prints "LABEL: P passed, F failed, S skipped" over every test of every file given (a file that
does not exist is skipped: a stage that did not run). OK and EXPECTEDFAIL count as passed, SKIP
as skipped, anything else (FAIL, TIMEOUT, UNEXPECTEDPASS, ERROR) as failed. --one-more counts one
more test that is not in a testlog (.ci/run: the fuzzing). scripts/test.sh prints one line per
build, .ci/run one over them all.
"""
import argparse
import json
import os
import sys


def count(paths, one_more=None):
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    if one_more:
        counts[one_more] += 1
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                r = json.loads(line).get("result", "")
                if r in ("OK", "EXPECTEDFAIL"):
                    counts["passed"] += 1
                elif r == "SKIP":
                    counts["skipped"] += 1
                else:
                    counts["failed"] += 1
    return counts


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("label")
    parser.add_argument("--one-more", choices=("passed", "failed"))
    parser.add_argument("testlogs", nargs="*")
    args = parser.parse_intermixed_args(argv)
    c = count(args.testlogs, args.one_more)
    print(f"{args.label}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
