"""Provenance recorded in every Parquet file: versions, commit, hashes, code fingerprints."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import platform
import subprocess
from functools import lru_cache
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # bloomqg/, above store/
REPO_ROOT = PACKAGE_ROOT.parent

#: Distributions whose versions change results.
TRACKED_DISTRIBUTIONS: tuple[str, ...] = (
    "bloomqg",
    "snakemake",
    "torch",
    "transformers",
    "sentence-transformers",
    "openai",
    "pandas",
    "pyarrow",
    "numpy",
    "krippendorff",
)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    """Installed versions of the distributions in :data:`TRACKED_DISTRIBUTIONS`."""
    versions: dict[str, str] = {"python": platform.python_version()}
    for name in TRACKED_DISTRIBUTIONS:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The workflow repository's HEAD commit (with ``-dirty`` when it has local changes)."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}-dirty" if dirty else commit


def code_fingerprint(*modules: str, exclude: tuple[str, ...] = ()) -> str:
    """Hash of the source of ``bloomqg`` modules (dotted names or sub-packages: every file in
    them, templates and static files included, not compiled caches), leaving out the
    sub-packages named in ``exclude`` (a stage that does not run them).

    Rules pass it as a ``params:`` value so that Snakemake reruns a stage when the library code
    it uses changes, and only then.
    """
    skipped = []
    for name in exclude:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError(f"cannot leave {name!r} out of a fingerprint: not a package")
        skipped += [Path(folder) for folder in spec.submodule_search_locations]
    digest = hashlib.sha256()
    for module in sorted(modules):
        spec = importlib.util.find_spec(module)
        if spec is None:
            raise ModuleNotFoundError(f"cannot fingerprint {module!r}: module not found")
        if spec.submodule_search_locations:  # a package, regular or namespace: all its files
            files = sorted(
                path for folder in spec.submodule_search_locations for path in Path(folder).rglob("*")
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
            )
        else:
            files = [Path(spec.origin)]
        for path in files:
            if any(path.is_relative_to(folder) for folder in skipped):
                continue
            digest.update(str(path.relative_to(PACKAGE_ROOT.parent)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def base_provenance() -> dict[str, object]:
    """Fields every output carries: package versions and the workflow's commit."""
    return {"package_versions": package_versions(), "git_commit": git_commit()}
