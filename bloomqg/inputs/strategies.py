"""Prompting strategies as data: what a strategy is, the built-in ones, and the comparisons.

A strategy is a name plus a definition (:class:`StrategySpec`): the template of each model call
(a *pass*), the fields its JSON answer carries besides ``question``, the number of few-shot
exemplars and the label tables, figures and the report show.  The built-ins are ``cot`` and
``fgp`` (the paper's Chain-of-Thought and Fine-Grained prompting) and ``refine`` (two passes:
an FGP draft, then a rewrite against the target level and units).  The config's
``strategies:`` mapping defines more or overrides keys of a built-in; its list form selects.

Templates use ``{variable}`` placeholders; :data:`TEMPLATE_VARIABLES` lists every variable a
first pass may use and :data:`LATER_PASS_VARIABLES` what a later pass adds.  A template using
any other variable is refused at config time, naming file, line and variable
(:func:`template_problems`).

Whether a strategy *gives* the model its targets is read off its first template: one that uses
``{target_bloom_level}`` or ``{target_knowledge_units}`` does (FGP), one that does not asks the
model to identify them (CoT).  Nothing else in the code knows a strategy by name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from pathlib import Path
from typing import Any

#: Every variable a first-pass template may use, with what it holds.
TEMPLATE_VARIABLES: dict[str, str] = {
    "domain": "the dataset's subject (datasets.*.domain, default its name)",
    "exemplars": "bulleted example questions sharing a knowledge unit with the item, with their Bloom levels",
    "original_question": "the item's question, whitespace collapsed",
    "knowledge_unit_list": "every knowledge unit of the dataset, comma separated",
    "bloom_level_list": "the six Bloom levels, Remember to Create",
    "target_knowledge_units": "the item's knowledge unit(s), comma separated (using it makes the strategy give targets)",
    "target_bloom_level": "the item's Bloom level, or 'the same as the original question' when it has none (using it makes the strategy give targets)",
}
#: Variables a later pass may use on top of :data:`TEMPLATE_VARIABLES`.
LATER_PASS_VARIABLES: dict[str, str] = {
    "previous_question": "the question the previous pass wrote",
    "previous_answer": "the previous pass's whole answer text",
}
#: Fields a strategy's JSON answer may carry besides ``question``, with what they hold.
ANSWER_FIELDS: dict[str, str] = {
    "knowledge_unit": "the knowledge unit(s) the model identified for the original (from the dataset's list)",
    "bloom_level": "the Bloom level the model identified for the original",
}
_TARGET_VARIABLES = frozenset({"target_knowledge_units", "target_bloom_level"})
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_LEADING_COMMENT = re.compile(r"\A\s*<!--.*?-->", re.DOTALL)
STRATEGY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class StrategyError(ValueError):
    """A strategy definition, selection, template or comparison is invalid."""


@dataclass(frozen=True)
class PassSpec:
    """One model call of a strategy: its template and the fields its answer carries."""

    name: str
    template: str
    answer_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class StrategySpec:
    """A prompting strategy: one or more passes, exemplars and a display label.

    ``exemplars`` None means the study's top-level ``exemplars``.  The first pass writes the
    question; each later pass gets it back (:data:`LATER_PASS_VARIABLES`) and rewrites it; the
    metrics score the last pass's question.
    """

    name: str
    label: str
    passes: tuple[PassSpec, ...]
    exemplars: int | None = None
    #: The strategy in full words, where its label is an abbreviation ("Chain-of-Thought").
    title: str = ""

    @property
    def template(self) -> str:
        return self.passes[0].template

    @property
    def answer_fields(self) -> tuple[str, ...]:
        """What the first pass's answer carries besides ``question`` (CoT's identifications)."""
        return self.passes[0].answer_fields

    def exemplar_count(self, default: int) -> int:
        return default if self.exemplars is None else self.exemplars

    def gives_targets(self) -> bool:
        """Whether the first template shows the model the target level or units (FGP-like)."""
        return bool(_TARGET_VARIABLES & set(template_variables(self.template)))


def _builtin(name: str, label: str, title: str, template: str, answer_fields: tuple[str, ...] = (),
             later: tuple[PassSpec, ...] = ()) -> StrategySpec:
    return StrategySpec(name, label, (PassSpec("generate", template, answer_fields), *later), title=title)


#: The strategies every study knows; a ``strategies:`` mapping entry overrides their keys.
BUILTIN_STRATEGIES: dict[str, StrategySpec] = {
    spec.name: spec
    for spec in (
        _builtin("cot", "CoT", "Chain-of-Thought: the model first names the original's knowledge unit and "
                 "Bloom level itself, then writes a question at them", "prompts/generation/cot.md",
                 ("knowledge_unit", "bloom_level")),
        _builtin("fgp", "FGP", "Fine-Grained Prompting: the prompt states the target knowledge unit and "
                 "Bloom level, and the model writes a question at them", "prompts/generation/fgp.md"),
        _builtin("refine", "Refine", "Refine: an FGP question, then a second pass that revises it",
                 "prompts/generation/fgp.md",
                 later=(PassSpec("revise", "prompts/generation/refine.md"),)),
    )
}
#: The selection when the config names none (the paper's two).
DEFAULT_SELECTION: tuple[str, ...] = ("cot", "fgp")


def template_variables(path: str | Path) -> list[str]:
    """The ``{variable}`` names a template file uses (its documentation comment excluded)."""
    text = Path(path).read_text(encoding="utf-8")
    return _PLACEHOLDER.findall(_LEADING_COMMENT.sub("", text, count=1))


def template_problems(path: str | Path, *, later_pass: bool = False, where: str = "") -> list[str]:
    """``file:line: unknown variable {name}`` for each unknown placeholder of a template; a
    missing or empty file is one problem.  ``later_pass`` admits :data:`LATER_PASS_VARIABLES`."""
    path = Path(path)
    prefix = f"{where}: " if where else ""
    if not path.is_file():
        return [f"{prefix}template file {path} does not exist"]
    text = path.read_text(encoding="utf-8")
    comment = _LEADING_COMMENT.match(text)
    body_start = comment.end() if comment else 0
    if not text[body_start:].strip():
        return [f"{prefix}template file {path} is empty"]
    known = set(TEMPLATE_VARIABLES) | (set(LATER_PASS_VARIABLES) if later_pass else set())
    problems = []
    for match in _PLACEHOLDER.finditer(text, body_start):
        if match.group(1) not in known:
            line = text.count("\n", 0, match.start()) + 1
            problems.append(
                f"{prefix}{path}:{line}: unknown variable {{{match.group(1)}}} "
                f"(known: {', '.join(sorted(known))})"
            )
    return problems


def _answer_fields(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise StrategyError(f"{where}: a list of field names ({', '.join(ANSWER_FIELDS)})")
    unknown = [v for v in value if v not in ANSWER_FIELDS]
    if unknown:
        raise StrategyError(f"{where}: unknown answer field(s) {unknown} (known: {', '.join(ANSWER_FIELDS)}; "
                            "'question' is always required)")
    return tuple(value)


def _define(name: str, entry: Mapping[str, Any] | None, base: StrategySpec | None) -> StrategySpec:
    where = f"strategies.{name}"
    entry = dict(entry or {})
    if base is None and "template" not in entry:
        raise StrategyError(f"{where}: a new strategy needs a template (built-ins: {', '.join(BUILTIN_STRATEGIES)})")
    first = base.passes[0] if base else PassSpec("generate", "")
    first = replace(first, template=str(entry.get("template", first.template)))
    if "answer_fields" in entry:
        first = replace(first, answer_fields=_answer_fields(entry["answer_fields"], f"{where}.answer_fields"))
    later = base.passes[1:] if base else ()
    if "passes" in entry:
        later = tuple(
            PassSpec(str(p.get("name", f"pass{i + 2}")), str(p["template"]),
                     _answer_fields(p.get("answer_fields", []), f"{where}.passes[{i}].answer_fields"))
            for i, p in enumerate(entry["passes"] or [])
        )
    exemplars = entry.get("exemplars", base.exemplars if base else None)
    label = str(entry.get("label", base.label if base else name))
    title = str(entry.get("title", base.title if base else ""))
    return StrategySpec(name, label, (first, *later), exemplars, title)


def strategy_specs(config: Mapping[str, Any]) -> dict[str, StrategySpec]:
    """Every defined strategy: the built-ins, overridden or extended by a ``strategies:``
    mapping.  The legacy ``prompts.cot`` / ``prompts.fgp`` keys set the built-ins' templates."""
    prompts = config.get("prompts") or {}
    specs = dict(BUILTIN_STRATEGIES)
    for name in ("cot", "fgp"):
        if prompts.get(name):
            specs[name] = replace(specs[name], passes=(replace(specs[name].passes[0], template=str(prompts[name])),
                                                       *specs[name].passes[1:]))
    if prompts.get("fgp") and "refine" in specs:
        refine = specs["refine"]
        specs["refine"] = replace(refine, passes=(replace(refine.passes[0], template=str(prompts["fgp"])),
                                                  *refine.passes[1:]))
    entries = config.get("strategies")
    if isinstance(entries, Mapping):
        for name, entry in entries.items():
            if not STRATEGY_NAME.match(str(name)) or len(str(name)) > 64:
                raise StrategyError(f"strategies.{name}: a name of letters, digits, _ and - (at most 64)")
            specs[str(name)] = _define(str(name), entry, specs.get(str(name)))
    return specs


def default_selection(config: Mapping[str, Any]) -> list[str]:
    """The strategies datasets that name none run: the mapping's names or the list."""
    entries = config.get("strategies")
    if entries is None:
        return list(DEFAULT_SELECTION)
    return [str(name) for name in entries]


def check_selection(selected: Sequence[str], specs: Mapping[str, StrategySpec], where: str) -> None:
    """Refuse a selected strategy that is not defined, listing the defined ones."""
    unknown = [name for name in selected if name not in specs]
    if unknown:
        raise StrategyError(f"{where}: strategy {', '.join(map(repr, unknown))} is not defined "
                            f"(defined: {', '.join(specs)}; define one under strategies:)")


def strategy_labels(specs: Mapping[str, StrategySpec]) -> dict[str, str]:
    return {name: spec.label for name, spec in specs.items()}


def strategy_descriptions(specs: Mapping[str, StrategySpec], selection: Sequence[str]) -> list[dict[str, Any]]:
    """What the report says of each strategy the study runs: its label, its title (the label
    where it has none) and each pass's prompt as the model reads it (the template's leading
    comment removed, placeholders kept)."""
    out = []
    for name in selection:
        spec = specs[name]
        passes = []
        for p in spec.passes:
            path = Path(p.template)
            text = path.read_text(encoding="utf-8") if path.is_file() else f"(template {path} not found)"
            passes.append({"name": p.name, "template": str(path), "text": _LEADING_COMMENT.sub("", text, count=1).strip()})
        out.append({"name": name, "label": spec.label, "title": spec.title or spec.label, "passes": passes})
    return out


@dataclass(frozen=True)
class ComparisonSpec:
    """Which strategy pairs the paired tests and robustness rows compare.

    ``baseline``: each other strategy against it (default: the first one run);
    ``all_pairs``: every pair, in the order the strategies are listed.
    """

    baseline: str | None = None
    all_pairs: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ComparisonSpec:
        entry = config.get("comparisons") or {}
        return cls(baseline=entry.get("baseline"), all_pairs=bool(entry.get("all_pairs", False)))

    def pairs(self, strategies: Sequence[str]) -> list[tuple[str, str]]:
        """``(a, b)`` pairs over ``strategies`` (in their order); b - a is the difference."""
        ordered = list(dict.fromkeys(strategies))
        if self.all_pairs:
            return list(combinations(ordered, 2))
        if not ordered:
            return []
        baseline = self.baseline or ordered[0]
        if baseline not in ordered:
            return []  # a cell group that does not run the baseline has nothing to compare
        return [(baseline, other) for other in ordered if other != baseline]


def with_templates(spec: StrategySpec, resolve: Any) -> StrategySpec:
    """``spec`` with each pass's template replaced by ``resolve(template, where)`` (a path),
    ``where`` naming the config key (``strategies.NAME.template``, ``...passes[i].template``)."""
    passes = tuple(
        replace(p, template=str(resolve(p.template, f"strategies.{spec.name}."
                                        + ("template" if i == 0 else f"passes[{i - 1}].template"))))
        for i, p in enumerate(spec.passes)
    )
    return replace(spec, passes=passes)


def strategy_problems(spec: StrategySpec) -> list[str]:
    """Every template problem of ``spec``'s passes (:func:`template_problems`); later passes
    admit :data:`LATER_PASS_VARIABLES`."""
    return [
        problem
        for i, p in enumerate(spec.passes)
        for problem in template_problems(
            p.template, later_pass=i > 0,
            where=f"strategies.{spec.name}." + ("template" if i == 0 else f"passes[{i - 1}].template"),
        )
    ]
