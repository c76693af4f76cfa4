"""A rule script's first line: :func:`start_job` sets up the job's log, its CPU threads and
takes its GPUs.

One call instead of two each script must remember: a script that set up its log but forgot to
claim its GPUs ran its model across every GPU of the workstation (``probe_judge`` did), and
``tests/integration/test_job_logs.py`` checks every rule script starts with this call.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bloomqg.runtime.devices import DeviceClaim, claim_job_gpus
from bloomqg.store.logs import configure_job_logging
from bloomqg.store.stored_text import register_secret


def start_job(snakemake: object, log_path: str | Path | None = None) -> DeviceClaim:
    """Configure the job's log (``log_path``, by default the rule's first log file), then give
    the job the GPUs its rule's ``gpu`` resource asks for, none when it asks for none (see
    :func:`bloomqg.runtime.devices.claim_gpus`); before anything initialises CUDA, so first thing."""
    configure_job_logging(getattr(snakemake, "log")[0] if log_path is None else log_path)
    hide_configured_secrets(getattr(snakemake, "config", None) or {})
    apply_job_threads(int(getattr(snakemake, "threads", 1) or 1))
    return claim_job_gpus(snakemake)


#: What torch's and the BLAS libraries' thread pools read when they start.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def apply_job_threads(threads: int) -> None:
    """Run the job's torch and BLAS on ``threads`` (the rule's ``threads:``, which Snakemake caps
    at ``--cores`` / ``--max-threads``), so jobs Snakemake runs side by side do not ask for more
    cores than it granted them: torch's default is every core, and threads beyond the free cores
    spin at each barrier (docs/operations.md). Set as the variables, read when torch starts its
    pool (importing torch here would cost each small job a second), and on torch when a job has
    already imported it."""
    threads = max(1, int(threads))
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


def hide_configured_secrets(config: Mapping[str, Any]) -> None:
    """Mask the key of every models and judges entry (the value of its ``api_key_env``, when
    set in the environment) in every text this job logs or writes
    (:func:`bloomqg.store.stored_text.register_secret`), whether or not the job calls its endpoint."""
    for section in ("models", "judges"):
        entries = config.get(section)
        for spec in (entries.values() if isinstance(entries, Mapping) else ()):
            if not isinstance(spec, Mapping):
                continue
            name = spec.get("api_key_env", "OPENAI_API_KEY" if spec.get("backend") == "openai" else None)
            if isinstance(name, str):
                register_secret(os.environ.get(name))
