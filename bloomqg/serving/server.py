"""A model server's lifecycle, owned by one job: start, readiness, teardown that cannot leak.

:class:`ModelServer` starts a server command (vLLM's, ``transformers serve``) under
:mod:`bloomqg.serving.watchdog` in a new session, so the server and all its workers form one
process group apart from the job's, and holds the write end of a pipe to the watchdog:

- readiness: ``GET http://127.0.0.1:<port><ready_path>`` until it answers 200, at most
  ``ready_timeout_s``; on timeout, or when the server exits first, :class:`ServerError` carries
  the command line and the last lines of the server's log;
- teardown: :meth:`ModelServer.stop` (a ``with`` block's end, success or failure) closes the
  pipe and the watchdog ends the whole group (SIGTERM, then SIGKILL); a SIGTERM or SIGINT to
  the job stops the server and ends the job; a job killed with ``kill -9`` closes the pipe by
  dying, and the watchdog ends the group all the same.

The server's stdout and stderr go to ``log_path`` (appended, one header per start).
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

from bloomqg.serving.watchdog import GRACE_S

#: Lines of the server log a failure message quotes.
LOG_TAIL_LINES = 40
#: Seconds between readiness polls.
POLL_S = 1.0
HOST = "127.0.0.1"


class ServerError(RuntimeError):
    """The server did not come up (timeout, early exit) or stopped answering."""

    #: First line of the failed job's log (bloomqg.logs).
    what_to_do = ("the model server did not start: read the server log named below (its last lines are "
                  "quoted), fix the engine settings of the model entry (engine_python, engine_args, "
                  "engine_ready_timeout_s), then run the workflow again.")


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def log_tail(path: str | Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of ``path`` ('' when it does not exist)."""
    path = Path(path)
    if not path.is_file():
        return ""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 256 * 1024))
        text = handle.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


class ModelServer:
    """One server process group; use as a context manager (``with ModelServer(...) as server``).

    ``argv`` is the server's command line, which must listen on ``port`` at ``HOST``;
    ``env`` its whole environment.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        port: int,
        env: Mapping[str, str],
        log_path: str | Path,
        ready_timeout_s: float,
        ready_paths: Sequence[str] = ("/v1/models",),
        name: str = "server",
    ) -> None:
        self.argv = [str(part) for part in argv]
        self.port = int(port)
        self.env = dict(env)
        self.log_path = Path(log_path)
        self.ready_timeout_s = float(ready_timeout_s)
        self.ready_paths = tuple(ready_paths)
        self.name = name
        self.process: subprocess.Popen[bytes] | None = None
        self._pipe_w: int | None = None
        self._old_handlers: dict[int, Any] = {}
        self.ready_after_s: float | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API's base URL."""
        return f"http://{HOST}:{self.port}/v1"

    @property
    def command_line(self) -> str:
        return shlex.join(self.argv)

    def __enter__(self) -> ModelServer:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the watchdog and, under it, the server; returns at once (see :meth:`wait_ready`)."""
        if self.process is not None:
            raise RuntimeError(f"{self.name}: already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        read_end, self._pipe_w = os.pipe()  # both ends non-inheritable: no other child keeps it open
        with open(self.log_path, "ab") as log:
            stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
            log.write(f"\n=== {stamp} {self.name} on {HOST}:{self.port}: {self.command_line}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bloomqg.serving.watchdog", "--", *self.argv],
                stdin=read_end, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                start_new_session=True, close_fds=True,
            )
        os.close(read_end)
        self._install_signal_handlers()

    def wait_ready(self) -> float:
        """Block until the server answers 200 on one of ``ready_paths``; the seconds it took.

        Raises :class:`ServerError` (command line and log tail in its message) when the server
        exits first or does not answer within ``ready_timeout_s``.
        """
        if self.process is None:
            raise RuntimeError(f"{self.name}: not started")
        started = time.monotonic()
        urls = [f"http://{HOST}:{self.port}{path}" for path in self.ready_paths]
        while True:
            code = self.process.poll()
            if code is not None:
                raise self._error(f"exited with status {code} before it was ready")
            for url in urls:
                try:
                    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 (loopback only)
                        if answer.status == 200:
                            self.ready_after_s = time.monotonic() - started
                            return self.ready_after_s
                except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                    pass
            if time.monotonic() - started >= self.ready_timeout_s:
                raise self._error(f"did not answer {' or '.join(urls)} within {self.ready_timeout_s:.0f} s "
                                  "(engine_ready_timeout_s)")
            time.sleep(POLL_S)

    def check_alive(self) -> None:
        """Raise :class:`ServerError` if the server has exited."""
        if self.process is not None and (code := self.process.poll()) is not None:
            raise self._error(f"exited with status {code} while serving")

    def stop(self) -> None:
        """End the server's whole process group and wait for it; safe to call twice."""
        self._restore_signal_handlers()
        if self._pipe_w is not None:
            os.close(self._pipe_w)  # the watchdog reads EOF and ends the group
            self._pipe_w = None
        if self.process is None:
            return
        try:
            self.process.wait(timeout=GRACE_S + 10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()

    def _error(self, what: str) -> ServerError:
        tail = log_tail(self.log_path)
        return ServerError(f"{self.name} {what}.\n  command: {self.command_line}\n  log: {self.log_path}, "
                           f"last lines:\n{tail}")

    def _install_signal_handlers(self) -> None:
        # Only the main thread may set handlers; a server started elsewhere relies on the pipe.
        if threading.current_thread() is not threading.main_thread():
            return

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            self.stop()
            raise SystemExit(128 + signum)

        for signum in (signal.SIGTERM, signal.SIGINT):
            self._old_handlers[signum] = signal.signal(signum, on_signal)

    def _restore_signal_handlers(self) -> None:
        while self._old_handlers:
            signum, handler = self._old_handlers.popitem()
            signal.signal(signum, handler)
