"""Seeded synthetic frames that match :mod:`bloomqg.store.frames`, for tests of the analysis stages.

One call, :func:`synthetic_study`, builds a coherent small study (2–6 models × 3 datasets ×
strategies): the datasets, the generations, the votes on them, the judges' reliability, tidy
metrics, correlations, paired strategy-vs-strategy comparisons, a token/cost ledger, human annotations and
provenance dictionaries. Each frame also has its own function, so a test can build just one.

The numbers are *plausible*, not computed by :mod:`bloomqg.metrics`: models differ in a seeded
"skill", FGP is a little better than CoT, judged levels lean upwards as in the paper. Some texts
contain HTML/LaTeX special characters (``<``, ``&``, ``%``, ``_``) so that escaping is exercised.
Every frame passes :func:`bloomqg.store.parquet_io.to_table` with its schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.metrics.registry import PERCENT_METRICS
from bloomqg.store.frames import CRITERIA
from bloomqg.inputs.strategies import ComparisonSpec

#: Model names in the order of the paper's tables (up to six).
MODEL_NAMES: tuple[str, ...] = (
    "glm-4-9b",
    "qwen2.5-7b",
    "baichuan2-7b",
    "llama-3-8b",
    "internlm3-8b",
    "spark-3.5-max",
)

#: (dataset -> strategies) as in the default config: math is run under FGP only.
DEFAULT_CELLS: dict[str, tuple[str, ...]] = {
    "cs": ("cot", "fgp"),
    "math": ("fgp",),
    "social": ("cot", "fgp"),
}

_UNITS: dict[str, tuple[str, ...]] = {
    "cs": ("stack", "queue", "binary_search_tree", "hashing", "recursion", "sorting"),
    "math": ("fractions", "linear_equations", "area", "percentages"),
    "social": ("economics", "civics", "geography", "history", "sociology"),
}

#: Question stems per level; some carry characters that HTML and LaTeX must escape.
_STEMS: dict[str, str] = {
    "Remember": "Define the term {unit} & list its parts.",
    "Understand": "Explain why {unit} matters when a[i] < a[j].",
    "Apply": "Use {unit} to solve: 50% of the input has <b>size</b> n_1.",
    "Analyze": "Compare {unit} with an alternative; which costs O(n^2)?",
    "Evaluate": "Judge whether {unit} is the best choice for {{x: 1}} \\ why?",
    "Create": "Design a new exercise on {unit} with a # counter.",
}

JUDGES: tuple[str, ...] = ("rules", "minilm", "smollm2")
GATE_THRESHOLD = 0.7


@dataclass
class SyntheticStudy:
    """Every frame of a small study, mutually consistent in names and cells."""

    datasets: dict[str, pd.DataFrame]
    generations: pd.DataFrame
    votes: pd.DataFrame
    reliability: pd.DataFrame
    metrics: pd.DataFrame
    correlations: pd.DataFrame
    paired: pd.DataFrame
    ledger: pd.DataFrame
    human_annotations: pd.DataFrame
    generation_provenance: list[dict] = field(default_factory=list)
    judgment_provenance: list[dict] = field(default_factory=list)
    config: dict = field(default_factory=dict)


def _cells(cells: Mapping[str, Sequence[str]] | None) -> dict[str, tuple[str, ...]]:
    return {name: tuple(s) for name, s in (cells or DEFAULT_CELLS).items()}


def synthetic_dataset(name: str, n_items: int = 30, seed: int = 0) -> pd.DataFrame:
    """A DATASET frame: math items are all Apply (as in the paper), cs has a few uncategorized."""
    rng = np.random.default_rng([seed, len(name), sum(map(ord, name))])
    units = _UNITS.get(name, ("unit_a", "unit_b", "unit_c"))
    rows = []
    for row in range(1, n_items + 1):
        if name == "math":
            level: str | None = "Apply"
        elif name == "cs" and row % 15 == 0:
            level = None  # Uncategorized by the verb list
        else:
            level = BLOOM_LEVELS[(row - 1) % len(BLOOM_LEVELS)]
        n_units = 2 if rng.random() < 0.15 else 1
        item_units = sorted(rng.choice(units, size=n_units, replace=False).tolist())
        stem = _STEMS[level or "Understand"].format(unit=item_units[0])
        rows.append(
            {
                "item_id": f"{name}-{row:04d}",
                "dataset": name,
                "source_row": row,
                "question": stem,
                "bloom_level": level,
                "bloom_source": "fixed" if name == "math" else ("label" if name == "social" else "verb_list"),
                "knowledge_units": item_units,
            }
        )
    return pd.DataFrame(rows)


def _skill(model: str, seed: int) -> float:
    """A model's latent quality in [0, 1], stable for a (model, seed)."""
    return float(np.random.default_rng([seed, sum(map(ord, model))]).uniform(0.2, 0.95))


def _shifted_level(rng: np.random.Generator, level: str, p_match: float) -> str:
    """A judged level: the original with probability ``p_match``, else a shift leaning upwards."""
    if rng.random() < p_match:
        return level
    weight = BLOOM_LEVELS.index(level) + 1
    deltas = [d for d in (-3, -2, -1, 1, 2, 3) if 1 <= weight + d <= 6]
    probs = np.array([{-3: 0.4, -2: 0.8, -1: 1.5, 1: 1.8, 2: 1.6, 3: 1.0}[d] for d in deltas])
    delta = rng.choice(deltas, p=probs / probs.sum())
    return BLOOM_LEVELS[weight + int(delta) - 1]


def synthetic_generations_and_votes(
    datasets: Mapping[str, pd.DataFrame],
    models: Sequence[str],
    cells: Mapping[str, Sequence[str]] | None = None,
    seed: int = 0,
    gated_cells: frozenset[tuple[str, str, str]] = frozenset(),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """GENERATIONS and VOTES frames for every (model, dataset, strategy) cell.

    ``gated_cells`` holds (model, dataset, strategy) triples whose ``alpha_gated`` is True.
    """
    generations, votes = [], []
    for dataset, strategies in _cells(cells).items():
        items = datasets[dataset]
        units = sorted({u for us in items["knowledge_units"] for u in us})
        for strategy in strategies:
            for model in models:
                skill = _skill(model, seed)
                bonus = 0.12 if strategy == "fgp" else 0.0
                rng = np.random.default_rng([seed, sum(map(ord, model)), len(dataset), len(strategy)])
                for item in items.itertuples(index=False):
                    prompt_id = f"{item.item_id}:{strategy}"
                    failed = rng.random() < 0.08 * (1 - skill)
                    level = None if pd.isna(item.bloom_level) else item.bloom_level
                    new_level = _shifted_level(rng, level or "Apply", 0.25 + 0.3 * skill + bonus)
                    new_question = None if failed else (
                        _STEMS[new_level].format(unit=item.knowledge_units[0]) + f" (variant {rng.integers(1000)})"
                    )
                    cot = strategy == "cot"
                    identified_level = None
                    identified_units = None
                    if cot and not failed:
                        identified_level = _shifted_level(rng, level or "Apply", 0.3 + 0.4 * skill)
                        identified_units = (
                            list(item.knowledge_units)
                            if rng.random() < 0.5 + 0.45 * skill
                            else [str(rng.choice(units))]
                        )
                    raw_text = (
                        f"Thinking about <{item.knowledge_units[0]}> ...\nNew question: {new_question}"
                        if not failed
                        else "I cannot answer that & will not produce JSON"
                    )
                    base = {
                        "prompt_id": prompt_id,
                        "item_id": item.item_id,
                        "dataset": dataset,
                        "strategy": strategy,
                        "model": model,
                        "original_question": item.question,
                        "original_bloom_level": level,
                        "original_knowledge_units": list(item.knowledge_units),
                        "new_question": new_question,
                        "identified_bloom_level": identified_level,
                        "identified_knowledge_units": identified_units,
                        "parse_status": "failed" if failed else "ok",
                    }
                    generations.append(
                        {
                            **base,
                            "raw_text": raw_text,
                            "parse_error": "no 'New question:' field in the answer" if failed else None,
                            "finish_reason": "stop",
                            "n_prompt_tokens": int(rng.integers(300, 600)),
                            "n_completion_tokens": int(rng.integers(40, 200)),
                            "latency_s": float(rng.uniform(0.2, 2.0)),
                            "batch_index": int(item.source_row // 8),
                            "seed": seed,
                            "prompt_hash": "0123456789abcdef",
                        }
                    )
                    votes.append(
                        {**base, "answered": True, **_votes_for(rng, failed, new_level, item.knowledge_units, units, skill + bonus),
                         "alpha_gated": (model, dataset, strategy) in gated_cells}
                    )
    return pd.DataFrame(generations), pd.DataFrame(votes)


def _majority(values: list) -> tuple[object, float | None, str | None]:
    """Strict majority of non-null votes -> (value, agreement, null_reason)."""
    valid = [v for v in values if v is not None]
    if not valid:
        return None, None, "no valid votes"
    counts = pd.Series(valid).value_counts()
    if counts.iloc[0] * 2 <= len(valid):
        return None, None, "tie"
    return counts.index[0], float(counts.iloc[0] / len(valid)), None


def _votes_for(
    rng: np.random.Generator,
    failed: bool,
    new_level: str,
    original_units: Sequence[str],
    units: Sequence[str],
    quality: float,
) -> dict:
    """The vote columns of one VOTES row for three judges."""
    row: dict = {"n_judges": len(JUDGES)}
    if failed:
        for criterion in CRITERIA:
            row[criterion] = None
            row[f"{criterion}_votes"] = None
            row[f"{criterion}_agreement"] = None
            row[f"{criterion}_null_reason"] = "no question to judge"
        row["useful"] = None
        return row
    probs = {"unique": 0.75 + 0.2 * quality, "readable": 0.97, "answerable": 0.9 + 0.08 * quality}
    for criterion, p in probs.items():
        ballots = ["1" if rng.random() < min(p, 0.995) else "0" for _ in JUDGES]
        value, agreement, reason = _majority(ballots)
        row[criterion] = None if value is None else value == "1"
        row[f"{criterion}_votes"] = ballots
        row[f"{criterion}_agreement"] = agreement
        row[f"{criterion}_null_reason"] = reason
    level_ballots = [new_level if rng.random() < 0.8 else _shifted_level(rng, new_level, 0.0) for _ in JUDGES]
    value, agreement, reason = _majority(level_ballots)
    row["bloom_level"], row["bloom_level_votes"] = value, level_ballots
    row["bloom_level_agreement"], row["bloom_level_null_reason"] = agreement, reason
    unit_ballots = [
        sorted(original_units) if rng.random() < 0.6 + 0.35 * min(quality, 1) else [str(rng.choice(units))]
        for _ in JUDGES
    ]
    value, agreement, reason = _majority([json.dumps(u) for u in unit_ballots])
    row["knowledge_units"] = None if value is None else json.loads(value)
    row["knowledge_units_votes"] = [json.dumps(u) for u in unit_ballots]
    row["knowledge_units_agreement"], row["knowledge_units_null_reason"] = agreement, reason
    flags = [row["unique"], row["readable"], row["answerable"]]
    row["useful"] = None if any(f is None for f in flags) else all(flags)
    return row


def synthetic_reliability(
    models: Sequence[str],
    cells: Mapping[str, Sequence[str]] | None = None,
    seed: int = 0,
    gated_cells: frozenset[tuple[str, str, str]] = frozenset(),
    gate_action: str = "flag",
) -> pd.DataFrame:
    """RELIABILITY rows: one panel row per criterion and one diagnostics row per judge.

    In a gated cell the ``bloom_level`` criterion's α falls below :data:`GATE_THRESHOLD`.
    """
    rng = np.random.default_rng([seed, 7])
    rows = []
    for dataset, strategies in _cells(cells).items():
        for strategy in strategies:
            for model in models:
                gated = (model, dataset, strategy) in gated_cells
                for criterion in CRITERIA:
                    alpha = float(rng.uniform(0.72, 0.95))
                    if gated and criterion == "bloom_level":
                        alpha = float(rng.uniform(0.35, 0.65))
                    width = float(rng.uniform(0.04, 0.12))
                    common = {
                        "dataset": dataset, "strategy": strategy, "model": model,
                        "criterion": criterion,
                        "level_of_measurement": "ordinal" if criterion == "bloom_level" else "nominal",
                        "n_items": 30, "n_judges": len(JUDGES),
                        "gate_threshold": GATE_THRESHOLD, "gate_action": gate_action,
                    }
                    rows.append({
                        **common, "judge": None, "alpha": alpha,
                        "alpha_ci_low": max(-1.0, alpha - width), "alpha_ci_high": min(1.0, alpha + width),
                        "gate_passed": alpha >= GATE_THRESHOLD,
                        "agreement_with_majority": None, "agreement_with_others": None, "parse_failure_rate": None,
                    })
                    for judge in JUDGES:
                        rows.append({
                            **common, "judge": judge, "alpha": None, "alpha_ci_low": None,
                            "alpha_ci_high": None, "gate_passed": None,
                            "agreement_with_majority": float(rng.uniform(0.75, 1.0)),
                            # its own vote left out: below its agreement with a majority it is part of
                            "agreement_with_others": float(rng.uniform(0.5, 0.95)),
                            "parse_failure_rate": float(rng.uniform(0, 0.06)) if judge == "smollm2" else 0.0,
                        })
    return pd.DataFrame(rows)


def synthetic_metrics(
    models: Sequence[str],
    cells: Mapping[str, Sequence[str]] | None = None,
    seed: int = 0,
    n_items: int = 30,
    gated_cells: frozenset[tuple[str, str, str]] = frozenset(),
) -> pd.DataFrame:
    """METRICS rows (all metric names of :mod:`bloomqg.metrics.registry`) with bootstrap-like CIs."""
    rows = []
    for dataset, strategies in _cells(cells).items():
        for strategy in strategies:
            for model in models:
                skill = _skill(model, seed)
                fgp = strategy == "fgp"
                rng = np.random.default_rng([seed, sum(map(ord, model)), len(dataset), len(strategy), 3])
                gated = (model, dataset, strategy) in gated_cells
                unique = 75 + 20 * skill + (6 if fgp else 0) + rng.normal(0, 2)
                readable = 98 + 2 * rng.random()
                answerable = 94 + 5 * skill + rng.random()
                usability = unique * answerable / 100
                leap = 40 + 15 * rng.random() + (8 if fgp else 0)
                reg = (25 - 15 * skill) * (0.6 if fgp else 1.0) + rng.random()
                values = {
                    "unique": unique, "readable": readable, "answerable": answerable,
                    "usability": usability,
                    "catcons": 30 + 15 * (1 - skill) + (10 if fgp else 0) + rng.normal(0, 2),
                    "cogreg": reg, "cogdrift": 100 - leap - reg, "cogleap": leap,
                    "cogshift": 1.0 + rng.random(),
                    "cogreg_total": 80 * rng.random() + 20, "cogdrift_total": 120 * rng.random() + 30,
                    "cogleap_total": 200 * rng.random() + 60,
                    "cogreg_mean": 2.0 + 0.8 * rng.random(), "cogdrift_mean": 1.0,
                    "cogleap_mean": 2.1 + 0.9 * rng.random(),
                    "knowcov": 60 + 30 * skill + (7 if fgp else 0) + rng.normal(0, 1.5),
                    "parse_failure_rate": 8 * (1 - skill) * rng.random(),
                }
                if not fgp:
                    values["classification_acc"] = 55 - 20 * (1 - skill) * rng.random() - 15 * (1 - skill)
                    values["knowledge_id_acc"] = 50 + 40 * skill + rng.normal(0, 2)
                values["n_generated"] = float(n_items)
                values["n_useful"] = float(round(n_items * min(usability, 100) / 100))
                for metric, value in values.items():
                    percent = metric in PERCENT_METRICS
                    value = float(min(max(value, 0.0), 100.0)) if percent else float(value)
                    half = float(rng.uniform(1.0, 4.0)) if percent else float(rng.uniform(0.05, 0.3))
                    has_ci = metric not in ("n_generated", "n_useful")
                    rows.append({
                        "model": model, "dataset": dataset, "strategy": strategy, "metric": metric,
                        "value": value,
                        "ci_low": max(0.0, value - half) if has_ci else None,
                        "ci_high": (min(100.0, value + half) if percent else value + half) if has_ci else None,
                        "n": n_items,
                        "ci_method": "wilson" if has_ci else None,
                        "alpha_gated": gated and metric in ("catcons", "cogreg", "cogdrift", "cogleap", "cogshift"),
                    })
    return pd.DataFrame(rows)


def synthetic_correlations(metrics: pd.DataFrame) -> pd.DataFrame:
    """Pearson and Spearman correlations across models per (dataset, strategy): Figure 5's pairs."""
    from scipy import stats

    rows = []
    wide = metrics.pivot_table(index=["dataset", "strategy", "model"], columns="metric", values="value")
    for (dataset, strategy), frame in wide.groupby(level=["dataset", "strategy"]):
        for x, y in (("classification_acc", "catcons"), ("knowledge_id_acc", "knowcov")):
            if x not in frame or frame[x].isna().all() or len(frame) < 3:
                continue
            pearson = stats.pearsonr(frame[x], frame[y])
            spearman = stats.spearmanr(frame[x], frame[y])
            ci = pearson.confidence_interval()
            for method, result, low, high in (("pearson", pearson, ci.low, ci.high),
                                              ("spearman", spearman, None, None)):
                rows.append({
                    "dataset": dataset, "strategy": strategy, "x_metric": x, "y_metric": y,
                    "method": method, "r": float(result.statistic), "p_value": float(result.pvalue),
                    "n": len(frame), "ci_low": low, "ci_high": high,
                })
    columns = ["dataset", "strategy", "x_metric", "y_metric", "method", "r", "p_value", "n", "ci_low", "ci_high"]
    return pd.DataFrame(rows, columns=columns)


def synthetic_paired(metrics: pd.DataFrame, seed: int = 0, comparison: ComparisonSpec = ComparisonSpec()) -> pd.DataFrame:
    """Paired rows for every strategy pair of ``comparison`` (by default each against the first
    strategy, CoT first) in each model × dataset, p Holm-adjusted per metric as the real stage does."""
    from bloomqg.metrics.paired import PAIRED_COLUMNS, holm_adjust, ordered_strategies

    rng = np.random.default_rng([seed, 11])
    rows = []
    wide = metrics.set_index(["model", "dataset", "strategy", "metric"])["value"]
    for (model, dataset), frame in metrics.groupby(["model", "dataset"], sort=False):
        strategies = ordered_strategies(list(frame["strategy"]), ("cot", "fgp"))
        for strategy_a, strategy_b in comparison.pairs(strategies):
            for metric, test, effect in (
                ("unique", "mcnemar", "odds_ratio"), ("usability", "mcnemar", "odds_ratio"),
                ("catcons", "mcnemar", "odds_ratio"), ("knowcov", "wilcoxon", "rank_biserial"),
            ):
                value_a = float(wide[(model, dataset, strategy_a, metric)])
                value_b = float(wide[(model, dataset, strategy_b, metric)])
                diff = value_b - value_a
                half = float(rng.uniform(2, 6))
                rows.append({
                    "model": model, "dataset": dataset, "metric": metric, "strategy_a": strategy_a,
                    "strategy_b": strategy_b, "n_pairs": 28, "n_differing": 12, "value_a": value_a, "value_b": value_b, "diff": diff,
                    "ci_low": diff - half, "ci_high": diff + half, "test": test,
                    "p_value": float(min(1.0, rng.uniform(0, 0.2) if abs(diff) > 5 else rng.uniform(0.05, 1))),
                    "effect_size": float(rng.uniform(0.5, 3.0) if effect == "odds_ratio" else rng.uniform(-0.5, 0.5)),
                    "effect_size_name": effect,
                })
    table = pd.DataFrame(rows, columns=[c for c in PAIRED_COLUMNS if c not in ("p_adjusted", "family_size")])
    table["p_adjusted"], table["family_size"] = np.nan, 0
    for _, part in table.groupby("metric", sort=False):
        table.loc[part.index, "p_adjusted"] = holm_adjust(part["p_value"].to_numpy(dtype=float))
        table.loc[part.index, "family_size"] = len(part)
    return table[list(PAIRED_COLUMNS)]


def synthetic_ledger(
    models: Sequence[str], cells: Mapping[str, Sequence[str]] | None = None, seed: int = 0
) -> pd.DataFrame:
    """Token/cost ledger rows per judge × cell; only an API judge costs money."""
    rng = np.random.default_rng([seed, 5])
    rows = []
    for dataset, strategies in _cells(cells).items():
        for strategy in strategies:
            for model in models:
                for judge in (*JUDGES, "gpt-4o-mini"):
                    requests = 30 if judge in ("smollm2", "gpt-4o-mini") else 0
                    cached = int(rng.integers(0, 10)) if requests else 0
                    prompt_tokens = requests * int(rng.integers(400, 700))
                    completion_tokens = requests * int(rng.integers(30, 90))
                    rows.append({
                        "judge": judge, "model": model, "dataset": dataset, "strategy": strategy,
                        "requests": requests, "cached": cached, "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "cost_usd": (prompt_tokens * 0.15 + completion_tokens * 0.6) / 1e6
                        if judge == "gpt-4o-mini" else 0.0,
                    })
    return pd.DataFrame(rows)


def synthetic_human_annotations(votes: pd.DataFrame, seed: int = 0, per_cell: int = 10) -> pd.DataFrame:
    """Expert labels for the first ``per_cell`` judged questions of each social-science cell.

    Columns as :func:`bloomqg.reporting.tables.human.human_agreement` expects: prompt_id, model, dataset, strategy,
    criterion, value ("1"/"0" or a level name). Labels agree with the votes most of the time.
    """
    rng = np.random.default_rng([seed, 13])
    rows = []
    social = votes[(votes["dataset"] == "social") & votes["new_question"].notna()]
    for (_, _, _), cell in social.groupby(["model", "dataset", "strategy"], sort=False):
        for vote in cell.head(per_cell).itertuples(index=False):
            for criterion in ("unique", "readable", "answerable", "bloom_level"):
                voted = getattr(vote, criterion)
                if voted is None or pd.isna(voted):
                    continue
                if criterion == "bloom_level":
                    value = voted if rng.random() < 0.5 else _shifted_level(rng, voted, 0.0)
                else:
                    agree = rng.random() < 0.9
                    value = ("1" if voted else "0") if agree else ("0" if voted else "1")
                rows.append({
                    "prompt_id": vote.prompt_id, "model": vote.model, "dataset": vote.dataset,
                    "strategy": vote.strategy, "criterion": criterion, "value": value,
                })
    return pd.DataFrame(rows, columns=["prompt_id", "model", "dataset", "strategy", "criterion", "value"])


def synthetic_study(
    n_models: int = 4,
    n_items: int = 30,
    cells: Mapping[str, Sequence[str]] | None = None,
    seed: int = 0,
    gated_cells: frozenset[tuple[str, str, str]] | None = None,
) -> SyntheticStudy:
    """A whole small study. By default the second model's (cs, cot) cell fails the α gate."""
    if not 1 <= n_models <= len(MODEL_NAMES):
        raise ValueError(f"n_models must be 1..{len(MODEL_NAMES)}, got {n_models}")
    models = MODEL_NAMES[:n_models]
    cells = _cells(cells)
    if gated_cells is None:
        first = next(iter(cells))
        gated_cells = frozenset({(models[min(1, n_models - 1)], first, cells[first][0])})
    datasets = {name: synthetic_dataset(name, n_items, seed) for name in cells}
    generations, votes = synthetic_generations_and_votes(datasets, models, cells, seed, gated_cells)
    metrics = synthetic_metrics(models, cells, seed, n_items, gated_cells)
    generation_provenance = [
        {
            "model": model, "dataset": dataset, "strategy": strategy,
            "model_id": f"example/{model}", "revision": "0123abc", "gguf_sha256": "b179c952" * 8,
            "prompt_hash": "0123456789abcdef", "seed": seed, "git_commit": "deadbeef",
            "package_versions": {"transformers": "5.24.0", "torch": "2.13.0"},
        }
        for dataset, strategies in cells.items() for strategy in strategies for model in models
    ]
    judgment_provenance = [
        {"judge": judge, "backend": {"rules": "rules", "minilm": "embedding"}.get(judge, "hf"),
         "prompt_hash": "fedcba9876543210", "git_commit": "deadbeef"}
        for judge in JUDGES
    ]
    config = {
        "seed": seed, "strategies": ["cot", "fgp"],
        "datasets": {name: {"loader": "embedded", "strategies": list(s)} for name, s in cells.items()},
        "models": {m: {"backend": "hf", "model": f"example/{m}"} for m in models},
        "judges": {j: {"backend": "rules"} for j in JUDGES},
        "gate": {"alpha": GATE_THRESHOLD, "action": "flag"},
    }
    return SyntheticStudy(
        datasets=datasets,
        generations=generations,
        votes=votes,
        reliability=synthetic_reliability(models, cells, seed, gated_cells),
        metrics=metrics,
        correlations=synthetic_correlations(metrics),
        paired=synthetic_paired(metrics, seed),
        ledger=synthetic_ledger(models, cells, seed),
        human_annotations=synthetic_human_annotations(votes, seed),
        generation_provenance=generation_provenance,
        judgment_provenance=judgment_provenance,
        config=config,
    )


def trust_frames(study) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(RELIABILITY rows with agreement, AC1, Dawid–Skene and per-judge diagnostics; the
    robustness table) recomputed from the synthetic votes' ballots, for the report's section
    "Can these judges be trusted?" (small bootstraps: a test fixture)."""
    from bloomqg.metrics.robustness import panel_judges, robustness_table
    from bloomqg.release.reliability import release_reliability

    frames = [
        release_reliability(cell, n_resamples=50)[1]
        for _, cell in study.votes.groupby(["model", "dataset", "strategy"], sort=True)
    ]
    reliability = pd.concat(frames, ignore_index=True)
    return reliability, robustness_table(study.votes, panel_judges(reliability), n_resamples=50)
