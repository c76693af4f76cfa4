"""Numbers corrected by people: prediction-powered estimates of the judged metrics from the
human labels of the annotation sample.

Each calibrated metric is the **share of a cell's generated questions** with a per-item 0/1
outcome — unique, readable, answerable, usable; CatCons of the level, of the knowledge units and
of both; the share at each Bloom level; regression / drift / leap — at six levels and, where
levels enter, at three (:data:`bloomqg.inputs.bloom.BLOOM_ORDERS`). A share over *all* generated
questions (rather than, say, CatCons over the questions the judges found useful) is what makes
it a mean of per-item outcomes, the estimand prediction-powered inference corrects: a
denominator chosen by the judges would itself be a judged number. Metrics that compare with the
original's level are over the questions whose original has one (a property of the item, not of
any rater, so the random sample stays random within it).

Per item the outcome is computed twice: from each annotator's answers (``human``: the mean over
the annotators who labelled it) and from the panel's majority in the votes (``judge``). The
labelled items must be the export's random within-cell draw (:func:`check_random_draw`): the
estimates' validity rests on it, and items chosen any other way are refused.

Estimates per (cell, metric) (:func:`calibrated_estimates`): the judges' mean with its normal
interval (what the judges say, with only the items' sampling error); the humans' mean over the
labelled items; PPI++ (:func:`bloomqg.annotation.ppi.calibrated_mean`: ppi-python's estimator
on the labelled items plus a few pseudo-labelled disagreements, the small-sample guard that
module explains) from the labelled items and the judge values of the cell's other items. A panel verdict that is null (a tie, a parse failure)
enters PPI as the judges' mean of the cell — any fixed function of the judged data is a valid
prediction — and is left out of the judges' own mean, as every judged metric leaves it out.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bloomqg.annotation.ppi import (
    DEFAULT_PSEUDO_DISAGREEMENTS,
    MeanEstimate,
    calibrated_mean,
    paired_difference,
    score_mean,
)
from bloomqg.annotation.sample import cell_count, sample_cell
from bloomqg.store.cells import CELL_COLUMNS, cell_name, cell_of
from bloomqg.inputs.bloom import BLOOM_LEVELS, BLOOM_ORDERS, LEVEL_WEIGHT, ORDER_OF_LEVEL, ORDER_WEIGHT
from bloomqg.inputs.parsing import has_question
from bloomqg.store.frames import (
    CALIBRATION_AGREEMENT,
    CALIBRATION_ESTIMATES,
    CALIBRATION_ITEMS,
    CALIBRATION_PAIRED,
)
from bloomqg.inputs.strategies import ComparisonSpec

logger = logging.getLogger(__name__)

SIX_LEVELS = "six levels"
THREE_LEVELS = "three levels"
CRITERION = "criterion"

#: Fewest labelled items for a humans' or PPI interval (one item has no spread to estimate).
MIN_LABELLED = 2


class CalibrationError(ValueError):
    """The labelled items cannot be used for calibration; the message says which and why."""

    #: First line of the failed job's log (bloomqg.store.logs).
    what_to_do = ("the annotated items cannot calibrate the judged metrics: read the reason below "
                  "(calibration needs the export's random within-cell sample, labelled as exported).")


@dataclass(frozen=True)
class Rating:
    """One rater's answers on one generated question, with the original's labels."""

    unique: bool | None
    readable: bool | None
    answerable: bool | None
    bloom_level: str | None
    knowledge_units: frozenset[str] | None
    original_bloom_level: str | None
    original_knowledge_units: frozenset[str]


def _binary(value: bool | None) -> float:
    return math.nan if value is None else float(value)


def _usable(r: Rating) -> float:
    values = (r.unique, r.readable, r.answerable)
    if any(v is False for v in values):
        return 0.0
    return math.nan if any(v is None for v in values) else 1.0


def _level_delta(r: Rating, weight: Mapping[str, int], grouping: Mapping[str, str] | None) -> float | None:
    if r.bloom_level is None or r.original_bloom_level is None:
        return None
    new, old = r.bloom_level, r.original_bloom_level
    if grouping is not None:
        new, old = grouping[new], grouping[old]
    return float(weight[new] - weight[old])


def _on_delta(test: Callable[[float], bool], weight: Mapping[str, int],
              grouping: Mapping[str, str] | None) -> Callable[[Rating], float]:
    def outcome(r: Rating) -> float:
        delta = _level_delta(r, weight, grouping)
        return math.nan if delta is None else float(test(delta))
    return outcome


def _units_match(r: Rating) -> float:
    return math.nan if r.knowledge_units is None else float(r.knowledge_units == r.original_knowledge_units)


def _both_match(r: Rating) -> float:
    level = _on_delta(lambda d: d == 0, LEVEL_WEIGHT, None)(r)
    units = _units_match(r)
    if level == 0.0 or units == 0.0:
        return 0.0
    return math.nan if math.isnan(level) or math.isnan(units) else 1.0


def _share_at(level: str, grouping: Mapping[str, str] | None) -> Callable[[Rating], float]:
    def outcome(r: Rating) -> float:
        if r.bloom_level is None:
            return math.nan
        return float((grouping[r.bloom_level] if grouping else r.bloom_level) == level)
    return outcome


@dataclass(frozen=True)
class CalibratedMetric:
    """A share of generated questions: ``outcome`` of a rating is 1, 0 or NaN (no verdict)."""

    name: str
    label: str
    granularity: str
    outcome: Callable[[Rating], float]
    #: the population is the questions whose original has a Bloom level
    needs_original_level: bool = False
    #: a headline metric: the sampling plan sizes the labels for it
    headline: bool = False


_ORDER_SLUG = {name: name.split()[0].lower() for name in BLOOM_ORDERS}

#: Every calibrated metric, in the order tables show them.
OUTCOMES: tuple[CalibratedMetric, ...] = (
    CalibratedMetric("unique", "Unique", CRITERION, lambda r: _binary(r.unique), headline=True),
    CalibratedMetric("readable", "Readable", CRITERION, lambda r: _binary(r.readable), headline=True),
    CalibratedMetric("answerable", "Answerable", CRITERION, lambda r: _binary(r.answerable), headline=True),
    CalibratedMetric("usable", "Usable, of decided replies with a question", CRITERION, _usable, headline=True),
    CalibratedMetric("catcons_level", "At the original's level (any judged question, useful or not)", SIX_LEVELS, _on_delta(lambda d: d == 0, LEVEL_WEIGHT, None),
                     needs_original_level=True, headline=True),
    CalibratedMetric("catcons_unit", "Same units as the original (any judged question, useful or not)", CRITERION, _units_match, headline=True),
    CalibratedMetric("catcons_both", "At the original's level and units", SIX_LEVELS, _both_match, needs_original_level=True),
    CalibratedMetric("cogreg", "2+ levels below the original (any judged question, useful or not)", SIX_LEVELS, _on_delta(lambda d: d <= -2, LEVEL_WEIGHT, None),
                     needs_original_level=True, headline=True),
    CalibratedMetric("cogdrift", "1 level from the original (any judged question, useful or not)", SIX_LEVELS, _on_delta(lambda d: abs(d) == 1, LEVEL_WEIGHT, None),
                     needs_original_level=True),
    CalibratedMetric("cogleap", "2+ levels above the original (any judged question, useful or not)", SIX_LEVELS, _on_delta(lambda d: d >= 2, LEVEL_WEIGHT, None),
                     needs_original_level=True, headline=True),
    *(CalibratedMetric(f"share_{level.lower()}", f"At {level}", SIX_LEVELS, _share_at(level, None))
      for level in BLOOM_LEVELS),
    CalibratedMetric("catcons_order", "Same order as the original (lower: Remember, Understand; middle: Apply, Analyze; higher: Evaluate, Create)", THREE_LEVELS,
                     _on_delta(lambda d: d == 0, ORDER_WEIGHT, ORDER_OF_LEVEL), needs_original_level=True, headline=True),
    CalibratedMetric("cogreg_order", "Lower order than the original", THREE_LEVELS,
                     _on_delta(lambda d: d <= -1, ORDER_WEIGHT, ORDER_OF_LEVEL), needs_original_level=True),
    CalibratedMetric("cogleap_order", "Higher order than the original", THREE_LEVELS,
                     _on_delta(lambda d: d >= 1, ORDER_WEIGHT, ORDER_OF_LEVEL), needs_original_level=True),
    *(CalibratedMetric(f"share_{_ORDER_SLUG[order]}_order", f"At {order.lower()}", THREE_LEVELS,
                       _share_at(order, ORDER_OF_LEVEL))
      for order in BLOOM_ORDERS),
)
METRICS_BY_NAME: dict[str, CalibratedMetric] = {metric.name: metric for metric in OUTCOMES}


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _units(value: object) -> frozenset[str] | None:
    if _missing(value):
        return None
    return frozenset(" ".join(str(unit).split()) for unit in value)  # type: ignore[union-attr]


def _flag(value: object) -> bool | None:
    return None if _missing(value) else bool(value)


def outcomes(rating: Rating) -> dict[str, float]:
    """Every calibrated metric's outcome of one rating (NaN: no verdict, or outside the metric's
    population)."""
    values = {}
    for metric in OUTCOMES:
        if metric.needs_original_level and rating.original_bloom_level is None:
            values[metric.name] = math.nan
        else:
            values[metric.name] = metric.outcome(rating)
    return values


def panel_rating(row: object) -> Rating:
    """The panel's majorities of one votes row (``schemas.VOTES`` attributes) as a :class:`Rating`."""
    return Rating(
        unique=_flag(row.unique), readable=_flag(row.readable), answerable=_flag(row.answerable),  # type: ignore[attr-defined]
        bloom_level=None if _missing(row.bloom_level) else str(row.bloom_level),  # type: ignore[attr-defined]
        knowledge_units=_units(row.knowledge_units),  # type: ignore[attr-defined]
        original_bloom_level=None if _missing(row.original_bloom_level) else str(row.original_bloom_level),  # type: ignore[attr-defined]
        original_knowledge_units=_units(row.original_knowledge_units) or frozenset(),  # type: ignore[attr-defined]
    )


def check_random_draw(items: pd.DataFrame, votes: Sequence[pd.DataFrame], *, items_per_cell: int | Mapping[str, int],
                      seed: int,
                      where: str = "the annotation key") -> None:
    """Refuse unless every cell's items in the annotation key ``items`` are exactly the export's
    random within-cell draw (:func:`bloomqg.annotation.sample.sample_cell` with the key's
    ``items_per_cell`` and ``seed``) from that cell's votes."""
    by_cell = {}
    for frame in votes:
        if len(frame):
            key = cell_of(frame)
            by_cell[key] = frame
    for key, part in items.groupby(list(CELL_COLUMNS), sort=False):
        key = tuple(str(k) for k in key)
        name = cell_name(*key)
        if key not in by_cell:
            raise CalibrationError(f"{where}: cell {name} has annotated items but no votes were given for it")
        drawn = set(sample_cell(by_cell[key], cell_count(items_per_cell, by_cell[key]), seed)["prompt_id"])
        listed = set(part["prompt_id"])
        if drawn != listed:
            extra, absent = sorted(listed - drawn), sorted(drawn - listed)
            raise CalibrationError(
                f"{where}: the items of cell {name} are not the export's random within-cell draw "
                f"(items_per_cell {items_per_cell}, seed {seed}): not drawn {extra[:5]}"
                f"{' …' if len(extra) > 5 else ''}, drawn but missing {absent[:5]}{' …' if len(absent) > 5 else ''}."
                " Calibrated estimates are valid only for a random sample: export the sample again"
                " (export_annotation) and annotate those items."
            )


def human_outcomes(items: pd.DataFrame, ratings: pd.DataFrame) -> pd.DataFrame:
    """Per (annotation_id, annotator) the calibrated outcomes of the annotator's answers: columns
    annotation_id, annotator and one per metric of :data:`OUTCOMES` (``ratings``:
    :func:`bloomqg.annotation.sheets.read_sheets`'s long frame)."""
    key = items.set_index("annotation_id")
    records = []
    if len(ratings):
        wide = ratings.pivot_table(index=["annotation_id", "annotator"], columns="criterion", values="value",
                                   aggfunc="first")
        for (annotation_id, annotator), row in wide.iterrows():
            item = key.loc[annotation_id]
            rating = Rating(
                unique=_flag(row.get("unique")), readable=_flag(row.get("readable")),
                answerable=_flag(row.get("answerable")),
                bloom_level=None if _missing(row.get("bloom_level")) else str(row.get("bloom_level")),
                knowledge_units=_units(row.get("knowledge_units")),
                original_bloom_level=None if _missing(item["original_bloom_level"]) else str(item["original_bloom_level"]),
                original_knowledge_units=_units(item["original_knowledge_units"]) or frozenset(),
            )
            records.append({"annotation_id": annotation_id, "annotator": annotator, **outcomes(rating)})
    return pd.DataFrame.from_records(records, columns=["annotation_id", "annotator", *METRICS_BY_NAME])


def panel_outcomes(frame: pd.DataFrame) -> pd.DataFrame:
    """Per generated question of one votes frame and calibrated metric whose population holds
    it: the panel's outcome (``judge``, NaN when the panel gave no verdict). Columns dataset,
    strategy, model, prompt_id, item_id, metric, judge."""
    records = []
    for row in frame.itertuples(index=False):
        if not has_question(row.new_question):
            continue  # never drawn: nothing to rate
        judged = outcomes(panel_rating(row))
        for metric in OUTCOMES:
            if metric.needs_original_level and _missing(row.original_bloom_level):
                continue
            records.append((row.dataset, row.strategy, row.model, row.prompt_id, row.item_id, metric.name,
                            judged[metric.name]))
    return pd.DataFrame.from_records(
        records, columns=[*CELL_COLUMNS, "prompt_id", "item_id", "metric", "judge"])


def joined_items(items: pd.DataFrame, ratings: pd.DataFrame, votes: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The per-item data of :data:`bloomqg.store.frames.CALIBRATION_ITEMS`: every generated question of
    every annotated cell, per metric whose population holds it, with the humans' outcome (mean
    over its annotators; null when unlabelled) and the panel's."""
    human = human_outcomes(items, ratings)
    long = human.melt(id_vars=["annotation_id", "annotator"], var_name="metric", value_name="human").dropna(
        subset=["human"])
    per_item = long.groupby(["annotation_id", "metric"])["human"].agg(human="mean", n_annotators="count").reset_index()
    # a prompt id names an item and a strategy, not a model: the key is the cell and the prompt
    keys = items[[*CELL_COLUMNS, "prompt_id", "annotation_id"]]
    cells = set(map(tuple, items[list(CELL_COLUMNS)].astype(str).to_numpy()))
    parts = [panel_outcomes(frame) for frame in votes
             if len(frame) and cell_of(frame) in cells]
    if not parts:
        return pd.DataFrame(columns=CALIBRATION_ITEMS.names)
    judged = pd.concat(parts, ignore_index=True).merge(keys, on=[*CELL_COLUMNS, "prompt_id"], how="left")
    joined = judged.merge(per_item, on=["annotation_id", "metric"], how="left")
    joined["n_annotators"] = joined["n_annotators"].fillna(0).astype("int64")
    joined["judge"] = joined["judge"].astype("float64")
    return joined[CALIBRATION_ITEMS.names]


def _percent(estimate: MeanEstimate) -> tuple[float, float, float]:
    return tuple(100.0 * float(np.asarray(v).reshape(-1)[0]) for v in (estimate.value, estimate.ci_low, estimate.ci_high))  # type: ignore[return-value]


_NAN3 = (math.nan, math.nan, math.nan)


def estimate_one(human: np.ndarray, judge: np.ndarray, confidence: float,
                 pseudo_disagreements: int = DEFAULT_PSEUDO_DISAGREEMENTS, *,
                 arms: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
                 ) -> dict[str, float]:
    """The three estimates (percent) of one population: ``human`` NaN where unlabelled, ``judge``
    NaN where the panel gave no verdict. Keys judges*, humans*, ppi*, lam (columns of
    :data:`~bloomqg.store.frames.CALIBRATION_ESTIMATES`). The judges' and the humans' own intervals
    hold at small n (:func:`~bloomqg.annotation.ppi.score_mean`). ``arms`` (``((human_a,
    human_b), (judge_a, judge_b))``): the values are paired differences b − a, the own intervals
    the strategy comparisons' paired ones on the arms (Tango's for 0/1), and the PPI guard is mirrored (unbiased at 0)."""
    labelled = ~np.isnan(human)
    judged = ~np.isnan(judge)
    differences = arms is not None

    def own(values: np.ndarray, keep: np.ndarray, pair: tuple[np.ndarray, np.ndarray] | None) -> MeanEstimate:
        if pair is None:
            return score_mean(values[keep], confidence=confidence)
        return paired_difference(pair[0][keep], pair[1][keep], confidence=confidence)

    judges = _percent(own(judge, judged, arms[1] if arms else None)) if judged.sum() >= 1 else _NAN3
    prediction = np.where(judged, judge, np.nanmean(judge) if judged.any() else 0.0)
    if labelled.sum() < MIN_LABELLED:
        humans, ppi, lam = _NAN3, _NAN3, math.nan
    else:
        humans = _percent(own(human, labelled, arms[0] if arms else None))
        if (~labelled).any():
            result = calibrated_mean(human[labelled], prediction[labelled], prediction[~labelled],
                                     confidence=confidence, pseudo_disagreements=pseudo_disagreements,
                                     differences=differences)
            ppi, lam = _percent(result), float(np.asarray(result.lam).reshape(-1)[0])
        else:  # every item labelled: nothing for the judges to add
            ppi, lam = humans, 0.0
    return {
        "judges": judges[0], "judges_low": judges[1], "judges_high": judges[2],
        "humans": humans[0], "humans_low": humans[1], "humans_high": humans[2],
        "ppi": ppi[0], "ppi_low": ppi[1], "ppi_high": ppi[2], "lam": lam,
    }


def _column(values: pd.Series) -> np.ndarray:
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)


def calibrated_estimates(joined: pd.DataFrame, items: pd.DataFrame, *, confidence: float = 0.95,
                         pseudo_disagreements: int = DEFAULT_PSEUDO_DISAGREEMENTS) -> pd.DataFrame:
    """:data:`~bloomqg.store.frames.CALIBRATION_ESTIMATES` per (cell, metric) from :func:`joined_items`'s
    frame; ``items`` (the annotation key) gives each cell's number of drawn items."""
    drawn = items.groupby(list(CELL_COLUMNS)).size()
    records = []
    for (dataset, strategy, model, metric), part in joined.groupby([*CELL_COLUMNS, "metric"], sort=False):
        n_sampled = int(part["annotation_id"].notna().sum())
        records.append({
            "dataset": dataset, "strategy": strategy, "model": model, "metric": metric,
            "granularity": METRICS_BY_NAME[metric].granularity,
            "n": int(part["human"].notna().sum()), "n_sampled": n_sampled, "big_n": len(part),
            **estimate_one(_column(part["human"]), _column(part["judge"]), confidence, pseudo_disagreements),
            "pseudo_disagreements": pseudo_disagreements, "confidence": confidence,
        })
        if n_sampled > int(drawn.get((dataset, strategy, model), 0)):
            raise CalibrationError(f"cell {cell_name(dataset, strategy, model)}: more annotated items than drawn")
    return pd.DataFrame.from_records(records, columns=CALIBRATION_ESTIMATES.names)


def study_pairs(votes: Sequence[pd.DataFrame], config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The strategy pairs the config's ``comparisons`` plan among the strategies of ``votes``'
    cells, in the order the cells come (the first is the default baseline)."""
    strategies = [cell_of(frame)[1] for frame in votes if len(frame)]
    return ComparisonSpec.from_config(config).pairs(strategies)


def paired_estimates(joined: pd.DataFrame, pairs: Sequence[tuple[str, str]], *, confidence: float = 0.95,
                     pseudo_disagreements: int = DEFAULT_PSEUDO_DISAGREEMENTS) -> pd.DataFrame:
    """:data:`~bloomqg.store.frames.CALIBRATION_PAIRED`: per model, dataset, strategy pair (a, b) of
    ``pairs`` and metric, the paired difference b − a over the items both cells generated (the
    per-item difference of outcomes), PPI++ on the items labelled in both cells. The export
    draws each cell's sample independently, so the items labelled in both are a random sample
    of the pairs too, only fewer: n says how many."""
    records = []
    for (dataset, model, metric), part in joined.groupby(["dataset", "model", "metric"], sort=False):
        by_strategy = {s: g.set_index("item_id") for s, g in part.groupby("strategy", sort=False)}
        for a, b in pairs:
            if a not in by_strategy or b not in by_strategy:
                continue
            both = by_strategy[a][["human", "judge"]].join(by_strategy[b][["human", "judge"]], how="inner",
                                                           lsuffix="_a", rsuffix="_b")
            if both.empty:
                continue
            judge_a, judge_b = _column(both["judge_a"]), _column(both["judge_b"])
            human_a, human_b = _column(both["human_a"]), _column(both["human_b"])
            judge, human = judge_b - judge_a, human_b - human_a
            records.append({
                "dataset": dataset, "model": model, "strategy_a": a, "strategy_b": b, "metric": metric,
                "n": int((~np.isnan(human)).sum()), "big_n": len(both),
                **estimate_one(human, judge, confidence, pseudo_disagreements,
                               arms=((human_a, human_b), (judge_a, judge_b))),
                "pseudo_disagreements": pseudo_disagreements, "confidence": confidence,
            })
    return pd.DataFrame.from_records(records, columns=CALIBRATION_PAIRED.names)


def level_agreement(items: pd.DataFrame, ratings: pd.DataFrame) -> pd.DataFrame:
    """:data:`~bloomqg.store.frames.CALIBRATION_AGREEMENT`: per cell and pooled, the share of
    (item, annotator) pairs whose Bloom level equals the panel's, at six levels and at three."""
    levels = ratings[ratings["criterion"] == "bloom_level"] if len(ratings) else ratings
    panel = items.set_index("annotation_id")
    rows = []
    pairs = []
    for record in levels.itertuples(index=False):
        item = panel.loc[record.annotation_id]
        if _missing(item["panel_bloom_level"]):
            continue
        pairs.append((item["dataset"], item["strategy"], item["model"], record.value, item["panel_bloom_level"]))
    frame = pd.DataFrame(pairs, columns=[*CELL_COLUMNS, "human", "panel"])
    groups = [((d, s, m), g) for (d, s, m), g in frame.groupby(list(CELL_COLUMNS), sort=False)] + [(("all",) * 3, frame)]
    for (dataset, strategy, model), group in groups:
        for granularity, grouping in ((SIX_LEVELS, None), (THREE_LEVELS, ORDER_OF_LEVEL)):
            human = group["human"] if grouping is None else group["human"].map(grouping)
            judged = group["panel"] if grouping is None else group["panel"].map(grouping)
            rows.append({"dataset": dataset, "strategy": strategy, "model": model, "granularity": granularity,
                         "n": len(group),
                         "percent_agreement": 100.0 * float((human == judged).mean()) if len(group) else None})
    return pd.DataFrame.from_records(rows, columns=CALIBRATION_AGREEMENT.names)


def round_sheets(folder: str | Path) -> list[Path]:
    """The filled sheets (``*.csv``) of one annotation round's folder, sorted."""
    path = Path(folder)
    return sorted(path.glob("*.csv")) if path.is_dir() else []


def read_rounds(folders: Sequence[str | Path], items: pd.DataFrame) -> pd.DataFrame:
    """The ratings of every round's sheets (:func:`bloomqg.annotation.sheets.read_sheets`, per
    round), pooled; an annotator who labels an item in two rounds is an error (one label per
    annotator and item, or the mean over annotators would weigh them twice)."""
    from bloomqg.annotation.sheets import RATING_COLUMNS, AnnotationError, read_sheets

    parts = [read_sheets(round_sheets(folder), items) for folder in folders]
    parts = [part for part in parts if len(part)]
    if not parts:
        return pd.DataFrame(columns=list(RATING_COLUMNS))
    ratings = pd.concat(parts, ignore_index=True)
    twice = ratings.drop_duplicates(["annotation_id", "annotator", "file"]).duplicated(
        ["annotation_id", "annotator"], keep=False)
    if twice.any():
        first = ratings.drop_duplicates(["annotation_id", "annotator", "file"])[twice].iloc[0]
        files = ratings[(ratings["annotation_id"] == first["annotation_id"])
                        & (ratings["annotator"] == first["annotator"])]["file"].unique()
        raise AnnotationError(
            f"{files[-1]}: item {first['annotation_id']} was already labelled by annotator {first['annotator']!r} "
            f"in {files[0]} (one label per annotator and item over all calibration rounds)"
        )
    return ratings
