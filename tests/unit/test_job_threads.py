"""A job's torch threads are its rule's threads (bloomqg.runtime.job.apply_job_threads), and every
rule that runs a script writes a benchmark file (logs/benchmarks/, read by benchmarks/study_time.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize("threads", [1, 2])
def test_torch_runs_on_the_jobs_threads(tmp_path: Path, threads: int) -> None:
    """In a fresh process whose environment asks for 3 threads (as if nothing capped it), the
    job's threads win, whether torch is imported after start_job or before it."""
    early = f"""
import json
import torch
from bloomqg.runtime.job import apply_job_threads
apply_job_threads({threads})
print(json.dumps({{"early": torch.get_num_threads()}}))
"""
    late = f"""
import json
from bloomqg.runtime.job import apply_job_threads
apply_job_threads({threads})
import torch
print(json.dumps({{"late": torch.get_num_threads()}}))
"""
    env = {"OMP_NUM_THREADS": "3", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    for code, key in ((early, "early"), (late, "late")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                             cwd=tmp_path, check=True, timeout=120).stdout
        assert json.loads(out.strip().splitlines()[-1])[key] == threads


def rule_blocks() -> dict[str, str]:
    """Each rule's text in rules/*.smk, by name (rules inside ``if`` blocks included)."""
    blocks: dict[str, str] = {}
    for path in sorted((REPO / "rules").glob("*.smk")):
        text = path.read_text()
        starts = list(re.finditer(r"^(\s*)rule (\w+):", text, flags=re.M))
        for index, match in enumerate(starts):
            end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
            blocks[match.group(2)] = text[match.start():end]
    return blocks


def test_every_rule_that_runs_a_script_writes_a_benchmark() -> None:
    blocks = rule_blocks()
    scripted = {name: block for name, block in blocks.items() if re.search(r"^\s*script:", block, flags=re.M)}
    assert len(scripted) > 30
    # A rule without outputs runs whenever it is asked for; Snakemake counts a benchmark file as an
    # output, so one would make it run once only (estimate_cost must count the cache each time).
    scripted = {name: block for name, block in scripted.items() if re.search(r"^\s*output:", block, flags=re.M)}
    missing = sorted(name for name, block in scripted.items() if not re.search(r"^\s*benchmark:", block, flags=re.M))
    assert not missing, f"rules without a benchmark: file: {missing}"
    assert not [name for name, block in blocks.items() if re.search(r"^\s*benchmark:", block, flags=re.M)
                and not re.search(r"^\s*output:", block, flags=re.M)], "a rule without outputs must write no benchmark"
    for name, block in scripted.items():
        path = re.search(r'benchmark:\s*\n\s*f?"([^"]+)"', block).group(1)
        assert path.startswith(f"logs/benchmarks/{name}") and path.endswith(".tsv"), (name, path)
