"""An OpenAI-compatible Batch API server on loopback, for testing batch mode without paying.

Implements, with the documented shapes: ``POST /v1/files`` (multipart upload, purpose
``batch``), ``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
``GET /v1/batches`` (cursor list), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``
and, for the client's sync fallback, ``POST /v1/chat/completions``.

A batch moves ``validating`` → ``in_progress`` → ``finalizing`` → ``completed`` on a clock
(``step_s`` per stage, items answered evenly over the in-progress stage), or ends ``failed``
(a line that is not a valid request, or the next ``fail_batches``), ``expired`` (the first ``expire_batches`` batches: half
the items answered, the rest ``batch_expired`` error lines) or ``cancelled`` (the next
``cancel_batches``: an operator cancels it mid-way; answered items keep their output). Items whose
custom_id the seeded ``item_error_rate`` picks fail their first try with a 500 error line
(partial errors) whose message is ``error_message``. An upload is answered after
``upload_delay_s`` (counted in ``uploads_started`` as it arrives), a sync chat call after
``chat_delay_s`` (counted in ``sync_calls`` as it arrives). Answers are :data:`VERDICT` (or
``content``), with usage counted by a stand-in tokenizer (:func:`count_tokens`: words and
punctuation marks, plus chat framing), not by the client's own character estimate.

Counters: ``answered`` (custom_id → times answered in a batch or sync: what would be paid),
``batches_created``, ``files_uploaded``, ``sync_calls``. Runs in a thread of the test process
(:meth:`BatchServer.start`), or as a script printing ``READY <port>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import threading
import time
import uuid
from collections import Counter
from typing import Any

from aiohttp import web

VERDICT = {
    "unique": "yes",
    "readable": "yes",
    "answerable": "yes",
    "bloom_level": "Apply",
    "knowledge_units": ["binary search tree"],
}
_PIECE = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Stand-in tokenizer: one token per word and per punctuation mark."""
    return len(_PIECE.findall(text))


def chat_completion(body: dict[str, Any], content: str) -> dict[str, Any]:
    """A chat.completion object answering ``body`` with ``content``, with stand-in usage."""
    messages = body.get("messages") or []
    prompt_tokens = sum(count_tokens(str(m.get("content", ""))) + 3 for m in messages) + 3
    completion_tokens = count_tokens(content)
    finish_reason = "stop"
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if isinstance(limit, int) and completion_tokens > limit:  # cut at the limit, as a real server
        content = "".join(m.group(0) + " " for m in list(_PIECE.finditer(content))[:limit]).strip()
        completion_tokens, finish_reason = limit, "length"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model")),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error(status: int, message: str, code: str | None = None) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request_error", "code": code}}, status=status
    )


class BatchServer:
    """The server's state and handlers; see the module docstring for the knobs."""

    def __init__(
        self,
        *,
        step_s: float = 0.2,
        content: str | None = None,
        item_error_rate: float = 0.0,
        expire_batches: int = 0,
        cancel_batches: int = 0,
        fail_batches: int = 0,
        seed: int = 0,
        required_api_key: str | None = None,
        error_message: str = "The server had an error",
        upload_delay_s: float = 0.0,
        chat_delay_s: float = 0.0,
    ) -> None:
        self.chat_delay_s = chat_delay_s
        self.step_s = step_s
        self.upload_delay_s = upload_delay_s
        self.error_message = error_message
        self.content = content or json.dumps(VERDICT)
        self.item_error_rate = item_error_rate
        self.expire_batches = expire_batches
        self.cancel_batches = cancel_batches
        self.fail_batches = fail_batches
        self.seed = seed
        self.required_api_key = required_api_key
        self.files: dict[str, dict[str, Any]] = {}
        self.file_bytes: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.answered: Counter[str] = Counter()
        self.failed_once: set[str] = set()
        self.batches_created = 0
        self.files_uploaded = 0
        self.uploads_started = 0
        self.sync_calls = 0
        self.statuses_seen: Counter[str] = Counter()
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ app
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth], client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/files", self.upload)
        app.router.add_get("/v1/files/{file_id}", self.file_object)
        app.router.add_get("/v1/files/{file_id}/content", self.file_content)
        app.router.add_post("/v1/batches", self.create_batch)
        app.router.add_get("/v1/batches", self.list_batches)
        app.router.add_get("/v1/batches/{batch_id}", self.get_batch)
        app.router.add_post("/v1/batches/{batch_id}/cancel", self.cancel_batch)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.required_api_key is not None:
            sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if sent != self.required_api_key:
                return _error(401, "Incorrect API key provided.", "invalid_api_key")
        return await handler(request)

    def _new_file(self, data: bytes, purpose: str, filename: str) -> dict[str, Any]:
        file_id = f"file-{uuid.uuid4().hex[:20]}"
        obj = {
            "id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
            "filename": filename, "purpose": purpose, "status": "processed",
        }
        self.files[file_id] = obj
        self.file_bytes[file_id] = data
        return obj

    async def upload(self, request: web.Request) -> web.Response:
        self.uploads_started += 1
        await asyncio.sleep(self.upload_delay_s)  # a large batch file takes a while to send
        form = await request.post()
        upload = form.get("file")
        purpose = str(form.get("purpose", ""))
        if upload is None or not hasattr(upload, "file"):
            return _error(400, "'file' is a required multipart field")
        if purpose != "batch":
            return _error(400, f"purpose {purpose!r}: this server only takes 'batch'")
        self.files_uploaded += 1
        return web.json_response(self._new_file(upload.file.read(), purpose, upload.filename or "upload.jsonl"))

    async def file_object(self, request: web.Request) -> web.Response:
        obj = self.files.get(request.match_info["file_id"])
        return web.json_response(obj) if obj else _error(404, "No such file", "file_not_found")

    async def file_content(self, request: web.Request) -> web.Response:
        data = self.file_bytes.get(request.match_info["file_id"])
        if data is None:
            return _error(404, "No such file", "file_not_found")
        return web.Response(body=data, content_type="application/octet-stream")

    # ------------------------------------------------------------------ batches
    async def create_batch(self, request: web.Request) -> web.Response:
        body = await request.json()
        input_file_id = body.get("input_file_id")
        if input_file_id not in self.file_bytes:
            return _error(404, f"input file {input_file_id!r} not found", "file_not_found")
        if body.get("endpoint") != "/v1/chat/completions":
            return _error(400, f"endpoint {body.get('endpoint')!r} is not supported here")
        if body.get("completion_window") != "24h":
            return _error(400, "completion_window must be '24h'")
        self.batches_created += 1
        index = self.batches_created
        fate = "complete"
        if index <= self.expire_batches:
            fate = "expire"
        elif index <= self.expire_batches + self.cancel_batches:
            fate = "cancel"
        elif index <= self.expire_batches + self.cancel_batches + self.fail_batches:
            fate = "fail"
        batch_id = f"batch_{uuid.uuid4().hex[:20]}"
        lines, errors = self._read_lines(self.file_bytes[input_file_id])
        if fate == "fail":  # as if the input had failed validation
            errors = errors or [{"code": "invalid_request", "message": "injected validation failure", "line": 1}]
        now = time.time()
        self.batches[batch_id] = {
            "object": {
                "id": batch_id, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                "input_file_id": input_file_id, "completion_window": "24h", "status": "validating",
                "output_file_id": None, "error_file_id": None, "created_at": int(now),
                "in_progress_at": None, "expires_at": int(now) + 86400, "finalizing_at": None,
                "completed_at": None, "failed_at": None, "expired_at": None, "cancelling_at": None,
                "cancelled_at": None, "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": body.get("metadata"),
            },
            "lines": lines, "validation_errors": errors, "fate": fate, "created": now,
            "results": {}, "finished": False,
        }
        return web.json_response(self._advance(batch_id))

    @staticmethod
    def _read_lines(data: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        lines, errors, seen = [], [], set()
        for number, raw in enumerate(data.splitlines(), start=1):
            try:
                line = json.loads(raw)
                ok = (
                    isinstance(line.get("custom_id"), str) and line.get("method") == "POST"
                    and line.get("url") == "/v1/chat/completions" and isinstance(line.get("body"), dict)
                )
            except ValueError:
                ok = False
            if not ok:
                errors.append({"code": "invalid_request", "message": "not a valid batch request line", "line": number})
            elif line["custom_id"] in seen:
                errors.append({"code": "duplicate_custom_id", "message": "custom_id repeated", "line": number})
            else:
                seen.add(line["custom_id"])
                lines.append(line)
        return lines, errors

    def _answer_item(self, batch: dict[str, Any], line: dict[str, Any]) -> None:
        custom_id = line["custom_id"]
        rng = random.Random(f"{self.seed}:{custom_id}")
        if self.item_error_rate and custom_id not in self.failed_once and rng.random() < self.item_error_rate:
            self.failed_once.add(custom_id)
            batch["results"][custom_id] = (
                "error",
                {"status_code": 500, "request_id": uuid.uuid4().hex,
                 "body": {"error": {"message": self.error_message, "type": "server_error"}}},
                None,
            )
            return
        self.answered[custom_id] += 1
        batch["results"][custom_id] = (
            "output",
            {"status_code": 200, "request_id": uuid.uuid4().hex, "body": chat_completion(line["body"], self.content)},
            None,
        )

    def _advance(self, batch_id: str) -> dict[str, Any]:
        """Move a batch along its clock; write its output and error files when it ends."""
        with self._lock:
            batch = self.batches[batch_id]
            obj = batch["object"]
            if batch["finished"]:
                return obj
            elapsed = time.time() - batch["created"]
            lines = batch["lines"]
            if batch["validation_errors"]:
                if elapsed >= self.step_s:
                    obj.update(status="failed", failed_at=int(time.time()),
                               errors={"object": "list", "data": batch["validation_errors"]})
                    batch["finished"] = True
                    self.statuses_seen["failed"] += 1
                return obj
            if elapsed < self.step_s:
                self.statuses_seen["validating"] += 1
                return obj
            obj["in_progress_at"] = obj["in_progress_at"] or int(time.time())
            progress = min(1.0, (elapsed - self.step_s) / self.step_s)
            limit = len(lines) // 2 if batch["fate"] in ("expire", "cancel") else len(lines)
            due = min(limit, int(round(progress * len(lines))))
            for line in lines[len(batch["results"]):due]:
                self._answer_item(batch, line)
            counts = obj["request_counts"]
            counts["completed"] = sum(kind == "output" for kind, _, _ in batch["results"].values())
            counts["failed"] = sum(kind == "error" for kind, _, _ in batch["results"].values())
            if len(batch["results"]) < limit or progress < 1.0:
                obj["status"] = "in_progress"
                self.statuses_seen["in_progress"] += 1
                return obj
            if batch["fate"] == "cancel" and obj["status"] != "cancelling":
                obj.update(status="cancelling", cancelling_at=int(time.time()))
                self.statuses_seen["cancelling"] += 1
                return obj
            if batch["fate"] == "complete" and elapsed < 3 * self.step_s:
                obj["status"] = "finalizing"
                obj["finalizing_at"] = obj["finalizing_at"] or int(time.time())
                self.statuses_seen["finalizing"] += 1
                return obj
            if batch["fate"] == "expire":
                for line in lines[len(batch["results"]):]:
                    batch["results"][line["custom_id"]] = (
                        "error", None,
                        {"code": "batch_expired", "message": "This request could not be executed before the "
                         "completion window expired."},
                    )
                counts["failed"] = sum(kind == "error" for kind, _, _ in batch["results"].values())
            self._write_result_files(batch)
            final = {"complete": "completed", "expire": "expired", "cancel": "cancelled"}[batch["fate"]]
            obj["status"] = final
            obj[{"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}[final]] = int(time.time())
            batch["finished"] = True
            self.statuses_seen[final] += 1
            return obj

    def _write_result_files(self, batch: dict[str, Any]) -> None:
        outputs, errors = [], []
        for custom_id, (kind, response, error) in batch["results"].items():
            record = {"id": f"batch_req_{uuid.uuid4().hex[:16]}", "custom_id": custom_id,
                      "response": response, "error": error}
            (outputs if kind == "output" else errors).append(json.dumps(record))
        obj = batch["object"]
        if outputs:
            obj["output_file_id"] = self._new_file(("\n".join(outputs) + "\n").encode(), "batch_output", "output.jsonl")["id"]
        if errors:
            obj["error_file_id"] = self._new_file(("\n".join(errors) + "\n").encode(), "batch_output", "errors.jsonl")["id"]

    async def get_batch(self, request: web.Request) -> web.Response:
        batch_id = request.match_info["batch_id"]
        if batch_id not in self.batches:
            return _error(404, f"No batch found with id '{batch_id}'", "batch_not_found")
        return web.json_response(self._advance(batch_id))

    async def list_batches(self, request: web.Request) -> web.Response:
        limit = int(request.query.get("limit", "20"))
        after = request.query.get("after")
        ids = list(reversed(self.batches))  # newest first, as the API lists them
        if after in ids:
            ids = ids[ids.index(after) + 1:]
        page = [self._advance(batch_id) for batch_id in ids[:limit]]
        return web.json_response({
            "object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(ids) > limit,
        })

    async def cancel_batch(self, request: web.Request) -> web.Response:
        batch_id = request.match_info["batch_id"]
        if batch_id not in self.batches:
            return _error(404, f"No batch found with id '{batch_id}'", "batch_not_found")
        self.batches[batch_id]["fate"] = "cancel"
        return web.json_response(self._advance(batch_id))

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.sync_calls += 1
        self.answered[f"sync:{json.dumps(body.get('messages'), sort_keys=True)}"] += 1
        await asyncio.sleep(self.chat_delay_s)
        return web.json_response(chat_completion(body, self.content))

    # ------------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 10.0, port: int = 0) -> "BatchServer":
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._runner = web.AppRunner(self.app())
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", port)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="batch-server", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s):
            raise RuntimeError("batch server did not start")
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=timeout_s)

    def __enter__(self) -> "BatchServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--step-s", type=float, default=1.0, help="seconds per batch stage")
    parser.add_argument("--item-error-rate", type=float, default=0.0)
    parser.add_argument("--expire-batches", type=int, default=0)
    parser.add_argument("--cancel-batches", type=int, default=0)
    args = parser.parse_args(argv)
    server = BatchServer(step_s=args.step_s, item_error_rate=args.item_error_rate,
                         expire_batches=args.expire_batches, cancel_batches=args.cancel_batches)
    server.start(port=args.port)
    print(f"READY {server.port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
