"""What a study's summary stage costs: everything after judging (votes, metrics, the plan and the
answer, robustness, tables, figures, the explorer, the report and its bundle) rerun on a finished
study, ``--repeats`` times.

Each repeat is ``snakemake -R vote_judgments --rerun-triggers mtime`` on the study (the votes and
all that reads them, nothing upstream), timed as a whole (wall, and the CPU seconds of Snakemake
and every job it ran) and per rule from the jobs' ``logs/benchmarks`` files that run wrote
(``study_time.read_benchmarks``). With ``--baseline REV`` the same stage of a copy of the study
runs on that revision of this repository (``git archive``), each repeat right after the current
code's, so both see the same load; the machine's load average is printed with each run (a busy
shared machine inflates every figure: compare runs of one call). Without ``--study`` the ``.test``
study is run to completion first, in a temporary folder (minutes: generation and judging).
Prints one line per run, then one JSON document.

    python benchmarks/summary_time.py [--study DIR] [--configfile .test/config/config.yaml]
                                      [--repeats 3] [--cores 2] [--baseline REV] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from study_time import read_benchmarks  # noqa: E402 - the sibling benchmark's reader

REPO = Path(__file__).resolve().parents[1]
#: The first rule after judging: forcing it reruns the whole summary stage.
FIRST_SUMMARY_RULE = "vote_judgments"


def snakemake(code: Path, study: Path, configfile: Path, cores: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(code / "Snakefile"), "--directory", str(study),
            "--configfile", str(configfile), "--cores", str(cores), *extra]


def code_env(code: Path) -> dict[str, str]:
    """This environment with ``code``'s package first on the path (a baseline's, not the installed one)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(code) + (os.pathsep + path if path else "")}


def run_summary(code: Path, study: Path, configfile: Path, cores: int) -> dict[str, Any]:
    """Force the summary stage of ``study`` with ``code``; its wall, CPU and per-rule seconds."""
    command = snakemake(code, study, configfile, cores, "-R", FIRST_SUMMARY_RULE, "--rerun-triggers", "mtime")
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started_wall, started = time.time(), time.monotonic()
    result = subprocess.run(command, env=code_env(code), capture_output=True, text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (exit {result.returncode}):\n{result.stderr[-4000:]}")
    rules = read_benchmarks(study, since=started_wall)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load_before": round(load, 2),
        "jobs": int(sum(r["jobs"] for r in rules.values())),
        "job_seconds": round(sum(r["seconds"] for r in rules.values()), 2),
        "rules": {rule: {"jobs": int(r["jobs"]), "seconds": round(r["seconds"], 2), "cpu_seconds": round(r["cpu_seconds"], 2)}
                  for rule, r in sorted(rules.items(), key=lambda item: -item[1]["seconds"])},
    }


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median run: wall, CPU and each rule's seconds over the repeats."""
    rules = sorted({rule for run in runs for rule in run["rules"]})
    return {
        "wall_s": round(statistics.median(r["wall_s"] for r in runs), 2),
        "cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 2),
        "job_seconds": round(statistics.median(r["job_seconds"] for r in runs), 2),
        "rules": {rule: round(statistics.median(r["rules"].get(rule, {}).get("seconds", 0.0) for r in runs), 2)
                  for rule in rules},
    }


def copy_study(study: Path, to: Path) -> Path:
    """A copy of ``study`` whose summary another code may rewrite; its models linked, not copied."""
    shutil.copytree(study, to, symlinks=True, ignore=shutil.ignore_patterns("resources"))
    if (study / "resources").exists():
        (to / "resources").symlink_to((study / "resources").resolve())
    return to


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, help="a finished study (default: run the .test study first)")
    parser.add_argument("--configfile", type=Path, default=REPO / ".test" / "config" / "config.yaml")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--baseline", help="a revision of this repository to time the same stage on")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = parser.parse_args()
    configfile = args.configfile.resolve()
    scratch = Path(tempfile.mkdtemp(prefix="bloomqg-summary-time-"))
    try:
        study = args.study.resolve() if args.study else scratch / "study"
        if not args.study:
            study.mkdir()
            built = subprocess.run(snakemake(REPO, study, configfile, args.cores), env=code_env(REPO),
                                   capture_output=True, text=True)
            if built.returncode != 0:
                sys.exit(f"the study failed (exit {built.returncode}):\n{built.stderr[-4000:]}")
        codes = {"current": (REPO, study)}
        if args.baseline:
            baseline = scratch / "baseline"
            baseline.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", args.baseline], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive.stdout, check=True)
            codes["baseline"] = (baseline, copy_study(study, scratch / "baseline-study"))
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in codes}
        for repeat in range(args.repeats):
            for name, (code, workdir) in codes.items():
                run = run_summary(code, workdir, configfile, args.cores)
                runs[name].append(run)
                print(f"{name} #{repeat + 1}: {run['wall_s']:.1f} s wall, {run['cpu_s']:.1f} s CPU, "
                      f"{run['jobs']} jobs, load {run['load_before']:.2f}", file=sys.stderr)
        result = {"study": str(study), "configfile": str(configfile), "cores": args.cores, "repeats": args.repeats,
                  "baseline": args.baseline, "median": {name: medians(r) for name, r in runs.items()}, "runs": runs}
        print(json.dumps(result))
    finally:
        if args.keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
