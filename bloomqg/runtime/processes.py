"""The processes around a job, read with psutil: one walk up the process tree and one answer to
"is this Snakemake?", for the run lock (is another run alive in this folder?) and for a server's
owner (the Snakemake process above the job that started it).

A process is identified by its pid and its start time together, so a pid the system reused
for another process is not taken for the one that is gone.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class Process:
    """A live process: pid, start time (seconds since the epoch, psutil's ``create_time``), argv."""

    pid: int
    start: float
    argv: tuple[str, ...]

    def describe(self) -> str:
        return f"{' '.join(self.argv)[:120]} (pid {self.pid})"


def read_process(pid: int) -> Process | None:
    """The live (not zombie) process ``pid``, or None."""
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            if process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                return None
            return Process(pid, process.create_time(), tuple(process.cmdline()))
    except (psutil.Error, OSError):
        return None


def parent_pid(pid: int) -> int:
    """The parent of ``pid``; 0 when it is gone."""
    try:
        return psutil.Process(pid).ppid()
    except (psutil.Error, OSError):
        return 0


def ancestors(pid: int | None = None) -> set[int]:
    """``pid`` (this process by default) and every process above it."""
    pid = os.getpid() if pid is None else pid
    found = set()
    while pid > 1 and pid not in found:
        found.add(pid)
        pid = parent_pid(pid)
    return found


def snakemake_position(argv: Sequence[str]) -> int | None:
    """Index of the word that runs Snakemake (``…/bin/snakemake``, or ``-m snakemake``'s)."""
    for position, word in enumerate(argv):
        if Path(word).name == "snakemake":
            return position
    return None


def is_snakemake(argv: Sequence[str]) -> bool:
    """``snakemake …``, ``python …/bin/snakemake …``, ``python -m snakemake …`` (also under a
    wrapper such as ``timeout`` or ``nice``)."""
    return snakemake_position(argv) is not None


def is_snakemake_work(argv: Sequence[str]) -> bool:
    """Snakemake itself, or a job's ``script:`` it started (``.snakemake/scripts/…``), which
    outlives a Snakemake killed alone and still writes outputs."""
    return is_snakemake(argv) or any(".snakemake/scripts/" in word for word in argv)


def processes_working_in(directory: Path, *, skip: set[int] = frozenset()) -> list[Process]:
    """Live processes whose working directory is ``directory`` (pids in ``skip`` left out);
    processes of other users, or gone while read, are not listed."""
    directory = directory.resolve()
    found = []
    for process in psutil.process_iter(["pid"]):
        if process.pid in skip:
            continue
        try:
            if Path(process.cwd()).resolve() != directory:
                continue
            found.append(Process(process.pid, process.create_time(), tuple(process.cmdline())))
        except (psutil.Error, OSError):
            continue
    return found
