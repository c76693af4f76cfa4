"""CI's lint gate (.ci/lint, run by `make lint` and .ci/run) on a copy of the workflow: it passes
on the workflow as committed and fails, naming the cause, on a function among the rules (a lint
`snakemake --lint` reports), on a rule file snakefmt would reformat, and on imports against the
package's layers (`lint-imports`), a deferred one included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.workflow_copy import copy_workflow

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


def lint(workflow: Path) -> subprocess.CompletedProcess:
    """The copy's own .ci/lint under the default config (one config keeps the test short)."""
    env = {
        **os.environ,
        "SNAKEMAKE": str(BIN / "snakemake"),
        "SNAKEFMT": str(BIN / "snakefmt"),
        "LINT_IMPORTS": str(BIN / "lint-imports"),
        "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    return subprocess.run(
        [str(workflow / ".ci" / "lint"), "config.yaml"], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture
def workflow(tmp_path) -> Path:
    return copy_workflow(tmp_path / "workflow")


def test_the_gate_passes_on_the_workflow_as_committed(workflow):
    result = lint(workflow)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "lint: snakemake --lint (1 configs), snakefmt --check and lint-imports clean" in result.stdout


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


def test_imports_against_the_layers_fail_the_gate(workflow):
    # metrics -> reporting: a floor up (reporting draws what metrics computes).
    metrics = workflow / "bloomqg" / "metrics" / "counts.py"
    metrics.write_text(metrics.read_text() + "\nfrom bloomqg.reporting.display import MISSING  # noqa: E402\n")
    # A deferred import of the config (top floor) inside the API client (floor 3): Python would
    # never notice the circle it closes; the gate does.
    client = workflow / "bloomqg" / "api" / "client.py"
    text = client.read_text()
    client.write_text(text + "\n\ndef _config_schema():\n    from bloomqg.study.config import load_schema\n\n    return load_schema()\n")
    deferred_line = len(text.splitlines()) + 4
    result = lint(workflow)
    assert result.returncode != 0
    assert "bloomqg.metrics is not allowed to import bloomqg.reporting:" in result.stdout
    assert "- bloomqg.metrics.counts -> bloomqg.reporting.display" in result.stdout
    assert "bloomqg.api is not allowed to import bloomqg.study:" in result.stdout
    assert f"- bloomqg.api.client -> bloomqg.study.config (l.{deferred_line})" in result.stdout
    assert "lint: lint-imports failed" in result.stderr
    assert "snakemake --lint --configfile" not in result.stderr  # the rules themselves still lint clean
    assert "snakefmt --check failed" not in result.stderr
