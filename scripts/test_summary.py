#!/usr/bin/env python3
"""One plain closing line from Meson's testlog.json files, whatever the runner printed above it.

    scripts/test_summary.py LABEL [--slowest N] [--one-more passed|failed] TESTLOG.json...

prints "LABEL: P passed, F failed, S skipped" over every test of every file given (a file that
does not exist is skipped: a stage that did not run). OK and EXPECTEDFAIL count as passed, SKIP
as skipped, anything else (FAIL, TIMEOUT, UNEXPECTEDPASS, ERROR) as failed. --one-more counts one
more test that is not in a testlog (.ci/run: the fuzzing). scripts/test.sh prints one line per
build, .ci/run one over them all.

Above that line it names each failed test with the last lines of its output, and --slowest N
lists the N longest tests: CI keeps only the tail of a run's log, so what failed and where the
minutes went must be there, not only in the testlog files a clean clone's runner throws away.
"""
import argparse
import json
import os
import sys


TAIL_LINES = 15


def records(paths):
    """Every test record of the testlogs that exist, with the build folder it came from."""
    for path in paths:
        if not os.path.exists(path):
            continue
        build = os.path.dirname(os.path.dirname(path))
        with open(path) as f:
            for line in f:
                if line.strip():
                    yield build, json.loads(line)


def outcome(record):
    r = record.get("result", "")
    if r in ("OK", "EXPECTEDFAIL"):
        return "passed"
    return "skipped" if r == "SKIP" else "failed"


def count(recs, one_more=None):
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    if one_more:
        counts[one_more] += 1
    for _, record in recs:
        counts[outcome(record)] += 1
    return counts


def report_failures(recs, out):
    for build, record in recs:
        if outcome(record) != "failed":
            continue
        print(f"FAILED {build}: {record.get('name')} ({record.get('result')}, "
              f"{record.get('duration', 0):.0f} s)", file=out)
        text = (record.get("stdout") or "") + (record.get("stderr") or "")
        for line in text.rstrip().splitlines()[-TAIL_LINES:]:
            print(f"    {line}", file=out)


def report_slowest(recs, n, out):
    timed = sorted(((r.get("duration") or 0, b, r.get("name")) for b, r in recs), reverse=True)
    if not timed:
        return
    total = sum(t for t, _, _ in timed)
    print(f"slowest tests (all {len(timed)} sum {total / 60:.1f} min of test time):", file=out)
    for seconds, build, name in timed[:n]:
        print(f"  {seconds:7.1f} s  {build}: {name}", file=out)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("label")
    parser.add_argument("--one-more", choices=("passed", "failed"))
    parser.add_argument("--slowest", type=int, default=0, metavar="N")
    parser.add_argument("testlogs", nargs="*")
    args = parser.parse_intermixed_args(argv)
    recs = list(records(args.testlogs))  # each testlog read once
    if args.slowest:
        report_slowest(recs, args.slowest, sys.stdout)
    report_failures(recs, sys.stdout)
    c = count(recs, args.one_more)
    print(f"{args.label}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
