"""docs/datasets.md's worked example, run exactly as printed: its files (the fenced blocks that
name a path) are written into a folder that holds this repository's files, and its `sh` block's
command runs there.  The only additions: ``VENV=`` the environment this test runs in and ``-o``
its set-up marker (the set-up is done; make must not reinstall), and the session's converted
SmolLM2 seeded where ``prepare_model`` would write it (the conversion is test_workflow.py's).
Also checks that the Bloom-level aliases the page lists are the ones the code accepts."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bloomqg.store.frames import GENERATIONS
from bloomqg.store.parquet_io import read_frame
from tests.conftest import REPO, seed_converted_smollm2

DOC = REPO / "docs" / "datasets.md"
FENCE = re.compile(r"^```(\w+)(?: ([^\n]+))?\n(.*?)^```$", re.MULTILINE | re.DOTALL)
#: What the example folder does not link from the repository: its results, caches and VCS data,
#: and the package (imported from the repository through PYTHONPATH, where its paths are known).
LEFT_OUT = {".git", ".snakemake", "bloomqg", "results", "resources", "logs", ".cache", "mystudy", ".venv"}


def blocks() -> tuple[dict[str, str], list[str]]:
    """The example's files (path -> text) and its shell commands."""
    section = DOC.read_text(encoding="utf-8").split("## A study of your own, from one file", 1)[1]
    files, commands = {}, []
    for language, path, body in FENCE.findall(section):
        if path:
            files[path.strip()] = body
        elif language == "sh":
            commands += [line for line in body.splitlines() if line.strip()]
    return files, commands


def test_the_pages_bloom_aliases_are_the_codes():
    from bloomqg.inputs.bloom import _ALIASES, BLOOM_LEVELS, normalize_level

    table = DOC.read_text(encoding="utf-8").split("## Bloom levels a dataset may give", 1)[1].split("\n## ", 1)[0]
    listed = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 2 and cells[0] in BLOOM_LEVELS:
            listed[cells[0]] = {name.lower() for name in re.findall(r"`([^`]+)`", cells[1])}
    for alias, level in _ALIASES.items():
        assert alias in listed[level], f"{alias!r} ({level}) is accepted but not listed"
    for level, names in listed.items():
        for name in names:
            assert normalize_level(name) == level, name


@pytest.mark.integration
def test_the_worked_example_runs_as_printed(tmp_path, smollm2_dir):
    files, commands = blocks()
    assert set(files) == {"mystudy/biology.csv", "mystudy/socratic.md", "mystudy/study.yaml"}
    assert commands == ["make study CONFIG=mystudy/study.yaml"]
    for entry in REPO.iterdir():
        if entry.name not in LEFT_OUT:
            (tmp_path / entry.name).symlink_to(entry)
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    seed_converted_smollm2(tmp_path, smollm2_dir)
    venv = Path(sys.prefix)
    for command in commands:
        result = subprocess.run([*shlex.split(command), f"VENV={venv}", "-o", f"{venv}/.installed"],
                                cwd=tmp_path, capture_output=True, text=True, timeout=1500,
                                env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
        assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-6000:])
    assert (tmp_path / "results" / "report.html").stat().st_size > 0
    for strategy in ("fgp", "socratic"):
        generations = read_frame(tmp_path / "results" / "generations" / "biology" / strategy / "smollm2-135m.parquet",
                                 GENERATIONS)
        assert len(generations) == 3 and set(generations["strategy"]) == {strategy}
    report = (tmp_path / "results" / "report.html").read_text(encoding="utf-8")
    assert "socratic" in report  # the report covers the study's own strategy
