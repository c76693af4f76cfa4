"""An OpenAI-compatible loopback server whose judges carry planted biases, for the judge_bias probes.

``POST /v1/chat/completions`` answers by the request's ``model``:

- ``gen-<family>`` — a generator: a question whose length (9 to 38 words) and case number follow the
  prompt's hash alone, opened by the family's signature word (``Alphawise`` for ``gen-alpha``), so every
  family's questions have the same length distribution;
- judges — a verdict read off the rubric prompt (the Bloom levels in the order the system message
  lists them, the knowledge units of the last user message, the question inside its tags):

  * ``fair``: every criterion a function of the question's content alone (the hash of its text
    without the signature word), so the same item gets the same verdict from either family;
  * ``position``: as ``fair``, but on a third of the questions (by hash) the first-listed level;
  * ``selfpref-<family>``: as ``fair``, but on its family's questions yes on every yes/no
    criterion and the level ``Create``;
  * ``length``: as ``fair``, but readable only under 18 words and the level rising with length;
  * ``noisy``: as ``fair``, but on about a quarter of (question, seed) pairs the opposite readable
    and another level (inconsistent across seeds).

``requests`` counts the completions asked, per model in ``by_model``. Runs in a thread of the
test process (:meth:`PlantedJudgeServer.start`, or ``with PlantedJudgeServer() as server``), on
a free loopback port. While :meth:`PlantedJudgeServer.hold_generators` is in force, generator
requests wait unanswered (a job that is generating for as long as a test needs, at no CPU cost)
until :meth:`PlantedJudgeServer.release_generators`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from collections import Counter
from typing import Any

from aiohttp import web

LEVELS = ("Remember", "Understand", "Apply", "Analyze", "Evaluate", "Create")
FILLER = ("explain how the balanced tree keeps its height logarithmic after a sequence of "
          "insertions and deletions when keys arrive in sorted order and compare it with the "
          "plain binary search tree on the same input").split()
_QUESTION = re.compile(r"<question>\s*(.*?)\s*</question>", re.DOTALL)
_LEVEL_LIST = re.compile(r"one of: ([A-Za-z, ]+)\.")
_UNITS = re.compile(r"^Knowledge units: (.*)$", re.MULTILINE)


def signature(family: str) -> str:
    return family.capitalize() + "wise"


def _hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def generated_question(prompt: str, family: str) -> str:
    h = _hash(prompt)
    return f"{signature(family)}, " + " ".join(FILLER[: 6 + h % 30]) + f" (case {h % 999_983})?"


def content(question: str) -> str:
    """The question without its generator's signature word: what an unbiased judge reads."""
    return question.split(", ", 1)[1] if question.split(", ", 1)[0].endswith("wise") else question


def fair_verdict(question: str, units: list[str]) -> dict[str, Any]:
    h = _hash(content(question))
    return {"unique": (h >> 3) % 4 != 0, "readable": (h >> 5) % 4 != 0, "answerable": (h >> 7) % 3 != 0,
            "bloom_level": LEVELS[h % 6], "knowledge_units": [sorted(units)[h % len(units)]]}


def verdict(model: str, messages: list[dict[str, str]], seed: Any) -> dict[str, Any]:
    system = next(m["content"] for m in messages if m["role"] == "system")
    last = [m["content"] for m in messages if m["role"] == "user"][-1]
    question = _QUESTION.search(last).group(1)
    units = [u.strip() for u in _UNITS.search(last).group(1).split(";")]
    listed = [level.strip() for level in _LEVEL_LIST.search(system).group(1).split(",")]
    answer = fair_verdict(question, units)
    h = _hash(content(question))
    words = len(question.split())
    if model == "position" and (h >> 9) % 3 == 0:
        answer["bloom_level"] = listed[0]
    elif model.startswith("selfpref-") and question.startswith(signature(model.split("-", 1)[1])):
        answer.update(unique=True, readable=True, answerable=True, bloom_level="Create")
    elif model == "length":
        answer.update(readable=words < 18, bloom_level=LEVELS[min(5, words // 7)])
    elif model == "noisy" and _hash(f"{question}|{seed}") % 4 == 0:
        answer.update(readable=not answer["readable"], bloom_level=LEVELS[(h + 1 + _hash(str(seed)) % 5) % 6])
    return answer


class PlantedJudgeServer:
    def __init__(self) -> None:
        self.requests = 0
        self.by_model: Counter[str] = Counter()
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._generators_free: asyncio.Event | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        model = str(body.get("model"))
        self.requests += 1
        self.by_model[model] += 1
        messages = body["messages"]
        if model.startswith("gen-"):
            await self._generators_free.wait()  # type: ignore[union-attr]
            content = json.dumps({"question": generated_question(messages[-1]["content"], model[4:])})
        else:
            content = json.dumps(verdict(model, messages, body.get("seed")))
        return web.json_response({
            "id": "chatcmpl-planted", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 30, "total_tokens": 130},
        })

    def start(self, timeout_s: float = 10.0) -> "PlantedJudgeServer":
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._generators_free = asyncio.Event()
            self._generators_free.set()
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._complete)
            runner = web.AppRunner(app)
            self._loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="planted-judge-server", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s):
            raise RuntimeError("planted judge server did not start")
        return self

    def _in_loop(self, action) -> None:
        async def call() -> None:
            action()

        asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout=10)  # type: ignore[arg-type]

    def hold_generators(self) -> None:
        """From now on, generator requests wait unanswered until :meth:`release_generators`."""
        self._in_loop(self._generators_free.clear)  # type: ignore[union-attr]

    def release_generators(self) -> None:
        """Answer the held generator requests and every one after."""
        self._in_loop(self._generators_free.set)  # type: ignore[union-attr]

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self.release_generators()  # a held request would hold up the server's shutdown
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=timeout_s)

    def __enter__(self) -> "PlantedJudgeServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
