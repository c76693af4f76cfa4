"""Shards cover every row exactly once, balanced, in order."""

from __future__ import annotations

import pandas as pd
import pytest

from bloomqg.runtime.sharding import merge_shards, shard_bounds, shard_rows


@pytest.mark.parametrize("n_rows,n_shards", [(0, 1), (10, 1), (10, 3), (3, 5), (1406, 4)])
def test_shards_partition_the_rows(n_rows, n_shards):
    bounds = [shard_bounds(n_rows, s, n_shards) for s in range(n_shards)]
    covered = [i for start, stop in bounds for i in range(start, stop)]
    assert covered == list(range(n_rows))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_bad_shard_numbers_are_errors():
    with pytest.raises(ValueError):
        shard_bounds(10, 3, 3)
    with pytest.raises(ValueError):
        shard_bounds(10, 0, 0)


def test_merge_checks_coverage_and_restores_order():
    frame = pd.DataFrame({"prompt_id": list("abcde"), "x": range(5)})
    parts = [shard_rows(frame, s, 2) for s in range(2)]
    merged = merge_shards(parts[::-1], list("abcde"), key="prompt_id")
    assert merged["prompt_id"].tolist() == list("abcde")
    with pytest.raises(ValueError, match="duplicated"):
        merge_shards(parts + parts[:1], list("abcde"), key="prompt_id")
    with pytest.raises(ValueError, match="missing"):
        merge_shards(parts[:1], list("abcde"), key="prompt_id")
