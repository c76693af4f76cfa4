"""The report's section "Can these judges be trusted?": α and AC1 side by side with percent
agreement and prevalence, each judge's diagnostics (with a figure of its Dawid–Skene sensitivity
and specificity), the panel's effective number of judges, and whether each headline comparison
survives the judges (:mod:`bloomqg.metrics.robustness`).

Self-contained: it reads the RELIABILITY rows and the robustness table and returns the template's
context (``trust``); the figure is drawn here and inlined, so the section needs no figure file.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from bloomqg.metrics.registry import metric_spec
from bloomqg.metrics.paired import SIGNIFICANCE
from bloomqg.metrics.robustness import NOT_COMPARED, verdict_reason
from bloomqg.reporting.display import (
    COEFFICIENT_SYMBOL, CRITERION_LABEL, EMPTY, StrategyLabels, is_missing, ordered_unique, strategy_label,
)
from bloomqg.reporting.tables.model import fixed
from bloomqg.store.frames import BINARY_CRITERIA, RELIABILITY
from bloomqg.voting.agreement import NOT_MEASURED, RELIABLE, UNRELIABLE, recorded_decision
from bloomqg.voting.diagnostics import suspicious_judges

def _num(value: Any, decimals: int = 2) -> str:
    return "–" if is_missing(value) else fixed(float(value), decimals)


def _with_ci(value: Any, low: Any, high: Any, decimals: int = 2) -> str:
    if is_missing(value):
        return "–"
    if is_missing(low) or is_missing(high):
        return _num(value, decimals)
    return f"{fixed(float(value), decimals)} [{fixed(float(low), decimals)}, {fixed(float(high), decimals)}]"


def _cell(row: Any, strategy_labels: StrategyLabels | None = None) -> str:
    return f"{row.model} · {row.dataset} · {strategy_label(row.strategy, strategy_labels)}"


def coefficient_rows(reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> list[dict[str, str]]:
    """One row per cell × criterion: n, percent agreement, prevalence, α and AC1 with CIs, the
    effective number of judges and the gate's verdict."""
    panel = reliability[reliability["judge"].isna()]
    rows = []
    for r in panel.itertuples(index=False):
        assessable = not (is_missing(r.alpha) and (is_missing(r.n_items) or int(r.n_items) == 0))
        decision = recorded_decision(r._asdict())
        symbol = COEFFICIENT_SYMBOL.get(decision.coefficient, decision.coefficient)
        gate_text = {RELIABLE: f"reliable ({symbol} ≥ {_num(r.gate_threshold)})",
                     UNRELIABLE: f"unreliable ({symbol} below {_num(r.gate_threshold)})",
                     NOT_MEASURED: f"not measured ({decision.why})"}[decision.status]
        flagged = decision.status != RELIABLE and not is_missing(r.gate_passed)
        rows.append({
            "cell": _cell(r, strategy_labels), "criterion": CRITERION_LABEL.get(r.criterion, r.criterion),
            "n": "0" if is_missing(r.n_items) else str(int(r.n_items)),
            "agreement": _with_ci(r.percent_agreement, r.percent_agreement_ci_low, r.percent_agreement_ci_high),
            "prevalence": "–" if is_missing(r.prevalence) else
            f"{float(r.prevalence):.3f}" + ("" if not isinstance(r.majority_category, str) else
                                           f" ({_category(r.criterion, r.majority_category)})"),
            "alpha": ("undefined (no variance)" if assessable and is_missing(r.alpha) else
                      _with_ci(r.alpha, r.alpha_ci_low, r.alpha_ci_high) if assessable else "not assessable"),
            "ac1": _with_ci(r.ac1, r.ac1_ci_low, r.ac1_ci_high) if assessable else "not assessable",
            "n_eff": _num(r.n_effective_judges, 1), "gate": gate_text,
            "failed": flagged,
        })
    return rows


def _category(criterion: str, label: str) -> str:
    if criterion in BINARY_CRITERIA:
        return {"1": "yes", "0": "no"}.get(label, label)
    return label if len(label) <= 24 else label[:23] + "…"


def judge_rows(reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(one row per cell × criterion × judge with its diagnostics; the judges flagged, with why)."""
    judges = reliability[reliability["judge"].notna()]
    rows, flagged = [], []
    for (model, dataset, strategy, criterion), group in judges.groupby(
        ["model", "dataset", "strategy", "criterion"], sort=False
    ):
        binary = criterion in BINARY_CRITERIA
        records = group.to_dict("records")
        flags = suspicious_judges([r["judge"] for r in records], records, binary=binary)
        for r in records:
            if is_missing(r.get("vote_rate")):
                continue
            pairwise = json.loads(r["kappa_pairwise"]) if isinstance(r.get("kappa_pairwise"), str) else {}
            rows.append({
                "cell": f"{model} · {dataset} · {strategy_label(strategy, strategy_labels)}",
                "criterion": CRITERION_LABEL.get(criterion, criterion), "judge": r["judge"],
                "n": "–" if is_missing(r.get("n_items")) else str(int(r["n_items"])),
                "rate": _num(r["vote_rate"]),
                "agreement": _num(r.get("agreement_with_others")),
                "kappa": _num(r.get("kappa_with_others")),
                "pairwise": ", ".join(f"{k}: {_num(v)}" for k, v in pairwise.items()),
                "sensitivity": _with_ci(r.get("ds_sensitivity"), r.get("ds_sensitivity_ci_low"), r.get("ds_sensitivity_ci_high")) if binary else "–",
                "specificity": _with_ci(r.get("ds_specificity"), r.get("ds_specificity_ci_low"), r.get("ds_specificity_ci_high")) if binary else "–",
                "accuracy": _num(r.get("ds_accuracy")),
                "flag": flags.get(r["judge"], ""),
            })
            if r["judge"] in flags:
                flagged.append({"judge": r["judge"], "cell": f"{model} · {dataset} · {strategy_label(strategy, strategy_labels)}",
                                "criterion": CRITERION_LABEL.get(criterion, criterion), "why": flags[r["judge"]]})
    return rows, flagged


def _uninformative(flagged: list[dict[str, str]], criterion: str, cells: pd.Series) -> str:
    """"smollm2 in 4 of 5 cells": the flagged judges of one criterion, beside its effective number."""
    counts: dict[str, int] = {}
    for f in flagged:
        if f["criterion"] == criterion:
            counts[f["judge"]] = counts.get(f["judge"], 0) + 1
    return ", ".join(f"{judge} in {n} of {len(cells)} cells" for judge, n in counts.items())


def flagged_summary(flagged: list[dict[str, str]]) -> str:
    """"smollm2 in 8 criterion × cell pairs (Readable, Unique), rules in 1 (Answerable)": one
    clause per judge, in order of first appearance."""
    by_judge: dict[str, list[dict[str, str]]] = {}
    for f in flagged:
        by_judge.setdefault(f["judge"], []).append(f)
    return "; ".join(
        f"{judge} in {len(rows)} criterion × cell pair{'s' if len(rows) != 1 else ''} "
        f"({', '.join(dict.fromkeys(r['criterion'] for r in rows))})"
        for judge, rows in by_judge.items()
    )


def sensitivity_figure(reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> str | None:
    """Base64 PNG: each judge's Dawid–Skene sensitivity and specificity (95% intervals) per
    yes/no criterion (panels) and cell (rows); None when no judge row has them."""
    judges = reliability[reliability["judge"].notna() & reliability["criterion"].isin(BINARY_CRITERIA)]
    if "ds_sensitivity" not in judges or judges["ds_sensitivity"].isna().all():
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bloomqg.reporting.figures.style import OKABE_ITO, STYLE

    criteria = [c for c in BINARY_CRITERIA if c in set(judges["criterion"])]
    labels = list(dict.fromkeys(
        f"{r.model} · {r.dataset} · {strategy_label(r.strategy, strategy_labels)} · {r.judge}" for r in judges.itertuples(index=False)
    ))
    with matplotlib.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(criteria), figsize=(2.6 * len(criteria) + 2.2, 0.22 * len(labels) + 1.2),
                                 sharey=True, squeeze=False)
        for ax, criterion in zip(axes[0], criteria):
            part = judges[judges["criterion"] == criterion]
            for r in part.itertuples(index=False):
                y = labels.index(f"{r.model} · {r.dataset} · {strategy_label(r.strategy, strategy_labels)} · {r.judge}")
                for value, low, high, offset, colour, marker in (
                    (r.ds_sensitivity, r.ds_sensitivity_ci_low, r.ds_sensitivity_ci_high, -0.15, OKABE_ITO["blue"], "o"),
                    (r.ds_specificity, r.ds_specificity_ci_low, r.ds_specificity_ci_high, 0.15, OKABE_ITO["vermillion"], "s"),
                ):
                    if is_missing(value):
                        continue
                    err = None if is_missing(low) else [[max(0.0, value - low)], [max(0.0, high - value)]]
                    ax.errorbar(value, y + offset, xerr=err, fmt=marker, color=colour, markersize=3, capsize=1.5, linewidth=0.8)
            ax.set_title(CRITERION_LABEL[criterion])
            ax.set_xlim(-0.02, 1.02)
            ax.axvline(0.5, color="#999999", linestyle=":", linewidth=0.7)
            ax.set_xlabel("Dawid–Skene estimate")
        axes[0][0].set_yticks(range(len(labels)), labels)
        axes[0][0].invert_yaxis()
        handles = [plt.Line2D([], [], marker="o", linestyle="none", color=OKABE_ITO["blue"], label="sensitivity P(yes | yes)"),
                   plt.Line2D([], [], marker="s", linestyle="none", color=OKABE_ITO["vermillion"], label="specificity P(no | no)")]
        fig.legend(handles=handles, loc="upper center", ncol=2, frameon=False, bbox_to_anchor=(0.5, 1.0))
        fig.tight_layout(rect=(0, 0, 1, 0.93))
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=150, facecolor="white", metadata={"Software": None})
        plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _comparison_text(r: Any, strategy_labels: StrategyLabels | None) -> str:
    """``m · cs: FGP − CoT`` (strategy vs strategy, labels from the config) or
    ``cs · CoT: m2 − m1`` (model vs model)."""
    if r.comparison == "cot vs fgp":  # written before strategy pairs were the config's
        return f"{r.model} · {r.dataset}: {strategy_label('fgp', strategy_labels)} − {strategy_label('cot', strategy_labels)}"
    strategy_b = getattr(r, "strategy_b", None)
    if r.comparison == "strategy vs strategy" and not is_missing(strategy_b):
        return (f"{r.model} · {r.dataset}: {strategy_label(strategy_b, strategy_labels)} − "
                f"{strategy_label(r.strategy, strategy_labels)}")
    return f"{r.dataset} · {strategy_label(r.strategy, strategy_labels)}: {r.model_b} − {r.model}"


def robustness_rows(
    robustness: pd.DataFrame | None, strategy_labels: StrategyLabels | None = None
) -> list[dict[str, str]]:
    """The robustness table's rows, formatted (comparison, metric, the two arms' values under the
    majority and under Dawid–Skene, majority diff and p, each variant's difference, verdict and,
    for "within judge noise", which of its clauses holds).
    Files written before the Dawid–Skene values existed show them as "–"."""
    if robustness is None or robustness.empty:
        return []
    rows = []
    for r in robustness.itertuples(index=False):
        what = _comparison_text(r, strategy_labels)
        variants = json.loads(r.variants) if isinstance(r.variants, str) else {}
        ds_a, ds_b = getattr(r, "value_a_dawid_skene", None), getattr(r, "value_b_dawid_skene", None)
        rows.append({
            "comparison": what, "metric": r.metric, "n": str(int(r.n_pairs)),
            "majority": f"{_num(r.value_a, 2)} → {_num(r.value_b, 2)}",
            "dawid_skene": f"{_num(ds_a, 2)} → {_num(ds_b, 2)}",
            "diff": _num(r.diff, 2), "p": "–" if is_missing(r.p_value) else f"{float(r.p_value):.3g}",
            "variants": "; ".join(
                f"{name.replace('dawid_skene', 'Dawid–Skene')}: {_num(d, 2)} (p {('–' if d is None or p is None or (isinstance(p, float) and math.isnan(p)) else f'{p:.2g}')})"
                for name, (d, p) in variants.items()
            ),
            "verdict": r.verdict,
            "reason": verdict_reason(r.diff, r.p_value, r.verdict, variants) if variants else "",
            "holds": r.verdict == "holds",
        })
    return rows


def robustness_summary(robustness: pd.DataFrame | None) -> str:
    """One sentence: how many headline comparisons hold, depend on a judge, or are noise."""
    if robustness is None or robustness.empty:
        return (f"{EMPTY} No headline comparison could be formed: a strategy pair needs a model × dataset run "
                "under two strategies (and the comparisons' baseline among them), a model pair two models.")
    counts = robustness["verdict"].map(
        lambda v: "holds" if v == "holds" else "not assessable" if v.startswith("not assessable")
        else NOT_COMPARED if v == NOT_COMPARED
        else "within judge noise" if v == "within judge noise" else "depends on the panel"
    ).value_counts()
    parts = [f"{counts[k]} {k}" for k in ("holds", "depends on the panel", "within judge noise", "not assessable",
                                          NOT_COMPARED) if k in counts]
    if NOT_COMPARED in counts:
        parts[-1] += " (0 pairs or no value: nothing to hold)"
    metrics = ordered_unique(robustness["metric"])
    labels = ", ".join(metric_spec(m).label for m in metrics)
    return (f"Of {len(robustness)} comparisons ({len(metrics)} metrics: {labels}; each strategy pair and model pair "
            f"on each dataset), judged by whether the sign and the side of raw p = {SIGNIFICANCE:g} stay the same under the "
            f"majority, Dawid–Skene and every leave-one-judge-out panel: " + ", ".join(parts) + ". A comparison that "
            "holds does not depend on any one judge; that does not make unreliable judges reliable, so the Answer's "
            "verdicts, which check the judges' agreement first, decide.")


def trust_context(
    reliability: pd.DataFrame, robustness: pd.DataFrame | None, strategy_labels: StrategyLabels | None = None
) -> dict[str, Any]:
    """The ``trust`` context of the report template. Reliability rows written before these
    measures existed lack their columns: they show as "–"."""
    reliability = reliability.reindex(columns=list(dict.fromkeys([*reliability.columns, *RELIABILITY.names])))
    judges, flagged = judge_rows(reliability, strategy_labels)
    panel = reliability[reliability["judge"].isna()]
    n_eff = panel.dropna(subset=["n_effective_judges"]) if "n_effective_judges" in panel else panel.iloc[0:0]
    effective = [
        {"criterion": CRITERION_LABEL.get(c, c), "median": _num(g["n_effective_judges"].median(), 1),
         "low": _num(g["n_effective_judges"].min(), 1), "high": _num(g["n_effective_judges"].max(), 1),
         "n_judges": str(int(g["n_judges"].max())),
         "uninformative": _uninformative(flagged, CRITERION_LABEL.get(c, c), g["model"].astype(str) + " · "
                                         + g["dataset"].astype(str))}
        for c, g in n_eff.groupby("criterion", sort=False)
    ]
    return {
        "coefficients": coefficient_rows(reliability, strategy_labels),
        "judges": judges,
        "flagged": flagged,
        "flagged_summary": flagged_summary(flagged),
        "figure": sensitivity_figure(reliability, strategy_labels),
        "effective": effective,
        "robustness": robustness_rows(robustness, strategy_labels),
        "robustness_summary": robustness_summary(robustness),
        "significance": f"{SIGNIFICANCE:g}",
    }


def trained_judges(judgment_provenance: Sequence[Mapping[str, Any]]) -> list[str]:
    """One sentence per learned judge of the study: what it was trained on (source, rows and
    their sha256) and how well it agreed with its teacher when cross-validated."""
    sentences: dict[str, str] = {}
    for entry in judgment_provenance:
        model = entry.get("learned_model")
        judge = entry.get("judge")
        if not isinstance(model, Mapping) or not judge or judge in sentences:
            continue
        people = model.get("source") == "annotations"
        source = {"release": "the paper's release panel votes", "votes": "an earlier study's votes",
                  "annotations": "annotators' majorities"}.get(str(model.get("source")), f"{model.get('source')} votes")
        text = (f"{judge} is a classifier trained on {source} ({int(model.get('rows', 0)):,} questions of "
                f"{', '.join(model.get('datasets') or []) or 'no dataset'}; rows sha256 "
                f"{str(model.get('rows_sha256', ''))[:12]}).")
        level = (model.get("cross_validated") or {}).get("bloom_level/*")
        if level:
            text += (f" Cross-validated by original item, it agreed with its teacher's Bloom level on "
                     f"{100 * level['agreement']:.1f}% of {int(level['n']):,} questions (Cohen's κ "
                     f"{level['cohen_kappa']:.2f})"
                     + ("." if people else "; its teacher is a panel, not experts."))
        sentences[judge] = text
    return list(sentences.values())
