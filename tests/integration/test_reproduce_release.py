"""`reproduce_release` through Snakemake on the GLM-4-9B slice of the paper's release.

The unit tests (tests/unit/test_release.py) check every figure to 0.01 through the library;
this runs the same numbers through the workflow's rules from another working directory.
"""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO

pytestmark = pytest.mark.integration


def test_reproduce_release_writes_the_paper_tables(tmp_path, release_dir):
    manifest = yaml.safe_load((REPO / "tests" / "release_glm.yaml").read_text())
    manifest["release_root"] = str(release_dir)
    manifest_path = tmp_path / "glm.yaml"
    manifest_path.write_text(yaml.safe_dump(manifest))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
         "--cores", "2", "reproduce_release", "--config", f"release_manifest={manifest_path}"],
        capture_output=True, text=True, timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    out = tmp_path / "results" / "release"
    table4 = pd.read_csv(out / "table4.csv").set_index(["dataset", "strategy"])
    table5 = pd.read_csv(out / "table5.csv").set_index(["dataset", "strategy"])
    table6 = pd.read_csv(out / "table6.csv").set_index(["dataset", "strategy"])
    assert table4.loc[("cs", "cot"), ["unique", "readable", "answerable"]].tolist() == [90.77, 100.0, 99.86]
    assert table4.loc[("math", "fgp"), ["unique", "readable", "answerable"]].tolist() == [97.71, 100.0, 100.0]
    assert table5.loc[("cs", "fgp"), ["usability", "catcons", "knowcov"]].tolist() == [99.43, 51.42, 92.82]
    assert table6.loc[("cs", "cot"), ["cogreg", "cogdrift", "cogleap"]].tolist() == [18.54, 33.42, 48.05]
    figures = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert "fig2_transitions.png" in figures and "fig3_shift_scores.png" in figures
