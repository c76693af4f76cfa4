"""`make reproduce` on the GLM-4-9B slice of the paper's release: through Make, the run lock
(``bloomqg.runtime.run_lock``) and Snakemake's ``reproduce_release``, in a temporary run directory.

The shared copy of the release holds GLM-4-9B's runs (the training slice) and Qwen2.5-7B's (the
validation slice), so the test imports the GLM-4-9B subset of the full manifest shipped in
configs/ (same pins, same paths, same preset; Make's RELEASE_MANIFEST); on a partial release of
its own (the datasets and GLM's runs, linked into a temporary folder) the full manifest stops with
a message naming the 15 runs it lacks. The unit tests (tests/unit/test_release.py) check every figure to 0.01 through the
library; this runs the same numbers through the Makefile and the workflow's rules from another
working directory. The reproduction runs once per test session (every xdist worker shares it);
the tests only read it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.store.frames import UNJOINED_LINES
from bloomqg.store.parquet_io import read_frame
from bloomqg.runtime.run_lock import EXIT_BUSY, RUN_LOCK
from tests.conftest import REPO
from tests.support.shared import build_once

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


def glm_only_release(release_dir: Path, folder: Path) -> Path:
    """A partial release of its own: the datasets and GLM-4-9B's runs of ``release_dir``,
    linked (not copied) into ``folder``, whatever else the shared copy holds."""
    if not (release_dir / "generated" / "glm").is_dir():
        pytest.skip(f"GLM-4-9B's runs are not in {release_dir}")
    for part in ("dataset", "generated/glm"):
        (folder / part).parent.mkdir(parents=True, exist_ok=True)
        (folder / part).symlink_to(release_dir / part, target_is_directory=True)
    return folder


def test_the_full_manifest_names_the_runs_a_partial_release_lacks(tmp_path, release_dir):
    partial = glm_only_release(release_dir, tmp_path / "release")
    (tmp_path / "run").mkdir()
    result = reproduce(tmp_path / "run", partial, options=("--dry-run",))
    assert result.returncode != 0
    assert "15 of the 18 runs of" in result.stdout + result.stderr
    assert "qwen25-7b cs/cot:" in result.stdout + result.stderr


def fewer_resamples(run_dir: Path) -> Path:
    """configs/paper.yaml with 100 bootstrap resamples, not 1000: the tables' values are point
    estimates, and the intervals' code runs all the same."""
    config = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    config["bootstrap"]["n_resamples"] = 100
    path = run_dir / "paper.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def make_reproduce(run_dir: Path, release_dir: Path, manifest: Path) -> subprocess.CompletedProcess:
    """`make reproduce RELEASE_DIR=... RELEASE_MANIFEST=... RUN_DIR=...` with this interpreter's
    environment (BIN). ``-o`` takes the set-up as done: `make test` has just done it, and a test
    must not reinstall the environment it runs in."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("GNU make is not installed")
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "snakemake").is_file():
        pytest.skip(f"no snakemake script beside {sys.executable} for the Makefile's $(BIN)/snakemake")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [make, "-C", str(REPO), "-o", ".venv/.installed", "reproduce", f"BIN={bin_dir}", f"RUN_DIR={run_dir}",
         f"RELEASE_DIR={release_dir}", f"RELEASE_MANIFEST={manifest}", f"REPRODUCE_CONFIG={fewer_resamples(run_dir)}"],
        capture_output=True, text=True, timeout=1200, env=env,
    )


@pytest.fixture(scope="session")
def made(tmp_path_factory, release_dir) -> tuple[Path, dict]:
    """A run directory where `make reproduce` ran on the GLM-4-9B slice, and how it went."""

    def build(run_dir: Path) -> None:
        result = make_reproduce(run_dir, release_dir, glm_subset(run_dir))
        (run_dir / "make.json").write_text(json.dumps(
            {"returncode": result.returncode, "stdout": result.stdout, "stderr": result.stderr}))

    run_dir = build_once(tmp_path_factory, "make-reproduce", build)
    return run_dir, json.loads((run_dir / "make.json").read_text())


def test_make_reproduce_runs_snakemake_under_the_run_lock(made, release_dir):
    run_dir, result = made
    assert result["returncode"] == 0, result["stderr"][-4000:]
    # Make ran the run lock, which ran Snakemake's target in RUN_DIR, holding the lock there.
    assert "-m bloomqg.runtime.run_lock" in result["stdout"] and f"--directory {run_dir}" in result["stdout"]
    holder = (run_dir / RUN_LOCK).read_text()
    assert "snakemake" in holder and "reproduce_release" in holder and str(run_dir) in holder, holder
    # While another run holds that lock, `make reproduce` refuses at once and Make fails with it.
    with open(run_dir / RUN_LOCK, "r+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        busy = make_reproduce(run_dir, release_dir, run_dir / "glm.yaml")
    assert busy.returncode != 0
    assert f"another run is working in {run_dir}" in busy.stderr, busy.stderr[-3000:]
    assert f"Error {EXIT_BUSY}" in busy.stderr


def test_make_reproduce_writes_the_paper_tables_and_report(made):
    run_dir, result = made
    assert result["returncode"] == 0, result["stderr"][-4000:]
    out = run_dir / "results" / "release"
    table4 = pd.read_csv(out / "table4.csv").set_index(["dataset", "strategy"])
    table5 = pd.read_csv(out / "table5.csv").set_index(["dataset", "strategy"])
    table6 = pd.read_csv(out / "table6.csv").set_index(["dataset", "strategy"])
    assert table4.loc[("cs", "cot"), ["unique", "readable", "answerable"]].tolist() == [90.77, 100.0, 99.86]
    assert table4.loc[("math", "fgp"), ["unique", "readable", "answerable"]].tolist() == [97.71, 100.0, 100.0]
    assert table5.loc[("cs", "fgp"), ["usability", "catcons", "knowcov"]].tolist() == [99.43, 51.42, 92.75]
    assert table6.loc[("cs", "cot"), ["cogreg", "cogdrift", "cogleap"]].tolist() == [18.54, 33.42, 48.05]
    comparison = pd.read_csv(out / "paper_comparison.csv")
    assert len(comparison) == 9 + 8 + 6 and set(comparison["paper_model"]) == {"GLM-4-9B"}
    within = comparison.assign(ok=comparison["difference"].abs() <= 0.05).groupby("table")["ok"].sum()
    assert within.to_dict() == {"table4": 9, "table5": 5, "table6": 6}
    # The study plan of the release: CoT against FGP on each dataset both ran (computer science).
    plan = pd.read_parquet(out / "metrics" / "study_plan.parquet")
    assert set(plan["dataset"]) == {"cs"} and (plan["n_pairs"] > 1000).all() and (plan["mdd"] < 10).all()
    # The import report: every GLM-4-9B vote line gives its votes to its own question.
    # the Answer: the paper's panel is not unreliable on Bloom levels (unmeasured: no per-judge
    # votes) nor on knowledge units (α 0.82), so FGP against CoT gets verdicts there; cs unique,
    # which Usability needs, is voted "yes" 81-89% with α near 0 and AC1 0.58-0.72: unreliable
    answer = pd.read_parquet(out / "metrics" / "answer.parquet").set_index("metric")
    assert answer.loc["catcons", "verdict"] == "higher" and answer.loc["catcons", "reliability_status"] == "not_measured"
    assert answer.loc["knowcov", "verdict"] == "higher" and answer.loc["knowcov", "reliability_status"] == "reliable"
    assert (answer.loc["usability", "verdict"], answer.loc["usability", "reason"]) == ("cannot_tell", "judges_disagree")
    assert read_frame(out / "import_report.parquet", UNJOINED_LINES).empty
    assert "Every line of the imported votes files gives its votes" in (out / "paper_comparison.md").read_text(encoding="utf-8")
    figures = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert {f"fig{n}_" for n in range(2, 7)} <= {name[:5] for name in figures}
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "7635ce2b72c262e3d9ad5b014875896598471afe" in report  # the release's commit
    assert "d2221398b5ce418f0e507f90ed9dbd21aa1e04911769f4b62a0c6b6b9562e9c9" in report  # glm_gen_voted.jsonl
    assert "Table 4 9 of 9 cells" in report
    # The item explorer beside the report, linked from every metric cell of its tables.
    from bloomqg.reporting.explorer.encode import decode_data_script

    explorer = decode_data_script((out / "explorer" / "data.js").read_text(encoding="utf-8"))
    # a row per question and one per published vote line (Table 4 counts those)
    assert explorer["n"] == 3270 + 3260 and set((out / "explorer").iterdir()) >= {out / "explorer" / "index.html"}
    assert "votes/cs/cot/glm-4-9b.lines.parquet" in explorer["cells"]["cs/cot/glm-4-9b"]["lines"]
    assert "7635ce2b72c262e3d9ad5b014875896598471afe" in str(explorer["cells"])  # each cell's provenance
    # each link says which element opened the explorer (its "← Report" returns there)
    assert 'href="explorer/index.html#f.model=glm-4-9b&amp;f.dataset=cs&amp;f.strategy=FGP&amp;m=catcons&amp;back=l-' in report
    # ... and from the figures' bars: the report's overlays, and the SVG's links from figures/
    bar = "explorer/index.html#f.model=glm-4-9b&amp;f.dataset=cs&amp;f.strategy=CoT&amp;m=cogreg_mean"
    assert re.search(f'<a class="mark" id="(l-[^"]+)" href="{re.escape(bar)}&amp;back=\\1"', report)
    assert f'xlink:href="../{bar}"' in (out / "figures" / "fig3_shift_scores.svg").read_text(encoding="utf-8")
