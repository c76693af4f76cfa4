"""Routing a job's library logging to the log file Snakemake gives it."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_job_logging(log_path: str | Path | None, level: int = logging.INFO) -> None:
    """Send ``logging`` records (and uncaught warnings) to ``log_path`` and to stderr.

    Called first thing by every rule script, so a failed job's log explains the failure.
    """
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
    logging.basicConfig(level=level, format=_FORMAT, handlers=handlers, force=True)
    logging.captureWarnings(True)
