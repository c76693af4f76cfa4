"""Wall time of the test suite as `make test` runs it, and where the time goes.

Runs ``pytest -q -n WORKERS --dist loadfile --no-loadscope-reorder`` (``--workers 0``: one
process, as before the suite ran in parallel) on this checkout, with any extra pytest arguments
(a subset), and prints one JSON document: the wall time, how many tests were collected and how
each ended, the slowest tests (set-up, call and tear-down together, from pytest's JUnit report),
and the machine's load average before and after (a busy shared machine inflates every figure;
compare runs made under similar load, or ratios).

With ``--cpu-by-process`` it also says where the CPU goes: for the run, a ``.pth`` file in each
environment's site-packages (``.venv``, ``.venv-vllm``; removed afterwards, also on failure, though
not if this script is killed with -9: then delete ``zz_bloomqg_suite_cpu_log.pth`` by hand) has
every Python process the suite starts (pytest workers, Snakemake, each job's script, servers,
benchmarks) append its own CPU-seconds at exit, and the processes are summed by kind: a job by
its rule, Snakemake's own process, a pytest process (the tests' own code), a vLLM process, or the
program's name. A process killed by a signal (the servers the lifecycle tests kill) writes
nothing; its CPU is in the run's total, which the kernel counts for every process reaped within it.

    python benchmarks/suite_time.py [--workers 2] [--slowest 25] [--cpu-by-process] [-- PYTEST_ARGS...]
    python benchmarks/suite_time.py --workers 0 -- tests/unit     # the unit tests in one process
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The environments whose Python processes log their CPU under --cpu-by-process.
ENVIRONMENTS = (".venv", ".venv-vllm")
#: What each Python process runs at exit under --cpu-by-process ({log!r}: the JSON-lines file).
CPU_LOGGER = """\"\"\"Written by benchmarks/suite_time.py --cpu-by-process for one run; removed after it.\"\"\"
import atexit, json, resource, sys


def _log():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    modules = [name for name in ("_pytest", "vllm") if name in sys.modules]
    record = {{"argv": sys.argv[:1], "cpu_s": usage.ru_utime + usage.ru_stime,
              "executable": sys.executable, "modules": modules}}
    try:
        with open({log!r}, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\\n")
    except OSError:
        pass


atexit.register(_log)
"""


def collected(pytest_args: list[str]) -> int:
    """How many tests pytest collects for these arguments (after the ini file's -m filter)."""
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          *pytest_args], cwd=REPO, capture_output=True, text=True)
    match = re.search(r"(\d+)(?:/\d+)? tests? collected", run.stdout)
    if not match:
        raise SystemExit(f"pytest --collect-only printed no count:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    return int(match.group(1))


def site_packages(environment: Path) -> Path:
    """The environment's site-packages, as its own interpreter names it."""
    run = subprocess.run([str(environment / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(run.stdout.strip())


def install_cpu_logger(scratch: Path, log: Path) -> list[Path]:
    """The logger module in ``scratch`` and a ``.pth`` naming it in each environment that exists;
    returns the ``.pth`` files, which the caller removes."""
    (scratch / "bloomqg_suite_cpu_log.py").write_text(CPU_LOGGER.format(log=str(log)), encoding="utf-8")
    installed = []
    for name in ENVIRONMENTS:
        if (REPO / name / "bin" / "python").exists():
            pth = site_packages(REPO / name) / "zz_bloomqg_suite_cpu_log.pth"
            pth.write_text(f"import sys; sys.path.append({str(scratch)!r}); import bloomqg_suite_cpu_log\n", encoding="utf-8")
            installed.append(pth)
    return installed


def process_kind(record: dict) -> str:
    """What a logged process was: ``job <rule>`` (Snakemake writes a job's script as
    ``.snakemake/scripts/tmpXXXX.<script>.py``), ``snakemake``, ``pytest`` (a process running
    tests: their own code), ``vllm``, or the program's file name."""
    program = record["argv"][0] if record["argv"] else ""
    job = re.search(r"[\\/]\.snakemake[\\/]scripts[\\/]tmp[^.]*\.(\w+)\.py$", program)
    if job:
        return f"job {job.group(1)}"
    if "vllm" in record["modules"] or f"{os.sep}.venv-vllm{os.sep}" in record["executable"]:
        return "vllm"
    if "_pytest" in record["modules"]:
        return "pytest"
    if program.endswith(os.path.join("snakemake", "__main__.py")) or Path(program).name == "snakemake":
        return "snakemake"
    return "python -c" if program in ("", "-c") else Path(program).name


def cpu_by_kind(log: Path, total_cpu_s: float) -> dict:
    """The logged processes' CPU-seconds summed by :func:`process_kind`, most first."""
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.is_file() else []
    kinds: dict[str, list[float]] = {}
    for record in records:
        kinds.setdefault(process_kind(record), []).append(float(record["cpu_s"]))
    rows = sorted(({"kind": kind, "processes": len(cpu), "cpu_s": round(sum(cpu), 1),
                    "cpu_s_each": round(sum(cpu) / len(cpu), 2)} for kind, cpu in kinds.items()),
                  key=lambda row: -row["cpu_s"])
    return {"total_cpu_s": round(total_cpu_s, 1), "logged_cpu_s": round(sum(r["cpu_s"] for r in rows), 1),
            "logged_processes": len(records), "kinds": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers; 0 = one process")
    parser.add_argument("--slowest", type=int, default=25, help="how many of the slowest tests to list")
    parser.add_argument("--cpu-by-process", action="store_true",
                        help="log every Python process's CPU and sum it by kind (see the module's docstring)")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest (paths, -k, -m)")
    args = parser.parse_args()

    parallel = ["-n", str(args.workers), "--dist", "loadfile", "--no-loadscope-reorder"] if args.workers else []
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *parallel,
                   f"--junitxml={report}", *args.pytest_args]
        log = Path(scratch) / "cpu.jsonl"
        installed = install_cpu_logger(Path(scratch), log) if args.cpu_by_process else []
        load_before = os.getloadavg()
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        try:
            run = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        finally:
            for pth in installed:
                pth.unlink(missing_ok=True)
        wall_s = time.monotonic() - started
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        total_cpu_s = (children.ru_utime + children.ru_stime) - (children_before.ru_utime + children_before.ru_stime)
        cpu = cpu_by_kind(log, total_cpu_s) if args.cpu_by_process else None
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
        "cpu_s": round(total_cpu_s, 1),
        "collected": collected(args.pytest_args),
        "outcomes": outcomes,
        "failed": not_passed,
        "sum_of_test_times_s": round(sum(t for t, _ in timings), 1),
        "slowest": [{"test": name, "s": round(seconds, 1)} for seconds, name in timings[:args.slowest]],
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        **({"cpu_by_process": cpu} if cpu is not None else {}),
    }, indent=2))


if __name__ == "__main__":
    main()
