"""How the plan grows with a study: job count and dry-run time; prints one JSON object.

Synthetic studies of one dataset of 1,000 / 10,000 / 100,000 questions, 6 models (5 in-process
on a GPU each, 1 behind an API), 2 strategies and 3 API judges, each planned with ``snakemake -n``
in a fresh directory. Generation is sharded by the dataset's ``shards`` key, set here to
``ceil(questions / --items-per-shard)``: the job count grows with shards, never with items.
With ``--release-dir`` it also plans the paper's preset (configs/paper.yaml) on the release.

Goals: the paper's scale plans ≤ 1,000 jobs; a 100,000-question study dry-runs in ≤ 30 s on
2 cores.

    python benchmarks/plan_scale.py [--sizes 1000 10000 100000] [--items-per-shard 2000]
                                    [--release-dir ../shared/data/llm-eval-release]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
LEVELS = ("Remember", "Understand", "Apply", "Analyze", "Evaluate", "Create")
STEMS = ("Define", "Explain", "Use", "Compare", "Judge", "Design")
UNITS = [f"Unit {i}" for i in range(12)]
HF_MODELS = {
    "glm-4-9b": "THUDM/glm-4-9b-chat",
    "qwen25-7b": "Qwen/Qwen2.5-7B-Instruct",
    "baichuan2-7b": "baichuan-inc/Baichuan2-7B-Chat",
    "internlm3-8b": "internlm/internlm3-8b-instruct",
    "llama3-8b": "shenzhi-wang/Llama3-8B-Chinese-Chat",
}


def write_dataset(path: Path, n_questions: int) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["question", "knowledge_units", "bloom_level"])
        for i in range(n_questions):
            level = i % len(LEVELS)
            unit = UNITS[i % len(UNITS)]
            writer.writerow([f"{STEMS[level]} property {i} of {unit.lower()}.", unit, LEVELS[level]])


def study_config(workdir: Path, n_questions: int, items_per_shard: int) -> Path:
    dataset = workdir / "questions.csv"
    write_dataset(dataset, n_questions)
    api = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "BLOOMQG_PLAN_KEY"}
    models = {name: {"backend": "hf", "model": hub_id, "revision": "main", "dtype": "bfloat16", "gpus": 1}
              for name, hub_id in HF_MODELS.items()}
    models["api-model"] = {"backend": "openai", "model": "api-generator", **api}
    config = {
        "seed": 1, "exemplars": 3, "strategies": ["cot", "fgp"], "cache_dir": str(workdir / "cache"),
        "datasets": {"synthetic": {"loader": "embedded", "path": str(dataset), "domain": "synthetic",
                                   "shards": math.ceil(n_questions / items_per_shard)}},
        "models": models,
        "judges": {f"judge-{k}": {"backend": "openai", "model": f"judge-{k}", **api} for k in "abc"},
    }
    path = workdir / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def plan(workdir: Path, *args: str) -> dict:
    """Dry-run in ``workdir``; the job counts per rule and the wall time."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
         "-n", "--cores", "2", "--quiet", "rules", *args],
        capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"dry run failed in {workdir}:\n{result.stderr[-4000:]}")
    counts = {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.M)}
    total = counts.pop("total")
    return {"jobs": total, "dry_run_s": round(seconds, 2), "jobs_by_rule": counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--items-per-shard", type=int, default=2000)
    parser.add_argument("--release-dir", type=Path, default=None)
    args = parser.parse_args()
    figures: dict = {"items_per_shard": args.items_per_shard, "cpu_count": os.cpu_count(), "studies": {}}
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix=f"plan-{size}-") as tmp:
            workdir = Path(tmp)
            config = study_config(workdir, size, args.items_per_shard)
            figures["studies"][str(size)] = {"shards": math.ceil(size / args.items_per_shard),
                                             **plan(workdir, "--configfile", str(config))}
    if args.release_dir:
        with tempfile.TemporaryDirectory(prefix="plan-paper-") as tmp:
            figures["paper_preset"] = plan(Path(tmp), "--configfile", str(REPO / "configs" / "paper.yaml"),
                                           "--config", f"release_dir={args.release_dir.resolve()}")
    largest = figures["studies"].get("100000")
    figures["goals"] = {
        "paper_scale_jobs_le_1000": all(s["jobs"] <= 1000 for k, s in figures["studies"].items() if int(k) <= 20000)
        and figures.get("paper_preset", {"jobs": 0})["jobs"] <= 1000,
        "100k_dry_run_le_30s": None if largest is None else largest["dry_run_s"] <= 30,
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
