"""The model cache (bloomqg.inputs.model_cache): a hit skips the conversion, a changed source or a
corrupted entry converts again, two processes converting at once convert once, and what is read
back from the cache is verified. The converter here writes real safetensors from the source's
bytes in milliseconds; tests/integration/test_model_cache_smollm2.py converts the real GGUF."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from bloomqg.inputs import model_cache, models
from bloomqg.inputs.model_cache import (
    MANIFEST_FILE,
    CacheEntryError,
    cache_root,
    cached_entry,
    entry_key,
    place_entry,
    verify_entry,
)


def convert_bytes(source: Path, counter: Path | None = None):
    """A converter: the source's bytes as a uint8 tensor, a 2 MB padding tensor (so the weights
    file is large enough to be hard-linked) and a config; appends a line to ``counter``."""

    def convert(folder: Path) -> None:
        data = np.frombuffer(source.read_bytes(), dtype=np.uint8).copy()
        save_file({"source": data, "pad": np.zeros(1 << 19, dtype=np.float32)}, str(folder / "model.safetensors"))
        (folder / "config.json").write_text(json.dumps({"model_type": "test"}))
        if counter is not None:
            with open(counter, "a") as handle:
                handle.write(f"{os.getpid()}\n")

    return convert


def parts_of(source: Path) -> dict[str, str]:
    from bloomqg.store.provenance import sha256_file

    return {"source_sha256": sha256_file(source), "converter": "v1"}


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"weights-one")
    return path


def test_cache_root_follows_the_environment(tmp_path: Path) -> None:
    assert cache_root({"BLOOMQG_MODEL_CACHE": str(tmp_path)}) == tmp_path
    assert cache_root({"BLOOMQG_MODEL_CACHE": "off"}) is None
    assert cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/bloomqg/models")
    assert cache_root({}) == Path("~/.cache/bloomqg/models").expanduser()


def test_miss_then_hit_converts_once(tmp_path: Path, source: Path) -> None:
    calls = tmp_path / "calls"
    root = tmp_path / "cache"
    entry, hit = cached_entry(root, parts_of(source), convert_bytes(source, calls))
    assert not hit and entry == root / entry_key(parts_of(source))
    again, hit = cached_entry(root, parts_of(source), convert_bytes(source, calls))
    assert hit and again == entry
    assert len(calls.read_text().splitlines()) == 1
    assert bytes(load_file(str(entry / "model.safetensors"))["source"]) == b"weights-one"
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


def test_changed_source_converts_again(tmp_path: Path, source: Path) -> None:
    calls = tmp_path / "calls"
    root = tmp_path / "cache"
    first, _ = cached_entry(root, parts_of(source), convert_bytes(source, calls))
    source.write_bytes(b"weights-two")
    second, hit = cached_entry(root, parts_of(source), convert_bytes(source, calls))
    assert not hit and second != first
    assert bytes(load_file(str(second / "model.safetensors"))["source"]) == b"weights-two"
    assert len(calls.read_text().splitlines()) == 2


@pytest.mark.parametrize(
    "corrupt, reason",
    [
        (lambda e: (e / "model.safetensors").write_bytes(b"x" * (e / "model.safetensors").stat().st_size), "sha256"),
        (lambda e: (e / "config.json").unlink(), "missing ['config.json']"),
        (lambda e: (e / "pytorch_model.bin").write_bytes(b"pickle"), "extra ['pytorch_model.bin']"),
        (lambda e: (e / MANIFEST_FILE).write_text("{"), "no readable manifest"),
        (lambda e: (e / "config.json").write_text("{}"), "bytes"),
    ],
    ids=["weights-rewritten", "file-missing", "pickle-added", "manifest-broken", "file-changed"],
)
def test_corrupted_entry_is_logged_and_rebuilt(tmp_path, source, caplog, corrupt, reason) -> None:
    calls = tmp_path / "calls"
    root = tmp_path / "cache"
    entry, _ = cached_entry(root, parts_of(source), convert_bytes(source, calls))
    corrupt(entry)
    with pytest.raises(CacheEntryError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        verify_entry(entry, entry_key(parts_of(source)))
    with caplog.at_level(logging.WARNING, logger=model_cache.__name__):
        again, hit = cached_entry(root, parts_of(source), convert_bytes(source, calls))
    assert not hit and again == entry
    assert "failed verification" in caplog.text and "converting again" in caplog.text
    verify_entry(entry, entry_key(parts_of(source)))
    assert len(calls.read_text().splitlines()) == 2


def test_a_pickle_in_the_manifest_is_refused(tmp_path: Path, source: Path) -> None:
    """An entry whose manifest lists a .bin (written by someone else) is not taken."""
    root = tmp_path / "cache"
    key = entry_key(parts_of(source))
    entry, _ = cached_entry(root, parts_of(source), convert_bytes(source))
    (entry / "pytorch_model.bin").write_bytes(b"pickle")
    manifest = json.loads((entry / MANIFEST_FILE).read_text())
    manifest["files"]["pytorch_model.bin"] = {"bytes": 6, "sha256": "0"}
    (entry / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(CacheEntryError, match="only"):
        verify_entry(entry, key)


def test_a_symlinked_file_is_refused(tmp_path: Path, source: Path) -> None:
    root = tmp_path / "cache"
    key = entry_key(parts_of(source))
    entry, _ = cached_entry(root, parts_of(source), convert_bytes(source))
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text((entry / "config.json").read_text())
    (entry / "config.json").unlink()
    (entry / "config.json").symlink_to(elsewhere)
    with pytest.raises(CacheEntryError, match="not a regular file"):
        verify_entry(entry, key)


def _convert_in_process(root: str, source: str, calls: str, ready: str, results: str) -> None:
    import time

    # each process waits until both have started, so the two conversions overlap
    Path(ready, str(os.getpid())).touch()
    while len(list(Path(ready).iterdir())) < 2:
        time.sleep(0.01)
    src = Path(source)
    slow = convert_bytes(src, Path(calls))

    def convert(folder: Path) -> None:
        time.sleep(0.5)
        slow(folder)

    entry, hit = cached_entry(Path(root), parts_of(src), convert)
    with open(results, "a") as handle:
        handle.write(json.dumps({"entry": str(entry), "hit": hit}) + "\n")


def test_two_processes_converting_at_once_convert_once(tmp_path: Path, source: Path) -> None:
    ready = tmp_path / "ready"
    ready.mkdir()
    args = (str(tmp_path / "cache"), str(source), str(tmp_path / "calls"), str(ready), str(tmp_path / "results"))
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_convert_in_process, args=args) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    results = [json.loads(line) for line in (tmp_path / "results").read_text().splitlines()]
    assert sorted(r["hit"] for r in results) == [False, True]
    assert len({r["entry"] for r in results}) == 1
    assert len((tmp_path / "calls").read_text().splitlines()) == 1
    verify_entry(Path(results[0]["entry"]), entry_key(parts_of(source)))


def test_place_entry_links_weights_and_copies_the_rest(tmp_path: Path, source: Path) -> None:
    entry, _ = cached_entry(tmp_path / "cache", parts_of(source), convert_bytes(source))
    out = tmp_path / "study" / "resources" / "models" / "m"
    place_entry(entry, out)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    assert (out / "model.safetensors").stat().st_ino == (entry / "model.safetensors").stat().st_ino
    assert (out / "config.json").stat().st_ino != (entry / "config.json").stat().st_ino
    (out / "config.json").write_text("changed in the study")
    verify_entry(entry, entry_key(parts_of(source)))


def test_converted_gguf_takes_a_hit_from_the_cache_and_says_so(tmp_path, source, monkeypatch, caplog) -> None:
    """materialize_model's path: the study folder gets the entry's files and a provenance naming
    the entry; the second study logs the hit and converts nothing. The GGUF converter is replaced
    by the bytes converter (the real one: tests/integration/test_model_cache_smollm2.py)."""
    calls = tmp_path / "calls"

    def fake_convert(gguf_path: Path, out_dir: Path, *, dtype: str) -> dict:
        convert_bytes(gguf_path, calls)(out_dir)
        provenance = {"kind": models.KIND_CONVERTED_GGUF, "source_gguf_sha256": "s", "dtype": dtype}
        (out_dir / models.PROVENANCE_FILE).write_text(json.dumps(provenance))
        return provenance

    monkeypatch.setattr(models, "convert_gguf_to_safetensors", fake_convert)
    root = tmp_path / "cache"
    with caplog.at_level(logging.INFO, logger=models.__name__):
        first = models.converted_gguf(source, tmp_path / "a" / "m", dtype="float32", root=root)
        assert "converted model stored in cache" in caplog.text
        caplog.clear()
        second = models.converted_gguf(source, tmp_path / "b" / "m", dtype="float32", root=root)
    assert f"converted model taken from cache {root / entry_key(models.conversion_parts(source, 'float32'))}" in caplog.text
    assert first["model_cache"]["hit"] is False and second["model_cache"]["hit"] is True
    assert len(calls.read_text().splitlines()) == 1
    assert (tmp_path / "b" / "m" / "model.safetensors").is_file()

    # a different dtype is another conversion
    models.converted_gguf(source, tmp_path / "c" / "m", dtype="bfloat16", root=root)
    assert len(calls.read_text().splitlines()) == 2


def test_an_unwritable_cache_converts_around_it(tmp_path, source, monkeypatch, caplog) -> None:
    calls = tmp_path / "calls"

    def fake_convert(gguf_path: Path, out_dir: Path, *, dtype: str) -> dict:
        out_dir.mkdir(parents=True, exist_ok=True)
        convert_bytes(gguf_path, calls)(out_dir)
        return {"kind": models.KIND_CONVERTED_GGUF}

    monkeypatch.setattr(models, "convert_gguf_to_safetensors", fake_convert)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache would go")
    with caplog.at_level(logging.WARNING, logger=models.__name__):
        provenance = models.converted_gguf(source, tmp_path / "a" / "m", dtype="float32", root=blocker / "models")
    assert "not usable" in caplog.text and "model_cache" not in provenance
    assert (tmp_path / "a" / "m" / "model.safetensors").is_file()


def test_a_killed_conversion_leaves_nothing_for_long(tmp_path: Path, source: Path) -> None:
    """A conversion killed by a signal (no Python clean-up runs) leaves its build folder; the
    next conversion of the key removes it, and leaves other keys' alone."""
    root = tmp_path / "cache"
    key = entry_key(parts_of(source))
    root.mkdir()
    for name in (f".{key}.abc.tmp", f"..{key}.abc.tmp.def.tmp", f".{key}.bad-123", ".otherkey.abc.tmp"):
        (root / name).mkdir()
        (root / name / "model.safetensors").write_bytes(b"half")
    cached_entry(root, parts_of(source), convert_bytes(source))
    assert sorted(p.name for p in root.iterdir()) == [".otherkey.abc.tmp", key, f"{key}.lock"]
