"""One self-contained HTML report of a run: config, provenance, tables, figures, reliability,
cost and browsable examples, each figure and table with a one-sentence reading from the data.

The page has no external resource (images are inlined as base64 PNG, CSS is inline, there is no
script), so it can be mailed or archived as one file. It is rendered by Jinja2 from
``bloomqg/report_templates/report.html.j2`` with autoescaping on: every text from a model, a
judge or a dataset is escaped.

The readings (:func:`figure_readings`, :func:`table_readings`) are pure functions of the frames,
so they can be tested and reused, e.g. in a paper's text.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.atomic import write_text_atomic
from bloomqg.bloom import BLOOM_LEVELS, LEVEL_WEIGHT, UNCATEGORIZED
from bloomqg.tables import (
    CRITERION_LABEL,
    METRIC_LABEL,
    TableInputError,
    check_metrics,
    ordered_unique,
    read_markdown_table,
    require_columns,
    strategy_label,
)

log = logging.getLogger(__name__)

TEMPLATE_DIR = Path(__file__).resolve().parent / "report_templates"
TEMPLATE_NAME = "report.html.j2"

#: Short captions shown under each figure of the HTML report (the Snakemake report's captions
#: live in ``report/captions/*.rst``).
FIGURE_CAPTIONS: dict[str, str] = {
    "fig2_transitions": "Figure 2. Bloom-level transitions from the original question (left) to the judged level "
    "of the generated question (right), useful questions only; band width = number of questions.",
    "fig3_shift_scores": "Figure 3. Mean shift score (|Δ| in Bloom levels) of regressions, drifts and leaps per model.",
    "fig4_knowledge_id": "Figure 4. Knowledge-identification accuracy under CoT (the model names the original's "
    "knowledge unit), with 95% confidence intervals.",
    "fig5_correlations": "Figure 5. Correlations across models under CoT: (a) classification accuracy vs CatCons, "
    "(b) knowledge-identification accuracy vs KnowCov.",
    "fig6_confusion": "Figure 6. Original Bloom level vs the model's own classification (CoT) and vs the judged "
    "level of its question, pooled over datasets; rows sum to 100%.",
    "reliability": "Judge reliability: Krippendorff's α per criterion and cell with 95% CI; dashed line = gate.",
    "parse_failures": "Parse failures of generations and of judges' answers (%).",
    "human_agreement": "Table 9 as a figure: agreement (%) of the annotators' majority with the panel's per "
    "criterion and cell, with 95% bootstrap CIs (only when the study configures annotation).",
}

#: How many examples are shown per model × original level × dataset × strategy.
EXAMPLES_PER_GROUP = 1
#: How many unparsed generations are shown per model.
FAILURES_PER_MODEL = 3


class ReportInputError(ValueError):
    """An input of the report is missing or malformed; the message names it."""


# --------------------------------------------------------------------------- helpers


def _finite(value: object) -> bool:
    return value is not None and value is not pd.NA and not (isinstance(value, float) and math.isnan(value))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _cell_name(dataset: str, strategy: str) -> str:
    return f"{dataset}, {strategy_label(strategy)}"


def _values(all_metrics: pd.DataFrame, metric: str) -> pd.DataFrame:
    frame = all_metrics[(all_metrics["metric"] == metric) & all_metrics["value"].notna()]
    return frame.assign(value=frame["value"].astype(float))


def strategy_effect(all_metrics: pd.DataFrame, metric: str) -> str | None:
    """"On cs, FGP raised CatCons for 3 of 4 models and lowered it for 1; the largest change was X (+Y pp)."

    One sentence per dataset run under both CoT and FGP (same model in both); None when there is none.
    """
    frame = _values(all_metrics, metric)
    label = METRIC_LABEL.get(metric, metric)
    unit = "" if metric in ("cogshift", "cogreg_mean", "cogdrift_mean", "cogleap_mean") else " pp"
    sentences = []
    for dataset in ordered_unique(frame["dataset"]):
        wide = frame[frame["dataset"] == dataset].pivot_table(index="model", columns="strategy", values="value")
        if not {"cot", "fgp"} <= set(wide.columns):
            continue
        diff = (wide["fgp"] - wide["cot"]).dropna().round(6)
        if diff.empty:
            continue
        n = _plural(len(diff), "model")
        raised, lowered = int((diff > 0).sum()), int((diff < 0).sum())
        if raised == lowered == 0:
            sentences.append(f"On {dataset}, FGP left {label} unchanged for all {n}.")
            continue
        largest = diff.abs().idxmax()
        sentences.append(
            f"On {dataset}, FGP raised {label} for {raised} of {n} and lowered it for {lowered}; "
            f"the largest change was {largest} ({diff[largest]:+.2f}{unit})."
        )
    return " ".join(sentences) if sentences else None


def metric_range(all_metrics: pd.DataFrame, metric: str, *, unit: str = "%") -> str | None:
    """"Knowledge-ID acc. ranged from 58.0% (m, cs) to 87.6% (m2, social)." or None."""
    frame = _values(all_metrics, metric)
    if frame.empty:
        return None
    label = METRIC_LABEL.get(metric, metric)
    low = frame.loc[frame["value"].idxmin()]
    high = frame.loc[frame["value"].idxmax()]

    def where(row: pd.Series) -> str:
        return f"{row['model']}, {_cell_name(row['dataset'], row['strategy'])}"

    if len(frame) == 1:
        return f"{label} was {low['value']:.1f}{unit} ({where(low)})."
    return (
        f"{label} ranged from {low['value']:.1f}{unit} ({where(low)}) "
        f"to {high['value']:.1f}{unit} ({where(high)})."
    )


def transition_summary(votes: pd.DataFrame) -> str:
    """Share of useful judged questions that kept, raised or lowered the original's level."""
    from bloomqg.metrics import transition_counts

    parts = []
    totals = {}
    for strategy in ordered_unique(votes["strategy"]):
        counts = transition_counts(votes[votes["strategy"] == strategy], kind="judged")
        known = counts[counts["original_level"].isin(BLOOM_LEVELS) & counts["other_level"].isin(BLOOM_LEVELS)]
        if known.empty:
            continue
        delta = known["other_level"].map(LEVEL_WEIGHT) - known["original_level"].map(LEVEL_WEIGHT)
        n = int(known["count"].sum())
        same = int(known.loc[delta == 0, "count"].sum())
        up = int(known.loc[delta > 0, "count"].sum())
        down = int(known.loc[delta < 0, "count"].sum())
        totals[strategy] = (n, same, up, down)
        parts.append(
            f"under {strategy_label(strategy)}, {100 * same / n:.0f}% of {n} useful questions kept the original's "
            f"level, {100 * up / n:.0f}% moved up and {100 * down / n:.0f}% moved down"
        )
    if not parts:
        return "No useful question with both levels known was judged, so there is no transition to show."
    sentence = "; ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."


def classification_summary(votes: pd.DataFrame) -> str:
    """Per-level accuracy of the models' own classification under CoT, pooled over models."""
    from bloomqg.metrics import per_level_accuracy

    cot = votes[votes["strategy"] == "cot"]
    accuracy = per_level_accuracy(cot, kind="classified") if len(cot) else pd.DataFrame()
    accuracy = accuracy[accuracy["n"] > 0] if len(accuracy) else accuracy
    if accuracy.empty:
        return "No model classified the original questions (the task runs under CoT only)."
    best = accuracy.loc[accuracy["accuracy"].idxmax()]
    worst = accuracy.loc[accuracy["accuracy"].idxmin()]
    return (
        f"Pooled over models, classification of the originals was most accurate for {best['original_level']} "
        f"({best['accuracy']:.0f}% of {int(best['n'])}) and least for {worst['original_level']} "
        f"({worst['accuracy']:.0f}% of {int(worst['n'])})."
    )


def correlation_summary(all_metrics: pd.DataFrame, correlations: pd.DataFrame | None) -> str:
    """The Figure 5 correlations in words, from the correlations frame."""
    from bloomqg.figures import FIG5_PAIRS, MIN_POINTS_FOR_CORRELATION

    n_models = all_metrics.loc[all_metrics["strategy"] == "cot", "model"].nunique()
    if n_models < MIN_POINTS_FOR_CORRELATION:
        return (f"Not estimated: the run has {_plural(n_models, 'model')} under CoT and a correlation across "
                f"models needs at least {MIN_POINTS_FOR_CORRELATION}.")
    if correlations is None or correlations.empty:
        return "No correlations were computed for this run."
    parts = []
    for x_metric, y_metric in FIG5_PAIRS:
        rows = correlations[(correlations["x_metric"] == x_metric) & (correlations["y_metric"] == y_metric)
                            & (correlations["strategy"] == "cot")]
        methods = rows["method"] if "method" in rows else pd.Series("pearson", index=rows.index)
        for dataset in ordered_unique(rows["dataset"]):
            estimates = {m: r for m, r in zip(methods[rows["dataset"] == dataset], rows[rows["dataset"] == dataset].itertuples(index=False))}
            pearson, spearman = estimates.get("pearson"), estimates.get("spearman")
            if pearson is None or not _finite(pearson.r):
                continue
            text = (f"r({METRIC_LABEL[x_metric]}, {METRIC_LABEL[y_metric]}) = {pearson.r:+.2f} on {dataset} "
                    f"(p = {pearson.p_value:.2g}, n = {pearson.n}")
            if spearman is not None and _finite(spearman.r):
                text += f"; Spearman ρ = {spearman.r:+.2f}"
            parts.append(text + ")")
    return ("Across models under CoT: " + "; ".join(parts) + ".") if parts else \
        "The correlations frame has no CoT rows for these metric pairs."


def gate_summary(reliability: pd.DataFrame) -> dict[str, Any]:
    """The α gate's settings, the cells and criteria that failed it, and its effect in words."""
    require_columns(reliability, ["judge", "criterion", "alpha", "gate_threshold", "gate_action", "gate_passed",
                                  "model", "dataset", "strategy"], "reliability")
    panel = reliability[reliability["judge"].isna()]
    failed = panel[panel["gate_passed"].notna() & ~panel["gate_passed"].fillna(True).astype(bool)]
    undefined = panel[panel["alpha"].isna()]
    thresholds = [float(t) for t in ordered_unique(panel["gate_threshold"])]
    actions = [str(a) for a in ordered_unique(panel["gate_action"])]
    failures = [
        {"model": r.model, "dataset": r.dataset, "strategy": strategy_label(r.strategy),
         "criterion": CRITERION_LABEL.get(r.criterion, r.criterion), "alpha": r.alpha,
         "threshold": r.gate_threshold, "action": r.gate_action}
        for r in failed.itertuples(index=False)
    ]
    threshold_text = ", ".join(f"{t:g}" for t in thresholds) or "n/a"
    if not len(panel):
        effect = "No reliability was computed (no panel-level rows)."
    elif not failures:
        effect = f"All {len(panel)} panel α values passed the gate (α ≥ {threshold_text}); nothing was flagged or dropped."
    else:
        cells = failed[["model", "dataset", "strategy"]].drop_duplicates()
        if set(actions) == {"drop"}:
            consequence = ("the failing criteria's majority votes were set to null in those cells, so their "
                           "metrics leave those votes out")
        else:
            consequence = "the metrics those criteria feed are marked † in the tables; no vote was removed"
        effect = (
            f"{len(failures)} of {len(panel)} panel α values fell below the gate (α ≥ {threshold_text}) in "
            f"{_plural(len(cells), 'cell')}; action '{'/'.join(actions)}': {consequence}."
        )
    if len(undefined):
        effect += f" α was undefined (no variation in the votes) for {len(undefined)} criterion × cell pairs."
    return {"thresholds": thresholds, "actions": actions, "failures": failures, "effect": effect,
            "n_panel": len(panel)}


def parse_failure_summary(all_metrics: pd.DataFrame, reliability: pd.DataFrame) -> str:
    """Mean and worst generation parse-failure rate, and the judges' mean."""
    frame = _values(all_metrics, "parse_failure_rate")
    parts = []
    if not frame.empty:
        worst = frame.loc[frame["value"].idxmax()]
        parts.append(
            f"Generation parse failures averaged {frame['value'].mean():.1f}% over {_plural(len(frame), 'cell')}; "
            f"the highest was {worst['model']} ({_cell_name(worst['dataset'], worst['strategy'])}: {worst['value']:.1f}%)."
        )
    judges = reliability[reliability["judge"].notna() & reliability["parse_failure_rate"].notna()] \
        if "parse_failure_rate" in reliability else reliability.iloc[0:0]
    if len(judges):
        per_judge = judges.groupby("judge")["parse_failure_rate"].mean() * 100
        worst_judge = per_judge.idxmax()
        parts.append(f"Among judges, {worst_judge} failed to give a parsable answer most often ({per_judge.max():.1f}%).")
    return " ".join(parts) if parts else "No parse-failure rates were recorded."


def shift_score_summary(all_metrics: pd.DataFrame) -> str:
    """Mean shift scores per type and the largest single value."""
    frames = {m: _values(all_metrics, f"{m}_mean") for m in ("cogreg", "cogdrift", "cogleap")}
    present = {m: f for m, f in frames.items() if not f.empty}
    if not present:
        return "No mean shift scores were computed."
    means = ", ".join(f"{METRIC_LABEL[m]} {f['value'].mean():.2f}" for m, f in present.items())
    stacked = pd.concat([f.assign(kind=m) for m, f in present.items()])
    top = stacked.loc[stacked["value"].idxmax()]
    return (f"Averaged over cells the mean shift scores were {means}; the largest was {METRIC_LABEL[top['kind']]} "
            f"for {top['model']} ({_cell_name(top['dataset'], top['strategy'])}: {top['value']:.2f} levels).")


def figure_readings(
    all_metrics: pd.DataFrame,
    votes: pd.DataFrame,
    reliability: pd.DataFrame,
    correlations: pd.DataFrame | None,
) -> dict[str, str]:
    """One sentence per figure stem, computed from the data the figure shows."""
    return {
        "fig2_transitions": transition_summary(votes),
        "fig3_shift_scores": shift_score_summary(all_metrics),
        "fig4_knowledge_id": metric_range(all_metrics, "knowledge_id_acc")
        or "No knowledge-identification accuracy was computed (the task runs under CoT only).",
        "fig5_correlations": correlation_summary(all_metrics, correlations),
        "fig6_confusion": classification_summary(votes),
        "reliability": gate_summary(reliability)["effect"],
        "parse_failures": parse_failure_summary(all_metrics, reliability),
    }


def table_readings(
    all_metrics: pd.DataFrame,
    reliability: pd.DataFrame,
    paired: pd.DataFrame | None,
    table1: pd.DataFrame | None = None,
) -> dict[str, str]:
    """One sentence per table stem (only where the data says something)."""
    readings: dict[str, str | None] = {
        "table4_quality": strategy_effect(all_metrics, "unique") or metric_range(all_metrics, "unique"),
        "table5_usability": strategy_effect(all_metrics, "catcons") or metric_range(all_metrics, "catcons"),
        "table6_cognitive_shift": strategy_effect(all_metrics, "cogreg")
        or metric_range(all_metrics, "cogleap"),
        "table7_quality_by_dataset": strategy_effect(all_metrics, "answerable") or metric_range(all_metrics, "answerable"),
        "table8_shift_by_dataset": strategy_effect(all_metrics, "cogleap") or metric_range(all_metrics, "cogleap"),
        "table_auxiliary": metric_range(all_metrics, "classification_acc"),
        "table_reliability": gate_summary(reliability)["effect"],
        "table_parse_failures": parse_failure_summary(all_metrics, reliability),
        "table_judges": _judge_reading(reliability),
        "table_paired": _paired_reading(paired),
    }
    if table1 is not None and len(table1):
        readings["table1_datasets"] = " ".join(
            f"{row['dataset']}: {int(row['total'])} items over "
            f"{_plural(sum(1 for level in BLOOM_LEVELS if row.get(level, 0)), 'Bloom level')} and "
            f"{_plural(int(row['knowledge_units']), 'knowledge unit')}."
            for _, row in table1.iterrows()
        )
    return {stem: text for stem, text in readings.items() if text}


def _judge_reading(reliability: pd.DataFrame) -> str | None:
    judges = reliability[reliability["judge"].notna() & reliability["agreement_with_majority"].notna()]
    if judges.empty:
        return None
    agreement = judges.groupby("judge")["agreement_with_majority"].mean() * 100
    return (f"{agreement.idxmax()} agreed with the panel majority most often ({agreement.max():.1f}%), "
            f"{agreement.idxmin()} least often ({agreement.min():.1f}%).")


def _paired_reading(paired: pd.DataFrame | None) -> str | None:
    if paired is None or paired.empty:
        return None
    tested = paired[paired["p_value"].notna()]
    if tested.empty:
        return "No paired test could be computed."
    significant = tested[tested["p_value"] < 0.05]
    favour = int((significant["diff"] > 0).sum())
    return (f"{len(significant)} of {len(tested)} paired comparisons had p < 0.05 (unadjusted); "
            f"{favour} of them favour FGP.")


# --------------------------------------------------------------------------- examples


def _as_list(value: object) -> list:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return list(value)


def _verdict(value: object) -> str:
    if not _finite(value):
        return "no majority"
    return "yes" if bool(value) else "no"


def question_examples(
    votes: pd.DataFrame,
    generations: pd.DataFrame | None,
    *,
    per_group: int = EXAMPLES_PER_GROUP,
    failures_per_model: int = FAILURES_PER_MODEL,
) -> list[dict[str, Any]]:
    """Examples per model → original Bloom level, with verdicts and the original; plus parse failures.

    Deterministic: per (model, level, dataset, strategy) the first ``per_group`` generated
    questions in item order. Texts are returned raw; the template escapes them.
    """
    require_columns(votes, ["prompt_id", "model", "dataset", "strategy", "original_question",
                            "original_bloom_level", "new_question", "bloom_level", "unique", "readable",
                            "answerable", "useful"], "votes")
    raw = {}
    if generations is not None and len(generations):
        require_columns(generations, ["prompt_id", "model", "raw_text", "parse_status", "parse_error"], "generations")
        raw = {(r.prompt_id, r.model): r for r in generations.itertuples(index=False)}
    models = []
    for model in ordered_unique(votes["model"]):
        frame = votes[votes["model"] == model].sort_values(["dataset", "strategy", "prompt_id"], kind="stable")
        levels = []
        for level in (*BLOOM_LEVELS, None):
            at_level = frame[frame["original_bloom_level"].isna()] if level is None else \
                frame[frame["original_bloom_level"] == level]
            with_question = at_level[at_level["new_question"].notna()]
            chosen = with_question.groupby(["dataset", "strategy"], sort=False).head(per_group)
            if chosen.empty:
                continue
            levels.append({
                "level": level or UNCATEGORIZED,
                "n_total": len(with_question),
                "examples": [_example(row) for _, row in chosen.iterrows()],
            })
        failed = frame[frame["new_question"].isna()].head(failures_per_model)
        failures = []
        for _, row in failed.iterrows():
            generation = raw.get((row["prompt_id"], model))
            failures.append({
                "prompt_id": row["prompt_id"], "dataset": row["dataset"], "strategy": strategy_label(row["strategy"]),
                "original_question": row["original_question"],
                "raw_text": None if generation is None else generation.raw_text,
                "reason": None if generation is None else generation.parse_error,
            })
        models.append({"model": model, "levels": levels, "failures": failures,
                       "n_failed": int(frame["new_question"].isna().sum())})
    return models


def _example(row: pd.Series) -> dict[str, Any]:
    def level(value: object) -> str:
        return str(value) if _finite(value) else UNCATEGORIZED

    return {
        "prompt_id": row["prompt_id"],
        "dataset": row["dataset"],
        "strategy": strategy_label(row["strategy"]),
        "original_question": row["original_question"],
        "original_level": level(row["original_bloom_level"]),
        "original_units": ", ".join(map(str, _as_list(row.get("original_knowledge_units")))),
        "new_question": row["new_question"],
        "judged_level": str(row["bloom_level"]) if _finite(row["bloom_level"]) else "no majority",
        "judged_units": ", ".join(map(str, _as_list(row.get("knowledge_units")))) or "no majority",
        "identified_level": str(row["identified_bloom_level"]) if _finite(row.get("identified_bloom_level")) else None,
        "unique": _verdict(row["unique"]),
        "readable": _verdict(row["readable"]),
        "answerable": _verdict(row["answerable"]),
        "useful": _verdict(row["useful"]),
        "votes": {
            c: ", ".join(map(str, _as_list(row.get(f"{c}_votes")))) for c in ("unique", "readable", "answerable", "bloom_level")
        },
        "gated": bool(row.get("alpha_gated", False)),
    }


# --------------------------------------------------------------------------- provenance, ledger


def plain(value: Any) -> Any:
    """JSON-safe plain data (Snakemake's Config and other mappings become dicts)."""
    return json.loads(json.dumps(value, default=str))


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Nested mappings as sorted (dotted key, text) pairs; lists are shown as JSON."""
    items: list[tuple[str, str]] = []
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            items += flatten(value, name + ".")
        else:
            items.append((name, value if isinstance(value, str) else json.dumps(value, default=str)))
    return items


def provenance_entries(entries: Sequence[Mapping[str, Any]], *, skip: Sequence[str] = ("package_versions",)) -> list[dict]:
    """Distinct provenance dictionaries as (title, [(key, value)]) for display; duplicates merged."""
    seen: dict[str, dict] = {}
    for entry in entries:
        entry = plain(dict(entry))
        shown = {k: v for k, v in entry.items() if k not in skip}
        key = json.dumps(shown, sort_keys=True)
        if key in seen:
            seen[key]["count"] += 1
            continue
        seen[key] = {"title": provenance_title(entry), "items": flatten(shown), "count": 1}
    return list(seen.values())


#: Provenance fields that name what an entry describes, in the order they are shown.
_TITLE_KEYS: tuple[str, ...] = (
    "judge", "model_name", "model", "generator.model", "dataset", "strategy", "stage", "prompt_hashes", "prompt_hash",
)


def provenance_title(entry: Mapping[str, Any]) -> str:
    """A short label for a provenance entry from whichever naming fields it has."""
    values = dict(flatten(entry))
    parts = []
    for key in _TITLE_KEYS:
        value = values.get(key)
        if value in (None, "null", "[]") or value in parts:
            continue
        if key.startswith("prompt_hash"):
            value = "prompt " + value.strip('[]"').split('"')[0][:12]
        parts.append(value)
    return " · ".join(parts) or "entry"


def ledger_view(ledger: pd.DataFrame) -> dict[str, Any]:
    """Per-judge totals and the full ledger rows, with a grand total of tokens and cost."""
    require_columns(ledger, ["judge", "model", "dataset", "strategy", "requests", "cached",
                             "prompt_tokens", "completion_tokens", "cost_usd"], "ledger")
    numeric = [c for c in ("questions", "requests", "cached", "prompt_tokens", "completion_tokens", "cost_usd")
               if c in ledger.columns]
    frame = ledger.copy()
    frame["judge"] = frame["judge"].fillna("(generation)")
    for column in numeric:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").fillna(0)
    per_judge = frame.groupby("judge", sort=False)[numeric].sum().reset_index()
    total = {c: float(frame[c].sum()) for c in numeric}
    return {"columns": ["judge", "model", "dataset", "strategy", *numeric], "numeric": numeric,
            "rows": frame.to_dict("records"), "per_judge": per_judge.to_dict("records"), "total": total}


def generation_usage(generations: pd.DataFrame) -> list[dict[str, Any]]:
    """Tokens and latency of generation per model × dataset × strategy."""
    if generations is None or generations.empty:
        return []
    require_columns(generations, ["model", "dataset", "strategy", "n_prompt_tokens", "n_completion_tokens",
                                  "latency_s", "parse_status"], "generations")
    grouped = generations.groupby(["model", "dataset", "strategy"], sort=False)
    usage = grouped.agg(
        prompts=("parse_status", "size"),
        parsed=("parse_status", lambda s: int((s == "ok").sum())),
        prompt_tokens=("n_prompt_tokens", lambda s: int(pd.to_numeric(s, errors="coerce").fillna(0).sum())),
        completion_tokens=("n_completion_tokens", lambda s: int(pd.to_numeric(s, errors="coerce").fillna(0).sum())),
        latency_s=("latency_s", lambda s: float(pd.to_numeric(s, errors="coerce").fillna(0).sum())),
    ).reset_index()
    usage["strategy"] = usage["strategy"].map(strategy_label)
    return usage.to_dict("records")


# --------------------------------------------------------------------------- assembling


#: Display size of a figure on screen relative to its 200-dpi pixels: 130 CSS px per inch, so
#: 7-pt text shows at about 12.6 px and the PNG stays sharp on high-density screens.
SCREEN_SCALE = 130 / 200


def png_size(data: bytes, where: Path) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ReportInputError(f"figure file {where} is not a PNG image")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _figure_entries(figure_paths: Sequence[Path], readings: Mapping[str, str]) -> list[dict[str, str]]:
    entries = []
    for path in figure_paths:
        path = Path(path)
        if path.suffix.lower() != ".png":
            continue
        if not path.is_file():
            raise ReportInputError(f"figure file {path} does not exist")
        raw = path.read_bytes()
        width, height = png_size(raw, path)
        data = base64.b64encode(raw).decode("ascii")
        entries.append({
            "stem": path.stem, "data_uri": f"data:image/png;base64,{data}",
            "width": round(width * SCREEN_SCALE), "height": round(height * SCREEN_SCALE),
            "caption": FIGURE_CAPTIONS.get(path.stem, path.stem), "reading": readings.get(path.stem, ""),
        })
    return entries


def _table_entries(table_paths: Sequence[Path], readings: Mapping[str, str]) -> list[dict[str, Any]]:
    entries = []
    for path in table_paths:
        path = Path(path)
        if path.suffix.lower() != ".md":
            continue
        try:
            parsed = read_markdown_table(path)
        except (OSError, TableInputError) as error:
            raise ReportInputError(f"table file {path}: {error}") from error
        entries.append({
            "stem": parsed.name, "caption": parsed.caption, "groups": parsed.groups,
            "has_groups": any(label for label, _ in parsed.groups), "header": parsed.header,
            "rows": parsed.rows, "notes": parsed.notes, "reading": readings.get(parsed.name, ""),
            "align": parsed.align,
            "files": sorted(p.name for p in path.parent.glob(f"{path.stem}.*") if p.suffix in (".csv", ".md", ".tex")),
        })
    return entries


def _table1_frame(table_paths: Sequence[Path]) -> pd.DataFrame | None:
    for path in table_paths:
        path = Path(path)
        if path.name == "table1_datasets.csv" and path.is_file():
            return pd.read_csv(path)
    return None


def overview(all_metrics: pd.DataFrame, votes: pd.DataFrame, ledger: pd.DataFrame | None) -> dict[str, Any]:
    """Headline counts for the top of the report."""
    useful = votes["useful"].map(lambda v: _finite(v) and bool(v)) if len(votes) else pd.Series(dtype=bool)
    cost = float(pd.to_numeric(ledger["cost_usd"], errors="coerce").fillna(0).sum()) if ledger is not None and len(ledger) else 0.0
    return {
        "models": ordered_unique(all_metrics["model"]),
        "datasets": ordered_unique(all_metrics["dataset"]),
        "strategies": [strategy_label(s) for s in ordered_unique(all_metrics["strategy"])],
        "n_cells": int(all_metrics[["model", "dataset", "strategy"]].drop_duplicates().shape[0]),
        "n_generated": int(votes["new_question"].notna().sum()) if len(votes) else 0,
        "n_prompts": len(votes),
        "n_useful": int(useful.sum()),
        "cost_usd": cost,
    }


def render_report(context: Mapping[str, Any]) -> str:
    """Render the Jinja2 template with autoescaping (every text is escaped unless marked safe)."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "j2"), default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["number"] = _format_number
    return environment.get_template(TEMPLATE_NAME).render(**context)


def _format_number(value: Any, decimals: int = 0) -> str:
    if not _finite(value):
        return "–"
    return f"{float(value):,.{decimals}f}"


def build_report(
    out_path: Path,
    *,
    config: Mapping,
    all_metrics: pd.DataFrame,
    votes: pd.DataFrame,
    reliability: pd.DataFrame,
    generations: pd.DataFrame,
    generation_provenance: list[dict],
    judgment_provenance: list[dict],
    ledger: pd.DataFrame,
    table_paths: Sequence[Path],
    figure_paths: Sequence[Path],
    correlations: pd.DataFrame | None = None,
    paired: pd.DataFrame | None = None,
    git_commit: str | None,
    package_versions: Mapping,
    title: str = "bloomqg report",
) -> None:
    """Write one self-contained HTML report of the run to ``out_path`` (atomically).

    Tables are read back from their Markdown files in ``table_paths`` (CSV/TeX paths are listed as
    downloads but not parsed), figures are the PNG files of ``figure_paths`` inlined as base64.
    """
    import yaml

    check_metrics(all_metrics)
    readings = figure_readings(all_metrics, votes, reliability, correlations)
    t_readings = table_readings(all_metrics, reliability, paired, _table1_frame(table_paths))
    context = {
        "title": title,
        "generated_at": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "overview": overview(all_metrics, votes, ledger),
        "config_yaml": yaml.safe_dump(plain(dict(config)), sort_keys=False, allow_unicode=True),
        "git_commit": git_commit or "unknown (not a git checkout)",
        "package_versions": sorted(plain(dict(package_versions)).items()),
        "generation_provenance": provenance_entries(generation_provenance),
        "judgment_provenance": provenance_entries(judgment_provenance),
        "tables": _table_entries(table_paths, t_readings),
        "figures": _figure_entries(figure_paths, readings),
        "gate": gate_summary(reliability),
        "ledger": ledger_view(ledger),
        "generation_usage": generation_usage(generations),
        "examples": question_examples(votes, generations),
    }
    html = render_report(context)
    out_path = Path(out_path)
    write_text_atomic(out_path, html)
    log.info("wrote report %s (%.1f MB)", out_path, out_path.stat().st_size / 1e6)


def build_report_from_files(
    out_path: Path,
    *,
    config: Mapping,
    metrics: Path,
    correlations: Path,
    paired: Path,
    votes: Sequence[Path],
    reliability: Sequence[Path],
    generations: Sequence[Path],
    judgments: Sequence[Path],
    tables: Sequence[Path],
    figures: Sequence[Path],
    title: str = "bloomqg report",
) -> None:
    """:func:`build_report` from the workflow's files (what the report rules hand over).

    ``judgments`` may be empty (an imported release publishes votes, not the judges' calls):
    the judgments provenance and the cost ledger are then empty too.
    """
    from bloomqg.api.ledger import LEDGER_COLUMNS, ledger_from_judgments
    from bloomqg.parquet_io import read_frame, read_frames, read_provenance
    from bloomqg.provenance import git_commit, package_versions
    from bloomqg.schemas import GENERATIONS, JUDGMENTS, METRICS, RELIABILITY, VOTES

    build_report(
        Path(out_path),
        config=config,
        all_metrics=read_frame(metrics, METRICS),
        votes=read_frames(votes, VOTES),
        reliability=read_frames(reliability, RELIABILITY),
        generations=read_frames(generations, GENERATIONS),
        generation_provenance=[read_provenance(p) for p in generations],
        judgment_provenance=[read_provenance(p) for p in judgments],
        ledger=ledger_from_judgments(read_frames(judgments, JUDGMENTS)) if judgments else pd.DataFrame(columns=LEDGER_COLUMNS),
        table_paths=[Path(p) for p in tables],
        figure_paths=[Path(p) for p in figures],
        correlations=pd.read_parquet(correlations),
        paired=pd.read_parquet(paired),
        git_commit=git_commit(),
        package_versions=package_versions(),
        title=title,
    )
