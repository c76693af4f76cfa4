"""A converted model kept outside the study, so a second clone or study skips the conversion.

``prepare_model`` turns SmolLM2's GGUF into safetensors (~26 s). The result depends only on the
source file's bytes, the converter's code and the libraries that ran it, so it is stored once per
user under :func:`cache_root` in a folder named by :func:`entry_key` of those, and each study
takes its files from there.

The cache is input this process did not write, so an entry is used only when it verifies
(:func:`verify_entry`): a manifest (``bloomqg_cache.json``) naming the key and each file's size
and sha256, every file a regular file the manifest names, none a pickle format (only
``.safetensors`` weights and JSON / text tokenizer files). An entry that fails is logged,
removed and rebuilt. Entries appear by one rename of a folder built beside them, and an
exclusive ``flock`` on ``<key>.lock`` makes two studies converting at once convert once; what a
killed conversion left beside the entry is removed by the next one to take the lock.

Where: ``$BLOOMQG_MODEL_CACHE`` when set (``off`` turns the cache off: the study converts into
its own folder), else ``${XDG_CACHE_HOME:-~/.cache}/bloomqg/models``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bloomqg.store.atomic import shared_directory_mode
from bloomqg.store.provenance import sha256_file

logger = logging.getLogger(__name__)

#: The environment variable naming the cache folder; :data:`CACHE_OFF` turns the cache off.
CACHE_ENV = "BLOOMQG_MODEL_CACHE"
CACHE_OFF = "off"
#: Each entry's list of its files, their sizes and digests, and its key.
MANIFEST_FILE = "bloomqg_cache.json"
#: Suffixes an entry may hold: weights as safetensors only (a .bin or .pt is a pickle and runs
#: code when loaded), the rest JSON or plain text (tokenizer, chat template, merges).
ALLOWED_SUFFIXES = frozenset({".safetensors", ".json", ".txt", ".jinja", ".model"})
#: Files at least this large are hard-linked into the study (a copy of SmolLM2's 540 MB costs
#: seconds and disk); smaller ones are copied, so a write in the study never reaches the cache.
LINK_AT_BYTES = 1 << 20


class CacheEntryError(ValueError):
    """A cache entry that does not verify: what is wrong with it."""


def cache_root(environ: Mapping[str, str] | None = None) -> Path | None:
    """The cache folder (see the module docstring), or None when ``$BLOOMQG_MODEL_CACHE=off``."""
    env = os.environ if environ is None else environ
    chosen = env.get(CACHE_ENV, "").strip()
    if chosen.lower() == CACHE_OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    base = env.get("XDG_CACHE_HOME", "").strip() or str(Path("~/.cache").expanduser())
    return Path(base) / "bloomqg" / "models"


def entry_key(parts: Mapping[str, Any]) -> str:
    """A folder name for what decides a conversion's output (source digest, converter, versions)."""
    text = json.dumps(dict(parts), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _check_name(name: str) -> None:
    if name != Path(name).name or name in ("", ".", ".."):
        raise CacheEntryError(f"file name {name!r} is not a plain name")
    if Path(name).suffix not in ALLOWED_SUFFIXES:
        raise CacheEntryError(f"file {name!r}: only {sorted(ALLOWED_SUFFIXES)} are taken from the cache")


def write_manifest(folder: Path, key: str, parts: Mapping[str, Any]) -> dict[str, Any]:
    """Record ``folder``'s files (size, sha256), ``key`` and ``parts`` in its manifest."""
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.iterdir()):
        if path.name == MANIFEST_FILE:
            continue
        if path.is_symlink() or not path.is_file():
            raise CacheEntryError(f"{path} is not a regular file")
        _check_name(path.name)
        files[path.name] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
    manifest = {"key": key, "parts": dict(parts), "files": files}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def verify_entry(folder: Path, key: str) -> dict[str, Any]:
    """The manifest of the entry ``folder`` once every check passes; raises :class:`CacheEntryError`
    naming the first that fails (no manifest, another key, a file missing, extra, not regular,
    of a suffix not taken, or of another size or digest)."""
    if folder.is_symlink() or not folder.is_dir():
        raise CacheEntryError(f"{folder} is not a folder")
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
    except (OSError, ValueError) as err:
        raise CacheEntryError(f"no readable manifest ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("key") != key or not isinstance(manifest.get("files"), dict):
        raise CacheEntryError("the manifest is not this entry's")
    files: dict[str, Any] = manifest["files"]
    present = {path.name for path in folder.iterdir()} - {MANIFEST_FILE}
    if present != set(files):
        raise CacheEntryError(
            f"files differ from the manifest: missing {sorted(set(files) - present)}, "
            f"extra {sorted(present - set(files))}"
        )
    for name, record in sorted(files.items()):
        _check_name(name)
        path = folder / name
        if path.is_symlink() or not path.is_file():
            raise CacheEntryError(f"{name} is not a regular file")
        if path.stat().st_size != record.get("bytes"):
            raise CacheEntryError(f"{name} has {path.stat().st_size} bytes, the manifest says {record.get('bytes')}")
        if sha256_file(path) != record.get("sha256"):
            raise CacheEntryError(f"{name}'s sha256 differs from the manifest's")
    return manifest


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path``: the kernel drops it if the process dies."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove(folder: Path) -> None:
    """Move ``folder`` aside in one rename, then delete it (no reader sees it half removed)."""
    aside = folder.with_name(f".{folder.name}.bad-{os.getpid()}")
    os.replace(folder, aside)
    shutil.rmtree(aside, ignore_errors=True)


def _clear_leftovers(root: Path, key: str) -> int:
    """Remove what a killed conversion of ``key`` left (its build folders, the converter's own
    beside them, an entry moved aside): called under the key's lock, so no one is writing them."""
    leftovers = [path for path in root.iterdir() if path.name.startswith((f".{key}.", f"..{key}."))]
    for path in leftovers:
        logger.info("removing %s, left by a conversion that did not finish", path)
        shutil.rmtree(path, ignore_errors=True)
    return len(leftovers)


def cached_entry(
    root: Path, parts: Mapping[str, Any], convert: Callable[[Path], object]
) -> tuple[Path, bool]:
    """The verified entry for ``parts`` under ``root`` and whether it was there already.

    On a miss, or an entry that does not verify (logged, then removed), ``convert(folder)``
    writes the files into an empty folder beside the entry, which gets its manifest and is
    renamed into place. The lock serialises conversions of one key across processes.
    """
    key = entry_key(parts)
    root.mkdir(parents=True, exist_ok=True)
    entry = root / key
    with _exclusive(root / f"{key}.lock"):
        _clear_leftovers(root, key)
        if entry.exists() or entry.is_symlink():
            try:
                verify_entry(entry, key)
                return entry, True
            except CacheEntryError as err:
                logger.warning("cached model %s failed verification (%s): removing it and converting again",
                               entry, err)
                if entry.is_symlink() or not entry.is_dir():
                    entry.unlink()
                else:
                    _remove(entry)
        building = Path(tempfile.mkdtemp(dir=root, prefix=f".{key}.", suffix=".tmp"))
        try:
            building.chmod(shared_directory_mode())
            convert(building)
            write_manifest(building, key, parts)
            os.replace(building, entry)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        verify_entry(entry, key)
        return entry, False


def place_entry(entry: Path, out_dir: Path) -> None:
    """Put the entry's files (not its manifest) in ``out_dir``, replacing
    it in one rename: large files as hard links where the filesystem allows, the rest copies."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.", suffix=".tmp"))
    try:
        building.chmod(shared_directory_mode())
        for path in sorted(entry.iterdir()):
            if path.name == MANIFEST_FILE:
                continue
            target = building / path.name
            if path.stat().st_size >= LINK_AT_BYTES:
                try:
                    os.link(path, target)
                    continue
                except OSError:  # another filesystem, or links not allowed: copy instead
                    pass
            shutil.copyfile(path, target)
        if out_dir.exists():
            _remove(out_dir)
        os.replace(building, out_dir)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
