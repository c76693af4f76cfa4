"""The conda environment files are valid as written: parsed, conda-forge only, every package
pinned, names as conda-forge spells them, no pip options; post-deploy scripts parse and pin."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from tests.conftest import REPO

ENV_FILES = sorted((REPO / "envs").glob("*.yaml"))

#: conda-forge's names for what bloomqg uses (feedstock names; several differ from PyPI's).
CONDA_FORGE_NAMES = {
    "python", "pip", "pytorch", "pytorch-gpu", "transformers", "accelerate", "sentence-transformers",
    "gguf", "openai", "httpx", "aiohttp", "pandas", "pyarrow", "numpy", "scipy", "pyyaml", "tqdm",
    "openpyxl", "matplotlib", "jinja2", "jsonschema", "krippendorff", "tabulate", "safetensors",
    "tokenizers", "scikit-learn", "skops", "psutil",
}
#: PyPI spellings conda-forge does not use, with the name it does.
PYPI_ONLY = {"torch": "pytorch", "PyYAML": "pyyaml", "Jinja2": "jinja2"}
PINNED = re.compile(r"^(?P<name>[a-z0-9][a-z0-9._-]*)=(?P<version>\d+(\.\d+)*)$")


def test_there_are_environment_files():
    assert {path.name for path in ENV_FILES} >= {"analysis.yaml", "generation.yaml"}


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_environment_file_is_valid_as_written(path):
    env = yaml.safe_load(path.read_text())
    assert set(env) <= {"name", "channels", "dependencies"}, f"{path.name}: unknown top-level keys"
    assert env["channels"] == ["conda-forge", "nodefaults"], f"{path.name}: conda-forge only"
    names = []
    for entry in env["dependencies"]:
        assert isinstance(entry, str), (
            f"{path.name}: {entry!r}: no pip section (pip lines cannot carry options such as "
            "--no-deps; installs without dependencies go in a post-deploy script)"
        )
        match = PINNED.match(entry)
        assert match, f"{path.name}: {entry!r} is not pinned as name=version"
        name = match["name"]
        assert name not in PYPI_ONLY, f"{path.name}: {name!r} is PyPI's name; conda-forge's is {PYPI_ONLY[name]!r}"
        assert name in CONDA_FORGE_NAMES, f"{path.name}: {name!r} is not a conda-forge name this project knows"
        names.append(name)
    assert len(names) == len(set(names)), f"{path.name}: a package is listed twice"
    assert "python" in names


@pytest.mark.parametrize("script", sorted((REPO / "envs").glob("*.post-deploy.sh")), ids=lambda p: p.name)
def test_post_deploy_script_parses_and_pins(script):
    assert (REPO / "envs" / script.name.replace(".post-deploy.sh", ".yaml")).exists(), "no environment for it"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    installs = [line for line in script.read_text().splitlines() if "pip install" in line]
    assert installs
    for line in installs:
        packages = [word.strip('"\'') for word in line.split("pip install", 1)[1].split() if not word.startswith("-")]
        assert packages and all(re.fullmatch(r"[A-Za-z0-9._-]+==[\d.]+", p) for p in packages), line
