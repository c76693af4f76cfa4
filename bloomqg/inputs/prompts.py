"""Rendering the question-generation prompts of a strategy from editable template files.

A strategy (:class:`bloomqg.inputs.strategies.StrategySpec`) is one or more passes, each a template.
The first pass's messages are rendered per item (``messages_json``); a later pass's messages are
rendered too, with ``{previous_question}`` and ``{previous_answer}`` left in place for the
generation stage to fill with what the previous pass wrote (``passes_json``,
:func:`fill_later_pass`).  Whether the prompts carry targets is read off the strategy's first
template (:meth:`~bloomqg.inputs.strategies.StrategySpec.gives_targets`), never its name.

Templates are plain text files (``prompts/generation/*.md``).  A leading HTML comment documents
the template and is removed before rendering.  Placeholders are ``{name}`` with a lowercase
identifier; any other brace (such as the JSON example a template shows the model) is left
alone, so a template needs no escaping.  An unknown placeholder is an error naming the file.

Each prompt shows ``k`` exemplars: other items of the same dataset sharing a knowledge unit with
the item (never the item itself), drawn deterministically from the seed and the item id.

Response prefill (opt-in per in-process model, see :func:`with_response_prefill`): the
assistant turn is started with the opening of the JSON answer the prompt asks for, e.g.
``{"question": "``.  The prefix is not declared separately; it is read off the prompt's own
JSON example -- the last line that starts with ``{"key":`` -- so a user who edits a template's
example (another first key, other spacing) changes the prefix with it, and the prompt hash,
which covers the template file, covers the prefix too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS, normalize_level
from bloomqg.store.frames import PROMPTS
from bloomqg.store.provenance import REPO_ROOT
from bloomqg.inputs.strategies import BUILTIN_STRATEGIES, LATER_PASS_VARIABLES, StrategySpec, with_templates

logger = logging.getLogger(__name__)

#: Rendered in FGP prompts when the original has no Bloom level (Uncategorized).
UNSPECIFIED_LEVEL_TEXT = "the same as the original question"

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
# A JSON example's opening at the start of a line: `{"key": "` (string value) or `{"key": `.
_JSON_EXAMPLE_OPENING = re.compile(r'^[ \t]*(\{[ \t]*"[^"\n]+"[ \t]*:[ \t]*"?)', re.MULTILINE)
_LEADING_COMMENT = re.compile(r"\A\s*<!--.*?-->\s*", re.DOTALL)
_LATER_PASS_PLACEHOLDER = re.compile(r"\{(" + "|".join(LATER_PASS_VARIABLES) + r")\}")
_DATASET_COLUMNS = ("item_id", "dataset", "question", "bloom_level", "knowledge_units")


class TemplateError(ValueError):
    """A template file is missing, empty or uses an unknown placeholder."""


def template_hash(path: str | Path) -> str:
    """First 16 hex digits of the sha256 of a template file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def prompt_hash(template_path: str | Path, system_path: str | Path | None = None,
                later_paths: Sequence[str | Path] = ()) -> str:
    """Hash of the files a prompt is built from: the template alone, or template + system
    (+ the later passes' templates, for a strategy of more than one pass)."""
    if system_path is None and not later_paths:
        return template_hash(template_path)
    digest = hashlib.sha256(Path(template_path).read_bytes())
    if system_path is not None:
        digest.update(b"\x00")
        digest.update(Path(system_path).read_bytes())
    for path in later_paths:
        digest.update(b"\x01")
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16]


def load_template(path: str | Path) -> str:
    """A template's text without its leading documentation comment."""
    path = Path(path)
    if not path.is_file():
        raise TemplateError(f"template file {path} does not exist")
    text = _LEADING_COMMENT.sub("", path.read_text(encoding="utf-8"), count=1).strip()
    if not text:
        raise TemplateError(f"template file {path} is empty")
    return text


def render_template(text: str, values: Mapping[str, str], *, where: str = "template") -> str:
    """Replace each ``{name}`` with ``values[name]``; other braces stay as they are."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise TemplateError(
                f"{where}: unknown placeholder {{{name}}}; available: {', '.join(sorted(values))}"
            )
        return str(values[name])

    return _PLACEHOLDER.sub(substitute, text)


def _check_dataset(dataset: pd.DataFrame) -> None:
    missing = [column for column in _DATASET_COLUMNS if column not in dataset.columns]
    if missing:
        raise ValueError(f"dataset frame lacks columns {missing}")
    if dataset["item_id"].duplicated().any():
        duplicated = dataset.loc[dataset["item_id"].duplicated(), "item_id"].tolist()[:5]
        raise ValueError(f"dataset frame has duplicate item_id values {duplicated}")
    for row, units in zip(dataset["item_id"], dataset["knowledge_units"]):
        if units is None or len(units) == 0:
            raise ValueError(f"dataset item {row!r} has no knowledge unit")


def _units(value: Any) -> list[str]:
    return [str(unit) for unit in list(value)]


def choose_exemplars(
    dataset: pd.DataFrame, item_id: str, k: int, seed: int
) -> list[str]:
    """Up to ``k`` item ids sharing a knowledge unit with ``item_id``, never the item itself.

    Deterministic: candidates are sorted by id and sampled with a generator seeded from
    ``seed`` and the item id, so adding other items elsewhere does not reshuffle this choice
    unless they are candidates.
    """
    if k <= 0:
        return []
    row = dataset.loc[dataset["item_id"] == item_id]
    if row.empty:
        raise KeyError(f"item {item_id!r} not in the dataset")
    own_units = set(_units(row["knowledge_units"].iloc[0]))
    candidates = sorted(
        other
        for other, units in zip(dataset["item_id"], dataset["knowledge_units"])
        if other != item_id and own_units & set(_units(units))
    )
    if len(candidates) <= k:
        return candidates
    rng = random.Random(f"{seed}:{item_id}")
    return sorted(rng.sample(candidates, k))


def _format_exemplars(exemplars: pd.DataFrame) -> str:
    if exemplars.empty:
        return "- (none available)"
    lines = []
    for question, level in zip(exemplars["question"], exemplars["bloom_level"]):
        level_note = f" (Bloom level: {level})" if level else ""
        lines.append(f"- {' '.join(str(question).split())}{level_note}")
    return "\n".join(lines)


def builtin_strategy(name: str, root: str | Path = REPO_ROOT) -> StrategySpec:
    """A built-in strategy with its templates under ``root`` (the shipped ones by default)."""
    if name not in BUILTIN_STRATEGIES:
        raise ValueError(f"strategy {name!r} is not a built-in ({', '.join(BUILTIN_STRATEGIES)}); "
                         "define it under strategies: in the config")
    return with_templates(BUILTIN_STRATEGIES[name], lambda template, _where: Path(root) / template)


def build_prompts(
    dataset: pd.DataFrame,
    strategy: StrategySpec | str,
    *,
    k_exemplars: int,
    seed: int,
    domain: str,
    template_path: str | Path | None = None,
    system_path: str | Path | None = None,
) -> pd.DataFrame:
    """One prompt row per dataset item, with exactly the columns of :data:`bloomqg.store.frames.PROMPTS`.

    ``strategy``: a :class:`StrategySpec` (templates as paths), or a built-in's name.  A strategy
    whose first template uses the targets (:meth:`StrategySpec.gives_targets`, FGP-like) gets
    the original's units and level as the target columns; one that does not (CoT-like) asks the
    model to identify them.  ``k_exemplars`` is the study's count, which the strategy's own
    ``exemplars`` overrides; ``template_path`` replaces the first pass's template;
    ``system_path`` adds a system message to every pass.
    """
    spec = builtin_strategy(strategy) if isinstance(strategy, str) else strategy
    if template_path is not None:
        spec = replace(spec, passes=(replace(spec.passes[0], template=str(template_path)), *spec.passes[1:]))
    k_exemplars = spec.exemplar_count(k_exemplars)
    _check_dataset(dataset)
    first, *later = spec.passes
    template = load_template(first.template)
    later_templates = [load_template(p.template) for p in later]
    system = load_template(system_path) if system_path is not None else None
    hash_ = prompt_hash(first.template, system_path, [p.template for p in later])
    gives_targets = spec.gives_targets()
    unit_list = sorted({unit for units in dataset["knowledge_units"] for unit in _units(units)})
    by_id = dataset.set_index("item_id", drop=False)
    kept = {name: "{" + name + "}" for name in LATER_PASS_VARIABLES}  # filled by generation

    def chat(text: str, values: Mapping[str, str], where: str) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = []
        if system is not None:
            messages.append({"role": "system",
                             "content": render_template(system, values, where=str(system_path))})
        messages.append({"role": "user", "content": render_template(text, values, where=where)})
        return messages

    rows: list[dict[str, Any]] = []
    for item in dataset.itertuples(index=False):
        units = _units(item.knowledge_units)
        level = normalize_level(item.bloom_level)
        exemplar_ids = choose_exemplars(dataset, item.item_id, k_exemplars, seed)
        values = {
            "domain": domain,
            "exemplars": _format_exemplars(by_id.loc[exemplar_ids]),
            "original_question": " ".join(str(item.question).split()),
            "knowledge_unit_list": ", ".join(unit_list),
            "bloom_level_list": ", ".join(BLOOM_LEVELS),
            "target_knowledge_units": ", ".join(units),
            "target_bloom_level": level or UNSPECIFIED_LEVEL_TEXT,
        }
        passes = [{"name": first.name, "answer_fields": list(first.answer_fields)}] + [
            {"name": p.name, "answer_fields": list(p.answer_fields),
             "messages": chat(text, {**values, **kept}, p.template)}
            for p, text in zip(later, later_templates)
        ]
        rows.append({
            "prompt_id": f"{item.item_id}:{spec.name}",
            "item_id": item.item_id,
            "dataset": item.dataset,
            "strategy": spec.name,
            "original_question": item.question,
            "original_bloom_level": level,
            "original_knowledge_units": units,
            "target_bloom_level": level if gives_targets else None,
            "target_knowledge_units": units if gives_targets else None,
            "exemplar_ids": exemplar_ids,
            "messages_json": json.dumps(chat(template, values, first.template), ensure_ascii=False),
            "prompt_hash": hash_,
            "passes_json": json.dumps(passes, ensure_ascii=False),
        })
    frame = pd.DataFrame(rows, columns=PROMPTS.names)
    logger.info("built %d %s prompts (%d pass(es), template %s, hash %s)", len(frame), spec.name,
                len(spec.passes), first.template, hash_)
    return frame


def prompt_passes(prompt: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The passes of a prompts row: ``name``, ``answer_fields`` and, after the first, the
    ``messages`` with ``{previous_question}``/``{previous_answer}`` still to fill."""
    raw = prompt.get("passes_json")
    if raw is None:
        raise ValueError(f"prompt {prompt.get('prompt_id', '?')}: no passes_json (prompts written "
                         "before strategies had passes: rebuild the prompts)")
    passes = json.loads(raw)
    if not isinstance(passes, list) or not passes or not all(isinstance(p, dict) and "name" in p for p in passes):
        raise ValueError(f"prompt {prompt.get('prompt_id', '?')}: passes_json must be a non-empty list of passes")
    return passes


def fill_later_pass(messages: Sequence[Mapping[str, str]], *, previous_question: str,
                    previous_answer: str) -> tuple[dict[str, str], ...]:
    """A later pass's messages with what the previous pass wrote filled in (one substitution
    pass, so text the model wrote is never itself substituted)."""
    values = {"previous_question": previous_question, "previous_answer": previous_answer}
    return tuple({"role": m["role"], "content": _LATER_PASS_PLACEHOLDER.sub(lambda x: values[x.group(1)], m["content"])}
                 for m in messages)


def messages_from_json(messages_json: str, *, prompt_id: str = "?") -> tuple[dict[str, str], ...]:
    """Chat messages stored in a prompts row, checked for the role/content shape."""
    try:
        messages = json.loads(messages_json)
    except json.JSONDecodeError as err:
        raise ValueError(f"prompt {prompt_id}: messages_json is not JSON: {err}") from err
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in messages
    ):
        raise ValueError(f"prompt {prompt_id}: messages_json must be a list of {{role, content}}")
    return tuple({"role": m["role"], "content": m["content"]} for m in messages)


def default_template_paths(strategy: str, root: str | Path = ".") -> Sequence[Path]:
    """``(template, system)`` paths of a built-in strategy's shipped first-pass template under
    ``root`` (its later passes: :func:`builtin_strategy`)."""
    spec = builtin_strategy(strategy, root)
    return (Path(spec.template), Path(root) / "prompts" / "generation" / "system.md")


def response_prefix(prompt_text: str) -> str | None:
    """The opening of the JSON answer a prompt shows as its example, up to its first value.

    The example is the *last* line of ``prompt_text`` that starts with ``{"key":``.  The
    shipped templates show it after their instructions and put the item's own text (exemplars,
    original question, targets) after it, but always on a ``- `` bullet or after a label such as
    ``Original question:``, with its whitespace collapsed, so no later line can match.
    The prefix keeps the example's own spacing and ends with the opening quote
    of the first value when that value is a string: ``{"question": "``.  None when the prompt
    shows no such example.
    """
    openings = _JSON_EXAMPLE_OPENING.findall(prompt_text)
    return openings[-1].lstrip() if openings else None


def with_response_prefill(
    messages: Sequence[Mapping[str, str]], *, prompt_id: str = "?"
) -> tuple[tuple[dict[str, str], ...], str]:
    """``messages`` plus an assistant message holding the response prefix, and that prefix.

    The prefix comes from the last user message (:func:`response_prefix`).  A backend that
    continues a final assistant message (transformers' ``continue_final_message``) then writes
    the rest of the JSON answer.  Raises ValueError naming the prompt when the conversation
    already ends with an assistant turn or its last user message shows no JSON example:
    prefill was asked for, so generating without it would be a silent fallback.
    """
    if not messages:
        raise ValueError(f"prompt {prompt_id}: no messages to prefill")
    if messages[-1].get("role") == "assistant":
        raise ValueError(f"prompt {prompt_id}: the conversation already ends with an assistant "
                         "message; cannot add a response prefill")
    user_texts = [m["content"] for m in messages if m.get("role") == "user"]
    prefix = response_prefix(user_texts[-1]) if user_texts else None
    if prefix is None:
        raise ValueError(
            f"prompt {prompt_id}: response prefill is on but the prompt shows no JSON example "
            'line starting with {"key": ...} to take the answer\'s opening from (check the '
            "generation template, or turn response_prefill off for this model)")
    prefilled = tuple({"role": m["role"], "content": m["content"]} for m in messages)
    return (*prefilled, {"role": "assistant", "content": prefix}), prefix


def limited_items(dataset: pd.DataFrame, limit: int, *, by: str = "stratified", seed: int = 0) -> list[str]:
    """The ``limit`` item ids a study limited to ``limit`` items per dataset asks about, in the
    dataset's order (config ``limit_items`` and ``limit_items_by``).

    ``first``: the first rows. ``stratified``: a seeded draw stratified by Bloom level and
    knowledge unit, so a pilot sees the levels and units the full study will: with at least as
    many items as strata, one item per stratum and the rest in proportion to the strata's sizes
    (largest remainders); with fewer, strata are taken one at a time, each adding a level or a
    unit not yet drawn where one is left. The draw depends on the dataset and seed only, so
    every strategy of a dataset gets the same items (the paired comparisons need them)."""
    if limit < 1:
        raise ValueError(f"limit_items must be at least 1, got {limit}")
    ids = dataset["item_id"].astype(str).tolist()
    if limit >= len(ids):
        return ids
    if by == "first":
        return ids[:limit]
    if by != "stratified":
        raise ValueError(f"limit_items_by: {by!r} is not one of stratified, first")
    rng = np.random.default_rng([seed, zlib.crc32(str(dataset["dataset"].iloc[0]).encode())])
    levels = ["Uncategorized" if level is None or level != level else str(level) for level in dataset["bloom_level"]]
    units = [" | ".join(sorted(str(u) for u in found)) for found in dataset["knowledge_units"]]
    strata: dict[tuple[str, str], list[int]] = {}
    for position, key in enumerate(zip(levels, units)):
        strata.setdefault(key, []).append(position)
    keys = list(strata)
    for key in keys:  # a random order inside each stratum: its first items are the draw
        rng.shuffle(strata[key])
    if limit >= len(keys):
        counts = {key: 1 for key in keys}
        rest = limit - len(keys)
        spare = np.array([len(strata[key]) - 1 for key in keys], dtype=float)
        if rest and spare.sum():
            quota = rest * spare / spare.sum()
            extra = np.floor(quota).astype(int)
            order = np.lexsort((rng.random(len(keys)), -(quota - extra)))
            for index in order[: rest - int(extra.sum())]:
                extra[index] += 1
            for key, more in zip(keys, extra):
                counts[key] += int(more)
    else:
        counts, per_level, seen_units = {}, {}, set()
        remaining = [keys[i] for i in rng.permutation(len(keys))]
        while len(counts) < limit:
            # a new level or unit first, then the level drawn least so far
            best = max(range(len(remaining)), key=lambda i: (
                (remaining[i][0] not in per_level) + (remaining[i][1] not in seen_units),
                -per_level.get(remaining[i][0], 0)))
            key = remaining.pop(best)
            counts[key] = 1
            per_level[key[0]] = per_level.get(key[0], 0) + 1
            seen_units.add(key[1])
    chosen = sorted(position for key, count in counts.items() for position in strata[key][:count])
    return [ids[position] for position in chosen]


def strategy_from_params(name: str, definition: Mapping[str, Any]) -> StrategySpec:
    """The :class:`StrategySpec` of a study's ``strategy_params`` (its passes and resolved
    exemplar count; the label is the report's, not the prompts')."""
    from bloomqg.inputs.strategies import PassSpec

    return StrategySpec(
        name, name,
        tuple(PassSpec(p["name"], p["template"], tuple(p["answer_fields"])) for p in definition["passes"]),
        exemplars=definition["exemplars"],
    )


def study_prompts(
    dataset: pd.DataFrame,
    strategy: str,
    definition: Mapping[str, Any],
    *,
    seed: int,
    domain: str,
    system_path: str | Path | None,
    limit_items: int | None,
    limit_items_by: str,
) -> pd.DataFrame:
    """A study's prompts of one dataset and strategy, as rule build_prompts writes them and the
    ``bloomqg/questions`` Inspect task renders them: every item's prompt, exemplars drawn from the
    whole dataset, then the ``limit_items`` kept (:func:`limited_items`)."""
    spec = strategy_from_params(strategy, definition)
    prompts = build_prompts(dataset, spec, k_exemplars=definition["exemplars"], seed=seed, domain=domain,
                            system_path=system_path)
    if limit_items:
        kept = limited_items(dataset, limit_items, by=limit_items_by, seed=seed)
        prompts = prompts[prompts["item_id"].isin(kept)].reset_index(drop=True)
    return prompts
