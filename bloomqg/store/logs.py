"""A job's log: its library logging, its failure explained, and the logs of failed attempts kept.

Every rule script calls :func:`configure_job_logging` first thing. From then on:

- ``logging`` records and warnings go to the job's log file and to stderr;
- an uncaught exception is written to the log too, its traceback under a first line that says
  what to do (an exception class states that in its ``what_to_do`` attribute; running out of
  memory is recognised here), so the log Snakemake points at explains the failure;
- the log is also reachable as ``<name>.attempt-<n>.log`` (a hard link, n = 1, 2, ... the first
  free number) for as long as the job runs. A job that ends normally writes :data:`FINISHED` as
  its last line and removes that second name; a job that fails, or is killed (``kill -9``, the
  out-of-memory killer, a scheduler's time limit), leaves it. Snakemake deletes ``<name>.log``
  before it reruns the job, so the attempt's log survives only under that second name.
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import shutil
import sys
import threading
from pathlib import Path
from types import TracebackType

from bloomqg.store.stored_text import redact, register_secret

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: The last line of the log of a job that ended without an uncaught exception.
FINISHED = "bloomqg: job finished"
#: First line for a failure nothing more specific explains.
GENERIC_ADVICE = ("the job failed: the traceback below shows where. Fix the cause and run the "
                  "workflow again (this log stays beside the new one as <name>.attempt-<n>.log).")
OUT_OF_MEMORY_ADVICE = (
    "the job ran out of memory. GPU memory: generation already halves batches down to one "
    "request, so the model itself does not fit: give its models entry more gpus, a smaller dtype "
    "or fewer max_new_tokens, or free the GPU from other processes. Host memory: raise the entry's "
    "mem_mb (the scheduler's limit) or run fewer jobs at once (--cores / --resources mem_mb=...)."
)

log = logging.getLogger(__name__)

def hide_in_logs(secret: str | None) -> None:
    """Mask ``secret`` (an API key) as ``***`` in every line this process logs from now on, and
    in every other text :func:`bloomqg.store.stored_text.redact` masks: the last line of defence for a
    text that reaches a log on a path nothing else masked."""
    register_secret(secret)


class _MaskingFormatter(logging.Formatter):
    """The job log's format, with every secret given to :func:`hide_in_logs` masked."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class _JobState:
    """What the exit hooks of this process need: its log, the attempt's second name, the outcome."""

    def __init__(self) -> None:
        self.hooked = False
        self.failed = False
        self.log_path: Path | None = None
        self.attempt_path: Path | None = None
        self.linked = False


_job = _JobState()


def configure_job_logging(log_path: str | Path | None, level: int = logging.INFO) -> None:
    """Send ``logging`` records, warnings and an uncaught exception to ``log_path`` (and stderr);
    keep the log of an attempt that does not finish (see the module docstring)."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        log_path = Path(log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        set_aside_earlier_log(log_path)
        # Appending (O_APPEND): a script that also writes to its log (estimate_cost) is never overwritten.
        handlers.append(logging.FileHandler(log_path, mode="a", encoding="utf-8"))
        _job.log_path, _job.attempt_path = log_path, next_attempt_path(log_path)
        try:
            os.link(log_path, _job.attempt_path)
            _job.linked = True
        except OSError:  # no hard links here (some network file systems): copied on failure
            _job.linked = False
    for handler in handlers:
        handler.setFormatter(_MaskingFormatter(_FORMAT))
    logging.basicConfig(level=level, handlers=handlers, force=True)
    logging.captureWarnings(True)
    if log_path:
        earlier = sorted(set(attempt_logs(log_path)) - {_job.attempt_path})
        if earlier:
            log.info("logs of earlier attempts that did not finish: %s", ", ".join(map(str, earlier)))
    if not _job.hooked:
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_thread_exception
        atexit.register(_at_exit)
        _job.hooked = True


def attempt_logs(log_path: Path) -> list[Path]:
    """The kept ``<stem>.attempt-<n><suffix>`` logs beside ``log_path``."""
    return list(log_path.parent.glob(f"{log_path.stem}.attempt-*{log_path.suffix}"))


def next_attempt_path(log_path: Path) -> Path:
    """The first free ``<stem>.attempt-<n><suffix>`` beside ``log_path``."""
    number = 1
    while (path := log_path.with_name(f"{log_path.stem}.attempt-{number}{log_path.suffix}")).exists():
        number += 1
    return path


def set_aside_earlier_log(log_path: Path) -> Path | None:
    """Before a job writes ``log_path``, clear the way: an earlier log still there (Snakemake
    deletes it before a rerun, a script run by hand does not) is removed when it is already kept
    under an attempt name or ends in :data:`FINISHED`, else moved to the next attempt name, so it
    is never overwritten. Returns where it went (None: nothing kept)."""
    try:
        status = log_path.stat()
    except FileNotFoundError:
        return None
    if status.st_nlink > 1 or status.st_size == 0:
        log_path.unlink()
        return None
    with open(log_path, "rb") as handle:
        handle.seek(max(0, status.st_size - 512))
        tail = handle.read().decode("utf-8", "replace").rstrip()
    if tail.endswith(FINISHED):
        log_path.unlink()
        return None
    target = next_attempt_path(log_path)
    os.replace(log_path, target)
    return target


def advice_for(error: BaseException) -> str:
    """The first line of a failed job's log: what to do about ``error``.

    An exception (or one it was raised from) says so in a ``what_to_do`` attribute; running out
    of memory (host ``MemoryError``, torch's ``OutOfMemoryError`` or a CUDA "out of memory"
    error) is recognised by type and message, without importing torch.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        advice = getattr(current, "what_to_do", None)
        if isinstance(advice, str) and advice:
            return advice
        if _is_out_of_memory(current):
            return OUT_OF_MEMORY_ADVICE
        current = current.__cause__ or current.__context__
    return GENERIC_ADVICE


def _is_out_of_memory(error: BaseException) -> bool:
    if isinstance(error, MemoryError):
        return True
    if any(cls.__name__ == "OutOfMemoryError" for cls in type(error).__mro__):
        return True
    if isinstance(error, OSError) and error.errno == errno.ENOMEM:
        return True
    # CUDA kernels and libraries say "out of memory"; torch's CPU allocator "can't allocate memory".
    text = str(error).lower()
    return isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def _log_uncaught(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
    _job.failed = True  # an interrupted job did not finish either: its log is kept
    if issubclass(kind, KeyboardInterrupt):
        logging.getLogger("bloomqg.runtime.job").error("interrupted (KeyboardInterrupt)")
        return
    logging.getLogger("bloomqg.runtime.job").critical(
        "What to do: %s\n%s: %s", advice_for(error), kind.__name__, error, exc_info=(kind, error, trace)
    )


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None:
        return
    logging.getLogger("bloomqg.runtime.job").error(
        "thread %s failed: %s: %s", getattr(args.thread, "name", "?"), args.exc_type.__name__,
        args.exc_value, exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )


def _at_exit() -> None:
    """A finished job says so and drops the attempt's second name; a failed one keeps it."""
    if _job.log_path is None or _job.attempt_path is None:
        return
    if not _job.failed:
        logging.getLogger("bloomqg.runtime.job").info(FINISHED)
        if _job.linked:
            _job.attempt_path.unlink(missing_ok=True)
    elif not _job.linked:
        for handler in logging.getLogger().handlers:
            handler.flush()
        shutil.copyfile(_job.log_path, _job.attempt_path)
