"""Headless Chromium driven over the DevTools protocol, stdlib only (browser tests, benchmarks).

Chromium's ``--remote-debugging-pipe`` speaks NUL-separated JSON on file descriptors 3
(commands in) and 4 (replies out).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import threading
import time
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class DevToolsPipe:
    """A minimal Chrome DevTools Protocol session over ``--remote-debugging-pipe``."""

    def __init__(self, executable: str, profile_dir: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.events: list[dict] = []
        self._replies: queue.Queue[dict] = queue.Queue()
        self._next_id = 0
        # Our pipe ends sit above 9 and close on exec; posix_spawn copies them onto the child's
        # descriptors 3 and 4 (thread-safe, unlike a preexec_fn).
        cmd_read, cmd_write = (self._high(fd) for fd in os.pipe())
        res_read, res_write = (self._high(fd) for fd in os.pipe())
        err_read, err_write = (self._high(fd) for fd in os.pipe())
        argv = [
            executable, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-dev-shm-usage", "--hide-scrollbars",
            f"--user-data-dir={profile_dir}", "about:blank",
        ]
        self.pid = os.posix_spawn(executable, argv, dict(os.environ), file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, err_write, 2),
            (os.POSIX_SPAWN_DUP2, cmd_read, 3),
            (os.POSIX_SPAWN_DUP2, res_write, 4),
        ])
        for fd in (cmd_read, res_write, err_write):
            os.close(fd)
        self._write = os.fdopen(cmd_write, "wb", buffering=0)
        self._read = os.fdopen(res_read, "rb", buffering=0)
        self._stderr: list[bytes] = []
        stderr = os.fdopen(err_read, "rb")
        threading.Thread(target=self._reader, daemon=True).start()
        threading.Thread(target=lambda: self._stderr.extend(stderr), daemon=True).start()

    @staticmethod
    def _high(fd: int) -> int:
        import fcntl

        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return high

    def _reader(self) -> None:
        buffer = b""
        while chunk := self._read.read(65536):
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    self._replies.put(message)
                else:
                    self.events.append(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._write.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                reply = self._replies.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no reply to {method} within {self.timeout} s; stderr: {self.stderr()[-2000:]}")
            if reply["id"] == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                return reply.get("result", {})

    def open_page(self, width: int, height: int, domains: tuple[str, ...] = ("Page", "Runtime", "Log")) -> str:
        """A new blank page of ``width`` × ``height`` CSS px with ``domains`` enabled; its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in domains:
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        return session

    def wait_for_event(self, method: str, session: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for event in self.events:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            time.sleep(0.05)
        raise TimeoutError(f"no {method} event within {self.timeout} s")

    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (OSError, TimeoutError, RuntimeError):
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if os.waitpid(self.pid, os.WNOHANG) != (0, 0):
                return
            time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


def chromium_or_skip() -> str:
    """The Chromium executable, or a pytest skip naming what to install."""
    import pytest

    executable = find_chromium()
    if executable is None:
        pytest.skip(f"no headless Chromium found (looked for {', '.join(CHROMIUM_NAMES)}); "
                    "install it with `apt-get install chromium` or `make test-browser-deps`")
    return executable
