"""The keeper of one server's process group: ``python -m bloomqg.runtime.serving.watchdog -- CMD ...``.

The job that wants a server starts this module in a new session (its own process group, which
the server and every process it forks join) with a pipe on its standard input, and keeps the
pipe's write end. The watchdog starts ``CMD`` and waits for either of two things:

- end of file on standard input: the job is gone, however it ended (``kill -9`` included, as
  the kernel closes a dead process's pipes), or it closed the pipe to stop the server;
- the server's own exit.

Either way it ends the whole group: SIGTERM, then SIGKILL after a grace period, so the engine's
worker processes go too. A SIGTERM, SIGINT or SIGHUP sent to the watchdog does the same, and
``PR_SET_PDEATHSIG`` sends it a SIGTERM when its parent dies, in case the pipe stays open
(a forked child holding the write end); the job forks it from a thread that lives as long as
the job (the signal follows the forking *thread*). The server gets the same signal should the
watchdog die. It exits with the server's status (or 128+signal).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

from bloomqg.runtime.serving.owner import group_members

#: Seconds between SIGTERM and SIGKILL to the group.
GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Ask Linux to send ``signum`` to this process when its parent dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def end_group(pgid: int, grace_s: float = GRACE_S, *, spare: int | None = None) -> None:
    """SIGTERM the process group ``pgid``, SIGKILL what is left after ``grace_s``.

    ``spare`` (the watchdog itself, a member of the group) ignores the SIGTERM and is only
    reached by the final SIGKILL, which is therefore sent last.
    """
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not group_members(pgid, spare):
            return
        time.sleep(0.1)
    for pid in group_members(pgid, spare):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m bloomqg.runtime.serving.watchdog -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    die_with_parent(signal.SIGTERM)
    pgid = os.getpgrp()
    stop = threading.Event()
    reason: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        reason.append(f"signal {signal.Signals(signum).name}")
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    # the server too gets a SIGTERM should this watchdog be killed (-9): it shuts its engine
    # down, and the job that owns the group ends what is left (ModelServer's watch)
    server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)

    def watch_pipe() -> None:
        # the raw descriptor, not sys.stdin: a daemon thread blocked in a buffered read aborts
        # the interpreter's shutdown
        while os.read(0, 4096):
            pass  # the job never writes; anything read is ignored
        reason.append("the job closed the pipe or died")
        stop.set()

    threading.Thread(target=watch_pipe, daemon=True).start()
    while not stop.is_set() and server.poll() is None:
        stop.wait(0.2)
    if server.poll() is None:
        print(f"watchdog: {reason[0] if reason else 'stopping'}: ending process group {pgid}",
              file=sys.stderr, flush=True)
    # The group's SIGTERM reaches this process too: from here on it is ignored.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    end_group(pgid, spare=os.getpid())
    code = server.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(status)  # not sys.exit: the pipe thread may still be blocked in its read
