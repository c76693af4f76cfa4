"""What the default study costs: wall time, set-up time and job-seconds per rule.

Without ``--study``, clones this repository (its committed HEAD) into a fresh folder and times
``make setup`` there, then ``make study`` (the study alone, set-up done). With ``--study DIR``,
reads a study already run there instead and changes nothing in it. Either way the job-seconds
come from the study's ``logs/benchmarks/<rule>/**.tsv`` (every rule writes one: its ``s`` is the
job's wall seconds, ``cpu_time`` its CPU seconds). A finished study's wall time is that of its
latest Snakemake run that ran jobs (``.snakemake/log/``: from the log's start to its last
timestamp), printed with the steps that run did, so a partial rerun is seen for what it is.
Prints one line per rule, then one JSON line.

    python benchmarks/study_time.py [--study DIR] [--keep] [--cores 2]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = Path("logs") / "benchmarks"


def read_benchmarks(study: Path, since: float | None = None) -> dict[str, dict[str, float]]:
    """Per rule: jobs, seconds and CPU seconds summed over its benchmark files (only those written
    at or after the epoch seconds ``since``, when given: one run's jobs)."""
    rules: dict[str, dict[str, float]] = {}
    for path in sorted((study / BENCHMARKS).rglob("*.tsv")):
        if since is not None and path.stat().st_mtime < since:
            continue
        parts = path.relative_to(study / BENCHMARKS).parts
        rule = parts[0] if len(parts) > 1 else path.stem  # a rule without wildcards: <rule>.tsv
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        if not rows:
            continue
        row = rows[-1]  # a job benchmarked with repeats writes a row per repeat; the last is the run kept
        seconds = float(row["s"])
        cpu = float(row.get("cpu_time") or 0.0)
        total = rules.setdefault(rule, {"jobs": 0, "seconds": 0.0, "cpu_seconds": 0.0})
        total["jobs"] += 1
        total["seconds"] += seconds
        total["cpu_seconds"] += cpu
    return rules


def last_run(study: Path) -> dict[str, Any] | None:
    """The latest Snakemake run in ``study`` that ran jobs: its log, wall seconds and steps."""
    for log in sorted((study / ".snakemake" / "log").glob("*.snakemake.log"), reverse=True):
        text = log.read_text(errors="replace")
        if "Finished jobid" not in text:
            continue
        started = datetime.strptime(log.name.split(".")[0], "%Y-%m-%dT%H%M%S")
        stamps = re.findall(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$", text, flags=re.M)
        ended = datetime.strptime(" ".join(stamps[-1].split()), "%a %b %d %H:%M:%S %Y")
        steps = re.findall(r"^(\d+ of \d+) steps", text, flags=re.M)
        return {"log": str(log), "wall_s": (ended - started).total_seconds(), "steps": steps[-1] if steps else None}
    return None


def timed(command: list[str], cwd: Path, env: Mapping[str, str], log: Path) -> float:
    """Run ``command`` in ``cwd`` with its output in ``log``; its seconds (exits on failure)."""
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run(command, cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT).returncode
    took = time.monotonic() - started
    if code != 0:
        sys.exit(f"{' '.join(command)} failed (exit {code}) after {took:.0f} s; its output: {log}")
    return took


def fresh_study(folder: Path, cores: int) -> dict[str, float]:
    """Clone the repository into ``folder`` and run set-up, then the default study: their seconds."""
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(folder)], check=True)
    # the clone's own .venv; nothing of this shell's environment chooses its interpreter or threads
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "OMP_NUM_THREADS", "SNAKEMAKE_PROFILE")}
    setup = timed(["make", "setup"], folder, env, folder / "setup.log")
    study = timed(["make", "study", f"CORES={cores}"], folder, env, folder / "study.log")
    return {"setup": setup, "study": study}


def summary(study: Path, timings: Mapping[str, float] | None) -> dict[str, Any]:
    """The JSON line: wall, set-up and per-rule job-seconds."""
    rules = read_benchmarks(study)
    if not rules:
        sys.exit(f"no benchmark files under {study / BENCHMARKS}: is {study} a study that ran?")
    result: dict[str, Any] = {"study": str(study), "source": "fresh clone" if timings else "finished study"}
    if timings:
        result.update(wall_s=round(timings["setup"] + timings["study"], 1), setup_s=round(timings["setup"], 1),
                      study_s=round(timings["study"], 1))
    else:
        run = last_run(study)
        result.update(wall_s=round(run["wall_s"], 1) if run else None, setup_s=None,
                      last_run={"log": run["log"], "steps": run["steps"]} if run else None)
    result["jobs"] = int(sum(r["jobs"] for r in rules.values()))
    result["job_seconds"] = round(sum(r["seconds"] for r in rules.values()), 1)
    result["rules"] = {
        rule: {"jobs": int(r["jobs"]), "seconds": round(r["seconds"], 1), "cpu_seconds": round(r["cpu_seconds"], 1)}
        for rule, r in sorted(rules.items(), key=lambda item: -item[1]["seconds"])
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, help="a study already run there (read only)")
    parser.add_argument("--cores", type=int, default=2, help="make study CORES= (fresh clone only)")
    parser.add_argument("--keep", action="store_true", help="keep the fresh clone (its path is printed)")
    args = parser.parse_args()
    if args.study:
        result = summary(args.study.resolve(), None)
    else:
        folder = Path(tempfile.mkdtemp(prefix="bloomqg-study-time-")) / "clone"
        try:
            result = summary(folder, fresh_study(folder, args.cores))
        finally:
            if args.keep:
                print(f"clone kept at {folder}", file=sys.stderr)
            else:
                shutil.rmtree(folder.parent, ignore_errors=True)
    for key in ("wall_s", "setup_s", "study_s"):
        if result.get(key) is not None:
            print(f"{key[:-2].replace('_', ' ')}: {result[key]:.1f} s")
    if result.get("last_run"):
        print(f"(wall: the latest run, {result['last_run']['steps']} steps, {result['last_run']['log']})")
    print(f"{result['jobs']} jobs, {result['job_seconds']:.1f} job-seconds")
    for rule, row in result["rules"].items():
        print(f"  {rule:<28} {row['jobs']:>3} jobs {row['seconds']:>8.1f} s  (CPU {row['cpu_seconds']:.1f} s)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
