"""`reproduce_release` (what `make reproduce` runs) through Snakemake on the GLM-4-9B slice of
the paper's release.

The shared copy of the release holds GLM-4-9B's runs only, so the test imports the GLM-4-9B
subset of the full manifest shipped in configs/ (same pins, same paths, same preset); the full
manifest on that copy stops with a message naming the 15 runs it lacks. The unit tests
(tests/unit/test_release.py) check every figure to 0.01 through the library; this runs the same
numbers through the workflow's rules from another working directory.
"""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO

pytestmark = pytest.mark.integration


def reproduce(workdir, release_dir, *config: str, options: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """The command of docs/reproducing-the-paper.md: the target named before --configfile and --config."""
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--cores", "2", *options, "reproduce_release", "--configfile", str(REPO / "configs" / "paper.yaml"),
         "--config", f"release_dir={release_dir}", *config],
        capture_output=True, text=True, timeout=1200,
    )


def glm_subset(tmp_path):
    manifest = yaml.safe_load((REPO / "configs" / "llm-eval-release-manifest.yaml").read_text())
    manifest["runs"] = [run for run in manifest["runs"] if run["model"] == "glm-4-9b"]
    manifest["pins"] = str(REPO / "configs" / manifest["pins"])
    path = tmp_path / "glm.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return path


def test_the_full_manifest_names_the_runs_a_partial_release_lacks(tmp_path, release_dir):
    if (release_dir / "generated" / "qwen").is_dir():
        pytest.skip(f"{release_dir} holds more than GLM-4-9B's runs")
    result = reproduce(tmp_path, release_dir, options=("--dry-run",))
    assert result.returncode != 0
    assert "15 of the 18 runs of" in result.stdout + result.stderr
    assert "qwen25-7b cs/cot:" in result.stdout + result.stderr


def test_reproduce_release_writes_the_paper_tables_and_report(tmp_path, release_dir):
    result = reproduce(tmp_path, release_dir, f"release_manifest={glm_subset(tmp_path)}")
    assert result.returncode == 0, result.stderr[-4000:]
    out = tmp_path / "results" / "release"
    table4 = pd.read_csv(out / "table4.csv").set_index(["dataset", "strategy"])
    table5 = pd.read_csv(out / "table5.csv").set_index(["dataset", "strategy"])
    table6 = pd.read_csv(out / "table6.csv").set_index(["dataset", "strategy"])
    assert table4.loc[("cs", "cot"), ["unique", "readable", "answerable"]].tolist() == [90.77, 100.0, 99.86]
    assert table4.loc[("math", "fgp"), ["unique", "readable", "answerable"]].tolist() == [97.71, 100.0, 100.0]
    assert table5.loc[("cs", "fgp"), ["usability", "catcons", "knowcov"]].tolist() == [99.43, 51.42, 92.82]
    assert table6.loc[("cs", "cot"), ["cogreg", "cogdrift", "cogleap"]].tolist() == [18.54, 33.42, 48.05]
    comparison = pd.read_csv(out / "paper_comparison.csv")
    assert len(comparison) == 9 + 8 + 6 and set(comparison["paper_model"]) == {"GLM-4-9B"}
    within = comparison.assign(ok=comparison["difference"].abs() <= 0.05).groupby("table")["ok"].sum()
    assert within.to_dict() == {"table4": 9, "table5": 6, "table6": 6}
    figures = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert {f"fig{n}_" for n in range(2, 7)} <= {name[:5] for name in figures}
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "7635ce2b72c262e3d9ad5b014875896598471afe" in report  # the release's commit
    assert "d2221398b5ce418f0e507f90ed9dbd21aa1e04911769f4b62a0c6b6b9562e9c9" in report  # glm_gen_voted.jsonl
    assert "Table 4 9 of 9 cells" in report
    # The item explorer beside the report, linked from every metric cell of its tables.
    from bloomqg.reporting.explorer.encode import decode_data_script

    explorer = decode_data_script((out / "explorer" / "data.js").read_text(encoding="utf-8"))
    assert explorer["n"] == 3270 and set((out / "explorer").iterdir()) >= {out / "explorer" / "index.html"}
    assert "7635ce2b72c262e3d9ad5b014875896598471afe" in str(explorer["cells"])  # each cell's provenance
    assert 'href="explorer/index.html#f.model=glm-4-9b&amp;f.dataset=cs&amp;f.strategy=FGP&amp;m=catcons"' in report
