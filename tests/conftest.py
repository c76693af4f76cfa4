"""Shared fixtures: where the repository and the paper's reference data are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """The paper's release beside the project (../shared/data), or $BLOOMQG_SHARED_DATA."""
    return Path(os.environ.get("BLOOMQG_SHARED_DATA", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def release_dir() -> Path:
    path = shared_data_dir() / "llm-eval-release"
    if not (path / "dataset" / "computer" / "Data_Structure.csv").exists():
        pytest.skip(f"the paper's release is not at {path} (set BLOOMQG_SHARED_DATA)")
    return path
