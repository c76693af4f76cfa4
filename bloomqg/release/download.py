"""Fetching the paper's public release at a pinned commit, checking every file's sha256.

Used when a preset's ``release_dir`` does not exist yet: the ``download_release`` rule fetches
the repository archive once, extracts the pinned files under their ASCII names, and refuses any
file whose hash differs from the pin (the archive changed, or the download was corrupted).
A release_dir already at hand is held to the same pins: :func:`verify_release_files` refuses a
dataset file read from it that differs (at plan time and again in prepare_dataset), with the
message release run files get (:func:`pin_mismatch_message`).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

log = logging.getLogger(__name__)


class ReleaseDownloadError(RuntimeError):
    """The release could not be fetched or did not match its pinned hashes."""


def load_pins(path: str | Path) -> dict[str, Any]:
    """The pin file (configs/llm-eval-release.yaml): repository, commit, archive URL, files."""
    pins = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    for key in ("commit", "archive_url", "files"):
        if key not in pins:
            raise ReleaseDownloadError(f"{path}: missing key {key!r}")
    return pins


#: The pin file download_release fetches by; dataset files read from a release_dir are checked against it.
RELEASE_PINS = Path(__file__).resolve().parents[2] / "configs" / "llm-eval-release.yaml"


def pin_mismatch_message(file: Path, actual: str, expected: str, pins: Mapping[str, Any], source: Path,
                         way_out: str) -> str:
    """The one message for a release file whose sha256 differs from its pin (run and dataset files)."""
    return (f"{file}: sha256 {actual} differs from the {expected} pinned for {pins.get('repository')} at "
            f"{pins.get('commit')} ({source}); this is not the published file: fetch the release again, {way_out}")


def verify_release_files(files: Iterable[str | Path], release_dir: str | Path, pins_path: str | Path = RELEASE_PINS,
                         *, way_out: str = "or read the dataset from outside release_dir") -> list[Path]:
    """Refuse (:class:`ReleaseDownloadError`) any of ``files`` inside ``release_dir`` whose sha256
    differs from its pin in ``pins_path`` (looked up by its path inside the folder, or its
    ``also_named`` ASCII name); returns the files it checked. Files outside the folder, or not
    pinned, are not the release's and are left to their own checks."""
    from bloomqg.store.provenance import sha256_file

    pins = load_pins(pins_path)
    by_name: dict[str, str] = {}
    for name, pin in pins["files"].items():
        by_name[name] = str(pin["sha256"])
        if pin.get("also_named"):
            by_name[str(pin["also_named"])] = str(pin["sha256"])
    root = Path(release_dir).resolve()
    checked = []
    for file in (Path(f).resolve() for f in files):
        if not file.is_relative_to(root):
            continue
        expected = by_name.get(file.relative_to(root).as_posix())
        if expected is None:
            continue
        actual = sha256_file(file)
        if actual != expected:
            raise ReleaseDownloadError(pin_mismatch_message(file, actual, expected, pins, Path(pins_path), way_out))
        checked.append(file)
    return checked


def extract_release(archive: bytes, pins: Mapping[str, Any], release_dir: str | Path) -> list[Path]:
    """Write the pinned files from a repository zip into ``release_dir`` after checking hashes.

    GitHub archives put everything under one top folder (``LLM-Eval-<commit>/``); it is
    stripped. Nothing is written unless every pinned file is present and matches.
    """
    release_dir = Path(release_dir)
    with zipfile.ZipFile(io.BytesIO(archive)) as bundle:
        by_relative = {}
        for name in bundle.namelist():
            _, _, relative = name.partition("/")
            by_relative[relative] = name
        contents: dict[str, bytes] = {}
        for local, pin in pins["files"].items():
            member = by_relative.get(pin["source"])
            if member is None:
                raise ReleaseDownloadError(f"archive has no {pin['source']!r} (for {local})")
            data = bundle.read(member)
            actual = hashlib.sha256(data).hexdigest()
            if actual != pin["sha256"]:
                raise ReleaseDownloadError(
                    f"{pin['source']}: sha256 {actual} does not match the pinned {pin['sha256']}"
                )
            contents[local] = data
    written = []
    for local, data in contents.items():
        target = release_dir / local
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.part")
        temporary.write_bytes(data)
        os.replace(temporary, target)
        written.append(target)
    return written


def download_release(pins_path: str | Path, release_dir: str | Path, *, timeout_s: float = 120) -> list[Path]:
    """Fetch the pinned archive and extract it (see :func:`extract_release`)."""
    pins = load_pins(pins_path)
    url = pins["archive_url"].format(commit=pins["commit"])
    log.info("downloading %s at %s", pins.get("repository", url), pins["commit"])
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 (pinned https URL)
            archive = response.read()
    except OSError as error:
        raise ReleaseDownloadError(
            f"could not download the release from {url}: {error}. Without network access, fetch "
            f"{pins.get('repository')} at commit {pins['commit']} elsewhere and pass "
            "--config release_dir=PATH (make reproduce RELEASE_DIR=PATH)"
        ) from error
    return extract_release(archive, pins, release_dir)
