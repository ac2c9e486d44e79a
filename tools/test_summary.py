#!/usr/bin/env python3
"""Summarizes a test run for the records: the commit and date, ctest's counts, pass / skip / fail
counts per pytest file (from the JUnit files pytest wrote with --junitxml), the skip reasons, and
the largest error each tight check measured (the LOWBIT_TEST_RECORD file the tests append to).

    python3 tools/test_summary.py --commit abc1234 --ctest-log OUT/ctest.log --junit OUT/junit \\
        --errors OUT/tight-errors.tsv > OUT/tests-summary.txt
"""

from __future__ import annotations

import argparse
import collections
import datetime
import re
import xml.etree.ElementTree as ET
from pathlib import Path


def ctest_counts(log: Path) -> str:
    if not log.exists():
        return "ctest: no log"
    text = log.read_text(errors="replace")
    # "100% tests passed out of 78" when none failed, "96% tests passed, 2 tests failed out of 50" else
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", text)
    if m is None:
        every = re.search(r"100% tests passed out of (\d+)", text)
        if every is not None:
            return f"ctest: {every.group(1)} passed, 0 failed of {every.group(1)}"
    if not m:
        return "ctest: no summary line (crashed?)"
    failed, total = int(m.group(2)), int(m.group(3))
    return f"ctest: {total - failed} passed, {failed} failed of {total}"


def pytest_counts(junit_dir: Path) -> list[str]:
    lines, totals, reasons = [], collections.Counter(), collections.Counter()
    for xml in sorted(junit_dir.glob("*.xml")):
        counts = collections.Counter()
        for case in ET.parse(xml).getroot().iter("testcase"):
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                elif child.tag == "skipped":
                    outcome = "skipped"
                    reasons[(xml.stem, child.get("message", "").strip())] += 1
            counts[outcome] += 1
        totals.update(counts)
        lines.append(f"  {xml.stem}: {counts['passed']} passed, {counts['skipped']} skipped, {counts['failed']} failed")
    head = f"pytest: {totals['passed']} passed, {totals['skipped']} skipped, {totals['failed']} failed"
    skip_lines = [f"  skipped {n}x in {f}: {why}" for (f, why), n in sorted(reasons.items())]
    return [head, *lines, *(["skip reasons:", *skip_lines] if skip_lines else [])]


def tight_errors(path: Path) -> list[str]:
    if not path.exists() or path.stat().st_size == 0:
        return ["tight checks: nothing recorded"]
    worst: dict[str, tuple[float, str]] = {}
    count = collections.Counter()
    for line in path.read_text().splitlines():
        check, what, err = line.split("\t")
        count[check] += 1
        if check not in worst or float(err) > worst[check][0]:
            worst[check] = (float(err), what)
    return ["tight checks (largest measured rel err):"] + [
        f"  {c}: {e:.3e} at {what} ({count[c]} measured)" for c, (e, what) in sorted(worst.items())
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--ctest-log", type=Path, required=True)
    ap.add_argument("--junit", type=Path, required=True)
    ap.add_argument("--errors", type=Path, required=True)
    args = ap.parse_args()
    print(f"commit {args.commit}, {datetime.date.today().isoformat()}")
    print(ctest_counts(args.ctest_log))
    print("\n".join(pytest_counts(args.junit)))
    print("\n".join(tight_errors(args.errors)))


if __name__ == "__main__":
    main()
