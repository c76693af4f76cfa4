"""The study's models, judges and datasets, read once from the validated config into typed,
read-only specs: what the cost estimate, the budget checks and the bias probes take instead of
the raw config mapping (strategies have theirs in :mod:`bloomqg.inputs.strategies`).

An entry's typed settings are resolved here, once, when the config is read: its decoding
(:attr:`EntrySpec.decoding`, the ``generation:`` block checked against the schema with its
defaults filled in and the study's seed) and, for a paid API entry, its client settings
(:attr:`EntrySpec.client`, the study's ``budget_usd`` on an entry that sets none). A stage
takes those, never the raw entry to check and convert again. A spec keeps its validated entry
whole (``entry``, read-only) for the backend that builds a generator or judge from it; the
questions the study asks of an entry (is it a paid API? which family is it?) are answered here
once, not by each caller reaching back into ``config["models"][name]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Self

from bloomqg.inputs.api_settings import ClientSettings, client_settings_from_entry
from bloomqg.inputs.chat import DecodingParams, decoding_params
from bloomqg.store.config_schema import ConfigError, file_schema

#: The backend of a paid, OpenAI-compatible API entry (a generator or a judge).
API_BACKEND = "openai"


def _frozen(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(entry))


@dataclass(frozen=True)
class EntrySpec:
    """A ``models`` or ``judges`` entry: its name, section, validated keys and the typed
    settings resolved from them (:meth:`read` builds one)."""

    name: str
    entry: Mapping[str, Any]
    #: the decoding its calls use: its ``generation:`` block, the schema's defaults for the keys
    #: it leaves out, the study's seed (an entry of a backend that does not decode has the defaults)
    decoding: DecodingParams
    #: a paid API entry's client settings, with the study's ``budget_usd`` if it sets none of its
    #: own (what its client is built with and its calls are priced by); None for other backends
    client: ClientSettings | None = None

    #: "models" or "judges": the config section, and the first part of :attr:`key`
    section = ""

    @classmethod
    def read(cls, name: str, entry: Mapping[str, Any], *, seed: int, budget_usd: float | None) -> Self:
        """The spec of a validated entry, its settings resolved (a ValueError names the key)."""
        key = f"{cls.section}.{name}"
        decoding = decoding_params(entry.get("generation"), seed, where=f"{key}.generation")
        client = (client_settings_from_entry(with_study_budget(entry, budget_usd))
                  if entry.get("backend") == API_BACKEND else None)
        return cls(name, _frozen(entry), decoding, client)

    def with_entry(self, entry: Mapping[str, Any]) -> Self:
        """This spec over another entry of the same backend whose changed keys are not the
        decoding's or the client's (an hf judge's ``dtype`` over the models entry it borrows)."""
        return dataclasses.replace(self, entry=_frozen(entry))

    def with_seed(self, seed: int) -> Self:
        """This spec, its decoding with another seed (a section with a seed of its own, such as
        ``judge_validation.seed``, or a probe group's)."""
        return dataclasses.replace(self, decoding=dataclasses.replace(self.decoding, seed=seed))

    @property
    def key(self) -> str:
        """``models.NAME`` / ``judges.NAME``: how messages and the call counts name the entry."""
        return f"{self.section}.{self.name}"

    @property
    def backend(self) -> str:
        return str(self.entry["backend"])

    @property
    def is_api(self) -> bool:
        """A paid OpenAI-compatible entry (its calls are counted, priced and capped)."""
        return self.backend == API_BACKEND

    @property
    def own_budget_usd(self) -> float | None:
        value = self.entry.get("budget_usd")
        return None if value is None else float(value)

    @property
    def api_client(self) -> ClientSettings:
        """:attr:`client` of an entry known to be a paid API's (:attr:`is_api`)."""
        if self.client is None:
            raise ValueError(f"{self.key}: backend {self.backend!r} is not a paid API (backend {API_BACKEND!r})")
        return self.client

    @property
    def own_family(self) -> str | None:
        family = self.entry.get("family")
        return str(family) if family else None


@dataclass(frozen=True)
class ModelSpec(EntrySpec):
    """A ``models`` entry: a generator (and what a judge's ``model_ref`` borrows)."""

    section = "models"

    @property
    def engine(self) -> str | None:
        """The serving engine that runs it (``vllm``, ``transformers-serve``), None in-process."""
        return self.entry.get("engine")


@dataclass(frozen=True)
class JudgeSpec(EntrySpec):
    """A ``judges`` entry."""

    section = "judges"

    @property
    def model_ref(self) -> str | None:
        return self.entry.get("model_ref")


@dataclass(frozen=True)
class StudySpec:
    """What the study-wide checks and the cost estimate read of a config, read once."""

    seed: int
    limit_items: int | None
    #: the study's spending cap (an API entry's own ``budget_usd`` takes precedence)
    budget_usd: float | None
    #: dataset name -> its ``domain`` (what the judge rubric names)
    domains: Mapping[str, str]
    models: Mapping[str, ModelSpec]
    judges: Mapping[str, JudgeSpec]
    #: the ``judge_bias:`` section as written (None: the probes are off);
    #: :func:`bloomqg.judges.bias.design.judge_bias_settings` resolves it
    judge_bias: Mapping[str, Any] | None = None
    #: ``inspect.export``: ``all`` also writes the cells as Inspect logs (target inspect_logs)
    inspect_export: bool = False
    #: ``min_answer_rate``: the share of its calls a judge's (or an API generator's) job must get
    #: answered. Read by the jobs from the config, not a rule parameter: changing it reruns nothing.
    min_answer_rate: float = field(default_factory=lambda: float(file_schema().default_of("min_answer_rate")))
    #: ``input_limits``, every key, the schema's default where the config gives none (checks on
    #: input, not rule parameters, for the same reason)
    input_limits: Mapping[str, Any] = field(default_factory=lambda: input_limits({}))

    @property
    def max_question_chars(self) -> int:
        """``input_limits.max_question_chars``: the longest generated question kept."""
        return int(self.input_limits["max_question_chars"])

    @property
    def max_log_member_mb(self) -> float:
        """``input_limits.max_log_member_mb``: the largest header or sample of an imported Inspect log."""
        return float(self.input_limits["max_log_member_mb"])

    @property
    def paid_calls_threshold(self) -> int:
        """``input_limits.paid_calls_threshold``: paid calls above which planning warns (or refuses)."""
        return int(self.input_limits["paid_calls_threshold"])

    def api_entries(self) -> Iterator[EntrySpec]:
        """Every paid API entry, models first, in the config's order."""
        for spec in (*self.models.values(), *self.judges.values()):
            if spec.is_api:
                yield spec

    def entry(self, key: str) -> EntrySpec:
        """The spec of ``models.NAME`` / ``judges.NAME``."""
        section, name = key.split(".", 1)
        return {"models": self.models, "judges": self.judges}[section][name]

    def budget_of(self, spec: EntrySpec) -> float | None:
        """The cap a paid entry's calls count against: its own, else the study's."""
        own = spec.own_budget_usd
        return own if own is not None else self.budget_usd

    def borrowed_model(self, judge: str) -> ModelSpec | None:
        """The models entry a judge's ``model_ref`` names (an hf judge runs its weights), else None."""
        ref = self.judges[judge].model_ref
        return self.models[ref] if ref else None

    def judge_family(self, judge: str) -> str | None:
        """A judge's ``family``: its own, else that of the models entry it borrows."""
        spec = self.judges[judge]
        if spec.own_family:
            return spec.own_family
        borrowed = self.models.get(spec.model_ref) if spec.model_ref else None
        return borrowed.own_family if borrowed is not None else None


def with_study_budget(entry: Mapping[str, Any], budget_usd: float | None) -> dict[str, Any]:
    """An API config entry with the study's ``budget_usd`` unless it sets its own; other
    backends unchanged. The cap is not a ``params:`` value of any rule: raising it must not
    rerun the jobs that finished within it."""
    entry = dict(entry)
    if entry.get("backend") == API_BACKEND and budget_usd is not None and entry.get("budget_usd") is None:
        entry["budget_usd"] = budget_usd
    return entry


def unpriced_caps(config: Mapping[str, Any]) -> list[str]:
    """``models.X`` / ``judges.X`` API entries that a budget applies to (their own ``budget_usd``,
    else the study's) but that lack prices: their spend could not be counted."""
    study_budget = config.get("budget_usd")
    return [f"{section}.{name}" for section in ("models", "judges")
            for name, entry in (config.get(section) or {}).items()
            if entry.get("backend") == API_BACKEND
            and (entry.get("budget_usd") if entry.get("budget_usd") is not None else study_budget) is not None
            and (entry.get("price_per_million_input") is None or entry.get("price_per_million_output") is None)]


def input_limits(given: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The ``input_limits`` section with the schema's default of every key it leaves out."""
    schema = file_schema()
    declared = schema.schema["properties"]["input_limits"]["properties"]
    return _frozen({key: (given or {}).get(key, schema.default_of("input_limits", key)) for key in declared})


def study_spec(config: Mapping[str, Any]) -> StudySpec:
    """The specs of a validated config, every entry's settings resolved once
    (:func:`bloomqg.study.config.prepare_study` makes one; a rule script handed the config makes
    its own, once, at its start). A budget over an API entry without prices is a
    :class:`~bloomqg.store.config_schema.ConfigError` naming the entries."""
    unpriced = unpriced_caps(config)
    if unpriced:
        raise ConfigError(
            f"budget_usd is set but {', '.join(unpriced)} give no price_per_million_input/output: "
            "their spend could not be counted against the cap"
        )
    seed = int(config["seed"])
    budget_usd = None if config.get("budget_usd") is None else float(config["budget_usd"])
    return StudySpec(
        seed=seed,
        limit_items=config.get("limit_items"),
        budget_usd=budget_usd,
        domains=MappingProxyType({name: str(entry.get("domain", ""))
                                  for name, entry in (config.get("datasets") or {}).items()}),
        models=MappingProxyType({name: ModelSpec.read(name, entry, seed=seed, budget_usd=budget_usd)
                                 for name, entry in (config.get("models") or {}).items()}),
        judges=MappingProxyType({name: JudgeSpec.read(name, entry, seed=seed, budget_usd=budget_usd)
                                 for name, entry in (config.get("judges") or {}).items()}),
        judge_bias=_frozen(config["judge_bias"]) if config.get("judge_bias") else None,
        inspect_export=bool((config.get("inspect") or {}).get("export", False)),
        **({"min_answer_rate": float(config["min_answer_rate"])} if config.get("min_answer_rate") is not None else {}),
        input_limits=input_limits(config.get("input_limits")),
    )
