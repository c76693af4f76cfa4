"""CI's lint gate (.ci/lint, run by `make lint` and .ci/run) on a copy of the workflow: it passes
on the workflow as committed and fails, naming the cause, on a function among the rules (a lint
`snakemake --lint` reports) and on a rule file snakefmt would reformat."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
#: What a copy of the workflow leaves out: version control, run outputs and caches.
NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "results", "logs", ".snakemake", ".cache", "resources", "__pycache__", ".pytest_cache"
)


def lint(workflow: Path) -> subprocess.CompletedProcess:
    """The copy's own .ci/lint under the default config (one config keeps the test short)."""
    env = {
        **os.environ,
        "SNAKEMAKE": str(BIN / "snakemake"),
        "SNAKEFMT": str(BIN / "snakefmt"),
        "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    return subprocess.run(
        [str(workflow / ".ci" / "lint"), "config.yaml"], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture
def workflow(tmp_path) -> Path:
    copy = tmp_path / "workflow"
    shutil.copytree(REPO, copy, ignore=NOT_COPIED)
    return copy


def test_the_gate_passes_on_the_workflow_as_committed(workflow):
    result = lint(workflow)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "lint: snakemake --lint (1 configs) and snakefmt --check clean" in result.stdout


def test_a_function_among_the_rules_fails_the_gate(workflow):
    rules = workflow / "rules" / "metrics.smk"
    rules.write_text(rules.read_text() + '\n\ndef metrics_of(wc):\n    return f"results/metrics/{wc.model}.parquet"\n')
    result = lint(workflow)
    assert result.returncode != 0
    assert f"Lints for snakefile {rules}" in result.stdout
    assert "Mixed rules and functions in same snakefile" in result.stdout
    assert "lint: snakemake --lint --configfile config.yaml failed" in result.stderr


def test_an_unformatted_rule_file_fails_the_gate(workflow):
    rules = workflow / "rules" / "datasets.smk"
    text = rules.read_text()
    assert '"results/datasets/{dataset}.parquet",' in text
    rules.write_text(text.replace('"results/datasets/{dataset}.parquet",', "'results/datasets/{dataset}.parquet',", 1))
    result = lint(workflow)
    assert result.returncode != 0
    assert "lint: snakefmt --check failed" in result.stderr
    assert "snakemake --lint --configfile" not in result.stderr  # the rules themselves still lint clean
