"""make setup's installer: uv where it can be had, pip otherwise (standard library only).

    python .ci/install.py venv DIR              a new environment at DIR
    python .ci/install.py pip DIR ARGS...       pip install ARGS into it (uv pip install)
    python .ci/install.py uninstall DIR PKGS... remove packages from it

Run by the bootstrap interpreter ($(PYTHON) in the Makefile), whose version the environment gets.
uv is the one on PATH, else the one the bootstrap interpreter has, else one pip installs into
the bootstrap interpreter from the package index; if none, or ``INSTALLER=pip``, pip does it
all, as before. uv reads its own settings, not pip's, so pip's configuration (pip.conf and
``PIP_*``: find-links, index-url, extra-index-url, constraint) is passed to it as flags, with
pip's way of choosing among indexes (the best version from any), so both install the same
files. Environments made by uv are seeded with pip, so pip stays usable in them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

#: pip settings that choose what is installed, and the uv flag each becomes.
PIP_TO_UV = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}


def pip_settings(listing: str) -> dict[str, list[str]]:
    """The settings of :data:`PIP_TO_UV` in ``pip config list``'s output (``scope.key='value'``
    lines; the environment's ``:env:`` scope wins over files, as in pip), values split on spaces."""
    found: dict[str, tuple[int, list[str]]] = {}
    for line in listing.splitlines():
        name, sep, value = line.partition("=")
        if not sep or "." not in name:
            continue
        scope, key = name.rsplit(".", 1)
        if key not in PIP_TO_UV:
            continue
        rank = 2 if scope == ":env:" else 1
        values = shlex.split(value.strip().strip("'\""))
        if key not in found or rank >= found[key][0]:
            found[key] = (rank, values)
    return {key: values for key, (_, values) in found.items()}


def uv_flags(settings: dict[str, list[str]]) -> list[str]:
    """``uv pip install`` flags for pip's settings (see the module docstring)."""
    flags: list[str] = []
    for key, flag in PIP_TO_UV.items():
        for value in settings.get(key, []):
            flags += [flag, value]
    if settings.get("extra-index-url") or settings.get("find-links"):
        flags += ["--index-strategy", "unsafe-best-match"]  # pip's rule: the best version from any source
    return flags


def find_uv(python: str) -> list[str] | None:
    """The command that runs uv (see the module docstring), or None (then pip)."""
    if os.environ.get("INSTALLER") == "pip":
        return None
    if path := shutil.which("uv"):
        return [path]
    module = [python, "-m", "uv"]
    if subprocess.run([*module, "--version"], capture_output=True).returncode == 0:
        return module
    print("install: uv not found; installing it into the bootstrap interpreter", file=sys.stderr)
    if subprocess.run([python, "-m", "pip", "install", "--quiet", "uv"]).returncode != 0:
        print("install: uv could not be installed; pip does the set-up", file=sys.stderr)
        return None
    return module if subprocess.run([*module, "--version"], capture_output=True).returncode == 0 else None


def run(command: list[str]) -> None:
    print("+", shlex.join(command), flush=True)
    if subprocess.run(command).returncode != 0:
        sys.exit(f"install: {shlex.join(command)} failed")


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] not in ("venv", "pip", "uninstall"):
        sys.exit(__doc__)
    action, venv, args = argv[0], Path(argv[1]), argv[2:]
    python = sys.executable
    uv = find_uv(python)
    env_python = str(venv / "bin" / "python")
    if action == "venv":
        if uv:
            run([*uv, "venv", "--quiet", "--seed", "--python", python, str(venv)])
        else:
            run([python, "-m", "venv", str(venv)])
            run([env_python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    elif action == "pip":
        if uv:
            listing = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
            # --compile-bytecode: pip's default, not uv's. Without .pyc files, and with a read-only
            # cache (PYTHONDONTWRITEBYTECODE), every job compiles torch's and transformers' sources
            # anew: 3.9 s of a MiniLM judge job's 8 s (docs/operations.md, "Bytecode").
            run([*uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", env_python,
                 *uv_flags(pip_settings(listing)), *args])
        else:
            run([env_python, "-m", "pip", "install", "--quiet", *args])
    elif uv:
        run([*uv, "pip", "uninstall", "--quiet", "--python", env_python, *args])
    else:
        run([env_python, "-m", "pip", "uninstall", "--quiet", "-y", *args])


if __name__ == "__main__":
    main(sys.argv[1:])
