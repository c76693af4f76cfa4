"""A minimal OpenAI-compatible chat endpoint with a fixed latency, for throughput benchmarks.

``POST /v1/chat/completions`` waits ``latency`` seconds, then answers a fixed JSON verdict (the
shape an LLM judge returns). ``GET /stats`` reports how many completions were requested, how
many carried an ``Idempotency-Key`` header and how many distinct keys those were;
``GET /health`` answers ok, and ``GET /v1/models`` an empty list. With ``--status 500 --error-message TEXT`` every completion is
answered with that status and an OpenAI-style error body carrying TEXT instead. Plain asyncio
with HTTP/1.1 keep-alive, so the server itself costs far less than the latency it simulates and
the client is what gets measured.

Run: ``python tests/support/fixed_latency_server.py --port 0 --latency 0.2``; it prints
``READY <port>`` on stdout once listening. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)

VERDICT = {
    "unique": "yes",
    "readable": "yes",
    "answerable": "yes",
    "bloom_level": "Apply",
    "knowledge_units": ["binary search tree"],
}


class FixedLatencyServer:
    """Answers every chat completion with :data:`VERDICT` after ``latency_s`` seconds."""

    def __init__(
        self, latency_s: float, content: str | None = None, status: int = 200, error_message: str = "error"
    ) -> None:
        self.latency_s = latency_s
        self.status = "200 OK" if status == 200 else f"{status} Error"
        self._error_body = json.dumps({"error": {"message": error_message, "type": "server_error"}}).encode()
        self.completions = 0
        self.idempotency_keys: list[str] = []
        self._body = json.dumps(
            {
                "id": "chatcmpl-fixed",
                "object": "chat.completion",
                "created": 0,
                "model": "fixed-latency",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content or json.dumps(VERDICT)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
            }
        ).encode()

    @staticmethod
    def _response(status: str, body: bytes, keep_alive: bool) -> bytes:
        head = (
            f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        return head.encode() + body

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length, keep_alive, idempotency_key = 0, True, None
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "idempotency-key":
                        idempotency_key = value.strip()
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                    elif name.strip().lower() == "connection" and value.strip().lower() == "close":
                        keep_alive = False
                if length:
                    await reader.readexactly(length)
                if method == "POST" and path.endswith("/chat/completions"):
                    self.completions += 1
                    if idempotency_key:
                        self.idempotency_keys.append(idempotency_key)
                    await asyncio.sleep(self.latency_s)
                    body = self._body if self.status == "200 OK" else self._error_body
                    writer.write(self._response(self.status, body, keep_alive))
                elif path == "/stats":
                    writer.write(
                        self._response(
                            "200 OK",
                            json.dumps({
                                "completions": self.completions,
                                "with_idempotency_key": len(self.idempotency_keys),
                                "distinct_idempotency_keys": len(set(self.idempotency_keys)),
                            }).encode(),
                            keep_alive,
                        )
                    )
                elif path == "/v1/models":  # what a model server's readiness poll asks
                    writer.write(self._response("200 OK", b'{"object":"list","data":[]}', keep_alive))
                elif path == "/health":
                    writer.write(self._response("200 OK", b'{"status":"ok"}', keep_alive))
                else:
                    writer.write(
                        self._response("404 Not Found", b'{"error":{"message":"not found"}}', keep_alive)
                    )
                await writer.drain()
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()


async def serve(
    port: int, latency_s: float, content: str | None = None, status: int = 200, error_message: str = "error"
) -> None:
    server_state = FixedLatencyServer(latency_s, content, status, error_message)
    server = await asyncio.start_server(server_state.handle, "127.0.0.1", port, backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    print(f"READY {bound}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per completion")
    parser.add_argument("--content", default=None, help="the assistant's answer (default: a verdict)")
    parser.add_argument("--content-file", default=None,
                        help="a file holding the answer (for answers longer than a command-line argument may be)")
    parser.add_argument("--status", type=int, default=200, help="HTTP status of every completion")
    parser.add_argument("--error-message", default="error", help="the error body's message (status not 200)")
    args = parser.parse_args(argv)
    if args.content_file is not None:
        args.content = Path(args.content_file).read_text(encoding="utf-8")
    try:
        asyncio.run(serve(args.port, args.latency, args.content, args.status, args.error_message))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
