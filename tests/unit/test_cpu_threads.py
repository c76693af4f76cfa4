"""A job's CPU threads: its rule's count, capped by ``OMP_NUM_THREADS`` (bloomqg.devices)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bloomqg.devices import THREADS_ENV, DeviceError, job_cpu_threads
from tests.support.tiny_models import save_standin


def test_the_rules_count_unless_the_environment_caps_it() -> None:
    assert job_cpu_threads(8, {}) == 8
    assert job_cpu_threads(8, {THREADS_ENV: ""}) == 8
    assert job_cpu_threads(8, {THREADS_ENV: "2"}) == 2
    assert job_cpu_threads(1, {THREADS_ENV: "4"}) == 1   # a cap, never a floor
    assert job_cpu_threads(8, {THREADS_ENV: "3,1"}) == 3  # OpenMP's nested form: the first level


@pytest.mark.parametrize("value", ["0", "two", "-1", ",2"])
def test_a_cap_that_is_no_count_is_named(value: str) -> None:
    with pytest.raises(DeviceError, match=f"{THREADS_ENV}='{value}'"):
        job_cpu_threads(4, {THREADS_ENV: value})


def test_a_job_asking_for_no_thread_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        job_cpu_threads(0, {})


def test_the_generator_runs_torch_on_the_capped_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from bloomqg.generation.hf.generator import HFTextGenerator

    folder = save_standin("llama", tmp_path / "standin")
    before = torch.get_num_threads()
    monkeypatch.setenv(THREADS_ENV, "1")
    try:
        generator = HFTextGenerator(folder, num_threads=2, batch_size=2)
        assert torch.get_num_threads() == 1
        assert generator.provenance["num_threads"] == 1
    finally:
        torch.set_num_threads(before)
