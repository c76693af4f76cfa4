"""The content-addressed API call cache: key stability and sensitivity, atomic concurrent writes,
corrupt entries read as misses."""

from __future__ import annotations

import json
import logging
import multiprocessing
from pathlib import Path

import pytest

from bloomqg.api.cache import CachedResponse, CallCache, call_cache_key

MESSAGES = (
    {"role": "system", "content": "You judge questions."},
    {"role": "user", "content": "Is 2+2=4 clear?"},
)
BASE = dict(temperature=0.0, top_p=1.0, max_tokens=64, seed=7, response_schema={"type": "object"})


def key(**overrides) -> str:
    fields = {**BASE, **overrides}
    messages = fields.pop("messages", MESSAGES)
    model = fields.pop("model", "gpt-4o-mini")
    return call_cache_key(model, messages, **fields)


def test_key_is_stable_across_equivalent_inputs() -> None:
    reference = key()
    assert reference == key()
    assert len(reference) == 64 and int(reference, 16) >= 0
    # Same call, other Python spellings: int vs float, tuple vs list, dict key order.
    assert key(temperature=0, top_p=1) == reference
    assert key(messages=[dict(reversed(list(m.items()))) for m in MESSAGES]) == reference
    # A pinned value: the key format must not drift silently between versions.
    assert call_cache_key(
        "m", [{"role": "user", "content": "hi"}], temperature=0.5, top_p=1.0, max_tokens=8, seed=None
    ) == call_cache_key(
        "m", ({"content": "hi", "role": "user"},), temperature=0.5, top_p=1, max_tokens=8, seed=None
    )


@pytest.mark.parametrize(
    "change",
    [
        {"model": "gpt-4.1-mini"},
        {"messages": (MESSAGES[0], {"role": "user", "content": "Is 2+2=5 clear?"})},
        {"messages": MESSAGES[1:]},
        {"temperature": 0.9},
        {"top_p": 0.95},
        {"max_tokens": 65},
        {"seed": 8},
        {"seed": None},
        {"response_schema": None},
        {"response_schema": {"type": "object", "required": ["a"]}},
    ],
)
def test_key_changes_with_every_field_that_changes_the_answer(change: dict) -> None:
    assert key(**change) != key()


def test_roundtrip_and_misses(tmp_path: Path) -> None:
    cache = CallCache(tmp_path / "calls")
    k = key()
    assert cache.get(k) is None
    response = CachedResponse('{"unique": "yes"}', "stop", 31, 9, "gpt-4o-mini-2024-07-18")
    path = cache.put(k, response)
    assert path == tmp_path / "calls" / k[:2] / f"{k}.json"
    assert cache.get(k) == response
    assert k in cache and len(cache) == 1
    assert not list(path.parent.glob("*.tmp")), "temporary files must not be left behind"


def test_failures_are_never_cached(tmp_path: Path) -> None:
    cache = CallCache(tmp_path)
    with pytest.raises(ValueError, match="never cached"):
        cache.put(key(), CachedResponse("", "error"))
    assert len(cache) == 0


def test_bad_key_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="64 lowercase hex"):
        CallCache(tmp_path).get("../../etc/passwd")


@pytest.mark.parametrize(
    "content",
    [
        b"",  # a crash between create and write
        b'{"version": 1, "key": "',  # truncated
        b"\x00\xff\xfe",  # garbage
        b"[]",  # valid JSON, wrong shape
        b'{"version": 1, "key": "KEY", "response": {"text": 3, "finish_reason": "stop"}}',
        b'{"version": 1, "key": "0000000000000000000000000000000000000000000000000000000000000000",'
        b' "response": {"text": "x", "finish_reason": "stop"}}',  # an entry under the wrong name
    ],
)
def test_corrupt_entry_is_a_logged_miss(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    cache = CallCache(tmp_path)
    k = key()
    path = cache.path_for(k)
    path.write_bytes(content.replace(b"KEY", k.encode()))
    with caplog.at_level(logging.WARNING, logger="bloomqg.api.cache"):
        assert cache.get(k) is None
    assert str(path) in caplog.text and "miss" in caplog.text
    # The next successful call repairs the entry.
    cache.put(k, CachedResponse("ok", "stop"))
    assert cache.get(k) == CachedResponse("ok", "stop")


def _writer(directory: str, worker: int, keys: list[str], rounds: int) -> None:
    cache = CallCache(directory)
    for round_ in range(rounds):
        for k in keys:
            # Large, writer-specific bodies make a torn write visible as invalid JSON.
            cache.put(k, CachedResponse(f"{worker}:{round_}:" + "x" * 20_000, "stop", worker, round_))


def _reader(directory: str, keys: list[str], rounds: int, queue: multiprocessing.Queue) -> None:
    """Count reads of a file that exists but is not a whole entry."""
    cache = CallCache(directory)
    torn = whole = 0
    for _ in range(rounds):
        for k in keys:
            try:
                raw = cache.path_for(k).read_bytes()
            except FileNotFoundError:
                continue
            try:
                entry = json.loads(raw)
                assert entry["response"]["text"].endswith("x" * 20_000)
                whole += 1
            except (ValueError, KeyError, AssertionError):
                torn += 1
    queue.put((torn, whole))


def test_parallel_writers_and_readers_never_see_a_torn_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Separate processes (like parallel Snakemake jobs) write the same keys at once."""
    keys = [key(seed=s) for s in range(12)]
    context = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    )
    queue = context.Queue()
    writers = [context.Process(target=_writer, args=(str(tmp_path), w, keys, 15)) for w in range(4)]
    reader = context.Process(target=_reader, args=(str(tmp_path), keys, 40, queue))
    for process in [*writers, reader]:
        process.start()
    for process in [*writers, reader]:
        process.join(timeout=120)
        assert process.exitcode == 0, f"{process.name} exited with {process.exitcode}"
    torn, whole = queue.get(timeout=10)
    assert torn == 0 and whole > 0, (torn, whole)
    cache = CallCache(tmp_path)
    with caplog.at_level(logging.WARNING, logger="bloomqg.api.cache"):
        entries = [cache.get(k) for k in keys]
    assert all(e is not None for e in entries), "every key must end with a whole entry"
    assert "corrupt" not in caplog.text
    assert {json.loads(cache.path_for(k).read_text())["key"] for k in keys} == set(keys)
    assert not list(tmp_path.glob("*/*.tmp")), "temporary files must not be left behind"
