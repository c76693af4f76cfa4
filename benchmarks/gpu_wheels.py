"""Wheels for the device check's ``engines`` step: what a served engine needs on the lent GPU machine.

The lent machine (CPython 3.12, x86-64, no network) has torch and transformers but not the
packages ``transformers serve`` and our OpenAI client need (pydantic, fastapi, uvicorn,
starlette, openai with its aiohttp transport, and jsonschema, which checks the client's settings). Run this here, where the package index is
reachable; it downloads their wheels, each root pinned to the version this interpreter has (the
one the tests pass with) and every dependency with it, for that machine's Python and platform,
into ``.whl/`` (ignored by git). A device run then names ``.whl`` in ``carry``, and
``benchmarks/gpu_check.sh`` installs them into a temporary folder first (``--no-index``)::

    .venv/bin/python benchmarks/gpu_wheels.py          # about 10 MB, 30 wheels
    # device run: carry [".whl"], command: benchmarks/gpu_check.sh

The whole closure travels, not only what the image lacks, so the versions that meet there are
the ones tested here; the image's torch, transformers and tokenizers are not among them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: What the served engine and its client import, beyond what the lent machine's image holds.
ROOTS = ("openai", "fastapi", "uvicorn", "pydantic", "starlette", "jsonschema")
#: The openai extra our transport uses (DefaultAioHttpClient).
EXTRAS = {"openai": "[aiohttp]"}
#: The lent machine's interpreter and the platform tags its pip accepts.
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64", "manylinux_2_5_x86_64")
#: Must leave room in the 64 MiB a device run carries with the working tree.
MAX_MB = 40.0


def pinned_roots() -> list[str]:
    """Each root as ``name[extra]==version`` of this interpreter's copy."""
    return [f"{name}{EXTRAS.get(name, '')}=={importlib.metadata.version(name)}" for name in ROOTS]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=REPO / ".whl")
    args = parser.parse_args()
    args.dest.mkdir(exist_ok=True)
    for old in args.dest.glob("*.whl"):  # one version of each: two stop the install there
        old.unlink()
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
               "--python-version", PYTHON_VERSION, "--implementation", "cp",
               *(part for tag in PLATFORMS for part in ("--platform", tag)), "-d", str(args.dest), *pinned_roots()]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"gpu_wheels: pip download failed:\n{done.stderr[-3000:]}", file=sys.stderr)
        return 1
    wheels = sorted(args.dest.glob("*.whl"))
    size_mb = sum(w.stat().st_size for w in wheels) / 2**20
    for wheel in wheels:
        print(wheel.name)
    print(f"gpu_wheels: {len(wheels)} wheels, {size_mb:.1f} MiB in {args.dest}", file=sys.stderr)
    if size_mb > MAX_MB:
        print(f"gpu_wheels: over {MAX_MB} MiB: a device run carries at most 64 MiB with the tree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
