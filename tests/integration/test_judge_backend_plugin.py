"""Adding a judge backend is adding one file: the example of docs/adding-a-backend.md, dropped
into a copy of the workflow's ``bloomqg/judges/backends/``, runs a whole small study beside the rules judge.

The generator is an API model answering from a loopback server (no model to load), so the
study takes seconds; nothing but the one new file differs from the repository.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from bloomqg.store.parquet_io import read_frame
from bloomqg.store.frames import CRITERIA, JUDGMENTS, VOTES
from tests.conftest import REPO
from tests.integration.test_api_workflow import one_cell_study
from tests.support.workflow_copy import copy_workflow

pytestmark = pytest.mark.integration

N_ITEMS = 3


def documented_backend_example() -> str:
    """The Python block after the ``judge-backend-example`` marker of docs/adding-a-backend.md."""
    page = (REPO / "docs" / "adding-a-backend.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- judge-backend-example -->\s*```python\n(.*?)```", page, re.DOTALL)
    assert match, "docs/adding-a-backend.md lost its judge backend example"
    return match.group(1)


@pytest.fixture()
def generator_server():
    question = json.dumps({"question": "How would you design a stack that also returns its minimum in O(1)?"})
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "support" / "fixed_latency_server.py"), "--port", "0",
         "--latency", "0.01", "--content", question],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("READY"), line
        yield int(line.split()[1])
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_one_file_backend_runs_a_study(tmp_path, generator_server):
    workflow = copy_workflow(tmp_path / "workflow")
    (workflow / "bloomqg" / "judges" / "backends" / "length.py").write_text(documented_backend_example())

    workdir = tmp_path / "study"
    workdir.mkdir()
    config = one_cell_study(
        workdir, n_items=N_ITEMS,
        generator={"backend": "openai", "model": "fixed-generator", "api_key_env": "BLOOMQG_TEST_KEY",
                   "base_url": f"http://127.0.0.1:{generator_server}/v1"},
        judges={"rules": {"backend": "rules"}, "short": {"backend": "length", "max_words": 25}},
    )
    config_path = workdir / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    # The copy's package, not the installed one, in this process's children and their jobs (and
    # cwd the study folder: ``python -m`` puts the cwd first on sys.path, ahead of PYTHONPATH).
    env = {**os.environ, "PYTHONPATH": str(workflow), "BLOOMQG_TEST_KEY": "unused-by-the-loopback-server"}
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(workflow / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(config_path), "--cores", "2"],
        capture_output=True, text=True, timeout=900, env=env, cwd=workdir,
    )
    assert result.returncode == 0, result.stderr[-6000:]

    verdicts = read_frame(workdir / "results" / "judgments" / "cs" / "fgp" / "api-gen" / "short.parquet", JUDGMENTS)
    assert len(verdicts) == N_ITEMS * len(CRITERIA)
    readable = verdicts[verdicts["criterion"] == "readable"]
    assert readable["status"].eq("ok").all() and readable["value_bool"].eq(True).all()
    assert readable["reason"].str.fullmatch(r"\d+ words").all()
    assert set(verdicts.loc[verdicts["criterion"] != "readable", "status"]) == {"error"}
    votes = read_frame(workdir / "results" / "votes" / "cs" / "fgp" / "api-gen.parquet", VOTES)
    assert len(votes) == N_ITEMS
    assert (workdir / "results" / "report.html").is_file()

    # A key the backend does not declare is refused by the config schema, naming it.
    config["judges"]["short"]["max_word"] = 3
    config_path.write_text(yaml.safe_dump(config))
    refused = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-s", str(workflow / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(config_path)],
        capture_output=True, text=True, timeout=300, env=env, cwd=workdir,
    )
    assert refused.returncode != 0 and "judges.short: unknown key(s) 'max_word'" in refused.stdout + refused.stderr
