"""Questions an Inspect task generated, as the generation rows of one cell.

A models entry ``backend: inspect`` with ``logs: PATH`` (an ``.eval`` log, a folder of them, or
a list) takes its questions from finished Inspect runs instead of calling a model, one cell at a
time: a log may cover some of the entry's cells (a run of one dataset and strategy), the other
cells coming from its other logs. Every sample that answers a prompt of the cell (named by its
``metadata.prompt_id``, else by its ``id``, else found by its input text) becomes that prompt's
generation row, its answer parsed exactly as the generation stage parses a model's (so judges,
votes, metrics and the report cannot tell the difference). Headers are read first
(``read_eval_log(header_only=True)``) and a log of another cell is passed over; samples are
streamed (``read_eval_log_samples``). ``bloomqg/questions`` (:mod:`bloomqg.inspect_eval.questions`)
is the task whose samples carry bloomqg's own prompts (docs/inspect.md).

What the import cannot vouch for is recorded per sample in the generations file's provenance: a
sample whose input is not the prompt bloomqg would have sent (its answer is still that
prompt's), and an answer that holds no question (the parser's reason; ``parse_status`` failed).
A prompt no sample answers, a prompt answered twice, a ``metadata.prompt_id`` of the cell's
strategy that is not one of its prompts, or a strategy whose passes the sample's answers do not
match stops the import with a :class:`InspectImportError` naming the log and the sample.

A log is untrusted input: before inspect_ai reads any of it, its zip directory is read
(:mod:`bloomqg.store.archives`), and a log whose header or any one sample would inflate past
``input_limits.max_log_member_mb`` is refused (inspect_ai holds a member whole while it parses
it; a 400 KB log with a 400 MB header took it 20 s and 1.3 GB).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.inputs.chat import Completion
from bloomqg.store.archives import ArchiveUnreadable, extent
from bloomqg.store.config_schema import file_schema
from bloomqg.store.frames import GENERATIONS
from bloomqg.generation.stage import final_row, pass_record
from bloomqg.inputs.prompts import fill_later_pass, messages_from_json, prompt_passes

logger = logging.getLogger(__name__)

#: Inspect's stop reasons as GENERATIONS ``finish_reason`` values (others are kept as written).
_FINISH = {"stop": "stop", "max_tokens": "length", "model_length": "length"}


class InspectImportError(ValueError):
    """A log or sample that cannot become a generation row; the message names both."""


@dataclass(frozen=True)
class LogSource:
    """What a generation file's provenance says of one log it was imported from."""

    path: str
    task: str
    task_file: str | None
    eval_id: str
    model: str
    created: str
    n_samples: int
    #: how many of its samples were matched by each way of :data:`MATCHED_BY`
    matched_by: Mapping[str, int] = field(default_factory=dict)
    #: per sample whose input is not the prompt bloomqg would have sent: sample, prompt, how
    input_mismatches: Sequence[Mapping[str, str]] = ()
    #: per sample whose answer held no question: sample, prompt and the parser's reason
    parse_failures: Sequence[Mapping[str, str]] = ()

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "matched_by": dict(self.matched_by),
                "input_mismatches": [dict(m) for m in self.input_mismatches],
                "parse_failures": [dict(f) for f in self.parse_failures]}


def log_files(logs: str | Path | Sequence[str | Path]) -> list[Path]:
    """The ``.eval`` logs named by ``logs``: files as given, folders searched (sorted); none found
    is an error naming where it looked."""
    entries = [logs] if isinstance(logs, (str, Path)) else list(logs)
    found: list[Path] = []
    for entry in map(Path, entries):
        if entry.is_dir():
            found += sorted(entry.rglob("*.eval"))
        elif entry.is_file():
            found.append(entry)
        else:
            raise InspectImportError(f"Inspect logs {entry}: no such file or folder")
    if not found:
        raise InspectImportError(f"Inspect logs {', '.join(map(str, entries))}: no .eval log there")
    return found


def _answers(sample: Any, n_passes: int, where: str) -> list[Completion]:
    """One completion per pass run: the output's for a one-pass strategy; for several passes,
    the assistant messages of the conversation, in order (the output's usage, time and stop
    reason go to the last)."""
    output = sample.output
    usage = output.usage if output is not None else None
    error = sample.error.message if sample.error is not None else None
    stop = output.stop_reason if output is not None and output.choices else None
    if n_passes == 1:
        text = output.completion if output is not None and output.choices else None
        texts = [text if text or error is None else None]
    else:
        texts = [message.text for message in sample.messages if message.role == "assistant"]
        # fewer answers than passes: a pass that wrote no question ended them, as in the stage
        if not 1 <= len(texts) <= n_passes:
            raise InspectImportError(f"{where}: the strategy has {n_passes} passes but the sample's "
                                     f"conversation has {len(texts)} assistant answers")
    completions = []
    for index, text in enumerate(texts):
        last = index == len(texts) - 1
        completions.append(Completion(
            request_id=str(sample.id), text=text,
            finish_reason=(_FINISH.get(stop, stop) if last else "stop") if text is not None else "error",
            n_prompt_tokens=usage.input_tokens if usage is not None and last else None,
            n_completion_tokens=usage.output_tokens if usage is not None and last else None,
            latency_s=output.time if output is not None and last else None,
            error=error if text is None else None,
        ))
    return completions


#: How a sample was matched to its prompt, in the order tried.
MATCHED_BY = ("metadata.prompt_id", "id", "input")


def _message_text(message: Any) -> str:
    return " ".join(str(message.text).split())


def _sample_turns(sample: Any) -> list[tuple[str, str]]:
    """The sample's input as (role, whitespace-normalised text) turns; a text input is one user turn."""
    if isinstance(sample.input, str):
        return [("user", " ".join(sample.input.split()))]
    return [(message.role, _message_text(message)) for message in sample.input]


def _prompt_turns(prompt: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], " ".join(m["content"].split()))
            for m in messages_from_json(prompt["messages_json"], prompt_id=prompt["prompt_id"])]


def input_difference(sample: Any, prompt: Mapping[str, Any]) -> str | None:
    """How the sample's input differs from the prompt bloomqg would have sent (None: the same
    messages, whitespace aside; a text input is compared with the prompt's last user message)."""
    turns, expected = _sample_turns(sample), _prompt_turns(prompt)
    if isinstance(sample.input, str):
        users = [text for role, text in expected if role == "user"]
        return None if users and turns[0][1] == users[-1] else "its input text is not bloomqg's user message"
    if [role for role, _ in turns] != [role for role, _ in expected]:
        return (f"its input messages are {[role for role, _ in turns]}, bloomqg's prompt "
                f"{[role for role, _ in expected]}")
    for (role, text), (_, want) in zip(turns, expected):
        if text != want:
            return f"its {role} message differs from bloomqg's prompt"
    return None


def _prompt_strategy(prompt_id: str) -> str | None:
    """The strategy a prompt id names (``<item_id>:<strategy>``), None for another id."""
    return prompt_id.rsplit(":", 1)[1] if ":" in prompt_id else None


def _row(prompt: Mapping[str, Any], sample: Any, model_name: str, seed: int,
         knowledge_units: Sequence[str], where: str) -> dict[str, Any]:
    """The generation row of ``prompt`` from ``sample``, parsed pass by pass as the stage does."""
    passes = prompt_passes(prompt)
    completions = _answers(sample, len(passes), where)
    messages = list(messages_from_json(prompt["messages_json"], prompt_id=prompt["prompt_id"]))
    records: list[dict[str, Any]] = []
    for index, (definition, completion) in enumerate(zip(passes, completions)):
        if index > 0:
            previous = records[-1]
            if previous["new_question"] is None:
                break  # as the stage: a pass that wrote no question ends the prompt's passes
            messages = list(fill_later_pass(definition["messages"], previous_question=previous["new_question"],
                                            previous_answer=previous["raw_text"] or ""))
        records.append(pass_record(definition["name"], definition.get("answer_fields", []), messages,
                                   completion, knowledge_units))
    row = final_row(dict(prompt), records, model_name, seed)
    row["cached"] = False  # no call of ours: Inspect made it
    return row


def _header_cell(log: Any) -> tuple[str | None, str | None]:
    """The (dataset, strategy) a log's header says it answers (bloomqg/questions' task args or
    eval metadata), None where it says nothing."""
    spec = log.eval
    named = {**(spec.metadata or {}), **(spec.task_args or {})}
    dataset, strategy = named.get("dataset"), named.get("strategy")
    return (str(dataset) if dataset is not None else None, str(strategy) if strategy is not None else None)


def _check_extent(path: Path, max_member_mb: float) -> None:
    """Refuse a log one of whose members (or, a plain JSON log, the whole file) would inflate past
    ``max_member_mb`` MB, from its zip directory, before inspect_ai reads it."""
    try:
        held = extent(path)
    except ArchiveUnreadable as error:
        raise InspectImportError(f"Inspect log {error}") from error
    if held.largest_bytes > max_member_mb * 1_000_000:
        raise InspectImportError(
            f"Inspect log {path}: {held.largest_name} holds {held.largest_bytes:,} bytes uncompressed, above "
            f"input_limits.max_log_member_mb = {max_member_mb:g}; raise the limit if the log is trusted")


def _read_header(path: Path) -> Any:
    from inspect_ai.log import read_eval_log

    try:
        return read_eval_log(str(path), header_only=True)
    except Exception as error:  # inspect_ai raises its own types for a log it cannot read
        raise InspectImportError(f"Inspect log {path}: cannot be read ({error})") from error


def _samples(path: Path, header: Any) -> Iterable[Any]:
    """The log's samples, streamed; a log written without its sample ids (by hand, not by an
    Inspect run) cannot be streamed and is read whole."""
    from inspect_ai.log import read_eval_log, read_eval_log_samples

    if header.eval.dataset.sample_ids is None:
        return read_eval_log(str(path), resolve_attachments=True).samples or []
    return read_eval_log_samples(str(path), all_samples_required=False, resolve_attachments=True)


def _match(sample: Any, by_id: Mapping[str, Mapping[str, Any]], by_text: Mapping[str, str], dataset: str,
           strategy: str, where: str) -> tuple[str | None, str | None]:
    """(prompt id, how it was matched) of a sample of this cell, (None, None) for a sample this
    cell does not answer (another cell's, or one that names no prompt of it)."""
    metadata = sample.metadata or {}
    if metadata.get("dataset", dataset) != dataset or metadata.get("strategy", strategy) != strategy:
        return None, None  # another cell's question
    if metadata.get("prompt_id") is not None:
        pid = str(metadata["prompt_id"])
        if pid in by_id:
            return pid, "metadata.prompt_id"
        if _prompt_strategy(pid) not in (None, strategy):
            return None, None  # another strategy's prompt
        raise InspectImportError(f"{where}: metadata.prompt_id {pid!r} is not a prompt of {dataset}/{strategy} "
                                 "(rebuilt prompts, or another limit_items?)")
    if str(sample.id) in by_id:
        return str(sample.id), "id"
    pid = by_text.get(" ".join(text for _, text in _sample_turns(sample)))
    if pid is not None:
        return pid, "input"
    return None, None


def import_generations(
    logs: str | Path | Sequence[str | Path],
    prompts: pd.DataFrame,
    model_name: str,
    *,
    knowledge_units: Sequence[str],
    seed: int,
    max_member_mb: float | None = None,
) -> tuple[pd.DataFrame, list[LogSource]]:
    """The cell's GENERATIONS rows (in the prompts' order) from the samples of ``logs`` that
    answer its prompts, and what each log that gave some was.

    Each log's header is read first (``header_only``): an unfinished run is refused, a log whose
    header names another dataset or strategy is passed over unread; the others' samples are
    streamed. A sample answers a prompt of the cell named by its ``metadata.prompt_id``, else by
    its ``id``, else by its input (the prompt whose messages it repeats, whitespace aside); its
    input is compared with the prompt bloomqg would have sent, and a difference is recorded per
    sample (:attr:`LogSource.input_mismatches`), as is an answer that holds no question
    (:attr:`LogSource.parse_failures`). Samples of other cells, and samples that match no prompt,
    are left alone; a prompt answered twice, a ``metadata.prompt_id`` of this strategy that is
    not a prompt, and a prompt no sample answers are errors, as is a log with a member larger
    than ``max_member_mb`` MB uncompressed (checked first, from its zip directory; None: the
    schema's ``input_limits.max_log_member_mb``)."""
    if prompts.empty:
        raise InspectImportError(f"models.{model_name}: the cell has no prompts to import answers for")
    by_id = {row["prompt_id"]: row for row in prompts.to_dict("records")}
    by_text = {" ".join(text for _, text in _prompt_turns(row)): pid for pid, row in by_id.items()}
    for pid, row in by_id.items():  # a text input repeats the last user message only
        by_text.setdefault([text for role, text in _prompt_turns(row) if role == "user"][-1], pid)
    dataset, strategy = prompts["dataset"].iloc[0], prompts["strategy"].iloc[0]
    rows: dict[str, dict[str, Any]] = {}
    taken_from: dict[str, str] = {}
    sources: list[LogSource] = []
    unmatched: list[str] = []
    paths = log_files(logs)
    if max_member_mb is None:
        max_member_mb = float(file_schema().default_of("input_limits", "max_log_member_mb"))
    for path in paths:
        _check_extent(path, max_member_mb)
        log = _read_header(path)
        if log.status != "success":
            raise InspectImportError(f"Inspect log {path}: its eval ended with status {log.status!r}; "
                                     "import a finished run")
        if _header_cell(log)[0] not in (None, dataset) or _header_cell(log)[1] not in (None, strategy):
            continue  # a run of another cell: its samples are not read
        matched_by: dict[str, int] = {}
        mismatches: list[dict[str, str]] = []
        failures: list[dict[str, str]] = []
        for sample in _samples(path, log):
            where = f"Inspect log {path}, sample {sample.id!r} (epoch {sample.epoch})"
            pid, how = _match(sample, by_id, by_text, dataset, strategy, where)
            if pid is None:
                unmatched.append(f"{path.name}:{sample.id}")
                continue
            if pid in rows:
                raise InspectImportError(f"{where}: prompt {pid} is answered twice (also by "
                                         f"{taken_from[pid]}); import one epoch of one run")
            row = _row(by_id[pid], sample, model_name, seed, knowledge_units, where)
            rows[pid], taken_from[pid] = row, where
            matched_by[str(how)] = matched_by.get(str(how), 0) + 1
            difference = input_difference(sample, by_id[pid])
            if difference is not None:
                mismatches.append({"sample": str(sample.id), "prompt_id": pid, "difference": difference})
                logger.warning("%s: %s (its answer is kept under bloomqg's prompt %s)", where, difference, pid)
            if row["parse_status"] == "failed":
                failures.append({"sample": str(sample.id), "prompt_id": pid, "reason": str(row["parse_error"])})
                logger.warning("%s: no question in its answer: %s", where, row["parse_error"])
        if matched_by:
            sources.append(LogSource(path=str(path), task=log.eval.task, task_file=log.eval.task_file,
                                     eval_id=log.eval.eval_id, model=log.eval.model, created=log.eval.created,
                                     n_samples=sum(matched_by.values()), matched_by=matched_by,
                                     input_mismatches=mismatches, parse_failures=failures))
    missing = [pid for pid in by_id if pid not in rows]
    if missing:
        passed = (f"; {len(unmatched)} sample(s) matched no prompt of it by metadata.prompt_id, id or input "
                  f"(e.g. {unmatched[:3]}): set metadata.prompt_id (bloomqg/questions does)") if unmatched else ""
        raise InspectImportError(f"models.{model_name}: no sample of {', '.join(map(str, paths))} "
                                 f"answers {len(missing)} prompt(s) of {dataset}/{strategy}, e.g. {missing[:3]}{passed}")
    frame = pd.DataFrame([rows[pid] for pid in by_id], columns=GENERATIONS.names)
    logger.info("imported %d questions of %s/%s from %d Inspect log(s)", len(frame), dataset, strategy, len(sources))
    return frame, sources
