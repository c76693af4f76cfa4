"""One workflow run per working directory, and no manual unlock after a crash.

``make study`` runs ``python -m bloomqg.runtime.run_lock SNAKEMAKE [ARGS...]``. Before Snakemake starts
this takes an exclusive ``flock`` on ``.snakemake/bloomqg-run.lock`` in the run's directory
(``--directory``/``-d`` or the current one) and hands it to Snakemake, which holds it until it
exits, however it exits: the kernel drops the lock when the process dies, ``kill -9`` included.

- The lock is taken: no other run started this way is alive. Snakemake's own lock
  (``.snakemake/locks/``) left behind is then stale and is removed with ``snakemake --unlock``
  before the run, unless a Snakemake process started some other way (no ``flock``) is still
  working in this directory (found with psutil, on Linux): then nothing is removed and the
  run refuses, naming that process.
- The lock is held: another run is alive; this one refuses at once with a message naming it and
  exit status :data:`EXIT_BUSY`, and touches nothing.

Incomplete outputs of the killed run are Snakemake's to handle (``rerun-incomplete`` in the
default profile).

A plain ``snakemake`` command (the README's, through the default profile) gets the stale-lock
half of this from the workflow itself: ``rules/common.smk`` calls :func:`clear_locks_of_dead_runs`
in Snakemake's main process before it checks its lock. Two runs there are kept apart by
Snakemake's own lock, as always.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import logging
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from bloomqg.runtime.processes import ancestors, is_snakemake_work, processes_working_in, snakemake_position

log = logging.getLogger(__name__)

#: The flock file, relative to the run's directory.
RUN_LOCK = Path(".snakemake") / "bloomqg-run.lock"
#: Where Snakemake keeps its own lock files, relative to the run's directory.
SNAKEMAKE_LOCKS = Path(".snakemake") / "locks"
#: Exit status of a run that refused to start (EX_TEMPFAIL: try again later).
EXIT_BUSY = 75


class RunBusy(RuntimeError):
    """Another run is alive in the same directory; the message names it."""


def run_directory(args: Sequence[str], cwd: Path | None = None) -> Path:
    """The directory Snakemake will run in: the value of ``--directory``/``-d``, else ``cwd``."""
    cwd = Path.cwd() if cwd is None else cwd
    for position, arg in enumerate(args):
        if arg in ("--directory", "-d") and position + 1 < len(args):
            return (cwd / args[position + 1]).resolve()
        if arg.startswith("--directory="):
            return (cwd / arg.split("=", 1)[1]).resolve()
    return cwd.resolve()


def acquire(directory: Path, command: Sequence[str]) -> int:
    """Take the run lock of ``directory``; return its file descriptor (kept open by the caller).

    Raises :class:`RunBusy` naming the holder when another live process has it. The file
    records the holder's pid, start time and command for that message.
    """
    path = directory / RUN_LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "a process"
        os.close(fd)
        raise RunBusy(
            f"another run is working in {directory} ({holder}); not starting a second one there. "
            "Wait for it to finish, or stop it and run again."
        ) from None
    started = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}, started {started}: {shlex.join(command)}\n".encode(), 0)
    return fd


def stale_locks(directory: Path) -> list[Path]:
    """Snakemake's lock files in ``directory`` (stale when the run lock could be taken)."""
    folder = directory / SNAKEMAKE_LOCKS
    return sorted(folder.glob("*.lock")) if folder.is_dir() else []


def other_snakemake_processes(directory: Path) -> list[tuple[int, str]]:
    """(pid, command line) of live Snakemake processes and job scripts working in ``directory``
    other than this one and its ancestors."""
    return sorted((process.pid, " ".join(process.argv))
                  for process in processes_working_in(directory, skip=ancestors())
                  if is_snakemake_work(process.argv))


def _say_stale(directory: Path) -> None:
    print(
        f"bloomqg: removing Snakemake's lock left in {directory / SNAKEMAKE_LOCKS} by a run that is no "
        "longer alive (killed or crashed); its incomplete outputs are rerun",
        file=sys.stderr,
    )


def clear_stale_lock(command: Sequence[str], directory: Path) -> bool:
    """With the run lock held: remove Snakemake's lock left by a dead run; True if there was one.

    Raises :class:`RunBusy` if a Snakemake process started without the run lock still works in
    ``directory`` (its lock is not stale).
    """
    at = snakemake_position(command)
    locks = stale_locks(directory)
    if at is None or not locks:  # only a Snakemake run needs (and can remove) Snakemake's lock
        return False
    others = other_snakemake_processes(directory)
    if others:
        listed = "; ".join(f"pid {pid}: {cmdline[:200]}" for pid, cmdline in others)
        raise RunBusy(
            f"Snakemake's lock in {directory / SNAKEMAKE_LOCKS} belongs to a run still alive ({listed}); "
            "not removing it. Wait for that run, or stop it and run again."
        )
    _say_stale(directory)
    # --unlock right after "snakemake": a trailing --config would swallow it as a value.
    subprocess.run([*command[: at + 1], "--unlock", *command[at + 1 :]], check=True, stdout=subprocess.DEVNULL)
    return True


def _run_lock_free(directory: Path) -> bool:
    """Whether no live process holds ``directory``'s run lock (this process included)."""
    path = directory / RUN_LOCK
    if not path.exists():
        return True
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the probe's lock
    return True


def clear_locks_of_dead_runs(directory: Path) -> bool:
    """Remove Snakemake's lock in ``directory`` when no run that could own it is alive: nobody
    holds the run lock and no other Snakemake process works there. True if one was removed.

    Called from the workflow in Snakemake's main process, before Snakemake checks its lock.
    Without ``/proc`` (not Linux) nothing can be told apart and nothing is removed.
    """
    directory = directory.resolve()
    locks = stale_locks(directory)
    if not locks or not Path("/proc").is_dir():
        return False
    if not _run_lock_free(directory) or other_snakemake_processes(directory):
        return False
    for lock in locks:
        lock.unlink(missing_ok=True)
    _say_stale(directory)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bloomqg.runtime.run_lock SNAKEMAKE [ARGS...]``: lock, clear a stale lock, exec."""
    command = list(sys.argv[1:] if argv is None else argv)
    if not command:
        print("usage: python -m bloomqg.runtime.run_lock SNAKEMAKE [ARGS...]", file=sys.stderr)
        return 2
    directory = run_directory(command[1:])
    try:
        fd = acquire(directory, command)
        clear_stale_lock(command, directory)
    except RunBusy as busy:
        print(f"bloomqg: {busy}", file=sys.stderr)
        return EXIT_BUSY
    except subprocess.CalledProcessError as error:
        print(f"bloomqg: `{shlex.join(error.cmd)}` failed (exit {error.returncode})", file=sys.stderr)
        return error.returncode or 1
    # Snakemake inherits the open descriptor and with it the lock, until it exits.
    os.set_inheritable(fd, True)
    os.execvp(command[0], command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
