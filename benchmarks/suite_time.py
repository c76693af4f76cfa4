"""Wall time of the test suite as `make test` runs it, and where the time goes.

Runs ``pytest -q -n WORKERS --dist loadfile --no-loadscope-reorder`` (``--workers 0``: one
process, as before the suite ran in parallel) on this checkout, with any extra pytest arguments
(a subset), and prints one JSON document: the wall time, how many tests were collected and how
each ended, the slowest tests (set-up, call and tear-down together, from pytest's JUnit report),
and the machine's load average before and after (a busy shared machine inflates every figure;
compare runs made under similar load, or ratios).

    python benchmarks/suite_time.py [--workers 2] [--slowest 25] [-- PYTEST_ARGS...]
    python benchmarks/suite_time.py --workers 0 -- tests/unit     # the unit tests in one process
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def collected(pytest_args: list[str]) -> int:
    """How many tests pytest collects for these arguments (after the ini file's -m filter)."""
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          *pytest_args], cwd=REPO, capture_output=True, text=True)
    match = re.search(r"(\d+)(?:/\d+)? tests? collected", run.stdout)
    if not match:
        raise SystemExit(f"pytest --collect-only printed no count:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers; 0 = one process")
    parser.add_argument("--slowest", type=int, default=25, help="how many of the slowest tests to list")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest (paths, -k, -m)")
    args = parser.parse_args()

    parallel = ["-n", str(args.workers), "--dist", "loadfile", "--no-loadscope-reorder"] if args.workers else []
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *parallel,
                   f"--junitxml={report}", *args.pytest_args]
        load_before = os.getloadavg()
        started = time.monotonic()
        run = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        wall_s = time.monotonic() - started
        load_after = os.getloadavg()
        if not report.is_file():
            raise SystemExit(f"pytest wrote no report (exit {run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        cases = ElementTree.parse(report).getroot().iter("testcase")
        outcomes: dict[str, int] = {}
        timings = []
        not_passed = []
        for case in cases:
            ending = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
            ended = "passed" if ending is None else ending.tag
            outcomes[ended] = outcomes.get(ended, 0) + 1
            name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            timings.append((float(case.get("time", 0.0)), name))
            if ending is not None and ended != "skipped":
                not_passed.append({"test": name, "ended": ended, "message": (ending.get("message") or "")[:500]})
    timings.sort(reverse=True)
    print(json.dumps({
        "command": " ".join(command[1:]).replace(str(report), "REPORT"),
        "exit_status": run.returncode,
        "workers": args.workers,
        "cpu_count": os.cpu_count(),
        "wall_s": round(wall_s, 1),
        "collected": collected(args.pytest_args),
        "outcomes": outcomes,
        "failed": not_passed,
        "sum_of_test_times_s": round(sum(t for t, _ in timings), 1),
        "slowest": [{"test": name, "s": round(seconds, 1)} for seconds, name in timings[:args.slowest]],
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
    }, indent=2))


if __name__ == "__main__":
    main()
