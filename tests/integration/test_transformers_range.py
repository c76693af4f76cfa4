"""The decode-loop tests again on the lowest transformers the project supports.

transformers renamed the cache keyword of ``forward`` (``past_key_values`` up to 5.23, ``cache``
from 5.24); a loop passing the wrong one runs without error and writes text computed without
context.  This test installs the lowest supported version (with the huggingface-hub and
tokenizers it needs) into a cached folder beside the current environment, and runs the
equivalence tests there in a subprocess.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bloomqg.generation.hf.model_support import TRANSFORMERS_TESTED

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
#: The lowest supported transformers and the companions its metadata requires.
LOWEST = ["transformers==5.2.0", "huggingface-hub>=1.3,<2", "tokenizers>=0.22,<=0.23.0"]
TESTS = ["tests/unit/test_decode_equivalence.py", "tests/unit/test_model_support.py", "tests/unit/test_remote_code.py",
         "tests/unit/test_kv_cache.py", "tests/unit/test_hf_batches.py",
         "tests/integration/test_paper_models.py"]


def test_supported_range_is_stated_once_everywhere():
    pyproject = (REPO / "pyproject.toml").read_text()
    spec = re.search(r'"transformers\[serving\]([^"]+)"', pyproject).group(1)
    assert spec.split(",") == list(TRANSFORMERS_TESTED)
    assert LOWEST[0] == f"transformers=={TRANSFORMERS_TESTED[0].removeprefix('>=')}.0"
    # the conda environment pins one version, which must lie inside the tested range
    from packaging.specifiers import SpecifierSet

    conda = (REPO / "envs" / "generation.yaml").read_text()
    pinned = re.search(r"^\s*- transformers=(\S+)", conda, re.M).group(1)
    assert pinned in SpecifierSet(",".join(TRANSFORMERS_TESTED)), pinned


def lowest_site(tmp_path_factory) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bloomqg" / "test-envs"
    target = cache / LOWEST[0].replace("==", "-")
    if (target / ".complete").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade",
                           "--target", str(target), *LOWEST], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        if "No matching distribution" in done.stderr or "Could not fetch" in done.stderr:
            pytest.skip(f"cannot install {LOWEST[0]} from the package index: {done.stderr[-300:]}")
        raise AssertionError(f"pip install --target failed:\n{done.stderr[-2000:]}")
    (target / ".complete").write_text(" ".join(LOWEST))
    return target


#: ``python -c`` program: print the version of the transformers imported, then ``pytest ARGS``.
RUN_WITH_VERSION = ("import sys, pytest, transformers; print('transformers', transformers.__version__, flush=True); "
                    "sys.exit(pytest.main(sys.argv[1:]))")


def test_equivalence_tests_pass_on_the_lowest_supported_transformers(tmp_path_factory):
    site = lowest_site(tmp_path_factory)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    # one interpreter says which transformers it imported, then runs the tests with it
    run = subprocess.run([sys.executable, "-c", RUN_WITH_VERSION, "-q", "-p", "no:cacheprovider", *TESTS],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    version = run.stdout.split("\n", 1)[0].removeprefix("transformers ")
    assert version == LOWEST[0].split("==")[1], run.stdout[:300] + run.stderr[-2000:]
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert run.returncode == 0, f"on transformers {version}:\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary
