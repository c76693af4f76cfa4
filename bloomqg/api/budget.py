"""What calls cost: the prompt-token estimate, the spend ledger under the cache and the cap.

* :func:`estimate_prompt_tokens` counts characters, not tokens: a tokenizer for the paid models
  would have to be downloaded at run time. OpenAI's rule of thumb is ~4 characters of English
  per token, and each chat message adds ~3 tokens of framing plus ~3 to prime the reply.
  :mod:`bloomqg.api.estimate` calibrates it with the spend ledger of finished runs.
* :class:`SpendLedger` is ``<cache_dir>/spend.jsonl``: one JSON line per paid answer (cache key,
  model, sync or batch, tokens, the estimate it had, USD), appended with ``O_APPEND`` so the
  parallel jobs of one study can share it (a line is one ``write`` well under ``PIPE_BUF``).
* :class:`Budget` refuses a call when what was spent, plus what calls in flight may still cost,
  plus this call's most (its prompt estimate and its whole ``max_tokens``) would pass the cap.
  Jobs running at the same time see each other's spend but not each other's reservations, so
  parallel jobs may pass the cap by at most what their calls in flight cost.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from bloomqg.inputs.specs import StudySpec

log = logging.getLogger(__name__)

#: Characters per token of English text for OpenAI's tokenizers (their documented rule of thumb).
CHARS_PER_TOKEN = 4.0
#: Tokens of chat framing per message, and to prime the assistant's reply (OpenAI's cookbook).
TOKENS_PER_MESSAGE = 3
TOKENS_REPLY_PRIMING = 3


class BudgetExceededError(RuntimeError):
    """``budget_usd`` stopped calls: the job fails, what was answered is cached."""

    #: First line of the failed job's log (bloomqg.store.logs).
    what_to_do = ("the study's budget_usd cap stopped paid API calls. Every answer already paid for is "
                  "cached and will not be paid again: check what is left with `snakemake estimate_cost`, "
                  "raise budget_usd in the config (or an entry's own budget_usd) and run the workflow again.")


def estimate_prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Prompt tokens of a chat request, from its characters (see the module docstring)."""
    chars = sum(len(str(message.get("content", ""))) for message in messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages) + TOKENS_REPLY_PRIMING


class SpendLedger:
    """``spend.jsonl``: every paid answer through one cache directory, shared by processes."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._offset = 0
        self._total = 0.0
        self._partial = b""
        #: (cache key, batch id) of batch answers recorded: a resumed batch's answers taken
        #: again after a kill were paid once and are recorded once
        self._batch_answers: set[tuple[str, str]] = set()
        #: USD recorded per cache key (a key paid twice, e.g. after a failed cache write, sums)
        self._paid: dict[str, float] = {}

    def record(
        self,
        *,
        key: str,
        model: str,
        mode: str,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        cost_usd: float,
        prompt_estimate: int | None = None,
        batch_id: str | None = None,
    ) -> None:
        """Append one paid answer (one ``write``, so concurrent writers never interleave)."""
        if batch_id is not None:
            self.total()  # reads the lines other processes appended
            if (key, batch_id) in self._batch_answers:
                return
            self._batch_answers.add((key, batch_id))
        line = json.dumps(
            {
                "time": round(time.time(), 3), "key": key, "model": model, "mode": mode,
                "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "prompt_estimate": prompt_estimate, "cost_usd": cost_usd, "batch_id": batch_id,
            },
            separators=(",", ":"),
        ).encode("utf-8") + b"\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def entries(self) -> list[dict[str, Any]]:
        """Every readable line (a torn or foreign line is skipped with a warning)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        for number, line in enumerate(raw.splitlines(), start=1):
            try:
                entry = json.loads(line)
                float(entry["cost_usd"])
            except (ValueError, KeyError, TypeError):
                log.warning("spend ledger %s line %d is not a spend record; skipped", self.path, number)
                continue
            out.append(entry)
        return out

    def total(self) -> float:
        """USD recorded so far, by every process (reads only what was appended since last time)."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return self._total
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # an unfinished last line waits for its end
        for line in lines:
            try:
                entry = json.loads(line)
                cost = float(entry["cost_usd"])
                self._total += cost
                self._paid[entry["key"]] = self._paid.get(entry["key"], 0.0) + cost
                if entry.get("batch_id"):
                    self._batch_answers.add((entry["key"], entry["batch_id"]))
            except (ValueError, KeyError, TypeError):
                log.warning("spend ledger %s: a line is not a spend record; skipped", self.path)
        return self._total


    def paid_for(self, key: str) -> float | None:
        """USD the ledger records for the call ``key`` (every process's lines), or None when it
        records none: the answer came from elsewhere (another cache, a run before the ledger)."""
        self.total()
        return self._paid.get(key)


class Budget:
    """A spending cap in USD over a :class:`SpendLedger`, with reservations for calls in flight."""

    def __init__(self, cap_usd: float, ledger: SpendLedger) -> None:
        if cap_usd < 0:
            raise ValueError(f"budget_usd must be >= 0, got {cap_usd}")
        self.cap_usd = float(cap_usd)
        self.ledger = ledger
        self.reserved = 0.0
        #: once a call was refused, every later one is too: the cap stops calls, it does not
        #: pick the cheapest ones to squeeze in
        self.exhausted = False

    def spent(self) -> float:
        return self.ledger.total()

    def try_reserve(self, amount_usd: float) -> bool:
        """Hold ``amount_usd`` for a call about to be made; False (and no call) past the cap."""
        if self.exhausted or self.spent() + self.reserved + amount_usd > self.cap_usd:
            if not self.exhausted:
                log.warning(
                    "budget_usd $%g reached: spent $%.4f, $%.4f held by calls in flight, next call "
                    "up to $%.4f; no further calls", self.cap_usd, self.spent(), self.reserved, amount_usd,
                )
            self.exhausted = True
            return False
        self.reserved += amount_usd
        return True

    def release(self, amount_usd: float) -> None:
        """A reserved call ended (its real cost, if any, is in the ledger by now)."""
        self.reserved = max(0.0, self.reserved - amount_usd)


def paid_calls(
    study: StudySpec, cells: Iterable[tuple[str, str]], items: Mapping[str, int],
    passes: Iterable[int] | None = None,
) -> dict[str, int]:
    """API calls per ``models.X`` / ``judges.X`` API entry that the study's ``cells``
    (``(dataset, model)`` pairs, one per strategy) make: one per prompt to generate, one per
    generated question and API judge, before the call cache answers any. ``items`` counts each
    dataset's items; a dataset absent from it (not yet downloaded) is not counted, and probes
    (judge_bias, judge validation) come on top.  ``passes`` (one per cell, default 1): the
    generation calls per prompt of the cell's strategy (refine: 2)."""
    calls: dict[str, int] = {}
    judges = [spec.key for spec in study.judges.values() if spec.is_api]
    cells = list(cells)
    for (dataset, model), n_passes in zip(cells, [1] * len(cells) if passes is None else passes):
        if dataset not in items:
            continue
        n = items[dataset] if study.limit_items is None else min(items[dataset], study.limit_items)
        generator = study.models[model]
        if generator.is_api:
            calls[generator.key] = calls.get(generator.key, 0) + n * n_passes
        for key in judges:
            calls[key] = calls.get(key, 0) + n
    return calls


def unbudgeted(study: StudySpec, keys: Iterable[str]) -> list[str]:
    """Those of the ``models.X`` / ``judges.X`` ``keys`` that no ``budget_usd`` caps (neither
    their own nor the study's)."""
    return [key for key in keys if study.budget_of(study.entry(key)) is None]
