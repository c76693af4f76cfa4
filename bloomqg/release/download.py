"""Fetching the paper's public release at a pinned commit, checking every file's sha256.

Used when a preset's ``release_dir`` does not exist yet: the ``download_release`` rule fetches
the repository archive once, extracts the pinned files under their ASCII names, and refuses any
file whose hash differs from the pin (the archive changed, or the download was corrupted).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Mapping

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
