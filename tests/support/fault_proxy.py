"""A fault-injecting HTTP reverse proxy on loopback, for testing the API client's robustness.

:class:`FaultProxy` listens on 127.0.0.1 and forwards each request to an upstream server
(``transformers serve`` in the tests), except when its seeded schedule says to fail it:

``rate_limit``   429 with ``Retry-After: <seconds>``
``server_error`` 500
``unavailable``  503 with ``retry-after-ms``
``timeout``      holds the request past the client's timeout, then closes without answering
``drop``         closes the connection without answering

The schedule is decided per request *content*: the n-th time the proxy sees given messages, a
seeded RNG keyed by (seed, digest of the messages, n) picks the fault, and a body is failed at most
``max_faults_per_body`` times. So which items fail and how is reproducible whatever order
concurrent requests arrive in, and every item gets through once the client has retried enough.

Modes that fail every request instead: ``required_api_key`` (401 unless the Authorization
header carries that key; the 401 body echoes the key it got, as some servers do, so tests can
check the client never repeats it), ``quota_exhausted`` (429 ``insufficient_quota``), and
``reject_response_format`` (400 for any request with ``response_format`` ``json_schema``).

It runs its own event loop in a background thread, so a synchronous client can be tested in the
main thread. Every request is answered with ``Connection: close``. Counters: ``received``,
``forwarded``, ``faults`` (by kind) and ``events`` (one per request: body digest, attempt, what
happened).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import threading
from collections import Counter
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

FAULT_KINDS = ("rate_limit", "server_error", "unavailable", "timeout", "drop")

#: Bound on how long the proxy waits for the upstream server's answer.
UPSTREAM_TIMEOUT_S = 120.0


@dataclass
class FaultSchedule:
    """Which faults to inject: ``fault_rate`` of a body's first ``max_faults_per_body`` tries fail,
    with a kind drawn by ``weights``."""

    seed: int = 0
    fault_rate: float = 0.5
    max_faults_per_body: int = 3
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "rate_limit": 1.0,
            "server_error": 1.0,
            "unavailable": 1.0,
            "drop": 1.0,
            "timeout": 0.5,
        }
    )
    retry_after_s: float = 1.0
    retry_after_ms: int = 200
    #: how long a ``timeout`` fault holds the request; set it above the client's timeout
    hold_s: float = 5.0

    def fault_for(self, body_digest: str, attempt: int) -> str | None:
        """The fault for the ``attempt``-th (0-based) sight of a body, or None to forward it."""
        if attempt >= self.max_faults_per_body:
            return None
        rng = random.Random(f"{self.seed}:{body_digest}:{attempt}")
        if rng.random() >= self.fault_rate:
            return None
        kinds = [k for k in FAULT_KINDS if self.weights.get(k, 0) > 0]
        return rng.choices(kinds, weights=[self.weights[k] for k in kinds])[0]


def request_digest(body: bytes) -> str:
    """Identity of a request for the schedule: its ``messages`` (stable across machines, unlike
    the model path or port), or the raw body when it is not chat-completion JSON."""
    try:
        material = json.dumps(json.loads(body)["messages"], sort_keys=True).encode()
    except (ValueError, KeyError, TypeError):
        material = body
    return hashlib.sha256(material).hexdigest()[:16]


def _http_response(status: str, body: bytes, extra_headers: dict[str, str] | None = None) -> bytes:
    headers = {"content-type": "application/json", "content-length": str(len(body)), "connection": "close"}
    headers.update(extra_headers or {})
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("latin-1") + body


def _with_connection_close(response: bytes) -> bytes:
    """An upstream response with its Connection header replaced by ``close``."""
    head, sep, body = response.partition(b"\r\n\r\n")
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    lines.append(b"connection: close")
    return b"\r\n".join(lines) + sep + body


class FaultProxy:
    """Reverse proxy 127.0.0.1:<port> → 127.0.0.1:<upstream_port> with scheduled faults."""

    def __init__(
        self,
        upstream_port: int,
        schedule: FaultSchedule | None = None,
        *,
        required_api_key: str | None = None,
        quota_exhausted: bool = False,
        reject_response_format: bool = False,
    ) -> None:
        self.upstream_port = upstream_port
        self.schedule = schedule
        self.required_api_key = required_api_key
        self.quota_exhausted = quota_exhausted
        self.reject_response_format = reject_response_format
        self.port: int | None = None
        self.received = 0
        self.forwarded = 0
        self.faults: Counter[str] = Counter()
        self.events: list[dict] = []
        self._seen: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float = 10.0) -> "FaultProxy":
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()
            self._loop.close()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s):
            raise RuntimeError("fault proxy did not start")
        return self

    async def _shutdown(self) -> None:
        """Stop listening and cancel requests in flight (a held ``timeout`` fault, say)."""
        assert self._server is not None
        self._server.close()
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self._server.wait_closed()

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout_s)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=timeout_s)

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset_counters(self) -> None:
        self.received = self.forwarded = 0
        self.faults.clear()
        self.events.clear()

    # ------------------------------------------------------------------ handling
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=30)
            headers = {}
            for line in head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name:
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.received += 1
            await self._answer(head, headers, body, writer)
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
            pass
        except asyncio.CancelledError:
            # Shutdown. Ending normally, not cancelled: Python 3.11's stream callback would log
            # the cancellation as an error.
            pass
        finally:
            writer.close()

    async def _answer(
        self, head: bytes, headers: dict[str, str], body: bytes, writer: asyncio.StreamWriter
    ) -> None:
        digest = request_digest(body)
        attempt = self._seen[digest]
        self._seen[digest] += 1
        event = {"body": digest, "attempt": attempt}
        self.events.append(event)

        if self.required_api_key is not None:
            sent = headers.get("authorization", "").removeprefix("Bearer ").strip()
            if sent != self.required_api_key:
                event["result"] = "unauthorized"
                # Echo the key like servers that show "Incorrect API key provided: sk-...".
                message = {
                    "error": {
                        "message": f"Incorrect API key provided: {sent}.",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                }
                writer.write(_http_response("401 Unauthorized", json.dumps(message).encode()))
                await writer.drain()
                return
        if self.quota_exhausted:
            event["result"] = "insufficient_quota"
            message = {
                "error": {
                    "message": "You exceeded your current quota.",
                    "type": "insufficient_quota",
                    "code": "insufficient_quota",
                }
            }
            writer.write(
                _http_response("429 Too Many Requests", json.dumps(message).encode(), {"retry-after": "1"})
            )
            await writer.drain()
            return
        if self.reject_response_format and b'"json_schema"' in body and b'"response_format"' in body:
            event["result"] = "rejected_response_format"
            message = {
                "error": {
                    "message": "response_format json_schema is not supported",
                    "type": "invalid_request_error",
                }
            }
            writer.write(_http_response("400 Bad Request", json.dumps(message).encode()))
            await writer.drain()
            return

        fault = self.schedule.fault_for(digest, attempt) if self.schedule else None
        event["result"] = fault or "forwarded"
        if fault is not None:
            self.faults[fault] += 1
        if fault == "rate_limit":
            message = {
                "error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
            }
            writer.write(
                _http_response(
                    "429 Too Many Requests",
                    json.dumps(message).encode(),
                    {"retry-after": f"{self.schedule.retry_after_s:g}"},
                )
            )
        elif fault == "server_error":
            writer.write(_http_response("500 Internal Server Error", b'{"error":{"message":"boom"}}'))
        elif fault == "unavailable":
            writer.write(
                _http_response(
                    "503 Service Unavailable",
                    b'{"error":{"message":"overloaded"}}',
                    {"retry-after-ms": str(self.schedule.retry_after_ms)},
                )
            )
        elif fault == "timeout":
            await asyncio.sleep(self.schedule.hold_s)
            return
        elif fault == "drop":
            return
        else:
            response = await self._forward(head, body)
            # Count before writing: the client runs in another thread and may read the counters
            # as soon as the answer's bytes leave, before this thread runs again.
            self.forwarded += 1
            writer.write(response)
        await writer.drain()

    async def _forward(self, head: bytes, body: bytes) -> bytes:
        """Send the request upstream with ``Connection: close`` and return the whole answer."""
        lines = [
            line
            for line in head.rstrip(b"\r\n").split(b"\r\n")
            if not line.lower().startswith(b"connection:")
        ]
        request = b"\r\n".join(lines) + b"\r\nconnection: close\r\n\r\n" + body
        reader, writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        try:
            writer.write(request)
            await writer.drain()
            response = await asyncio.wait_for(reader.read(), timeout=UPSTREAM_TIMEOUT_S)
        finally:
            writer.close()
        return _with_connection_close(response)
