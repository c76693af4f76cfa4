"""A model server's lifecycle, owned by one job: start, readiness, teardown that cannot leak.

:class:`ModelServer` starts a server command (vLLM's, ``transformers serve``) under
:mod:`bloomqg.runtime.serving.watchdog` in a new session, so the server and all its workers form one
process group apart from the job's, and holds the write end of a pipe to the watchdog.

- Start: the watchdog is forked from one thread that lives as long as the job process, so its
  parent-death signal (which follows the forking *thread*) fires only when the job dies.
- Readiness: ``GET http://127.0.0.1:<port><ready_path>`` until it answers 200 *and* the port's
  listening socket belongs to the server's own process group (another server on that port is a
  stranger, not ours), at most ``ready_timeout_s``. When another process holds the port and the
  server exits (a bind conflict), it starts again on a new port (``PORT_TRIES`` in all) and the
  log names both ports. On a timeout, or an exit for another reason, :class:`ServerError`
  carries the command line and the log's last lines (an argument error's usage text left out).
- The owner watch, a thread of the job: when a process between the job and its Snakemake process
  is gone (``kill -9`` of Snakemake), or Snakemake's log says a SIGTERM asked it to stop (it
  would wait for the job, hours for a study), the server is stopped and the job sent SIGTERM;
  when the watchdog dies (``kill -9``), what it left of the group is ended and the job fails at
  its next check.
- Teardown: :meth:`ModelServer.stop` (a ``with`` block's end, success or failure) closes the
  pipe, the watchdog ends the whole group (SIGTERM, then SIGKILL), and then, whatever the
  watchdog's state, whatever is left of the group is ended too. A SIGTERM or SIGINT to the job
  stops the server and ends the job; a job killed with ``kill -9`` closes the pipe by dying, and
  the watchdog ends the group all the same.

The server's stdout and stderr go to ``log_path`` (appended, one header per start).
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from bloomqg.runtime.serving.owner import (
    chain_broken,
    listening_inodes,
    owner_chain,
    port_holders,
    read_process,
    snakemake_log,
    stopping_gracefully,
)
from bloomqg.runtime.serving.watchdog import GRACE_S, end_group

#: Lines of the server log a failure message quotes.
LOG_TAIL_LINES = 40
#: Seconds between readiness polls, and between the owner watch's looks.
POLL_S = 1.0
WATCH_S = 0.5
#: Ports a server is started on before a bind conflict fails the job.
PORT_TRIES = 3
HOST = "127.0.0.1"
T = TypeVar("T")


class ServerError(RuntimeError):
    """The server did not come up (timeout, early exit) or stopped answering."""

    #: First line of the failed job's log (bloomqg.store.logs).
    what_to_do = ("the model server did not start: read the server log named below (its last lines are "
                  "quoted), fix the engine settings of the model entry (engine_python, engine_args, "
                  "engine_ready_timeout_s), then run the workflow again.")


class _PortTaken(Exception):
    def __init__(self, holders: Mapping[int, int]) -> None:
        super().__init__(", ".join(describe_pid(pid) for pid in holders))
        self.holders = dict(holders)


def describe_pid(pid: int) -> str:
    if pid == 0:
        return "a process of another user"
    process = read_process(pid)
    return process.describe() if process else f"pid {pid}"


def server_log_path(job_log: str | Path) -> Path:
    """Where the server of the job logging to ``job_log`` writes: ``logs/<rule>/...`` becomes
    ``logs/serve/<rule>/...``. Not a rule's ``log:`` entry, which Snakemake empties before a rerun
    (the killed run's server log is what explains it) and creates for jobs that start no server."""
    parts = Path(job_log).parts
    if parts and parts[0] == "logs":
        return Path("logs", "serve", *parts[1:])
    return Path(job_log).with_suffix(".serve.log")


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def log_tail(path: str | Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of ``path`` ('' when it does not exist), an argument parser's
    usage text left out when an error line follows it (the line that matters)."""
    path = Path(path)
    if not path.is_file():
        return ""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 256 * 1024))
        text = handle.read().decode("utf-8", errors="replace")
    return "\n".join(without_usage(text.splitlines())[-lines:])


def without_usage(lines: list[str]) -> list[str]:
    """``lines`` less the last ``usage: ...`` block that an argparse ``...: error: ...`` line ends."""
    errors = [i for i, line in enumerate(lines) if re.match(r"^\S*: error: ", line)]
    if not errors:
        return lines
    usages = [i for i, line in enumerate(lines[:errors[-1]]) if re.match(r"^usage: ", line, re.I)]
    if not usages:
        return lines
    return [*lines[:usages[-1]], "[usage text left out]", *lines[errors[-1]:]]


_SPAWNER: tuple[int, queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]] | None = None
_SPAWNER_LOCK = threading.Lock()


def spawn(make: Callable[[], T]) -> T:
    """``make()`` run on this process's spawner thread, which lives as long as the process:
    ``PR_SET_PDEATHSIG`` of a child fires when the *thread* that forked it exits, so a server
    started from a short-lived thread (an executor's, an event loop's helper) must not be forked
    there."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None or _SPAWNER[0] != os.getpid():  # a forked child has no such thread
            jobs: queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = queue.Queue()

            def run() -> None:
                while True:
                    call, future = jobs.get()
                    try:
                        future.set_result(call())
                    except BaseException as error:  # noqa: BLE001 (handed to the caller)
                        future.set_exception(error)

            threading.Thread(target=run, name="bloomqg-server-spawner", daemon=True).start()
            _SPAWNER = (os.getpid(), jobs)
        jobs = _SPAWNER[1]
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    jobs.put((make, future))
    return future.result()


class ModelServer:
    """One server process group; use as a context manager (``with ModelServer(...) as server``).

    ``argv`` is the server's command line, which must listen on ``port`` at ``HOST``, or a
    function of the port giving it (then ``port`` may be None, a free port, and a bind conflict
    moves the server to another port); ``env`` its whole environment. ``watch_owner``: stop the
    server when the workflow above the job goes (see the module's description).
    """

    def __init__(
        self,
        argv: Sequence[str] | Callable[[int], Sequence[str]],
        *,
        port: int | None,
        env: Mapping[str, str],
        log_path: str | Path,
        ready_timeout_s: float,
        ready_paths: Sequence[str] = ("/v1/models",),
        name: str = "server",
        watch_owner: bool = True,
    ) -> None:
        self._argv_for_port = argv if callable(argv) else None
        if port is None and self._argv_for_port is None:
            raise ValueError(f"{name}: a fixed command line needs its port")
        self.port = free_port() if port is None else int(port)
        self.argv = [str(part) for part in (argv(self.port) if callable(argv) else argv)]
        self.env = dict(env)
        self.log_path = Path(log_path)
        self.ready_timeout_s = float(ready_timeout_s)
        self.ready_paths = tuple(ready_paths)
        self.name = name
        self.process: subprocess.Popen[bytes] | None = None
        self._pipe_w: int | None = None
        self._old_handlers: dict[int, Any] = {}
        self.ready_after_s: float | None = None
        #: why the owner watch ended the server (None while it has not)
        self.ended_by: str | None = None
        self._watch_owner = watch_owner
        self._watch_stop = threading.Event()
        self._lock = threading.RLock()
        self._note_lock = threading.Lock()  # one "watchdog killed" note, whichever thread sees it first

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
        if self._pipe_w is not None:
            raise RuntimeError(f"{self.name}: already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        read_end, self._pipe_w = os.pipe()  # both ends non-inheritable: no other child keeps it open
        self._note(f"=== {self._stamp()} {self.name} on {HOST}:{self.port}: {self.command_line}")
        with open(self.log_path, "ab") as log:
            self.process = spawn(lambda: subprocess.Popen(
                [sys.executable, "-m", "bloomqg.runtime.serving.watchdog", "--", *self.argv],
                stdin=read_end, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                start_new_session=True, close_fds=True,
            ))
        os.close(read_end)
        self._install_signal_handlers()
        self._watch_stop.clear()
        threading.Thread(target=self._watch, args=(self.process,), name=f"watch {self.name}", daemon=True).start()

    def wait_ready(self) -> float:
        """Block until the server answers 200 on one of ``ready_paths`` from a socket of its own
        process group; the seconds it took. A bind conflict starts it again on another port.

        Raises :class:`ServerError` (command line and log tail in its message) when the server
        exits first, does not answer within ``ready_timeout_s``, or lost its port ``PORT_TRIES``
        times.
        """
        if self.process is None:
            raise RuntimeError(f"{self.name}: not started")
        started = time.monotonic()
        for attempt in range(1, PORT_TRIES + 1):
            try:
                self.ready_after_s = self._wait_ready_once(started)
                return self.ready_after_s
            except _PortTaken as taken:
                if self._argv_for_port is None or attempt == PORT_TRIES:
                    raise self._error(f"could not bind port {self.port}: it is held by {taken}") from None
                old = self.port
                self.stop()
                self.port = free_port()
                self.argv = [str(part) for part in self._argv_for_port(self.port)]
                self._note(f"--- {self._stamp()} port {old} is held by {taken}: starting again on port {self.port}")
                self.start()
        raise AssertionError("unreachable")

    def _wait_ready_once(self, started: float) -> float:
        assert self.process is not None
        urls = [f"http://{HOST}:{self.port}{path}" for path in self.ready_paths]
        foreign: dict[int, int] = {}
        while True:
            code = self.process.poll()
            holders = port_holders(self.port)
            ours = [pid for pid, group in holders.items() if group == self.process.pid]
            foreign = {pid: group for pid, group in holders.items() if pid not in ours} or foreign
            if not holders and listening_inodes(self.port):  # a socket of a process we cannot read
                foreign = {0: 0}
            if code is not None:
                if foreign:
                    raise _PortTaken(foreign)
                raise self._error(f"exited with status {code} before it was ready")
            for url in urls if ours else ():
                try:
                    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 (loopback only)
                        if answer.status == 200:
                            return time.monotonic() - started
                except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                    pass
            if time.monotonic() - started >= self.ready_timeout_s:
                held = f"; port {self.port} is held by {_PortTaken(foreign)}" if foreign else ""
                raise self._error(f"did not answer {' or '.join(urls)} within {self.ready_timeout_s:.0f} s "
                                  f"(engine_ready_timeout_s){held}")
            time.sleep(POLL_S)

    def check_alive(self) -> None:
        """Raise :class:`ServerError` if the server has exited (or its watchdog, or the owner
        watch ended it)."""
        if self.process is not None and (code := self.process.poll()) is not None:
            if code < 0 and not self.ended_by:  # the job saw it before the watch's next poll
                self._watchdog_killed(self.process, code)
            if self.ended_by:
                raise self._error(f"was ended while serving: {self.ended_by}")
            raise self._error(f"exited with status {code} while serving")

    def _watchdog_killed(self, process: subprocess.Popen[bytes], code: int) -> None:
        """The watchdog was killed by a signal (a negative status; it never exits so itself): say
        so once, and end what is left of its group, which it could not."""
        with self._note_lock:
            if self.ended_by:
                return
            self.ended_by = f"its watchdog (pid {process.pid}) was killed by signal {-code}"
            self._note(f"--- {self._stamp()} {self.ended_by}: ending what is left of its group")
        end_group(process.pid, grace_s=GRACE_S)

    def stop(self) -> None:
        """End the server's whole process group and wait for it; safe to call twice, from any
        thread, and whatever state the watchdog is in (a killed watchdog leaves the group to us)."""
        with self._lock:
            self._watch_stop.set()
            self._restore_signal_handlers()
            if self._pipe_w is not None:
                os.close(self._pipe_w)  # the watchdog reads EOF and ends the group
                self._pipe_w = None
            if self.process is None:
                return
            try:
                self.process.wait(timeout=GRACE_S + 10)
            except subprocess.TimeoutExpired:
                pass
            end_group(self.process.pid, grace_s=GRACE_S)  # what the watchdog left, or could not end
            self.process.wait()

    def _watch(self, process: subprocess.Popen[bytes]) -> None:
        """The owner watch (a daemon thread per start; see the module's description)."""
        chain = owner_chain() if self._watch_owner else []
        log = snakemake_log(chain)
        offset = 0  # the run's own log, read whole: a SIGTERM before this server started counts
        while not self._watch_stop.wait(WATCH_S):
            gone = chain_broken(chain)
            graceful, offset = stopping_gracefully(log, offset)
            if gone is not None or graceful:
                self.ended_by = (f"the workflow process {gone.describe()} is gone" if gone else
                                 f"Snakemake (pid {chain[-1].pid}) was asked to stop (SIGTERM)")
                self._note(f"--- {self._stamp()} {self.ended_by}: stopping the server, then the job")
                self.stop()
                os.kill(os.getpid(), signal.SIGTERM)
                return
            if (code := process.poll()) is not None:
                if code < 0 and not self._watch_stop.is_set():  # killed: it could not end the group
                    self._watchdog_killed(process, code)
                end_group(process.pid, grace_s=GRACE_S)
                return

    def _note(self, line: str) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"\n{line}\n".encode())

    @staticmethod
    def _stamp() -> str:
        return datetime.now(timezone.utc).isoformat(timespec="seconds")

    def _error(self, what: str) -> ServerError:
        tail = log_tail(self.log_path)
        return ServerError(f"{self.name} {what}.\n  command: {self.command_line}\n  log: {self.log_path}, "
                           f"last lines:\n{tail}")

    def _install_signal_handlers(self) -> None:
        # Only the main thread may set handlers; a server started elsewhere relies on the pipe.
        if threading.current_thread() is not threading.main_thread() or self._old_handlers:
            return

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            self.stop()
            raise SystemExit(128 + signum)

        for signum in (signal.SIGTERM, signal.SIGINT):
            self._old_handlers[signum] = signal.signal(signum, on_signal)

    def _restore_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # the handlers stop a stopped server harmlessly; the main thread restores them
        while self._old_handlers:
            signum, handler = self._old_handlers.popitem()
            signal.signal(signum, handler)
