"""The device check and the GPU benchmark on a CPU: their JSON judges every goal, and a lost
completion makes them fail.

``benchmarks/gpu_check.sh --dry-run`` runs the tests marked ``gpu`` on the CPU,
``benchmarks/engine_gpu.py --tiny`` (transformers serve on a tiny random model saved to disk) and
``benchmarks/generation_gpu.py --tiny``; the planted loss drops one completion of a real
``HFTextGenerator.complete`` call inside the benchmark's own process (through a
``sitecustomize`` module on its path), so the benchmark's checks, not the test, must notice.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VERDICTS = {"pass", "fail", "not judged"}
BENCHMARK_GOALS = {"equivalence_fp32", "speedup_batched_over_batch1", "batch1_roofline_share",
                   "peak_memory_vs_estimate", "forced_oom_split_lost_nothing",
                   "baichuan2_standin_batches_and_matches_batch1_fp32", "every_completion_returned"}

PLANT = textwrap.dedent('''
    """Planted by tests/integration/test_gpu_check.py: one completion of one run goes missing."""
    import bloomqg.generation.hf.generator as generator_module

    _original = generator_module.HFTextGenerator.complete
    _planted = []

    def complete(self, requests, params, on_batch=None, batch_size=None):
        completions = _original(self, requests, params, on_batch, batch_size)
        if not _planted and len(completions) > 4:
            _planted.append(completions[-1].request_id)
            return completions[:-1]
        return completions

    generator_module.HFTextGenerator.complete = complete
''')


def env_with(*paths: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), str(REPO)])}
    env.pop("OUT", None)
    return env


def test_device_script_dry_run_prints_every_goal_judged(tmp_path):
    out = tmp_path / "gpu_check.json"
    run = subprocess.run([str(REPO / "benchmarks" / "gpu_check.sh"), "--dry-run", "--out", str(out)], cwd=tmp_path,
                         env=env_with(), capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    report = json.loads(run.stdout[run.stdout.index("{"):])
    assert report == json.loads(out.read_text())
    assert report["mode"] == "cpu-dry-run" and report["pass"] is True and report["failed_goals"] == []
    goals = {goal["goal"]: goal for goal in report["goals"]}
    assert {goal["result"] for goal in goals.values()} <= VERDICTS
    assert {f"benchmark.{name}" for name in BENCHMARK_GOALS} | {"gpu_tests", "under_9_minutes"} <= set(goals)
    for name in ("gpu_tests", "benchmark.equivalence_fp32", "benchmark.forced_oom_split_lost_nothing",
                 "benchmark.baichuan2_standin_batches_and_matches_batch1_fp32",
                 "benchmark.every_completion_returned"):
        assert goals[name]["result"] == "pass", goals[name]
    # throughput and memory goals carry a measurement but are judged on a GPU only
    assert goals["benchmark.speedup_batched_over_batch1"]["result"] == "not judged"
    assert isinstance(goals["benchmark.speedup_batched_over_batch1"]["measured"], float)
    # the engines step: transformers serve started as the workflow starts it, every request answered
    assert goals["engines.transformers-serve_answered_every_request"]["result"] == "pass"
    speedup = goals["engines.engine_speedup_vs_loop_batch64"]
    assert speedup["result"] == "not judged" and speedup["measured"]["engine"] == "transformers-serve"
    served = report["engines"]["runs"]["transformers-serve"]
    assert served["identical_to_loop"] == served["requests"], "the same greedy texts in fp32 on the CPU"
    tests = report["tests"]
    assert tests["failed"] == tests["error"] == 0 and tests["passed"] >= 10
    outcomes = {case["test"].rsplit("::", 1)[-1].split("[")[0]: case["outcome"] for case in tests["cases"]}
    assert outcomes["test_bf16_greedy_tokens_equal_generate_up_to_near_ties"] == "passed"
    assert outcomes["test_out_of_memory_halving_under_a_real_cuda_memory_cap"] == "skipped"
    finished = report["benchmark"]["baichuan2_7b_shaped"]["finished_rows"]
    assert finished["computed_decode_steps"] <= finished["computed_if_rows_kept_to_batch_end"]
    assert finished["useful_tokens"] <= finished["computed_decode_steps"]


def test_one_lost_completion_fails_the_benchmark(tmp_path):
    plant = tmp_path / "plant"
    plant.mkdir()
    (plant / "sitecustomize.py").write_text(PLANT)
    out = tmp_path / "generation_gpu.json"
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "generation_gpu.py"), "--tiny", "--json", str(out)],
                         cwd=tmp_path, env=env_with(plant), capture_output=True, text=True, timeout=900)
    assert run.returncode == 1, f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    report = json.loads(out.read_text())
    assert report["pass"] is False and "every_completion_returned" in report["failed_goals"]
    short = [r for r in report["completeness"] if not r["ok"]]
    assert len(short) == 1 and short[0]["returned"] == short[0]["requested"] - 1 and not short[0]["ids_match"]
    assert len(short[0]["missing"]) == 1
    verdicts = {goal["goal"]: goal["result"] for goal in report["goals"]}
    assert verdicts["every_completion_returned"] == "fail"


def _gpu_check_module():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_device_check_fails_when_a_part_fails():
    combine = _gpu_check_module().combine
    tests = {"returncode": 0, "passed": 12, "failed": 0, "error": 0, "skipped": 2}
    good = {"returncode": 0, "goals": [{"goal": "every_completion_returned", "result": "pass"}]}
    assert combine("gpu", tests, good, 300.0)["pass"] is True
    lost = {"returncode": 1, "goals": [{"goal": "every_completion_returned", "result": "fail"}]}
    assert combine("gpu", tests, lost, 300.0)["failed_goals"] == ["benchmark.every_completion_returned"]
    crashed = {"returncode": 137, "stderr_tail": "Killed"}
    assert "benchmark_ran" in combine("gpu", tests, crashed, 300.0)["failed_goals"]
    assert combine("gpu", {**tests, "returncode": 1, "failed": 1}, good, 300.0)["failed_goals"] == ["gpu_tests"]
    assert combine("gpu", tests, good, 600.0)["failed_goals"] == ["under_9_minutes"]
    assert combine("cpu-dry-run", tests, good, 600.0)["pass"] is True  # not timed off a GPU
    assert "engines_ran" in combine("gpu", tests, good, 300.0, engines=crashed)["failed_goals"]
    slow = {"returncode": 1, "goals": [{"goal": "engine_speedup_vs_loop_batch64", "result": "fail"}]}
    assert combine("gpu", tests, good, 300.0, engines=slow)["failed_goals"] == ["engines.engine_speedup_vs_loop_batch64"]
    only_engines = combine("gpu", None, None, 200.0, engines=good)  # --steps engines
    assert only_engines["pass"] is True and {g["goal"] for g in only_engines["goals"]} == {
        "engines.every_completion_returned", "under_9_minutes"}
