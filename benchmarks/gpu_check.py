"""The device check: the tests marked ``gpu`` and the GPU benchmarks, judged, as one JSON.

Run through ``benchmarks/gpu_check.sh`` on a machine lent an NVIDIA GPU (it needs no network:
the serving packages the engines step needs travel as wheels, ``benchmarks/gpu_wheels.py``);
it is written to finish in under 9 minutes on an H200. Its steps (``--steps``, default all, in
this order: the engines step is the one issue 31 still owes a GPU figure):

1. ``tests``: ``pytest -m gpu`` over the test files that mark tests ``gpu`` (our loop against
   ``model.generate`` in fp32 and bf16 for every preset architecture, the Baichuan2-shaped remote
   code, a model split over two GPUs when two are visible, the out-of-memory halving under a
   real memory cap), its outcome per test;
2. ``engines``: ``benchmarks/engine_gpu.py`` (a served engine, as the workflow starts it,
   against our loop at batch 64 for a Llama-3-8B-shaped model), its goals as ``engines.*``;
3. ``generation``: ``benchmarks/generation_gpu.py`` (throughput, roofline, memory estimate,
   forced out-of-memory, the Baichuan2-shaped stand-in), its goals as ``benchmark.*``.

Without a GPU (or with ``--dry-run``) it runs the same steps on the CPU: the gpu tests with
``BLOOMQG_GPU_TESTS_ON_CPU=1`` (those that need CUDA skip) and the benchmarks with ``--tiny``;
throughput and memory goals are then "not judged".  The JSON lists every goal with its target,
measured value and ``pass``/``fail``/``not judged``; the exit status is 1 when any judged goal
fails.  It goes to stdout, to ``--out`` (default ``$OUT/gpu_check.json`` when ``OUT`` is set,
else ``results/gpu_check.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: The whole check must fit in this: a lent machine's 15 minutes hold its start (1–2 minutes),
#: the check, and a rerun of one step.
BUDGET_S = 540
#: The steps in the order they run; each but the last has a cap, the last gets what is left.
STEPS = ("tests", "engines", "generation")
TESTS_TIMEOUT_S = 150
ENGINES_TIMEOUT_S = 240
#: Each benchmark step: its script, and the prefix its goals take in the combined report.
BENCHMARKS = {"engines": ("engine_gpu.py", "engines"), "generation": ("generation_gpu.py", "benchmark")}


def junit_outcomes(path: Path) -> list[dict[str, Any]]:
    """Each test case of a pytest JUnit XML report: name, outcome, seconds, message."""
    cases = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = (found.get("message") or "")[:300]
                break
        cases.append({"test": f"{case.get('classname', '')}::{case.get('name', '')}", "outcome": outcome,
                      "seconds": round(float(case.get("time") or 0), 2), **({"message": message} if message else {})})
    return cases


def run_tests(dry_run: bool, timeout: float, work: Path) -> dict[str, Any]:
    """``pytest -m gpu`` on the files marking tests gpu: counts and per-test outcomes."""
    junit = work / "junit.xml"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    if dry_run:
        env["BLOOMQG_GPU_TESTS_ON_CPU"] = "1"
    # only the files that mark tests gpu: a module importing what this machine lacks (pandas,
    # snakemake...) must not stop the collection of the gpu tests
    files = sorted(str(path.relative_to(REPO)) for path in (REPO / "tests").rglob("test_*.py")
                   if "mark.gpu" in path.read_text(encoding="utf-8"))
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
               f"--junitxml={junit}", *files]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
        returncode, tail = done.returncode, (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired as expired:
        returncode, tail = None, f"timed out after {timeout:.0f} s: {str(expired.stdout or '')[-2000:]}"
    cases = junit_outcomes(junit) if junit.is_file() else []
    counts = {outcome: sum(c["outcome"] == outcome for c in cases) for outcome in ("passed", "failed", "error", "skipped")}
    return {"command": " ".join(command[1:]), "returncode": returncode, "wall_s": round(time.perf_counter() - started, 1),
            **counts, "cases": cases, **({"output_tail": tail} if returncode not in (0,) else {})}


def run_benchmark(script: str, dry_run: bool, timeout: float, work: Path) -> dict[str, Any]:
    """``benchmarks/<script>`` (``--tiny`` in a dry run): its report."""
    out = work / script.replace(".py", ".json")
    command = [sys.executable, str(REPO / "benchmarks" / script), "--json", str(out),
               *(["--tiny"] if dry_run else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("OUT", None)  # the combined JSON is the one written
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=max(timeout, 1))
        returncode, tail = done.returncode, done.stderr[-3000:]
    except subprocess.TimeoutExpired:
        returncode, tail = None, f"timed out after {timeout:.0f} s"
    report: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    report.update({"returncode": returncode, "wall_s": round(time.perf_counter() - started, 1)})
    if returncode != 0:
        report["stderr_tail"] = tail
    return report


def combine(mode: str, tests: dict[str, Any] | None, benchmark: dict[str, Any] | None, wall_s: float,
            engines: dict[str, Any] | None = None) -> dict[str, Any]:
    """One report: the steps that ran (None: not asked for) as goals, each judged, and the verdict."""
    goals = []
    if tests is not None:
        goals.append({"goal": "gpu_tests", "target": "every test marked gpu passes (those needing CUDA skip in a dry run)",
                      "measured": {k: tests.get(k, 0) for k in ("passed", "failed", "error", "skipped")},
                      "result": "pass" if tests.get("returncode") == 0 and tests.get("passed", 0) > 0
                      and not tests.get("failed") and not tests.get("error") else "fail"})
    for step, report in (("engines", engines), ("generation", benchmark)):
        if report is None:
            continue
        script, prefix = BENCHMARKS[step]
        step_goals = report.get("goals") or []
        if not step_goals or report.get("returncode") not in (0, 1):
            goals.append({"goal": f"{prefix}_ran", "target": f"{script} writes its report",
                          "measured": report.get("stderr_tail", "")[-300:] or report.get("returncode"),
                          "result": "fail"})
        goals += [{**goal, "goal": f"{prefix}.{goal['goal']}"} for goal in step_goals]
    on_gpu = mode == "gpu"
    goals.append({"goal": "under_9_minutes", "target": f"<= {BUDGET_S} s", "measured": round(wall_s, 1),
                  "result": ("pass" if wall_s <= BUDGET_S else "fail") if on_gpu else "not judged",
                  **({} if on_gpu else {"note": "timed on a GPU only"})})
    failed = [goal["goal"] for goal in goals if goal["result"] == "fail"]
    return {"check": "gpu_check", "mode": mode, "goals": goals, "failed_goals": failed, "pass": not failed,
            "wall_s": round(wall_s, 1), "tests": tests, "engines": engines, "benchmark": benchmark}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="run on the CPU even when a GPU is visible")
    parser.add_argument("--out", type=Path, help="where to write the JSON")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"the steps to run, comma-separated (default all: {','.join(STEPS)})")
    args = parser.parse_args(argv)
    steps = [step for step in args.steps.split(",") if step]
    if not steps or set(steps) - set(STEPS):
        parser.error(f"--steps: choose among {', '.join(STEPS)}")
    started = time.perf_counter()
    import torch
    import transformers

    dry_run = args.dry_run or not torch.cuda.is_available()
    mode = "cpu-dry-run" if dry_run else "gpu"
    results: dict[str, dict[str, Any] | None] = dict.fromkeys(STEPS)
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as work:
        for step in (step for step in STEPS if step in steps):
            left = BUDGET_S - (time.perf_counter() - started) - 10
            if step == "tests":
                results[step] = run_tests(dry_run, min(TESTS_TIMEOUT_S, left), Path(work))
            else:
                cap = ENGINES_TIMEOUT_S if step == "engines" else left
                results[step] = run_benchmark(BENCHMARKS[step][0], dry_run, min(cap, left), Path(work))
    report = combine(mode, results["tests"], results["generation"], time.perf_counter() - started,
                     engines=results["engines"])
    report.update({"steps": steps, "device": torch.cuda.get_device_name(0) if not dry_run else platform.processor() or "cpu",
                   "visible_gpus": torch.cuda.device_count(), "python": platform.python_version(),
                   "torch": torch.__version__, "transformers": transformers.__version__})
    text = json.dumps(report, indent=2, default=str)
    print(text)
    out = args.out or (Path(os.environ["OUT"]) / "gpu_check.json" if os.environ.get("OUT")
                       else REPO / "results" / "gpu_check.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"gpu_check: {'PASS' if report['pass'] else 'FAIL ' + ', '.join(report['failed_goals'])} "
          f"({mode}, {report['wall_s']} s) -> {out}", file=sys.stderr)
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
