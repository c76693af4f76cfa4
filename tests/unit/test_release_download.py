"""The pinned-release extraction: hashes checked, ASCII names, nothing written on a mismatch."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest

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
