"""Questions an Inspect task generated, as the generation rows of one cell.

A models entry ``backend: inspect`` with ``logs: PATH`` (an ``.eval`` log, or a folder of them)
takes its questions from Inspect logs instead of calling a model: every sample whose
``metadata.prompt_id`` (else whose ``id``) is a prompt of the cell becomes that prompt's
generation row, its answer parsed exactly as the generation stage parses a model's (so judges,
votes, metrics and the report cannot tell the difference). The logs are read with
``inspect_ai.log.read_eval_log``; ``examples/inspect_task.py`` is a task whose samples carry
bloomqg's own prompts (docs/inspect.md).

A sample that cannot be mapped, a prompt no sample answers, a prompt answered twice, or a
strategy whose passes the sample's answers do not match stops the import with a
:class:`InspectImportError` naming the log and the sample.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.inputs.chat import Completion
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

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


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


def _prompt_id(sample: Any) -> str:
    metadata = sample.metadata or {}
    return str(metadata.get("prompt_id", sample.id))


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


def import_generations(
    logs: str | Path | Sequence[str | Path],
    prompts: pd.DataFrame,
    model_name: str,
    *,
    knowledge_units: Sequence[str],
    seed: int,
) -> tuple[pd.DataFrame, list[LogSource]]:
    """The cell's GENERATIONS rows (in the prompts' order) from the samples of ``logs`` that
    answer its prompts, and what each log that gave some was. Samples of other cells are left
    alone; a sample that names a prompt of this cell's dataset and strategy but not one of its
    prompts (or answers one twice) is an error, as is a prompt no sample answers."""
    from inspect_ai.log import read_eval_log

    if prompts.empty:
        raise InspectImportError(f"models.{model_name}: the cell has no prompts to import answers for")
    by_id = {row["prompt_id"]: row for row in prompts.to_dict("records")}
    dataset, strategy = prompts["dataset"].iloc[0], prompts["strategy"].iloc[0]
    rows: dict[str, dict[str, Any]] = {}
    taken_from: dict[str, str] = {}
    sources: list[LogSource] = []
    for path in log_files(logs):
        try:
            log = read_eval_log(str(path))
        except Exception as error:  # inspect_ai raises its own types for a log it cannot read
            raise InspectImportError(f"Inspect log {path}: cannot be read ({error})") from error
        if log.status != "success":
            raise InspectImportError(f"Inspect log {path}: its eval ended with status {log.status!r}; "
                                     "import a finished run")
        used = 0
        for sample in log.samples or []:
            where = f"Inspect log {path}, sample {sample.id!r} (epoch {sample.epoch})"
            metadata = sample.metadata or {}
            if metadata.get("dataset", dataset) != dataset or metadata.get("strategy", strategy) != strategy:
                continue  # another cell's question
            pid = _prompt_id(sample)
            if pid not in by_id:
                if "prompt_id" in metadata or str(pid).endswith(f":{strategy}"):
                    raise InspectImportError(f"{where}: prompt_id {pid!r} is not a prompt of "
                                             f"{dataset}/{strategy} (rebuilt prompts, or another limit_items?)")
                raise InspectImportError(f"{where}: cannot tell which prompt it answers: set its "
                                         "metadata.prompt_id (or its id) to a bloomqg prompt_id "
                                         "(examples/inspect_task.py does)")
            if pid in rows:
                raise InspectImportError(f"{where}: prompt {pid} is answered twice (also by "
                                         f"{taken_from[pid]}); import one epoch of one run")
            rows[pid] = _row(by_id[pid], sample, model_name, seed, knowledge_units, where)
            taken_from[pid] = where
            used += 1
        if used:
            sources.append(LogSource(path=str(path), task=log.eval.task, task_file=log.eval.task_file,
                                     eval_id=log.eval.eval_id, model=log.eval.model, created=log.eval.created,
                                     n_samples=used))
    missing = [pid for pid in by_id if pid not in rows]
    if missing:
        raise InspectImportError(f"models.{model_name}: no sample of {', '.join(map(str, log_files(logs)))} "
                                 f"answers {len(missing)} prompt(s) of {dataset}/{strategy}, e.g. {missing[:3]}")
    frame = pd.DataFrame([rows[pid] for pid in by_id], columns=GENERATIONS.names)
    logger.info("imported %d questions of %s/%s from %d Inspect log(s)", len(frame), dataset, strategy, len(sources))
    return frame, sources
