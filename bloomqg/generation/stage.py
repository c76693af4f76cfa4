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

Passes: a strategy of more than one pass (``refine``) runs its passes in turn, pass by pass
over the pending prompts; each later pass's messages come from the prompts row
(``passes_json``) with the previous pass's question and answer filled in.  Each pass's record
(raw text, question, parse outcome, tokens, timing, cost, cache key) is kept in the row's
``passes_json``; a pass before the last is checkpointed as ``{"batch", "pass", "records"}``
lines, so a resumed job redoes at most the batch in flight of the pass in flight.  A row whose
pass wrote no question ends there, failed, naming the pass.

Response prefill: when on (the model entry's ``response_prefill``, carried by an in-process
generator), each request gets a final assistant message with the opening of the JSON answer its
prompt shows (:func:`bloomqg.inputs.prompts.with_response_prefill`), and the generator records the
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

from bloomqg.inputs.chat import (
    AnswerRateError,
    ChatRequest,
    Completion,
    DecodingParams,
    TextGenerator,
    refuse_low_answer_rate,
)
from bloomqg.store.parquet_io import write_frame
from bloomqg.inputs.parsing import MAX_QUESTION_CHARS, parse_generation, prompt_example_questions
from bloomqg.store.stored_text import stored_or_none
from bloomqg.inputs.prompts import fill_later_pass, messages_from_json, prompt_passes, with_response_prefill
from bloomqg.store.provenance import sha256_text
from bloomqg.store.frames import GENERATIONS, PROMPTS

logger = logging.getLogger(__name__)

#: tqdm refresh interval: often enough to watch, rare enough to keep log files short.
PROGRESS_MIN_INTERVAL_S = 5.0


class TooFewGenerationsError(AnswerRateError):
    """An API generator's calls failed on more of its prompts than ``min_answer_rate`` allows."""


def check_generation_rate(model_name: str, frame: pd.DataFrame, min_answer_rate: float) -> None:
    """Refuse a generator whose calls failed (``parse_status`` ``error``: no answer, not an answer
    that did not parse) on more than ``1 - min_answer_rate`` of its prompts, as a judge is
    refused (:func:`bloomqg.inputs.chat.refuse_low_answer_rate`, which both use): the study would judge and
    score a cell of errors as if it had been written."""
    failed = frame[frame["parse_status"] == "error"]
    refuse_low_answer_rate("model", model_name, asked=len(frame),
                           failure_reasons=failed["parse_error"].fillna("no reason recorded").tolist(),
                           min_answer_rate=min_answer_rate, items="prompts", error=TooFewGenerationsError)


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


def load_checkpoint(
    path: str | Path, run_key: dict[str, Any], pass_records: dict[str, list[dict[str, Any]]] | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Finished rows and number of batches from a checkpoint; ([], 0) when absent, torn-empty
    or stale.  ``pass_records`` (when given) receives the records of passes before the last,
    per prompt id, in pass order."""
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
        if "pass" in record:  # a pass before the last: records, not rows
            if pass_records is not None:
                for item in record["records"]:
                    pass_records.setdefault(item["prompt_id"], []).append(item["record"])
        else:
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
        self._write({"batch": batch, "rows": rows})

    def append_pass(self, batch: int, pass_index: int, records: list[dict[str, Any]]) -> None:
        """A batch of a pass before the last: ``records`` of ``{"prompt_id", "record"}``."""
        self._write({"batch": batch, "pass": pass_index, "records": records})

    def _write(self, line: dict[str, Any]) -> None:
        self.handle.write(json.dumps(line, ensure_ascii=False) + "\n")
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def close(self) -> None:
        self.handle.close()


def _example_questions(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The questions of the JSON answer examples the user messages show: an answer that
    echoes one wrote no question."""
    return [question for message in messages if message.get("role") == "user"
            for question in prompt_example_questions(str(message.get("content", "")))]


def pass_record(
    pass_name: str,
    answer_fields: Sequence[str],
    messages: Sequence[dict[str, Any]],
    completion: Completion,
    knowledge_units: Sequence[str],
    max_question_chars: int = MAX_QUESTION_CHARS,
) -> dict[str, Any]:
    """What one pass of one prompt gave: the completion, parsed for the pass's answer fields.
    The raw text is stored text too (:func:`bloomqg.store.stored_text.storable_text`): a reply the
    checkpoint or Parquet cannot encode fails no cell, and its replay from the cache none either."""
    raw_text = stored_or_none(completion.text)
    if completion.text is None:
        parsed = {"new_question": None, "identified_bloom_level": None, "identified_knowledge_units": None,
                  "parse_status": "error", "parse_error": completion.error or "generation failed"}
    else:
        answer = parse_generation(completion.text, list(answer_fields), knowledge_units=knowledge_units,
                                  example_questions=_example_questions(messages),
                                  max_question_chars=max_question_chars)
        parsed = {"new_question": answer.new_question, "identified_bloom_level": answer.identified_bloom_level,
                  "identified_knowledge_units": answer.identified_knowledge_units,
                  "parse_status": answer.parse_status, "parse_error": answer.parse_error}
    return {
        "pass": pass_name, "answer_fields": list(answer_fields), "raw_text": raw_text, **parsed,
        "finish_reason": completion.finish_reason, "n_prompt_tokens": completion.n_prompt_tokens,
        "n_completion_tokens": completion.n_completion_tokens, "latency_s": completion.latency_s,
        "batch_index": completion.batch_index, "cached": completion.cached, "cost_usd": completion.cost_usd,
        "cache_key": completion.extra.get("cache_key"),
    }


def _total(values: Sequence[Any]) -> Any:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def final_row(prompt: dict[str, Any], records: Sequence[dict[str, Any]], model_name: str, seed: int) -> dict[str, Any]:
    """One GENERATIONS row from a prompt row and the records of the passes it ran (all of them,
    or up to the one that wrote no question).  The question, raw text and parse outcome are the
    last record's; the identifications come from the pass that asks for them; tokens, latency
    and cost are summed over the passes."""
    last = records[-1]
    several = len(records) > 1 or len(prompt_passes(prompt)) > 1

    def noted(record: dict[str, Any]) -> str | None:
        return f"pass {record['pass']}: {record['parse_error']}" if several and record["parse_error"] else record["parse_error"]

    identified = {}
    for column, field_name in (("identified_bloom_level", "bloom_level"), ("identified_knowledge_units", "knowledge_unit")):
        identified[column] = next((r[column] for r in records if field_name in r["answer_fields"]), None)
    # Asked for the original's units but none recognised: an empty set, not null, so that a cell
    # whose model never names one scores 0% like a cell where it sometimes does (null: not asked).
    if identified["identified_knowledge_units"] is None and any(
            "knowledge_unit" in r["answer_fields"] for r in records):
        identified["identified_knowledge_units"] = []
    if last["parse_status"] == "ok":
        notes = [note for note in map(noted, records) if note]
        parse_error = "; ".join(notes) or None
    else:
        parse_error = noted(last)
    return {
        "prompt_id": prompt["prompt_id"],
        "item_id": prompt["item_id"],
        "dataset": prompt["dataset"],
        "strategy": prompt["strategy"],
        "model": model_name,
        "original_question": prompt["original_question"],
        "original_bloom_level": prompt["original_bloom_level"],
        "original_knowledge_units": list(prompt["original_knowledge_units"]),
        "raw_text": last["raw_text"],
        "new_question": last["new_question"],
        **identified,
        "parse_status": last["parse_status"],
        "parse_error": parse_error,
        "finish_reason": last["finish_reason"],
        "n_prompt_tokens": _total([r["n_prompt_tokens"] for r in records]),
        "n_completion_tokens": _total([r["n_completion_tokens"] for r in records]),
        "latency_s": _total([r["latency_s"] for r in records]),
        "batch_index": last["batch_index"],
        "seed": seed,
        "prompt_hash": prompt["prompt_hash"],
        "cached": all(bool(r["cached"]) for r in records),
        "cost_usd": _total([r["cost_usd"] for r in records]),
        "cache_key": last["cache_key"],
        "passes_json": json.dumps(list(records), ensure_ascii=False),
    }


def completion_row(
    prompt: dict[str, Any],
    completion: Completion,
    model_name: str,
    seed: int,
    knowledge_units: Sequence[str],
) -> dict[str, Any]:
    """One GENERATIONS row of a one-pass prompt from what the generator returned for it."""
    first = prompt_passes(prompt)[0]
    messages = json.loads(prompt["messages_json"]) if prompt.get("messages_json") else []
    record = pass_record(first["name"], first.get("answer_fields", []), messages, completion, knowledge_units)
    return final_row(prompt, [record], model_name, seed)


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
    min_answer_rate: float | None = None,
    max_question_chars: int = MAX_QUESTION_CHARS,
) -> pd.DataFrame:
    """Generate and parse one question per prompt row; write ``out_path`` (GENERATIONS).

    ``max_question_chars`` (``input_limits.max_question_chars``): a longer question fails its row.

    ``min_answer_rate`` (an API generator's): below it the job raises
    :class:`TooFewGenerationsError` and drops the checkpoint, whose failed rows a resume would
    otherwise keep as done; the answered calls are in the call cache, so a rerun pays for none.

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
    pass_records: dict[str, list[dict[str, Any]]] = {}
    done_rows, done_batches = load_checkpoint(checkpoint_path, run_key, pass_records)
    done_ids = {row["prompt_id"] for row in done_rows}
    prompt_rows = {row["prompt_id"]: row for row in prompts.to_dict("records")}
    passes = {pid: prompt_passes(row) for pid, row in prompt_rows.items()}
    stray = (done_ids | set(pass_records)) - set(prompt_rows)
    if stray or len(done_ids) != len(done_rows):
        raise ValueError(f"checkpoint {checkpoint_path} holds unknown or duplicate prompt ids "
                         f"{sorted(stray)[:5]}; delete it to start afresh")
    records = {pid: list(pass_records.get(pid, [])) for pid in prompt_rows if pid not in done_ids}
    n_passes = max((len(p) for p in passes.values()), default=1)
    if done_rows or pass_records:
        logger.info("resuming from %s: %d of %d prompts already done in %d batches",
                    checkpoint_path, len(done_rows), len(prompt_rows), done_batches)
    logger.info("generating %d questions with %s (%d pass(es))", len(records), model_name, n_passes)

    def pass_messages(pid: str, index: int) -> tuple[dict[str, str], ...]:
        """Pass ``index``'s messages; a later pass's get the previous pass's question and answer."""
        if index == 0:
            return messages[pid]
        previous = records[pid][-1]
        chat = fill_later_pass(passes[pid][index]["messages"], previous_question=previous["new_question"],
                               previous_answer=previous["raw_text"] or "")
        return with_response_prefill(chat, prompt_id=pid)[0] if prefill else chat

    # in-process generators resolve one batch size for the job, kept across a resume
    resolve = getattr(generator, "resolve_batch_size", None)
    batch_size = checkpoint_batch_size(checkpoint_path) if (done_rows or pass_records) else None
    first_requests = [ChatRequest(pid, messages[pid]) for pid, done in records.items() if not done]
    if batch_size is None and resolve is not None and (first_requests or records):
        batch_size = int(resolve(first_requests or [ChatRequest(pid, messages[pid]) for pid in records], params))
    if (done_rows or pass_records) and batch_size is not None:
        logger.info("resuming with the batch size of the first run: %d", batch_size)

    fresh = not done_rows and not pass_records
    writer = _CheckpointWriter(checkpoint_path, run_key, fresh=fresh, batch_size=batch_size)
    total = len(prompt_rows) * n_passes
    progress = tqdm(total=total, initial=total - sum(n_passes - len(r) for r in records.values()),
                    desc=f"generate {model_name}", unit="call", mininterval=PROGRESS_MIN_INTERVAL_S, file=sys.stderr)
    started = time.perf_counter()
    counters = {"tokens": 0, "batches": 0}
    extra = {"batch_size": batch_size} if batch_size is not None and resolve is not None else {}

    def finish(rows: list[dict[str, Any]]) -> None:
        # number batches as an uninterrupted run would: resumption skips whole leading batches
        for row in rows:
            if row["batch_index"] is not None:
                row["batch_index"] += done_batches
        writer.append(done_batches + counters["batches"], rows)
        counters["batches"] += 1
        for row in rows:
            records.pop(row["prompt_id"], None)

    try:
        for index in range(n_passes):
            todo = [pid for pid, done in records.items() if len(done) == index]
            if index > 0:  # a row whose previous pass wrote no question ends there
                stopped = [pid for pid in todo if records[pid][-1]["new_question"] is None]
                if stopped:
                    finish([final_row(prompt_rows[pid], records[pid], model_name, params.seed) for pid in stopped])
                    progress.update(len(stopped) * (n_passes - index))
                todo = [pid for pid in todo if pid not in stopped]
            if not todo:
                continue
            requests = [ChatRequest(pid, pass_messages(pid, index)) for pid in todo]
            request_messages = {r.request_id: r.messages for r in requests}

            def on_batch(completions: list[Completion], index: int = index,
                         request_messages: dict[str, Any] = request_messages) -> None:
                new = []
                for c in completions:
                    definition = passes[c.request_id][index]
                    new.append(pass_record(definition["name"], definition.get("answer_fields", []),
                                           list(request_messages[c.request_id]), c, knowledge_units,
                                           max_question_chars))
                last = [len(passes[c.request_id]) == index + 1 for c in completions]
                for c, record in zip(completions, new):
                    records[c.request_id].append(record)
                finished = [c.request_id for c, is_last in zip(completions, last) if is_last]
                ongoing = [c.request_id for c, is_last in zip(completions, last) if not is_last]
                if ongoing:
                    writer.append_pass(done_batches + counters["batches"], index,
                                       [{"prompt_id": pid, "record": records[pid][-1]} for pid in ongoing])
                    counters["batches"] += 1
                if finished:
                    finish([final_row(prompt_rows[pid], records[pid], model_name, params.seed) for pid in finished])
                counters["tokens"] += sum(c.n_completion_tokens or 0 for c in completions)
                elapsed = time.perf_counter() - started
                rate = counters["tokens"] / elapsed if elapsed else 0.0
                failed = sum(record["parse_status"] != "ok" for record in new)
                progress.update(len(completions))
                progress.set_postfix(tok_s=f"{rate:.1f}")
                logger.info("checkpointed pass %s batch: %d items (%d not parsed), %.1f tok/s",
                            passes[completions[0].request_id][index]["name"] if completions else index,
                            len(completions), failed, rate)

            completions = generator.complete(requests, params, on_batch=on_batch, **extra)
            if len(completions) != len(requests):
                raise RuntimeError(f"generator returned {len(completions)} completions for "
                                   f"{len(requests)} requests")
    finally:
        progress.close()
        writer.close()

    final_rows, _ = load_checkpoint(checkpoint_path, run_key)
    by_id = {row["prompt_id"]: row for row in final_rows}
    missing = [pid for pid in prompt_rows if pid not in by_id]
    if missing or len(by_id) != len(final_rows):
        raise RuntimeError(f"checkpoint {checkpoint_path} lacks prompts {missing[:5]} or holds "
                           "duplicates after generation")
    frame = pd.DataFrame([by_id[pid] for pid in prompt_rows], columns=GENERATIONS.names)
    if min_answer_rate is not None:
        try:
            check_generation_rate(model_name, frame, min_answer_rate)
        except TooFewGenerationsError:
            checkpoint_path.unlink(missing_ok=True)
            raise
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
