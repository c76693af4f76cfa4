"""The question-generation stage: prompts in, a GENERATIONS Parquet file out, resumable.

Checkpoint format: a JSON-lines file.  Line 1 is a header identifying the run (model, decoding
settings, prompt ids and hashes); every further line is one finished batch,
``{"batch": <n>, "rows": [<GENERATIONS row>, ...]}``, written with a single ``write`` and
flushed + fsynced before the next batch starts.  A SIGKILL can therefore only leave a torn last
line, which is discarded on load, so earlier batches survive intact and a rerun redoes at most
the batch that was in flight.  A checkpoint whose header does not match the current run (other
model, settings or prompts) is discarded with a warning rather than mixed in.  The header also
records the batch size an in-process generator resolved for the whole job (``batch_size``): a
resumed job, possibly on another node with other free memory, plans its remaining batches with
it, so they are the batches the uninterrupted job would have run.

Response prefill: when on (the model entry's ``response_prefill``, carried by an in-process
generator), each request gets a final assistant message with the opening of the JSON answer its
prompt shows (:func:`bloomqg.prompts.with_response_prefill`), and the generator records the
prefix + continuation as ``raw_text``.  The prefixes are part of the checkpoint's run key and
of the output's provenance; they derive from the template files the ``prompt_hash`` covers.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.chat import (
    ChatRequest,
    Completion,
    DecodingParams,
    TextGenerator,
)
from bloomqg.parquet_io import write_frame
from bloomqg.parsing import parse_generation, prompt_example_questions
from bloomqg.prompts import messages_from_json, with_response_prefill
from bloomqg.provenance import sha256_text
from bloomqg.frames import GENERATIONS, PROMPTS

logger = logging.getLogger(__name__)

#: tqdm refresh interval: often enough to watch, rare enough to keep log files short.
PROGRESS_MIN_INTERVAL_S = 5.0


def _check_prompts(prompts: pd.DataFrame) -> None:
    missing = [name for name in PROMPTS.names if name not in prompts.columns]
    if missing:
        raise ValueError(f"prompts frame lacks columns {missing}")
    duplicated = prompts.loc[prompts["prompt_id"].duplicated(), "prompt_id"].tolist()
    if duplicated:
        raise ValueError(f"prompts frame has duplicate prompt_id values {duplicated[:5]}")


def _run_key(
    prompts: pd.DataFrame,
    model_name: str,
    params: DecodingParams,
    prefixes: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What a checkpoint must match to be reused; ``prefixes`` maps prompt ids to prefills."""
    identity = "\n".join(f"{pid}\t{h}" for pid, h in zip(prompts["prompt_id"], prompts["prompt_hash"]))
    key: dict[str, Any] = {"model": model_name, "params": asdict(params),
                           "prompts_sha256": sha256_text(identity)}
    if prefixes:  # absent when off, so checkpoints written before prefill existed stay valid
        key["response_prefill_sha256"] = sha256_text(json.dumps(prefixes, sort_keys=True))
    return key


def prefill_enabled(generator: TextGenerator, requested: bool | None, model_name: str) -> bool:
    """Whether to prefill: ``requested``, or the generator's ``response_prefill`` when None.

    Raises ValueError when prefill is requested from a backend that cannot continue an
    assistant message (OpenAI-compatible APIs reject or mishandle a trailing one).
    """
    enabled = bool(getattr(generator, "response_prefill", False)) if requested is None else requested
    if enabled and not getattr(generator, "supports_response_prefill", False):
        raise ValueError(f"model {model_name!r}: response_prefill is only supported by in-process "
                         f"(hf) models, not by {type(generator).__name__}")
    return enabled


def load_checkpoint(path: str | Path, run_key: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Rows and number of batches from a checkpoint; ([], 0) when absent, torn-empty or stale."""
    path = Path(path)
    if not path.exists():
        return [], 0
    lines = path.read_bytes().split(b"\n")
    try:
        header = json.loads(lines[0])
    except (json.JSONDecodeError, IndexError):
        logger.warning("checkpoint %s has no readable header; starting afresh", path)
        path.unlink()
        return [], 0
    if header.get("run") != run_key:
        logger.warning("checkpoint %s belongs to another run (model/settings/prompts changed); "
                       "discarding it", path)
        path.unlink()
        return [], 0
    rows: list[dict[str, Any]] = []
    batches = 0
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            # only the last line can be torn (killed mid-write); anything else is corruption
            if any(later.strip() for later in lines[number:]):
                raise ValueError(f"checkpoint {path}: line {number} is not JSON") from None
            logger.warning("checkpoint %s: dropping a torn last line (batch in flight)", path)
            break
        rows.extend(record["rows"])
        batches += 1
    return rows, batches


def checkpoint_batch_size(path: str | Path) -> int | None:
    """The batch size a checkpoint's header records (None: absent, or written before it was)."""
    path = Path(path)
    if not path.exists():
        return None
    with open(path, "rb") as handle:
        try:
            header = json.loads(handle.readline())
        except json.JSONDecodeError:
            return None
    size = header.get("batch_size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


class _CheckpointWriter:
    """Appends one line per finished batch, durably."""

    def __init__(self, path: Path, run_key: dict[str, Any], fresh: bool,
                 batch_size: int | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if fresh:
            header: dict[str, Any] = {"run": run_key}
            if batch_size is not None:
                header["batch_size"] = batch_size
            self._rewrite(path, [json.dumps(header)])
        else:
            self._truncate_torn_tail(path)
        # kept open across batches and closed by close(): one append per batch
        self.handle = open(path, "a", encoding="utf-8")  # noqa: SIM115

    @staticmethod
    def _rewrite(path: Path, lines: Sequence[str]) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    @staticmethod
    def _truncate_torn_tail(path: Path) -> None:
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
                handle.flush()
                os.fsync(handle.fileno())

    def append(self, batch: int, rows: list[dict[str, Any]]) -> None:
        self.handle.write(json.dumps({"batch": batch, "rows": rows}, ensure_ascii=False) + "\n")
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def close(self) -> None:
        self.handle.close()


def _example_questions(prompt: dict[str, Any]) -> list[str]:
    """The questions of the JSON answer examples the prompt's user messages show: an answer
    that echoes one wrote no question."""
    messages = json.loads(prompt["messages_json"]) if prompt.get("messages_json") else []
    return [question for message in messages if message.get("role") == "user"
            for question in prompt_example_questions(str(message.get("content", "")))]


def completion_row(
    prompt: dict[str, Any],
    completion: Completion,
    model_name: str,
    seed: int,
    knowledge_units: Sequence[str],
) -> dict[str, Any]:
    """One GENERATIONS row from a prompt row and what the generator returned for it."""
    if completion.text is None:
        parsed_values = {
            "new_question": None, "identified_bloom_level": None,
            "identified_knowledge_units": None, "parse_status": "error",
            "parse_error": completion.error or "generation failed",
        }
    else:
        parsed = parse_generation(completion.text, prompt["strategy"], knowledge_units=knowledge_units,
                                  example_questions=_example_questions(prompt))
        parsed_values = {
            "new_question": parsed.new_question,
            "identified_bloom_level": parsed.identified_bloom_level,
            "identified_knowledge_units": parsed.identified_knowledge_units,
            "parse_status": parsed.parse_status,
            "parse_error": parsed.parse_error,
        }
    return {
        "prompt_id": prompt["prompt_id"],
        "item_id": prompt["item_id"],
        "dataset": prompt["dataset"],
        "strategy": prompt["strategy"],
        "model": model_name,
        "original_question": prompt["original_question"],
        "original_bloom_level": prompt["original_bloom_level"],
        "original_knowledge_units": list(prompt["original_knowledge_units"]),
        "raw_text": completion.text,
        **parsed_values,
        "finish_reason": completion.finish_reason,
        "n_prompt_tokens": completion.n_prompt_tokens,
        "n_completion_tokens": completion.n_completion_tokens,
        "latency_s": completion.latency_s,
        "batch_index": completion.batch_index,
        "seed": seed,
        "prompt_hash": prompt["prompt_hash"],
        "cached": completion.cached,
        "cost_usd": completion.cost_usd,
        "cache_key": completion.extra.get("cache_key"),
    }


def generate_questions(
    prompts: pd.DataFrame,
    model_name: str,
    generator: TextGenerator,
    params: DecodingParams,
    *,
    knowledge_units: Sequence[str],
    out_path: str | Path,
    checkpoint_path: str | Path,
    response_prefill: bool | None = None,
) -> pd.DataFrame:
    """Generate and parse one question per prompt row; write ``out_path`` (GENERATIONS).

    Resumable: finished batches are appended to ``checkpoint_path``; a rerun after a crash
    skips the prompt ids found there.  On success ``out_path`` is written atomically with
    provenance and the checkpoint is deleted.  Returns the written frame, in prompt order.

    ``response_prefill`` starts each answer with the opening of the prompt's JSON example;
    None (the default) takes the generator's own setting (``response_prefill`` of an hf model
    entry), False/True override it.
    """
    from tqdm import tqdm

    _check_prompts(prompts)
    out_path, checkpoint_path = Path(out_path), Path(checkpoint_path)
    messages = {
        pid: messages_from_json(text, prompt_id=pid)
        for pid, text in zip(prompts["prompt_id"], prompts["messages_json"])
    }
    prefixes: dict[str, str] = {}
    prefill = prefill_enabled(generator, response_prefill, model_name)
    if prefill:
        for pid, chat in list(messages.items()):
            messages[pid], prefixes[pid] = with_response_prefill(chat, prompt_id=pid)
    run_key = _run_key(prompts, model_name, params, prefixes)
    done_rows, done_batches = load_checkpoint(checkpoint_path, run_key)
    done_ids = {row["prompt_id"] for row in done_rows}
    prompt_rows = {row["prompt_id"]: row for row in prompts.to_dict("records")}
    stray = done_ids - set(prompt_rows)
    if stray or len(done_ids) != len(done_rows):
        raise ValueError(f"checkpoint {checkpoint_path} holds unknown or duplicate prompt ids "
                         f"{sorted(stray)[:5]}; delete it to start afresh")
    pending = [row for pid, row in prompt_rows.items() if pid not in done_ids]
    if done_rows:
        logger.info("resuming from %s: %d of %d prompts already done in %d batches",
                    checkpoint_path, len(done_rows), len(prompt_rows), done_batches)
    logger.info("generating %d questions with %s", len(pending), model_name)
    requests = [ChatRequest(row["prompt_id"], messages[row["prompt_id"]]) for row in pending]
    # in-process generators resolve one batch size for the job, kept across a resume
    resolve = getattr(generator, "resolve_batch_size", None)
    batch_size = checkpoint_batch_size(checkpoint_path) if done_rows else None
    if batch_size is None and resolve is not None and requests:
        batch_size = int(resolve(requests, params))
    if done_rows and batch_size is not None:
        logger.info("resuming with the batch size of the first run: %d", batch_size)

    writer = _CheckpointWriter(checkpoint_path, run_key, fresh=not done_rows, batch_size=batch_size)
    progress = tqdm(total=len(prompt_rows), initial=len(done_rows), desc=f"generate {model_name}",
                    unit="q", mininterval=PROGRESS_MIN_INTERVAL_S, file=sys.stderr)
    started = time.perf_counter()
    counters = {"tokens": 0, "batches": 0}

    def on_batch(completions: list[Completion]) -> None:
        rows = [completion_row(prompt_rows[c.request_id], c, model_name, params.seed,
                               knowledge_units) for c in completions]
        # number batches as an uninterrupted run would: resumption skips whole leading batches
        for row in rows:
            if row["batch_index"] is not None:
                row["batch_index"] += done_batches
        batch_number = done_batches + counters["batches"]
        writer.append(batch_number, rows)
        counters["batches"] += 1
        counters["tokens"] += sum(c.n_completion_tokens or 0 for c in completions)
        elapsed = time.perf_counter() - started
        rate = counters["tokens"] / elapsed if elapsed else 0.0
        failed = sum(row["parse_status"] != "ok" for row in rows)
        progress.update(len(rows))
        progress.set_postfix(tok_s=f"{rate:.1f}")
        logger.info("checkpointed batch %d: %d items (%d not parsed), %d/%d done, %.1f tok/s",
                    batch_number, len(rows), failed, progress.n, len(prompt_rows), rate)

    extra = {"batch_size": batch_size} if batch_size is not None and resolve is not None else {}
    try:
        completions = generator.complete(requests, params, on_batch=on_batch, **extra)
    finally:
        progress.close()
        writer.close()
    if len(completions) != len(requests):
        raise RuntimeError(f"generator returned {len(completions)} completions for "
                           f"{len(requests)} requests")

    final_rows, _ = load_checkpoint(checkpoint_path, run_key)
    by_id = {row["prompt_id"]: row for row in final_rows}
    missing = [pid for pid in prompt_rows if pid not in by_id]
    if missing or len(by_id) != len(final_rows):
        raise RuntimeError(f"checkpoint {checkpoint_path} lacks prompts {missing[:5]} or holds "
                           "duplicates after generation")
    frame = pd.DataFrame([by_id[pid] for pid in prompt_rows], columns=GENERATIONS.names)
    status_counts = frame["parse_status"].value_counts().to_dict()
    provenance = {
        "stage": "generate_questions",
        "model_name": model_name,
        "generator": dict(getattr(generator, "provenance", {})),
        "decoding": asdict(params),
        "prompt_hashes": sorted(set(prompts["prompt_hash"])),
        "n_prompts": len(prompt_rows),
        "resumed_from_batches": done_batches,
        "batch_size": batch_size,
        "parse_status_counts": status_counts,
        # distinct prefixes and how many prompts each started; {} when prefill is off
        "response_prefill": {"enabled": prefill,
                             "prefixes": dict(sorted(Counter(prefixes.values()).items()))},
    }
    write_frame(frame, out_path, GENERATIONS, provenance)
    checkpoint_path.unlink(missing_ok=True)
    elapsed = time.perf_counter() - started
    logger.info("wrote %s: %d rows %s, %d new tokens in %.1f s", out_path, len(frame),
                status_counts, counters["tokens"], elapsed)
    return frame
