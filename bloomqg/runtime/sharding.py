"""Splitting a stage's rows into shards: contiguous, balanced, covering every row once."""

from __future__ import annotations

from collections import Counter

import pandas as pd


def shard_bounds(n_rows: int, shard: int, n_shards: int) -> tuple[int, int]:
    """Half-open row range ``[start, stop)`` of ``shard`` (0-based) out of ``n_shards``.

    Sizes differ by at most one row; shards beyond the rows are empty, never an error, so a
    config with more shards than items still plans.
    """
    if n_shards < 1:
        raise ValueError(f"n_shards must be ≥ 1, got {n_shards}")
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard {shard} is outside 0..{n_shards - 1}")
    base, extra = divmod(n_rows, n_shards)
    start = shard * base + min(shard, extra)
    stop = start + base + (1 if shard < extra else 0)
    return start, stop


def shard_rows(frame: pd.DataFrame, shard: int, n_shards: int) -> pd.DataFrame:
    """The rows of ``frame`` that belong to ``shard``, in their original order."""
    start, stop = shard_bounds(len(frame), shard, n_shards)
    return frame.iloc[start:stop].reset_index(drop=True)


def merge_shards(frames: list[pd.DataFrame], expected_ids: list[str], key: str) -> pd.DataFrame:
    """Concatenate shard outputs, checking that every expected id appears exactly once."""
    merged = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    ids = merged[key].tolist() if len(merged) else []
    duplicated = sorted(i for i, count in Counter(ids).items() if count > 1)
    missing = sorted(set(expected_ids) - set(ids))
    unexpected = sorted(set(ids) - set(expected_ids))
    if duplicated or missing or unexpected:
        raise ValueError(
            f"shards do not cover the prompts exactly once: duplicated {duplicated[:5]}, "
            f"missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    order = {identifier: position for position, identifier in enumerate(expected_ids)}
    return merged.sort_values(key, key=lambda s: s.map(order)).reset_index(drop=True)
