"""Loading, validating and resolving a study's configuration before any job runs.

The Snakefile hands the merged config (config.yaml plus ``--configfile``/``--config``) to
:func:`prepare_study`, which validates it against ``schemas/config.schema.yaml``, resolves every
path, checks that files exist and loads each dataset once, so that a typo, a missing file, a
missing column or an unknown Bloom level stops the run with a message naming the culprit.
"""

from __future__ import annotations

import copy
import filecmp
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import yaml

from bloomqg.annotation.panel_sample import PanelSampleSettings, panel_sample_settings
from bloomqg.inputs.api_settings import base_url_problem
from bloomqg.store.config_schema import Cell, ConfigError, cut
from bloomqg.judges.registry import config_schema, judge_backend
from bloomqg.store.provenance import REPO_ROOT
from bloomqg.inputs.specs import StudySpec, study_spec
from bloomqg.inputs.strategies import (
    StrategyError,
    StrategySpec,
    check_selection,
    default_selection,
    strategy_problems,
    strategy_specs,
    with_templates,
)

log = logging.getLogger(__name__)


def _describe_sources(sources: Iterable[str | Path]) -> str:
    names = [str(s) for s in sources]
    return ", ".join(names) if names else "the config"


def _refuse(problems: Sequence[str], sources: Iterable[str | Path]) -> None:
    """Raise :class:`ConfigError` listing ``problems`` under the config file(s) they came from."""
    listed = "\n  - ".join(problems)
    raise ConfigError(f"invalid configuration ({_describe_sources(sources)}):\n  - {listed}")


def _schema() -> dict[str, Any]:
    return config_schema().schema


def load_schema() -> dict[str, Any]:
    """The config schema: ``schemas/config.schema.yaml`` plus the judge backends' branches."""
    return copy.deepcopy(_schema())


def validate_schema(config: Mapping[str, Any], *, sources: Iterable[str | Path] = ()) -> None:
    """Validate ``config`` against the JSON schema; raise :class:`ConfigError` listing each error
    with its key path (e.g. ``models.smollm2.dtype``) and the config file(s) it came from."""
    problems = config_schema().problems(dict(config))
    if problems:
        _refuse(problems, sources)


def check_base_urls(config: Mapping[str, Any], *, sources: Iterable[str | Path] = ()) -> None:
    """Refuse a ``base_url`` of any models or judges entry that carries credentials (user info,
    a query string, a fragment), naming the entry and never echoing them; see
    :func:`bloomqg.inputs.api_settings.base_url_problem`."""
    problems = []
    for section in ("models", "judges"):
        entries = config.get(section)
        for name, spec in (entries.items() if isinstance(entries, Mapping) else ()):
            url = spec.get("base_url") if isinstance(spec, Mapping) else None
            if isinstance(url, str) and (problem := base_url_problem(url)):
                problems.append(f"{section}.{name}.base_url: {problem}")
    if problems:
        _refuse(problems, sources)


def apply_defaults(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with the schema's ``default:`` of every top-level key it leaves out,
    and of the keys of top-level objects (``gate``, ``bootstrap``, ``prompts``).

    Deliberately two levels, not every ``default:`` of the schema (as a jsonschema validator
    extended to fill defaults would): entries of ``datasets``, ``models`` and ``judges`` keep
    only what the user wrote, because each is a rule parameter and its backend applies its own
    defaults; filling them in would change every job's parameters, and so rerun them.
    """
    merged = copy.deepcopy(dict(config))
    for key, prop in _schema()["properties"].items():
        if "default" in prop:
            merged.setdefault(key, copy.deepcopy(prop["default"]))
        elif prop.get("type") == "object" and any("default" in p for p in prop.get("properties", {}).values()):
            given = merged.get(key) or {}
            merged[key] = {
                **{k: copy.deepcopy(p["default"]) for k, p in prop["properties"].items() if "default" in p},
                **given,
            }
    return merged


def job_study_spec(config: Mapping[str, Any]) -> StudySpec:
    """The typed study of a job's ``snakemake.config`` (validated when the workflow was planned),
    its defaults applied and its entries read once, at the job's start. What a job reads of the
    config that is not a rule parameter (the spending cap, the answer-rate floor, the input
    limits: changing one must rerun no finished job) comes from here, never from the raw mapping
    with a default of the job's own."""
    return study_spec(apply_defaults(config))


@dataclass
class Study:
    """A validated config with resolved paths and the derived job matrix."""

    config: dict[str, Any]
    workdir: Path
    cells: list[Cell] = field(default_factory=list)
    prompt_files: dict[str, Path] = field(default_factory=dict)
    dataset_files: dict[str, list[Path]] = field(default_factory=dict)
    knowledge_units: dict[str, list[str]] = field(default_factory=dict)
    #: every defined strategy (built-ins and the config's), templates resolved to paths
    strategies: dict[str, StrategySpec] = field(default_factory=dict)
    #: release_dir when it does not exist yet (the download_release rule will fill it)
    release_to_download: Path | None = None
    #: the models, judges and datasets as typed specs, read once from the resolved config
    spec: StudySpec | None = None
    #: the panel paid for a sample per cell (``panel_sample``), None when every judge judges all
    panel_sample: PanelSampleSettings | None = None

    @property
    def voting_judges(self) -> list[str]:
        """The judges whose verdicts make the study's votes: all of them, or the local ones when
        the panel judges a sample only."""
        return list(self.panel_sample.local_judges if self.panel_sample else self.config["judges"])

    def is_downloaded(self, path: str | Path) -> bool:
        """Whether ``path`` lies in a release folder that download_release has yet to fetch."""
        if self.release_to_download is None:
            return False
        return Path(path).resolve().is_relative_to(self.release_to_download)

    @property
    def datasets(self) -> dict[str, dict[str, Any]]:
        return self.config["datasets"]

    @property
    def models(self) -> dict[str, dict[str, Any]]:
        return self.config["models"]

    @property
    def judges(self) -> dict[str, dict[str, Any]]:
        return self.config["judges"]

    def shards(self, dataset: str) -> int:
        return int(self.datasets[dataset].get("shards", 1))

    # What each rule hands its jobs as params: exactly the values the job reads, in one
    # canonical form (a key equal to its schema default is left out, as if not written), so
    # that writing a default explicitly, or adding a strategy, model or judge, changes no
    # other job's params and so reruns nothing else.  Defaults are dropped, not filled in:
    # the backends apply them, and filling keys a backend does not read (an API setting of an
    # in-process model) would hand it keys it refuses.

    def dataset_params(self, dataset: str) -> dict[str, Any]:
        """The keys of a datasets entry that loading it reads (:func:`bloomqg.inputs.datasets.load_dataset`)."""
        spec = self.datasets[dataset]
        return {key: spec[key] for key in DATASET_LOAD_KEYS if spec.get(key) is not None}

    def model_params(self, model: str) -> dict[str, Any]:
        """A models entry in canonical form (schema defaults left out)."""
        return without_defaults(self.models[model], "#/$defs/model")

    def judge_params(self, judge: str) -> dict[str, Any]:
        """A judges entry in canonical form (its backend's defaults left out)."""
        spec = self.judges[judge]
        return without_defaults(spec, f"#/$defs/judge_{spec['backend']}")

    def strategy_params(self, strategy: str) -> dict[str, Any]:
        """What building a strategy's prompts reads: its passes (templates and answer fields)
        and its resolved exemplar count; not its label, which only the report shows."""
        spec = self.strategies[strategy]
        return {
            "passes": [{"name": p.name, "template": p.template, "answer_fields": list(p.answer_fields)}
                       for p in spec.passes],
            "exemplars": spec.exemplar_count(int(self.config["exemplars"])),
        }

    def canonical_config(self) -> dict[str, Any]:
        """The config with every datasets, models and judges entry in canonical form (what the
        report shows, so that writing a default explicitly does not rebuild it)."""
        cfg = copy.deepcopy(self.config)
        for name, spec in cfg["datasets"].items():
            cfg["datasets"][name] = without_defaults(spec, "#/$defs/dataset")
        cfg["models"] = {name: self.model_params(name) for name in cfg["models"]}
        cfg["judges"] = {name: self.judge_params(name) for name in cfg["judges"]}
        # keys in sorted order (where a key is written changes nothing), the entries of the
        # named sections in the study's order (which the report follows)
        named = {section: cfg.pop(section) for section in ("datasets", "models", "judges", "strategies")
                 if isinstance(cfg.get(section), Mapping)}
        ordered = _sorted_keys(cfg)
        for section, entries in named.items():
            ordered[section] = {name: _sorted_keys(entry) for name, entry in entries.items()}
        return dict(sorted(ordered.items()))

    def model_needs_materializing(self, model: str) -> bool:
        return bool(self.models[model].get("gguf"))

    def judge_backend(self, judge: str) -> Any:
        """The :class:`~bloomqg.judges.registry.JudgeBackend` of judges entry ``judge``."""
        return judge_backend(self.judges[judge]["backend"])

    def judge_model(self, judge: str) -> str | None:
        """The models entry (``model_ref``) a judge whose backend borrows a model runs."""
        return self.judges[judge]["model_ref"] if self.judge_backend(judge).borrows_model else None


def _sorted_keys(value: Any) -> Any:
    """``value`` with every mapping's keys in sorted order (the order a config is written in
    is no change of it); the order of lists is kept."""
    if isinstance(value, Mapping):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


#: The datasets-entry keys :func:`bloomqg.inputs.datasets.load_dataset` reads.
DATASET_LOAD_KEYS: tuple[str, ...] = ("loader", "path", "verb_list", "bloom_level", "exclude_rows")


def _resolve_ref(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    while isinstance(node, Mapping) and "$ref" in node and node["$ref"].startswith("#/$defs/"):
        node = {**defs[node["$ref"].removeprefix("#/$defs/")], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _properties(node: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """The declared properties of a schema node: its own, and those of the schemas it
    includes (``allOf``); an own ``key: true`` defers to the included definition."""
    node = _resolve_ref(node, defs)
    found: dict[str, Any] = {}
    for part in node.get("allOf", []):
        found.update(_properties(part, defs))
    for key, prop in (node.get("properties") or {}).items():
        if prop is not True or key not in found:
            found[key] = prop
    return found


def without_defaults(entry: Mapping[str, Any], ref: str) -> dict[str, Any]:
    """``entry`` (a config entry validated against schema ``ref``) without the keys whose value
    is the schema's ``default:``, nested objects (``generation:``) alike; an object left empty
    goes too.  Two entries that differ only in written-out defaults give the same result."""
    defs = _schema()["$defs"]

    def strip(value: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, Any]:
        properties = _properties(node, defs)
        kept: dict[str, Any] = {}
        for key, item in value.items():
            prop = _resolve_ref(properties.get(key) or {}, defs) if isinstance(properties.get(key), Mapping) else {}
            if "default" in prop and item == prop["default"]:
                continue
            if isinstance(item, Mapping) and _properties(prop, defs):
                item = strip(item, prop)
                if not item:
                    continue
            kept[key] = copy.deepcopy(item)
        return dict(sorted(kept.items()))  # the order keys are written in changes nothing either

    return strip(entry, {"$ref": ref})


def resolve_path(value: str, *, workdir: Path, where: str, must_exist: bool = True) -> Path:
    """Resolve a config path: absolute as is; relative against the working directory, then the
    workflow's folder. ``where`` names the key for the error message."""
    path = Path(os.path.expanduser(value))
    candidates = [path] if path.is_absolute() else [workdir / path, REPO_ROOT / path]
    for candidate in candidates:
        if candidate.exists():
            return candidate.resolve()
    if must_exist:
        tried = " or ".join(str(c) for c in candidates)
        raise ConfigError(f"{where}: file not found: {value!r} (looked for {tried})")
    return candidates[0]


def choose_layout(
    candidates: Sequence[str], *, workdir: Path, where: str, downloaded: Callable[[str], bool]
) -> str:
    """The one of ``candidates`` (the same file as different copies of a release name it) that
    is present. None present, or two different files present, is a :class:`ConfigError` naming
    every candidate: which copy a study reads is never guessed. Candidates in a release folder
    that is still to be downloaded give the first, the release's own layout (what
    ``download_release`` writes; rules/release.smk checks that the download writes it)."""
    if not candidates:
        raise ConfigError(f"{where}: an empty list of candidate paths")
    if all(downloaded(candidate) for candidate in candidates):
        return candidates[0]
    found = {candidate: resolve_path(candidate, workdir=workdir, where=where, must_exist=False)
             for candidate in candidates}
    present = {candidate: path for candidate, path in found.items() if path.exists()}
    listed = "\n  ".join(f"{path} ({'present' if candidate in present else 'absent'})"
                         for candidate, path in found.items())
    if not present:
        raise ConfigError(f"{where}: none of the {len(candidates)} layouts is present; looked for\n  {listed}")
    first, *others = present.items()
    different = [path for _, path in others if not os.path.samefile(path, first[1])
                 and not filecmp.cmp(path, first[1], shallow=False)]
    if different:
        raise ConfigError(
            f"{where}: more than one layout is present and the files differ:\n  {listed}\n"
            "Remove the copy you do not mean, or set the path to one file."
        )
    return first[0]


def _substitute(value: Any, release_dir: str | None, where: str) -> Any:
    if isinstance(value, str) and "{release_dir}" in value:
        if not release_dir:
            raise ConfigError(
                f"{where} uses {{release_dir}} but release_dir is not set "
                "(pass --config release_dir=PATH)"
            )
        return value.replace("{release_dir}", release_dir)
    if isinstance(value, dict):
        return {k: _substitute(v, release_dir, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, release_dir, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def gate_settings(gate: Mapping[str, Any], sources: Iterable[str | Path] = ()) -> dict[str, Any]:
    """The gate block in its current spelling: the older ``alpha: X`` becomes
    ``coefficient: alpha, threshold: X`` (naming both spellings is an error)."""
    gate = dict(gate)
    if "alpha" not in gate:
        return gate
    if "threshold" in gate or gate.get("coefficient", "alpha") != "alpha":
        raise ConfigError(
            f"gate ({_describe_sources(sources)}): alpha is the older spelling of coefficient alpha "
            "with that threshold; give either alpha, or coefficient and threshold, not both"
        )
    threshold = gate.pop("alpha")
    return {**gate, "coefficient": "alpha", "threshold": threshold}


#: Config keys naming a folder the workflow writes to.
WRITTEN_PATHS: tuple[str, ...] = ("cache_dir",)


def check_written_paths(cfg: Mapping[str, Any], workdir: Path, sources: Iterable[str | Path] = ()) -> None:
    """A folder the workflow writes (:data:`WRITTEN_PATHS`) lies in the working directory, or is
    written as an absolute path: a relative path that climbs out of it (``cache_dir: ../..``)
    is refused, an absolute one outside it is allowed and said in the log."""
    for key in WRITTEN_PATHS:
        value = cfg.get(key)
        if not isinstance(value, str):
            continue
        path = Path(os.path.expanduser(value))
        resolved = (path if path.is_absolute() else workdir / path).resolve()
        if resolved.is_relative_to(workdir):
            continue
        if not path.is_absolute():
            _refuse([f"{key}: {value!r} leads outside the working directory {workdir} (to {resolved}); "
                     "write it as an absolute path if the workflow is to write there"], sources)
        log.warning("%s is outside the working directory %s: the workflow writes to %s", key, workdir, resolved)


def check_comparisons(config: Mapping[str, Any], sources: Iterable[str | Path] = ()) -> None:
    """Refuse a ``comparisons.baseline`` that is not a defined strategy (built-in or under
    ``strategies:``), listing the defined ones: every paired test would silently compare nothing."""
    from bloomqg.inputs.strategies import ComparisonSpec, StrategyError, strategy_specs

    baseline = ComparisonSpec.from_config(config).baseline
    if baseline is None:
        return
    try:
        defined = strategy_specs(config)
    except StrategyError as error:
        raise ConfigError(f"{_describe_sources(sources)}: {error}") from error
    if baseline not in defined:
        _refuse([f"comparisons.baseline: {baseline!r} is not a defined strategy (defined: {', '.join(defined)})"],
                sources)


def prepare_study(
    config: Mapping[str, Any],
    *,
    workdir: str | Path,
    sources: Iterable[str | Path] = (),
    load_datasets: bool = True,
) -> Study:
    """Validate and resolve ``config``; with ``load_datasets`` also load every dataset once so
    that bad data fails here, before any job."""
    sources = list(sources)
    check_config_sources(sources)  # before any walk: an alias bomb, a key written twice
    check_config_size(config)
    check_base_urls(config, sources=sources)  # a schema error may print a whole entry
    validate_schema(config, sources=sources)
    check_comparisons(config, sources)
    cfg = apply_defaults({**config, "gate": gate_settings(config.get("gate") or {}, sources)})
    workdir = Path(workdir).resolve()
    study = Study(config=cfg, workdir=workdir)
    if cfg.get("release_dir"):
        release_dir = resolve_path(cfg["release_dir"], workdir=workdir, where="release_dir", must_exist=False)
        if not release_dir.exists():
            # The download_release rule fetches it; its files are checked when they arrive.
            study.release_to_download = release_dir
        cfg["release_dir"] = str(release_dir)
    cfg = _substitute(cfg, cfg.get("release_dir"), "config")
    study.config = cfg
    check_written_paths(cfg, workdir, sources)

    for name, value in cfg["prompts"].items():
        if value is None:
            continue
        study.prompt_files[name] = resolve_path(value, workdir=workdir, where=f"prompts.{name}")
    cfg["prompts"] = {k: str(v) for k, v in study.prompt_files.items()}

    study.strategies, selection = _resolve_strategies(cfg, workdir, sources)
    for name, spec in cfg["datasets"].items():
        spec.setdefault("strategies", list(selection))
        try:
            check_selection(spec["strategies"], study.strategies, f"datasets.{name}.strategies")
        except StrategyError as error:
            _refuse([str(error)], sources)
        spec.setdefault("domain", name)
        files = []
        if isinstance(spec.get("path"), list):
            spec["path"] = choose_layout(spec["path"], workdir=workdir, where=f"datasets.{name}.path",
                                         downloaded=study.is_downloaded)
        for key in ("path", "verb_list"):
            if spec.get(key):
                resolved = resolve_path(
                    spec[key], workdir=workdir, where=f"datasets.{name}.{key}",
                    must_exist=not study.is_downloaded(spec[key]),
                )
                spec[key] = str(resolved)
                files.append(resolved)
        study.dataset_files[name] = files
    if cfg.get("release_dir") and study.release_to_download is None:
        _verify_release_datasets(study)

    for name in cfg["judges"]:
        # The schema's branch of a backend that borrows a model requires model_ref; others refuse it.
        ref = study.judge_model(name)
        if ref is not None and ref not in cfg["models"]:
            raise ConfigError(
                f"judges.{name}.model_ref: {ref!r} is not a models entry "
                f"(known: {', '.join(cfg['models'])})"
            )
        if ref is not None and cfg["models"][ref]["backend"] == "inspect":
            raise ConfigError(f"judges.{name}.model_ref: {ref!r} imports questions from Inspect logs "
                              "(backend inspect) and has no model to judge with")

    study.panel_sample = panel_sample_settings(cfg)
    # every entry's settings resolved once (a budget over an unpriced API entry is refused here)
    study.spec = study_spec(cfg)

    if cfg.get("release_manifest"):
        cfg["release_manifest"] = str(
            resolve_path(cfg["release_manifest"], workdir=workdir, where="release_manifest")
        )

    for dataset, spec in cfg["datasets"].items():
        for strategy in spec["strategies"]:
            for model in cfg["models"]:
                study.cells.append(Cell(dataset, strategy, model))

    if load_datasets:
        from bloomqg.inputs.datasets import DatasetError, dataset_knowledge_units, load_dataset

        items: dict[str, int] = {}
        for name, spec in cfg["datasets"].items():
            if study.is_downloaded(spec["path"]):
                continue  # validated by prepare_dataset once download_release has fetched it
            try:
                frame = load_dataset(name, spec, base_dir=workdir, limits=cfg["input_limits"])
            except DatasetError as error:
                raise ConfigError(f"datasets.{name}: {error}") from error
            study.knowledge_units[name] = dataset_knowledge_units(frame)
            items[name] = len(frame)
        _check_paid_calls(study.spec, [(cell.dataset, cell.model) for cell in study.cells], items,
                          [len(study.strategies[cell.strategy].passes) for cell in study.cells])
    return study


def _resolve_strategies(
    cfg: Mapping[str, Any], workdir: Path, sources: Sequence[str | Path]
) -> tuple[dict[str, StrategySpec], list[str]]:
    """Every defined strategy with its templates resolved and checked (unknown variables named
    by file and line), and the default selection; a problem is a :class:`ConfigError`."""
    try:
        specs = strategy_specs(cfg)
        selection = default_selection(cfg)
        check_selection(selection, specs, "strategies")
    except StrategyError as error:
        _refuse([str(error)], sources)

    def resolve(value: str, where: str) -> Path:
        return resolve_path(value, workdir=workdir, where=where, must_exist=False)

    resolved = {name: with_templates(spec, resolve) for name, spec in specs.items()}
    problems = [problem for spec in resolved.values() for problem in strategy_problems(spec)]
    if problems:
        _refuse(problems, sources)
    return resolved, selection


def _check_paid_calls(spec: StudySpec, cells: Sequence[tuple[str, str]], items: Mapping[str, int],
                      passes: Sequence[int]) -> None:
    # A dataset of a million rows would otherwise plan a million paid calls without a word.
    from bloomqg.api.budget import paid_calls, unbudgeted

    calls = paid_calls(spec, cells, items, passes)
    total, threshold = sum(calls.values()), spec.paid_calls_threshold
    if total <= threshold:
        return
    counts = ", ".join(f"{key} {n:,}" for key, n in calls.items())
    uncapped = unbudgeted(spec, calls)
    if uncapped:
        raise ConfigError(
            f"the study plans up to {total:,} paid API calls ({counts}), above"
            f" input_limits.paid_calls_threshold = {threshold:,}, and {', '.join(uncapped)} have no"
            " budget_usd: set budget_usd (with prices), reduce the datasets or limit_items, or"
            " raise the threshold"
        )
    log.warning(
        "the study plans up to %s paid API calls (%s), above input_limits.paid_calls_threshold = %s;"
        " budget_usd caps their spend (target estimate_cost prices them)", f"{total:,}", counts, f"{threshold:,}",
    )


def _verify_release_datasets(study: Study) -> None:
    """Refuse a dataset file read from release_dir that is not the published file (its pin in
    configs/llm-eval-release.yaml), as release run files are refused; prepare_dataset checks again."""
    from bloomqg.release.download import ReleaseDownloadError, verify_release_files

    for name, files in study.dataset_files.items():
        try:
            verify_release_files(files, study.config["release_dir"])
        except ReleaseDownloadError as error:
            raise ConfigError(f"datasets.{name}: {error}") from error


#: Most nodes a config may hold with every YAML alias expanded: the paper's study holds about
#: 1,500; 600 bytes of nested aliases expand to 9**9.
MAX_CONFIG_NODES = 100_000


class _StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key written twice in one mapping (naming it and both lines)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<: *base": its keys may be overridden on purpose
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise ConfigError(f"{self.name}: key {key!r} is written twice in one mapping, at lines "
                                  f"{seen[key]} and {line} (YAML would silently keep the last)")
            seen.setdefault(key, line)
        return super().construct_mapping(node, deep=deep)


def _expanded_count(root: Any, children: Callable[[Any], Iterable[Any] | None]) -> int:
    """Nodes under ``root`` with every shared node expanded (``children``: a node's children, None
    for a leaf), each distinct node walked once: an alias is the same object again, so nine
    aliases of nine aliases cost 18 steps, not 9**9. A recursive alias counts as one."""
    memo: dict[int, int] = {}

    def count(node: Any) -> int:
        if id(node) in memo:
            return memo[id(node)]
        below = children(node)
        if below is None:
            return 1
        memo[id(node)] = 1  # while it is being counted
        memo[id(node)] = total = 1 + sum(count(child) for child in below)
        return total

    return count(root)


def _yaml_children(node: yaml.Node) -> Iterable[yaml.Node] | None:
    """A YAML node's children: a mapping's keys and values, a sequence's items."""
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return None


def parse_config_text(text: str, name: str) -> Any:
    """A config file's YAML, checked before anything walks it: no more than
    :data:`MAX_CONFIG_NODES` nodes with aliases expanded (an alias bomb), no key written twice."""
    try:
        loader = _StrictLoader(text)
        loader.name = name
        try:
            root = loader.get_single_node()
            nodes = _expanded_count(root, _yaml_children) if root is not None else 0
            if nodes > MAX_CONFIG_NODES:
                raise ConfigError(f"{name}: {nodes:,} YAML nodes once its aliases (*name) are expanded, above"
                                  f" the {MAX_CONFIG_NODES:,} a config may hold; refused before reading it")
            return loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except RecursionError:
        raise ConfigError(f"{name}: nested too deeply to be a config") from None


def check_config_sources(sources: Iterable[str | Path]) -> None:
    """Refuse a config file that is an alias bomb or writes a key twice (:func:`parse_config_text`),
    before Snakemake's copy of it is walked: the file as written, whichever loader read it."""
    for source in sources:
        path = Path(source)
        if path.is_file():
            try:
                parse_config_text(path.read_text(encoding="utf-8"), str(path))
            except yaml.YAMLError as error:
                raise ConfigError(f"{path}: not valid YAML: {error}") from error


def check_config_size(config: Any) -> None:
    """Refuse a loaded config whose aliases expand beyond :data:`MAX_CONFIG_NODES` nodes (the
    same containers shared again and again), counted without expanding them."""

    def values(value: Any) -> Iterable[Any] | None:
        if isinstance(value, Mapping):
            return value.values()
        return value if isinstance(value, (list, tuple)) else None

    nodes = _expanded_count(config, values)
    if nodes > MAX_CONFIG_NODES:
        raise ConfigError(f"the config holds {nodes:,} values once its YAML aliases are expanded, above the"
                          f" {MAX_CONFIG_NODES:,} a config may hold; refused before reading it")


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file, naming it in any error (:func:`parse_config_text`'s checks)."""
    path = Path(path)
    try:
        data = parse_config_text(path.read_text(), str(path))
    except FileNotFoundError as error:
        raise ConfigError(f"config file not found: {path}") from error
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


#: Bounds of a config file checked before Snakemake parses it (:func:`check_config_file`): the
#: paper's study is about 10 KB, nests 6 deep and holds no value of 1,000 characters.
MAX_CONFIG_BYTES = 1_000_000
MAX_CONFIG_DEPTH = 32
MAX_CONFIG_VALUE_CHARS = 10_000
#: A key that makes Snakemake run the config through YTE templates: code, during a dry run too.
_YTE_KEY = "__use_yte__"


def check_config_file(path: str | Path) -> dict[str, Any]:
    """Refuse a config file before Snakemake parses it (``make study`` runs this first): larger
    than :data:`MAX_CONFIG_BYTES`, an alias or merge-key bomb or a key written twice
    (:func:`parse_config_text`), a ``__use_yte__`` key, nesting deeper than
    :data:`MAX_CONFIG_DEPTH` or a value longer than :data:`MAX_CONFIG_VALUE_CHARS`, each error
    naming the file and key with any value cut. Returns the config read."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {size:,} bytes, above the {MAX_CONFIG_BYTES:,} a config file may hold;"
                          " refused before reading it")
    config = load_config_file(path)
    if _YTE_KEY in config:
        raise ConfigError(f"{path}: key {_YTE_KEY!r} asks Snakemake to run the config as a YTE template, "
                          "which runs code from it (during a dry run too); bloomqg configs are plain YAML")
    stack: list[tuple[list[Any], Any]] = [([], config)]
    while stack:  # iterative: the depth is what is being checked
        keys, value = stack.pop()
        where = f"{path}: {'.'.join(map(str, keys)) or 'the top level'}"
        if len(keys) > MAX_CONFIG_DEPTH:
            raise ConfigError(f"{where}: nested more than {MAX_CONFIG_DEPTH} deep")
        if isinstance(value, str) and len(value) > MAX_CONFIG_VALUE_CHARS:
            raise ConfigError(f"{where}: a value of {len(value):,} characters ({cut(value, 60)}), above the "
                              f"{MAX_CONFIG_VALUE_CHARS:,} a config value may hold")
        if isinstance(value, Mapping):
            stack += [([*keys, key], item) for key, item in value.items()]
        elif isinstance(value, list):
            stack += [([*keys, index], item) for index, item in enumerate(value)]
    return config


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bloomqg.study.config FILE...``: :func:`check_config_file` on each file; 0 when all
    pass, else 2 with the reason on standard error (``make study`` runs it before Snakemake)."""
    files = list(sys.argv[1:] if argv is None else argv)
    if not files:
        print("usage: python -m bloomqg.study.config CONFIG.yaml [...]", file=sys.stderr)
        return 2
    for name in files:
        try:
            check_config_file(name)
        except ConfigError as error:
            print(f"bloomqg: {cut(str(error), 2000)}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
