"""The paper's release in the two layouts users have: as published (``dataset/K-12 math/
多知识点题目示例.xlsx``, a folder name with a space and a Chinese file name) and as the shared
copy renamed it (``dataset/k12-math/multi_knowledge_point_examples.xlsx``). `make reproduce
RELEASE_DIR=PATH` must work on either without renaming a file; which one is read is decided
explicitly (exactly one present), and the download writes the archive's own paths."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.study.config import prepare_study
from bloomqg.store.config_schema import ConfigError
from bloomqg.store.parquet_io import read_provenance
from bloomqg.release.download import load_pins
from tests.conftest import REPO

PUBLISHED = Path("dataset") / "K-12 math" / "多知识点题目示例.xlsx"
ASCII = Path("dataset") / "k12-math" / "multi_knowledge_point_examples.xlsx"


def published_copy(release_dir: Path, folder: Path) -> Path:
    """The shared copy laid out as the release publishes it: the math workbook under its
    original name (copied, not linked), the rest as it is."""
    (folder / PUBLISHED).parent.mkdir(parents=True)
    shutil.copyfile(release_dir / ASCII, folder / PUBLISHED)
    shutil.copytree(release_dir / "dataset" / "computer", folder / "dataset" / "computer")
    (folder / "generated").symlink_to(release_dir / "generated", target_is_directory=True)
    return folder


def paper_config(release_dir: Path) -> dict:
    config = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text(encoding="utf-8"))
    config["release_dir"] = str(release_dir)
    return config


def test_the_download_pins_name_the_archives_own_paths():
    pins = load_pins(REPO / "configs" / "llm-eval-release.yaml")["files"]
    assert all(local == pin["source"] for local, pin in pins.items())
    assert PUBLISHED.as_posix() in pins and ASCII.as_posix() not in pins
    # What the preset reads first from a release it downloads is a file the download writes.
    first = paper_config(Path("RELEASE"))["datasets"]["math"]["path"][0]
    assert first.removeprefix("{release_dir}/") == PUBLISHED.as_posix()


@pytest.mark.parametrize("layout", ["published", "ascii"])
def test_the_paper_preset_reads_either_layout(layout, release_dir, tmp_path):
    folder = published_copy(release_dir, tmp_path / "release") if layout == "published" else release_dir
    study = prepare_study(paper_config(folder), workdir=tmp_path)
    chosen = Path(study.datasets["math"]["path"])
    assert chosen == (folder / (PUBLISHED if layout == "published" else ASCII)).resolve()
    assert len(study.knowledge_units["math"]) == 20


def test_neither_layout_names_both_candidates(release_dir, tmp_path):
    folder = tmp_path / "release"
    shutil.copytree(release_dir / "dataset" / "computer", folder / "dataset" / "computer")
    with pytest.raises(ConfigError) as error:
        prepare_study(paper_config(folder), workdir=tmp_path)
    message = str(error.value)
    assert "datasets.math.path: none of the 2 layouts is present" in message
    assert str(folder / PUBLISHED) in message and str(folder / ASCII) in message


def test_two_different_files_in_both_layouts_are_refused(release_dir, tmp_path):
    folder = published_copy(release_dir, tmp_path / "release")
    (folder / ASCII).parent.mkdir(parents=True)
    (folder / ASCII).write_bytes(b"not the workbook")
    with pytest.raises(ConfigError, match="more than one layout is present and the files differ"):
        prepare_study(paper_config(folder), workdir=tmp_path, load_datasets=False)
    # The same file under both names is no ambiguity.
    shutil.copyfile(folder / PUBLISHED, folder / ASCII)
    study = prepare_study(paper_config(folder), workdir=tmp_path, load_datasets=False)
    assert Path(study.datasets["math"]["path"]) == (folder / PUBLISHED).resolve()


def snakemake(workdir: Path, release: Path, *targets: str, options: tuple[str, ...] = (),
              config: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--cores", "1", *options, *targets, "--configfile", str(REPO / "configs" / "paper.yaml"),
         "--config", f"release_dir={release}", *config],
        capture_output=True, text=True, timeout=900,
    )


@pytest.mark.integration
@pytest.mark.parametrize("layout", ["published", "ascii"])
def test_the_workflow_imports_the_math_dataset_from_either_layout(layout, release_dir, tmp_path):
    """Snakemake with the paper's preset: the math dataset job reads the workbook under the
    layout's name (spaces and Chinese in a rule's input included), and reproduce_release plans."""
    folder = published_copy(release_dir, tmp_path / "release") if layout == "published" else release_dir
    work = tmp_path / "work"
    work.mkdir()
    result = snakemake(work, folder, "results/datasets/math.parquet")
    assert result.returncode == 0, result.stderr[-3000:]
    frame = pd.read_parquet(work / "results" / "datasets" / "math.parquet")
    assert len(frame) == 438  # the paper's 438 of the workbook's 465 rows
    read = read_provenance(work / "results" / "datasets" / "math.parquet")["source_sha256"]
    assert list(read) == [str((folder / (PUBLISHED if layout == "published" else ASCII)).resolve())]
    manifest = yaml.safe_load((REPO / "configs" / "llm-eval-release-manifest.yaml").read_text())
    manifest["runs"] = [run for run in manifest["runs"] if run["model"] == "glm-4-9b"]
    manifest["pins"] = str(REPO / "configs" / manifest["pins"])
    (tmp_path / "glm.yaml").write_text(yaml.safe_dump(manifest))
    planned = snakemake(work, folder, "reproduce_release", options=("--dry-run",),
                        config=(f"release_manifest={tmp_path / 'glm.yaml'}",))
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "import_release_run" in planned.stdout
