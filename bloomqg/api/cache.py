"""Content-addressed on-disk cache of chat-completion API calls.

A call is identified by what determines its answer — the model name, the messages, the decoding
parameters (temperature, top_p, max tokens, seed) and the response schema — never by the
endpoint's URL, so the same call through a proxy or a mirror is still a hit. The key is the
sha256 of the canonical JSON of those fields.

Entries live in sharded sub-directories (``<dir>/<key[:2]>/<key>.json``) so no directory holds
tens of thousands of files. Several processes (parallel Snakemake jobs) may write the same
directory: each entry is written to a temporary file in its shard and moved into place with
:func:`os.replace`, which is atomic on POSIX, so a reader sees either nothing or a whole entry.
A truncated or otherwise unreadable entry (a crash on a file system without atomic rename, a
disk-full write) is logged and treated as a miss; the next successful call overwrites it.

Only successful responses are stored: a failure must be retried on the next run, not replayed.

Two jobs that need the same call at the same time (a judge's own job and its bias probes, two
studies sharing a cache) would both miss and both pay. :meth:`CallCache.claim` prevents that:
the first to claim a key holds an exclusive ``flock`` on a claim file of its shard until its
answer is stored; a second claimant waits, then finds the answer in the cache. A claim dies with
its process (the kernel drops the lock), so a killed job never blocks the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Mapping, Sequence

log = logging.getLogger(__name__)

_KEY_PATTERN = re.compile(r"[0-9a-f]{64}")
#: Sub-directory names: the first two hex digits of the key.
SHARDS = tuple(f"{i:02x}" for i in range(256))

#: How often a waiting claimant tries the lock again (seconds).
CLAIM_POLL_S = 0.05
#: Bumped when the key's fields or the entry layout change, so old entries are never misread.
CACHE_FORMAT_VERSION = 1


def try_lock(path: Path) -> int | None:
    """An exclusive ``flock`` on ``path`` (created if missing) if no other process holds one: the
    descriptor that holds it (closing it releases the lock), or None. The kernel drops a lock
    with its process, so one a killed job held is free again."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.asynccontextmanager
async def held_lock(path: Path) -> AsyncIterator[None]:
    """Hold :func:`try_lock`'s lock on ``path``, waiting for it without blocking the event loop."""
    while (fd := try_lock(path)) is None:
        await asyncio.sleep(CLAIM_POLL_S)
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@dataclass(frozen=True)
class CachedResponse:
    """What a successful call returned: the answer text, its usage and why it stopped."""

    text: str
    finish_reason: str
    n_prompt_tokens: int | None = None
    n_completion_tokens: int | None = None
    #: the model name the endpoint reported (may carry a dated snapshot suffix)
    response_model: str | None = None


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no insignificant whitespace and raw UTF-8: one text per value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def call_cache_key(
    model: str,
    messages: Sequence[Mapping[str, str]],
    *,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int | None,
    response_schema: Mapping[str, Any] | None = None,
) -> str:
    """Hex sha256 identifying one API call by its content (never by the endpoint URL).

    Numbers are normalised (``0`` and ``0.0`` are the same temperature) and messages are reduced
    to plain dicts, so the key is stable across Python types that mean the same call.
    """
    if not isinstance(model, str) or not model:
        raise ValueError(f"cache key: model must be a non-empty string, got {model!r}")
    payload = {
        "version": CACHE_FORMAT_VERSION,
        "model": model,
        "messages": [dict(message) for message in messages],
        "temperature": float(temperature),
        "top_p": float(top_p),
        "max_tokens": int(max_tokens),
        "seed": None if seed is None else int(seed),
        "response_schema": None if response_schema is None else dict(response_schema),
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


class CallCache:
    """A directory of cached API responses, safe for concurrent readers and writers."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # All 256 shards up front: one mkdir per write costs more than the write on a busy disk.
        existing = set(os.listdir(self.directory))
        for shard in SHARDS:
            if shard not in existing:
                (self.directory / shard).mkdir(exist_ok=True)

    def path_for(self, key: str) -> Path:
        """Where the entry for ``key`` lives (it may not exist)."""
        if not isinstance(key, str) or not _KEY_PATTERN.fullmatch(key):
            raise ValueError(f"cache key must be 64 lowercase hex digits, got {key!r}")
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> CachedResponse | None:
        """The cached response for ``key``, or None on a miss (absent, corrupt or foreign entry)."""
        path = self.path_for(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            log.warning("call cache: cannot read %s (%s); treating it as a miss", path, error)
            return None
        try:
            entry = json.loads(raw)
            if entry.get("version") != CACHE_FORMAT_VERSION or entry.get("key") != key:
                raise ValueError("version or key does not match the file name")
            response = entry["response"]
            cached = CachedResponse(
                text=response["text"],
                finish_reason=response["finish_reason"],
                n_prompt_tokens=response.get("n_prompt_tokens"),
                n_completion_tokens=response.get("n_completion_tokens"),
                response_model=response.get("response_model"),
            )
            if not isinstance(cached.text, str) or not isinstance(cached.finish_reason, str):
                raise ValueError("text and finish_reason must be strings")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
            # RecursionError: an entry nested thousands deep is as corrupt as a truncated one
            log.warning("call cache: corrupt entry %s (%s); treating it as a miss", path, type(error).__name__
                        if isinstance(error, RecursionError) else error)
            return None
        return cached

    def put(self, key: str, response: CachedResponse) -> Path:
        """Store ``response`` under ``key`` atomically (temp file in the shard, then os.replace)."""
        if response.finish_reason == "error":
            raise ValueError("call cache: failed calls are never cached")
        path = self.path_for(key)
        data = canonical_json(
            {"version": CACHE_FORMAT_VERSION, "key": key, "response": asdict(response)}
        ).encode("utf-8")
        # The temp name is unique per process and thread, so concurrent writers never share one;
        # it sits in the same directory, so os.replace never crosses file systems.
        tmp_path = path.parent / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        except FileNotFoundError:  # the shard directory was removed under us
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp_path, path)
        except BaseException:
            tmp_path.unlink(missing_ok=True)
            raise
        return path

    def claim_path(self, key: str) -> Path:
        """The claim file (a lock, never read) that ``key`` shares with the keys of its first four
        hex digits: a shard holds at most 256 of them, and two keys sharing one only wait."""
        return self.path_for(key).parent / f".claim-{key[:4]}"

    @contextlib.asynccontextmanager
    async def claim(self, key: str) -> AsyncIterator[None]:
        """Hold the exclusive claim on ``key`` (across processes) while the caller checks the
        cache, pays for the call and stores its answer; waits, without blocking the event loop,
        while another holder pays for it. Check the cache again once inside: the holder before
        you may have stored the answer."""
        async with held_lock(self.claim_path(key)):
            yield

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        """Number of entry files (readable or not); used by tests and benchmarks."""
        return sum(1 for _ in self.directory.glob("??/*.json"))
