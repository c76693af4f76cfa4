"""bloomqg's judging panel as an Inspect scorer: ``bloomqg/bloomqg_panel``.

Any Inspect sample whose output is a generated question can be scored, in a task
(``Task(scorer=bloomqg_panel())``, ``inspect eval … --scorer``) or afterwards on a finished log
(``inspect score LOG --scorer bloomqg/bloomqg_panel -S dataset=cs``). Per sample:

1. the question: the model's answer read by bloomqg's question parser
   (:func:`bloomqg.inputs.parsing.parse_generation`, ``answer=parsed``, the default), or the
   whole answer as it is (``answer=text``, for a task whose model writes the question alone);
2. what it was meant to hit: the source item's Bloom level (``metadata.original_bloom_level``,
   ``metadata.bloom_level``, else the sample's target when it is a level) and knowledge units
   (``metadata.original_knowledge_units`` / ``metadata.knowledge_units``), and the original
   question (``metadata.original_question``, else the sample's input);
3. the panel: the config's judges that run here without a model server (backends ``rules`` and
   ``embedding``, and ``learned`` once its model file exists; ``judges=`` names others), plus an
   LLM judge asked through Inspect's own ``get_model(role="grader")`` when the run binds that
   role (``--model-role grader=…``), with bloomqg's rubric (:mod:`bloomqg.judges.llm`);
4. the strict-majority vote of :mod:`bloomqg.voting.majority` per criterion, and *useful*.

Inspect keeps one :class:`~inspect_ai.scorer.Score` per scorer and sample, so the criteria are
the keys of its value (each its own entry of the log's results, with its metrics): ``useful``,
``unique``, ``readable``, ``answerable`` (true / false), ``bloom_level`` (the voted level),
``knowledge_units`` (the voted units, ``; ``-joined), and the two per-question terms of bloomqg's
Table 5 metrics: ``catcons`` (a useful question's voted level is the target's) and ``knowcov``
(the share of the original's units a useful question keeps). A criterion the panel does not
decide (a tie, too few valid votes, no question) is missing, not an error: NaN for the rated keys
(Inspect's own "unscored", which its epoch reducer and results leave out; ``None`` would be
averaged as 0), ``None`` for the level and the units. The score's
``answer`` is the voted level and usefulness (``Apply · useful: yes``), its ``explanation`` one
line per criterion with every judge's vote, its ``metadata.criteria`` each judge's verdict and
reason.

Metrics (:func:`share`, :func:`ci_low`, :func:`ci_high`, :func:`rated`) are bloomqg's: the mean of
the rated samples and its Clopper–Pearson interval (:func:`bloomqg.metrics.intervals.bounded_mean_interval`),
over the samples the criterion was decided for; ``usability`` counts a question that could not be
parsed from a written answer as not useful, as bloomqg's usability does
(:mod:`bloomqg.metrics.quality`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, get_model, model_roles
from inspect_ai.scorer import SampleScore, Score, Target, metric, scorer
from inspect_ai.solver import TaskState

from bloomqg.inputs.bloom import UnknownBloomLevel, normalize_level
from bloomqg.inputs.parsing import has_question, parse_generation
from bloomqg.judges.base import JudgeItem
from bloomqg.judges.verdict import CriterionVerdict, Verdict
from bloomqg.metrics.intervals import bounded_mean_interval
from bloomqg.store.frames import BINARY_CRITERIA, CRITERIA
from bloomqg.voting.majority import Majority, majority, useful_from, vote_string
from bloomqg.inspect_eval.study_inputs import StudyInputError, dataset_frame, load_study, require_dataset

if TYPE_CHECKING:
    from bloomqg.judges.base import Judge
    from bloomqg.judges.rubric import RubricTemplate

#: The judges entry name of the LLM judge asked through the ``grader`` model role.
GRADER = "grader"
#: Judge backends the panel builds from the config by default: none needs a model server.
OFFLINE_BACKENDS = ("rules", "embedding", "learned")
#: How a sample's answer becomes the judged question.
ANSWER_FORMATS = ("parsed", "text")
#: The keys of a panel score's value, the headline (bloomqg's usability) first: the viewer and
#: ``evals_df`` show the first result as the log's headline.
SCORE_KEYS = ("usability", "unique", "readable", "answerable", "bloom_level", "knowledge_units",
              "catcons", "knowcov")
#: The keys with numeric values (true / false or a share), which carry metrics.
RATED_KEYS = ("usability", "unique", "readable", "answerable", "catcons", "knowcov")
_YES_NO = {True: "yes", False: "no", None: "not rated"}
#: A rated key's value when the panel did not decide it.
NOT_RATED = math.nan


def _rated_value(value: bool | float | None) -> bool | float:
    return NOT_RATED if value is None else value


# -- metrics: bloomqg's rate and interval over the rated samples --------------------------------


def _rated(scores: Sequence[SampleScore]) -> list[float]:
    """The decided values (a criterion not rated is NaN: left out of every metric)."""
    values = [float(s.score.value) for s in scores]  # type: ignore[arg-type]
    return [value for value in values if not math.isnan(value)]


def _interval(scores: Sequence[SampleScore]) -> tuple[float, float]:
    values = _rated(scores)
    if not values:
        return math.nan, math.nan
    return bounded_mean_interval(sum(values) / len(values), len(values), 0.0, 1.0, "clopper_pearson")


@metric
def share():
    """The mean over the rated samples: a rate for true / false, a mean share for ``knowcov``."""

    def compute(scores: list[SampleScore]) -> float:
        values = _rated(scores)
        return sum(values) / len(values) if values else math.nan

    return compute


@metric
def ci_low():
    """The lower end of the share's 95% Clopper–Pearson interval (bloomqg's default ``ci_method``)."""

    def compute(scores: list[SampleScore]) -> float:
        return _interval(scores)[0]

    return compute


@metric
def ci_high():
    """The upper end of the share's 95% Clopper–Pearson interval."""

    def compute(scores: list[SampleScore]) -> float:
        return _interval(scores)[1]

    return compute


@metric
def rated():
    """How many samples the criterion was decided for: the interval's ``n``."""

    def compute(scores: list[SampleScore]) -> float:
        return float(len(_rated(scores)))

    return compute


# -- what a sample says ---------------------------------------------------------------------------


class PanelInputError(ValueError):
    """A sample the panel cannot score (no level where one is given, units of the wrong type);
    the message names the sample and the field."""


@dataclass(frozen=True)
class PanelQuestion:
    """One sample as the panel sees it."""

    sample_id: str
    item_id: str | None
    #: the judged question, None when the answer holds none (``question_problem`` says why)
    question: str | None
    question_problem: str | None
    #: whether the model wrote anything (a written answer without a question is not useful)
    answered: bool
    original_question: str
    target_level: str | None
    original_units: tuple[str, ...]


def _first(metadata: Mapping[str, Any], keys: Sequence[str]) -> tuple[str | None, Any]:
    for key in keys:
        if metadata.get(key) is not None:
            return key, metadata[key]
    return None, None


def _units(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(unit.strip() for unit in value.split(";") if unit.strip())
    if isinstance(value, Sequence) and all(isinstance(unit, str) for unit in value):
        return tuple(value)
    raise PanelInputError(f"{where}: knowledge units must be a list of names or a ';'-separated text, "
                          f"got {type(value).__name__}")


def _level(value: Any, where: str) -> str | None:
    try:
        return normalize_level(value)
    except UnknownBloomLevel as error:
        raise PanelInputError(f"{where}: {error}") from None


def panel_question(state: TaskState, target: Target, *, answer: str, knowledge_units: Sequence[str]) -> PanelQuestion:
    """What the panel judges of one sample (module docstring, steps 1 and 2)."""
    metadata = dict(state.metadata or {})
    where = f"sample {state.sample_id!r}"
    key, level = _first(metadata, ("original_bloom_level", "bloom_level"))
    if key is not None:
        target_level = _level(level, f"{where}, metadata.{key}")
    else:
        # a plain task's target is often the level itself; any other target says nothing of one
        try:
            target_level = normalize_level(target.text) if target.text else None
        except UnknownBloomLevel:
            target_level = None
    key, units = _first(metadata, ("original_knowledge_units", "knowledge_units"))
    original_units = _units(units, f"{where}, metadata.{key}")
    text = state.output.completion if state.output is not None else ""
    answered = bool(text and text.strip())
    if answer == "text":
        question = text.strip() or None
        problem = None if question else "empty answer"
    else:
        parsed = parse_generation(text, [], knowledge_units=knowledge_units)
        question, problem = parsed.new_question, parsed.parse_error if parsed.new_question is None else None
    original = metadata.get("original_question") or state.input_text
    return PanelQuestion(str(state.sample_id), metadata.get("item_id"), question if has_question(question) else None,
                         problem if not has_question(question) else None, answered, str(original), target_level,
                         original_units)


# -- the panel of one dataset -------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """The judges of one dataset, built once per scorer and dataset."""

    judges: Mapping[str, "Judge"]
    knowledge_units: tuple[str, ...]
    domain: str
    rubric: "RubricTemplate"
    #: one judge at a time: the offline judges are not made for concurrent calls
    lock: anyio.Lock


def _panel_judges(config: str, dataset: str, names: Sequence[str] | None) -> Panel:
    from bloomqg.judges.backends.learned import model_file
    from bloomqg.judges.registry import JudgeContext, judge_backend
    from bloomqg.judges.rubric import load_rubric
    from bloomqg.inputs.datasets import dataset_knowledge_units

    study = load_study(config)
    require_dataset(study, dataset, config)
    entries = study.judges
    if names is None:
        names = [name for name, spec in entries.items() if spec["backend"] in OFFLINE_BACKENDS
                 and (spec["backend"] != "learned" or (study.workdir / model_file(name, spec)).is_file())]
    unknown = [name for name in names if name not in entries]
    if unknown:
        raise StudyInputError(f"bloomqg config {config}: judges {unknown} are not judges entries "
                              f"(defined: {', '.join(entries)})")
    served = [name for name in names if entries[name]["backend"] not in OFFLINE_BACKENDS]
    if served:
        raise StudyInputError(f"judges {served}: their backends need a model the scorer does not start; "
                              "bind an LLM judge as Inspect's grader role instead (--model-role grader=MODEL)")
    frame = dataset_frame(config, dataset)
    units = dataset_knowledge_units(frame)
    judges = {}
    for name in names:
        judge = study.spec.judges[name]  # read once with the study, validated with it
        backend = judge_backend(judge.backend)
        judges[name] = backend.build(JudgeContext(name, backend.with_defaults(judge.entry), frame, units,
                                                  study.datasets[dataset]["domain"], None, None, judge.decoding))
    return Panel(judges, tuple(units), study.datasets[dataset]["domain"], load_rubric(), anyio.Lock())


async def _grader_verdict(panel: Panel, item: JudgeItem) -> Verdict:
    """The ``grader`` role's verdict, asked with bloomqg's rubric and read by its verdict parser."""
    from bloomqg.judges.llm import render_judge_messages
    from bloomqg.judges.verdict import GRADER_CALL_FAILED, parse_verdict

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    messages = render_judge_messages(panel.rubric, question=item.question, original_question=item.original_question,
                                     knowledge_units=panel.knowledge_units, domain=panel.domain)
    output = await get_model(role=GRADER).generate([kinds[m["role"]](content=m["content"]) for m in messages])
    if output.error or not output.choices:
        return Verdict.uniform(CriterionVerdict.error(f"{GRADER_CALL_FAILED}: {output.error or 'no answer'}"))
    return parse_verdict(output.completion, list(panel.knowledge_units))


# -- the vote and the score -----------------------------------------------------------------------


def _vote(criterion: str, verdicts: Mapping[str, Verdict], min_valid_votes: int) -> Majority:
    votes = [vote_string(criterion, v[criterion].value) if v[criterion].status == "ok"
             and v[criterion].value is not None else None for v in verdicts.values()]
    return majority(criterion, votes, min_valid_votes=min_valid_votes)


def _shown(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return _YES_NO[value]
    if isinstance(value, (list, tuple, frozenset)):
        return "; ".join(sorted(value)) or "none"
    return str(value)


def panel_score(question: PanelQuestion, verdicts: Mapping[str, Verdict], *, panel: Sequence[str],
                min_valid_votes: int) -> Score:
    """The panel's :class:`Score` of one question from its judges' verdicts (module docstring);
    ``panel`` names the judges that sat (none is asked about a sample without a question)."""
    if question.question is None:
        reason = f"no question to judge: {question.question_problem}"
        # bloomqg's usability: a written answer that holds no question was generated, and is not useful
        useful = False if question.answered else None
        value: dict[str, Any] = {key: NOT_RATED if key in RATED_KEYS else None for key in SCORE_KEYS}
        value["usability"] = _rated_value(useful)
        return Score(value=value, answer=f"no question · useful: {_YES_NO[useful]}",
                     explanation=reason, metadata={"panel": list(panel), "question": None, "reason": reason})
    majorities = {criterion: _vote(criterion, verdicts, min_valid_votes) for criterion in CRITERIA}
    useful = useful_from(*(majorities[c].value for c in BINARY_CRITERIA))
    level, units = majorities["bloom_level"].value, majorities["knowledge_units"].value
    catcons = None
    if useful and level is not None and question.target_level is not None:
        catcons = level == question.target_level
    knowcov = None
    if useful and units is not None and question.original_units:
        knowcov = len(set(question.original_units) & set(units)) / len(set(question.original_units))
    value = {"usability": _rated_value(useful), **{c: _rated_value(majorities[c].value) for c in BINARY_CRITERIA},
             "bloom_level": level, "knowledge_units": "; ".join(units) if units is not None else None,
             "catcons": _rated_value(catcons), "knowcov": _rated_value(knowcov)}
    lines, criteria = [], {}
    for criterion in CRITERIA:
        vote = majorities[criterion]
        judged = {name: v[criterion] for name, v in verdicts.items()}
        shown_votes = ", ".join(f"{name} {_shown(c.value) if c.status == 'ok' else 'not rated'}"
                                for name, c in judged.items())
        decided = _shown(vote.value) if vote.value is not None else f"not rated ({vote.null_reason})"
        lines.append(f"{criterion}: {decided} ({shown_votes})")
        criteria[criterion] = {
            "value": vote.value, "agreement": vote.agreement, "null_reason": vote.null_reason,
            "verdicts": {name: {"value": c.value if not isinstance(c.value, (tuple, frozenset)) else list(c.value),
                                "status": c.status, "reason": c.reason} for name, c in judged.items()},
        }
    lines.append(f"useful: {_YES_NO[useful]} (unique, readable and answerable by majority)")
    return Score(
        value=value,
        answer=f"{level or 'no level'} · useful: {_YES_NO[useful]}",
        explanation="\n".join(lines),
        metadata={"panel": list(panel), "question": question.question, "target_bloom_level": question.target_level,
                  "original_knowledge_units": list(question.original_units), "criteria": criteria},
    )


@scorer(metrics={key: [share(), ci_low(), ci_high(), rated()] for key in RATED_KEYS}, name="bloomqg_panel")
def bloomqg_panel(config: str = "config.yaml", dataset: str | None = None, judges: str | list[str] | None = None,
                  answer: str = "parsed", min_valid_votes: int = 2):
    """bloomqg's panel on each sample's question (module docstring).

    Args:
        config: the bloomqg config whose datasets and judges entries the panel uses.
        dataset: the config's dataset the questions were written from (its items and knowledge
            units are what the judges compare with); default: each sample's ``metadata.dataset``.
        judges: the judges entries that sit on the panel (a list, or names joined by commas);
            default: every entry that runs without a model server (module docstring).
        answer: ``parsed`` (bloomqg's question parser reads the answer) or ``text`` (the whole
            answer is the question).
        min_valid_votes: the fewest valid votes a majority needs (bloomqg's default, 2).
    """
    if answer not in ANSWER_FORMATS:
        raise ValueError(f"bloomqg_panel: answer must be one of {', '.join(ANSWER_FORMATS)}, got {answer!r}")
    names = [n.strip() for n in judges.split(",") if n.strip()] if isinstance(judges, str) else judges
    panel_of = functools.cache(lambda name: _panel_judges(config, name, names))

    async def score(state: TaskState, target: Target) -> Score:
        name = dataset or (state.metadata or {}).get("dataset")
        if not name:
            raise PanelInputError(f"sample {state.sample_id!r}: no metadata.dataset; pass the dataset the questions "
                                  "were written from (-S dataset=NAME, a datasets entry of the config)")
        panel = panel_of(str(name))
        question = panel_question(state, target, answer=answer, knowledge_units=panel.knowledge_units)
        verdicts: dict[str, Verdict] = {}
        if question.question is not None:
            item = JudgeItem(question.sample_id, question.item_id, question.question, question.original_question)
            async with panel.lock:
                for judge_name, judge in panel.judges.items():
                    (judged,) = await anyio.to_thread.run_sync(judge.judge_batch, [item])
                    verdicts[judge_name] = judged.verdict
            if GRADER in model_roles():
                verdicts[GRADER] = await _grader_verdict(panel, item)
        sitting = [*panel.judges, *([GRADER] if GRADER in model_roles() else [])]
        return panel_score(question, verdicts, panel=sitting, min_valid_votes=min_valid_votes)

    return score
