"""A rule script's first line: :func:`start_job` sets up the job's log and takes its GPUs.

One call instead of two each script must remember: a script that set up its log but forgot to
claim its GPUs ran its model across every GPU of the workstation (``probe_judge`` did), and
``tests/integration/test_job_logs.py`` checks every rule script starts with this call.
"""

from __future__ import annotations

from pathlib import Path

from bloomqg.devices import DeviceClaim, claim_job_gpus
from bloomqg.logs import configure_job_logging


def start_job(snakemake: object, log_path: str | Path | None = None) -> DeviceClaim:
    """Configure the job's log (``log_path``, by default the rule's first log file), then give
    the job the GPUs its rule's ``gpu`` resource asks for, none when it asks for none (see
    :func:`bloomqg.devices.claim_gpus`); before anything initialises CUDA, so first thing."""
    configure_job_logging(getattr(snakemake, "log")[0] if log_path is None else log_path)
    return claim_job_gpus(snakemake)
