"""One set of GPUs per job on a workstation with several: a lock-file pool of device indices.

Snakemake's ``--resources gpu=4`` only counts: it lets four one-GPU jobs run at once but tells
none of them which GPU is its own, so each would load with ``device_map="auto"`` over all four.
A job that asks for ``gpu=N`` therefore takes N device indices from a pool before torch
initialises CUDA and exports them as ``CUDA_VISIBLE_DEVICES``:

- The pool is one lock file per GPU, ``.snakemake/bloomqg-gpus/<host>/gpu-<i>.lock``, held with
  ``flock`` for the life of the job's process. The kernel drops the lock when the process ends,
  however it ends (``kill -9`` and the out-of-memory killer included), so no index is ever lost.
  The host name keeps apart nodes that share the working directory over a network file system.
- The machine's GPU count comes from ``nvidia-smi``; ``BLOOMQG_GPU_COUNT`` overrides it (a
  pretend count for tests, or fewer GPUs than the machine has), and ``BLOOMQG_GPUS`` names the
  indices to share (e.g. ``2,3``: the other two belong to someone else). Indices are
  ``nvidia-smi``'s: the job also gets ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` unless it is set.
- Where a scheduler already chose the devices (SLURM: ``SLURM_JOB_ID`` is set), or
  ``CUDA_VISIBLE_DEVICES`` is already set, that assignment is kept and nothing is locked.
- A job that asks for no GPU on a machine with GPUs gets ``CUDA_VISIBLE_DEVICES=""``: it runs on
  the CPU, as it would under SLURM, instead of spreading over GPUs other jobs hold.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, MutableMapping

log = logging.getLogger(__name__)

#: The pool's folder, relative to the run's directory (Snakemake's working directory).
POOL_DIR = Path(".snakemake") / "bloomqg-gpus"
#: Pretend (or limit) the machine's GPU count; for tests on a CPU and for sharing a machine.
COUNT_ENV = "BLOOMQG_GPU_COUNT"
#: Comma-separated device indices the pool hands out (default: 0 .. count-1).
INDICES_ENV = "BLOOMQG_GPUS"
#: How often a job that finds too few free GPUs looks again, and how often it says it waits.
POLL_S = 0.5
WAIT_REPORT_S = 60.0


class DeviceError(RuntimeError):
    """GPUs cannot be given to a job; the message says why and what to change."""

    #: First line of the failed job's log (bloomqg.store.logs).
    what_to_do = ("the job could not get its GPUs: make the model entry's gpus fit the machine, or set "
                  "BLOOMQG_GPUS / BLOOMQG_GPU_COUNT to the devices this machine shares (docs/operations.md), "
                  "then run the workflow again.")


@dataclass
class DeviceClaim:
    """The devices a job holds: ``indices`` locked in ``pool`` (empty when none were locked)."""

    visible: str | None
    source: str
    indices: tuple[int, ...] = ()
    pool: Path | None = None
    _fds: list[int] = field(default_factory=list, repr=False)

    def release(self) -> None:
        """Drop the locks now (process exit does the same)."""
        while self._fds:
            os.close(self._fds.pop())


def machine_gpu_indices(environ: Mapping[str, str] | None = None) -> tuple[int, ...]:
    """The device indices this machine shares among jobs (see the module docstring)."""
    environ = os.environ if environ is None else environ
    listed = environ.get(INDICES_ENV, "").strip()
    if listed:
        try:
            return tuple(int(part) for part in listed.split(","))
        except ValueError:
            raise DeviceError(f"{INDICES_ENV}={listed!r}: expected device indices such as 0,1,3") from None
    pretend = environ.get(COUNT_ENV, "").strip()
    if pretend:
        if not (pretend.isascii() and pretend.isdigit()):  # "²".isdigit(), but int("²") raises
            raise DeviceError(f"{COUNT_ENV}={pretend!r}: expected a whole number of GPUs")
        return tuple(range(int(pretend)))
    return tuple(range(_nvidia_smi_count()))


def _nvidia_smi_count() -> int:
    """GPUs ``nvidia-smi`` lists; 0 where there is no NVIDIA driver."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        listing = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError) as error:
        log.warning("nvidia-smi failed (%s); treating this machine as having no GPU", error)
        return 0
    return sum(1 for line in listing.splitlines() if line.strip())


def scheduler_assignment(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """``(CUDA_VISIBLE_DEVICES, who set it)`` when the devices were chosen before the job
    started, else None."""
    if environ.get("SLURM_JOB_ID"):
        gpus = environ.get("CUDA_VISIBLE_DEVICES", environ.get("SLURM_JOB_GPUS", ""))
        return gpus, "SLURM"
    if "CUDA_VISIBLE_DEVICES" in environ:
        return environ["CUDA_VISIBLE_DEVICES"], "CUDA_VISIBLE_DEVICES set before the job"
    return None


def claim_gpus(
    count: int,
    *,
    run_dir: str | Path = ".",
    timeout_s: float | None = None,
    environ: MutableMapping[str, str] | None = None,
) -> DeviceClaim:
    """Give this process ``count`` GPUs of its own and export them as ``CUDA_VISIBLE_DEVICES``
    in ``environ``, the environment read and written (``os.environ`` by default). Call before
    anything initialises CUDA.

    Waits while other jobs hold too many of the pool (Snakemake's ``gpu`` cap normally means it
    never has to); ``timeout_s`` bounds the wait (None: no bound). Raises :class:`DeviceError`
    when the job asks for more GPUs than the machine has, or CUDA is already initialised.
    """
    environ = os.environ if environ is None else environ
    _check_cuda_not_initialised()
    kept = scheduler_assignment(environ)
    if kept is not None:
        visible, source = kept
        log.info("GPUs for this job: CUDA_VISIBLE_DEVICES=%r, as %s chose (kept)", visible, source)
        named = [part for part in visible.split(",") if part.strip()]
        if source != "SLURM" and len(named) > count:
            log.warning("CUDA_VISIBLE_DEVICES=%s names %d devices but this job asks for %d, and every job "
                        "started with it sees them all; to share them out one set per job, unset it and "
                        "set %s=%s instead", visible, len(named), count, INDICES_ENV, ",".join(named))
        return DeviceClaim(visible=visible, source=source)
    indices = machine_gpu_indices(environ)
    if not indices:
        log.info("no GPU on this machine; the job runs on the CPU")
        return DeviceClaim(visible=None, source="no GPU on this machine")
    if count == 0:
        environ["CUDA_VISIBLE_DEVICES"] = ""
        log.info("this job asks for no GPU; CUDA_VISIBLE_DEVICES='' keeps it off the %d GPUs "
                 "other jobs hold (a model entry's gpus sets how many it asks for)", len(indices))
        return DeviceClaim(visible="", source="asked for none")
    if count > len(indices):
        raise DeviceError(
            f"this job asks for {count} GPUs but the machine shares {len(indices)} "
            f"(indices {list(indices)}); lower the model entry's gpus, or set {INDICES_ENV}/"
            f"{COUNT_ENV} if the count is wrong"
        )
    pool = Path(run_dir) / POOL_DIR / socket.gethostname()
    pool.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    reported = started
    while True:
        fds, taken = _try_take(pool, indices, count)
        if fds:
            break
        now = time.monotonic()
        if timeout_s is not None and now - started >= timeout_s:
            raise DeviceError(
                f"waited {timeout_s:.0f} s for {count} free GPUs of {list(indices)} in {pool}; "
                "other processes hold them (their pids are in the lock files)"
            )
        if now - reported >= WAIT_REPORT_S:
            log.info("waiting for %d free GPUs of %s (pool %s)", count, list(indices), pool)
            reported = now
        time.sleep(POLL_S)
    visible = ",".join(str(index) for index in taken)
    environ["CUDA_VISIBLE_DEVICES"] = visible
    # nvidia-smi's numbering (CUDA's own default orders by speed), so the indices match its listing
    environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    log.info("GPUs for this job: CUDA_VISIBLE_DEVICES=%s (%d of the %d this machine shares; pool %s)",
             visible, count, len(indices), pool)
    return DeviceClaim(visible=visible, source="pool", indices=taken, pool=pool, _fds=fds)


def _try_take(pool: Path, indices: tuple[int, ...], count: int) -> tuple[list[int], tuple[int, ...]]:
    """Lock ``count`` free indices of ``pool`` at once, or none (an empty list)."""
    fds: list[int] = []
    taken: list[int] = []
    for index in indices:
        fd = os.open(pool / f"gpu-{index}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
        fds.append(fd)
        taken.append(index)
        if len(fds) == count:
            return fds, tuple(taken)
    for fd in fds:  # too few free: hold none, so two waiting jobs cannot starve each other
        os.close(fd)
    return [], ()


def _check_cuda_not_initialised() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise DeviceError("CUDA was initialised before the job took its GPUs; "
                          "claim_gpus must run before anything touches torch.cuda")


def claim_job_gpus(snakemake: object) -> DeviceClaim:
    """:func:`claim_gpus` for a rule script: the count is the rule's ``gpu`` resource."""
    resources = getattr(snakemake, "resources")
    return claim_gpus(int(getattr(resources, "gpu", 0) or 0))
