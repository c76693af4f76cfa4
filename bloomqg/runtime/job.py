"""A rule script's first line: :func:`start_job` sets up the job's log and takes its GPUs.

One call instead of two each script must remember: a script that set up its log but forgot to
claim its GPUs ran its model across every GPU of the workstation (``probe_judge`` did), and
``tests/integration/test_job_logs.py`` checks every rule script starts with this call.
"""

from __future__ import annotations

import os
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
    return claim_job_gpus(snakemake)


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
