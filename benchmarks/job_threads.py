"""Two judging jobs on this machine's cores: on the threads Snakemake grants them, or on torch's default.

Each job is a judge_questions job on one cell of a finished default study (read only), as
benchmarks/judge_modes.py runs it, in a process of its own. Three ways, one after the other:

- ``granted``: both jobs at once, each on one thread (``--max-threads 1`` on ``--cores 2``: the
  job sets its torch threads from the rule's, bloomqg.runtime.job.apply_job_threads);
- ``default``: both jobs at once, each on torch's default (every core: what a job that does not
  set its threads gets, oversubscribed when two run);
- ``serial``: one job after the other, each on every core (the rule's threads capped at
  ``--cores``, Snakemake's default schedule).

Prints per way each job's seconds, their sum (job-seconds) and the wall time, then one JSON line.

    python benchmarks/job_threads.py --study /work/main [--cell cs/cot] [--judge smollm2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.judge_modes import judge_cell  # noqa: E402

WAYS = ("granted", "default", "serial")


def run_job(study: Path, cell: str, judge: str, threads: int | None, scratch: Path) -> float:
    """One judging job in this process: its seconds (the model's load included)."""
    import yaml

    if threads is not None:
        from bloomqg.runtime.job import apply_job_threads

        apply_job_threads(threads)
    config = yaml.safe_load((study / "config.yaml").read_text())
    model_ref = config["judges"][judge]["model_ref"]
    generations = study / "results" / "generations" / cell / f"{model_ref}.parquet"
    took, _ = judge_cell(study, config, judge, config["judges"][judge].get("mode", "generate"), generations,
                         study / "resources" / "models" / model_ref, threads, scratch)
    return took


def start(args: argparse.Namespace, threads: int | None, scratch: Path) -> subprocess.Popen:
    # torch's default comes from the cores, unless a variable left by a caller says otherwise
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    command = [sys.executable, __file__, "--study", str(args.study), "--cell", args.cell, "--judge", args.judge,
               "--job", str(scratch), *(["--threads", str(threads)] if threads else [])]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


def finish(process: subprocess.Popen) -> float:
    out, _ = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"a job failed (exit {process.returncode})")
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, required=True, help="a finished default study's folder")
    parser.add_argument("--cell", default="cs/cot", help="dataset/strategy")
    parser.add_argument("--judge", default="smollm2")
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--job", type=Path, help=argparse.SUPPRESS)  # run one job, print its seconds
    args = parser.parse_args()
    if args.job:
        print(run_job(args.study, args.cell, args.judge, args.threads, args.job))
        return
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for way in WAYS:
            caches = [Path(scratch) / way / str(index) for index in range(2)]  # fresh: nothing cached
            started = time.monotonic()
            if way == "serial":
                jobs = [finish(start(args, None, cache)) for cache in caches]
            else:
                threads = 1 if way == "granted" else None
                jobs = [finish(process) for process in [start(args, threads, cache) for cache in caches]]
            wall = time.monotonic() - started
            results[way] = {"job_seconds": [round(s, 1) for s in jobs], "sum": round(sum(jobs), 1),
                            "wall": round(wall, 1)}
            print(f"{way}: jobs {results[way]['job_seconds']} s, sum {results[way]['sum']} s, wall {wall:.1f} s",
                  flush=True)
    print(json.dumps({"cell": args.cell, "judge": args.judge, "cores": os.cpu_count(), "ways": results}))


if __name__ == "__main__":
    main()
