"""The pinned-release extraction: hashes checked, ASCII names, nothing written on a mismatch."""

from __future__ import annotations

import hashlib
import io
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from bloomqg.release.download import ReleaseDownloadError, extract_release, load_pins
from tests.conftest import REPO


def archive(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, data in files.items():
            bundle.writestr(f"LLM-Eval-abc/{name}", data)
    return buffer.getvalue()


def pins_for(files: dict[str, bytes]) -> dict:
    return {
        "commit": "abc",
        "archive_url": "unused",
        "files": {
            f"renamed/{i}.bin": {"source": name, "sha256": hashlib.sha256(data).hexdigest()}
            for i, (name, data) in enumerate(files.items())
        },
    }


def test_extracts_pinned_files_under_local_names(tmp_path):
    files = {"dataset/多知识点.xlsx": b"math", "dataset/a.csv": b"cs"}
    written = extract_release(archive(files), pins_for(files), tmp_path)
    assert sorted(p.read_bytes() for p in written) == [b"cs", b"math"]
    assert (tmp_path / "renamed" / "0.bin").read_bytes() == b"math"


def test_hash_mismatch_writes_nothing(tmp_path):
    files = {"dataset/a.csv": b"cs", "dataset/b.csv": b"other"}
    pins = pins_for(files)
    pins["files"]["renamed/1.bin"]["sha256"] = "0" * 64
    with pytest.raises(ReleaseDownloadError, match="does not match"):
        extract_release(archive(files), pins, tmp_path)
    assert not any(tmp_path.rglob("*.bin"))


def test_missing_member_is_named(tmp_path):
    pins = pins_for({"dataset/a.csv": b"cs"})
    with pytest.raises(ReleaseDownloadError, match="dataset/a.csv"):
        extract_release(archive({"other.csv": b"x"}), pins, tmp_path)


def test_pins_match_the_shared_release(release_dir):
    pins = load_pins(REPO / "configs" / "llm-eval-release.yaml")["files"]
    present = {local: pin for local, pin in pins.items() if (release_dir / local).is_file()}
    # The shared copy holds the datasets and GLM-4-9B's runs; a full copy holds all 39 files.
    assert {"dataset/computer/Data_Structure.csv", "generated/glm/glm_gen_voted.jsonl"} <= set(present)
    for local, pin in present.items():
        assert hashlib.sha256((release_dir / local).read_bytes()).hexdigest() == pin["sha256"], local


def test_pins_cover_every_file_of_the_full_manifest():
    import yaml

    pins = load_pins(REPO / "configs" / "llm-eval-release.yaml")
    manifest = yaml.safe_load((REPO / "configs" / "llm-eval-release-manifest.yaml").read_text())
    assert len(manifest["runs"]) == 18 and len({r["model"] for r in manifest["runs"]}) == 6
    run_files = {run[key] for run in manifest["runs"] for key in ("generations", "votes")}
    assert run_files <= set(pins["files"]) and len(run_files) == 36
    assert all(len(pin["sha256"]) == 64 for pin in pins["files"].values())


def test_download_fetches_the_pinned_archive_and_checks_it(tmp_path):
    """The whole download path on a local archive (a file:// URL stands in for GitHub's)."""
    import yaml

    from bloomqg.release.download import download_release

    files = {"generated/glm/votes.jsonl": b"{}\n", "dataset/a.csv": b"cs"}
    (tmp_path / "abc.zip").write_bytes(archive(files))
    pins = pins_for(files) | {"archive_url": f"file://{tmp_path}/{{commit}}.zip"}
    pin_path = tmp_path / "pins.yaml"
    pin_path.write_text(yaml.safe_dump(pins))
    written = download_release(pin_path, tmp_path / "release")
    assert sorted(p.read_bytes() for p in written) == [b"cs", b"{}\n"]
    pins["archive_url"] = f"file://{tmp_path}/missing-{{commit}}.zip"
    pin_path.write_text(yaml.safe_dump(pins))
    with pytest.raises(ReleaseDownloadError, match="could not download the release .* RELEASE_DIR=PATH"):
        download_release(pin_path, tmp_path / "elsewhere")


def _dataset_copy(release_dir: Path, folder: Path) -> Path:
    """The release's dataset files (the math workbook under its ASCII name), nothing else."""
    shutil.copytree(release_dir / "dataset" / "computer", folder / "dataset" / "computer")
    shutil.copytree(release_dir / "dataset" / "k12-math", folder / "dataset" / "k12-math")
    return folder


def test_a_release_dataset_that_differs_from_its_pin_is_refused_at_plan_time_and_in_prepare_dataset(
        release_dir, tmp_path):
    """A row appended to the release's CS dataset flowed into results/datasets/cs.parquet; now
    planning refuses it, and so does prepare_dataset's own check, with the run files' message."""
    from bloomqg.study.config import prepare_study
    from bloomqg.store.config_schema import ConfigError
    from bloomqg.store.provenance import sha256_file
    from bloomqg.release.download import RELEASE_PINS, verify_release_files

    folder = _dataset_copy(release_dir, tmp_path / "release")
    config = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text(encoding="utf-8"))
    config["release_dir"] = str(folder)
    study = prepare_study(config, workdir=tmp_path, load_datasets=False)  # the published files pass
    files = [file for files in study.dataset_files.values() for file in files]
    inside = [file for file in files if file.is_relative_to(folder.resolve())]
    assert verify_release_files(files, folder) == inside and len(inside) == 3  # the ASCII name is pinned too

    csv_path = folder / "dataset" / "computer" / "Data_Structure.csv"
    pinned = load_pins(RELEASE_PINS)["files"]["dataset/computer/Data_Structure.csv"]["sha256"]
    with csv_path.open("a", encoding="utf-8") as handle:
        handle.write("Stacks,1,Planted question that no paper ever saw?\n")
    expected = (f"{csv_path.resolve()}: sha256 {sha256_file(csv_path)} differs from the {pinned} pinned for "
                "wmm228/LLM-Eval at 7635ce2b72c262e3d9ad5b014875896598471afe")
    with pytest.raises(ConfigError) as planned:
        prepare_study(config, workdir=tmp_path, load_datasets=False)
    assert str(planned.value).startswith(f"datasets.cs: {expected}")
    assert "this is not the published file: fetch the release again" in str(planned.value)
    with pytest.raises(ReleaseDownloadError) as prepared:  # prepare_dataset's check of its inputs
        verify_release_files([csv_path], folder)
    assert str(prepared.value).startswith(expected)
