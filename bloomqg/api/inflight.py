"""Calls a live Batch API job is paying for, so that no other job pays for them again.

Batch jobs keep ``<cache_dir>/batches/<digest>.json`` for every batch they submitted (its
``custom_id`` list is the call-cache keys) and hold an exclusive ``flock`` on
``<digest>.lock`` until its answers are cached (:mod:`bloomqg.api.batch`). They check the cache,
scan those files and save their own under :data:`SUBMIT_LOCK`, and before adding a call to a
batch they check that no sync job holds its claim (:meth:`~bloomqg.api.cache.CallCache.claim`).
A sync job, holding a call's claim and finding no answer, looks under the same lock for a live
batch holding the call (:class:`InFlightBatches`) and waits for it to end before paying itself.
Either way round, each call is paid once however the jobs that need it are set to run.
A sync job whose calls an unfinished batch holds after that batch's job died
(:meth:`InFlightBatches.held_by_dead_jobs`) takes that batch up and waits for it
(:meth:`~bloomqg.api.batch.BatchRunner.take_up`): the batch is paid for whether or not its
answers are read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from bloomqg.api.cache import CallCache, held_lock, try_lock

#: The lock (in the batch folder) under which the cache is checked, the unfinished batches are
#: scanned and a new batch's state saved.
SUBMIT_LOCK = ".submit.lock"


def batches_dir(cache: CallCache) -> Path:
    """Where batch jobs keep their state files and locks, beside the cache they fill."""
    return cache.directory / "batches"


def lock_is_free(path: Path) -> bool:
    """No process holds the ``flock`` on ``path`` at this moment."""
    fd = try_lock(path)
    if fd is None:
        return False
    os.close(fd)
    return True


def claim_is_free(cache: CallCache, key: str) -> bool:
    """No sync job holds ``key``'s claim at this moment (it may be paying for the call)."""
    return lock_is_free(cache.claim_path(key))


class InFlightBatches:
    """The unfinished batches' calls under one cache: key → the batch's lock file. The state
    files are read again only when the folder changed (a state saved, a batch finished)."""

    def __init__(self, cache: CallCache) -> None:
        self.directory = batches_dir(cache)
        self._seen_mtime_ns: int | None = None
        self._locks: dict[str, Path] = {}

    def lock_for(self, key: str) -> Path | None:
        """The lock file of the unfinished batch that holds ``key``, if one does."""
        try:
            mtime_ns = self.directory.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        if mtime_ns != self._seen_mtime_ns:
            locks: dict[str, Path] = {}
            for path in self.directory.glob("*.json"):
                if path.name.endswith(".done.json"):
                    continue
                try:
                    keys = json.loads(path.read_text()).get("custom_ids") or ()
                except (FileNotFoundError, ValueError, AttributeError):
                    continue  # finished meanwhile, or not a state file: the batch job says which
                locks.update(dict.fromkeys(keys, path.with_suffix(".lock")))
            self._locks, self._seen_mtime_ns = locks, mtime_ns
        return self._locks.get(key)

    def held_by_dead_jobs(self, keys: Iterable[str]) -> set[str]:
        """Those of ``keys`` that an unfinished batch holds whose job is gone (its lock free)."""
        free: dict[Path, bool] = {}
        held: set[str] = set()
        for key in keys:
            lock = self.lock_for(key)
            if lock is None:
                continue
            if lock not in free:
                free[lock] = lock_is_free(lock)
            if free[lock]:
                held.add(key)
        return held

    async def wait_for(self, key: str) -> bool:
        """Wait while a live batch job holds ``key``; True when one held it (the caller then
        looks in the cache again). Takes :data:`SUBMIT_LOCK`, so a batch job saving a state at
        this moment is either seen here or sees this job's claim."""
        if not self.directory.is_dir():
            return False
        async with held_lock(self.directory / SUBMIT_LOCK):
            lock = self.lock_for(key)
        if lock is None:
            return False
        async with held_lock(lock):  # free at once when that job is gone
            return True
