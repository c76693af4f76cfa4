"""Agreement of the judges' majority votes with expert labels, and Table 9 drawn from it."""

from __future__ import annotations

import pandas as pd

from bloomqg.inputs.bloom import normalize_level
from bloomqg.reporting.display import CRITERION_LABEL, MISSING, StrategyLabels, is_missing, strategy_label, strategy_order
from bloomqg.reporting.tables.model import Cell, Table, TableInputError, require_columns


#: Columns of the per-item human annotations accepted by :func:`human_agreement`.
HUMAN_ANNOTATION_COLUMNS = ("prompt_id", "model", "dataset", "strategy", "criterion", "value")
HUMAN_CRITERIA = ("bloom_level", "unique", "readable", "answerable")


def human_agreement(votes: pd.DataFrame, annotations: pd.DataFrame) -> pd.DataFrame:
    """Agreement (%) of the majority votes with expert labels, per model × dataset × strategy × criterion.

    ``annotations`` has one row per (prompt_id, model, dataset, strategy, criterion) with the
    expert's ``value``: ``"1"``/``"0"`` (or true/false/yes/no) for unique, readable and answerable;
    a Bloom level name for ``bloom_level``. Items whose vote is null (tie, gated, no question) are
    left out of the denominator. Returns columns model, dataset, strategy, criterion, agreement, n.
    """
    require_columns(annotations, HUMAN_ANNOTATION_COLUMNS, "human annotations")
    require_columns(votes, ["prompt_id", "model", "dataset", "strategy", *HUMAN_CRITERIA], "votes")
    keys = ["prompt_id", "model", "dataset", "strategy", "criterion"]
    duplicated = annotations.duplicated(keys, keep=False)
    if duplicated.any():
        raise TableInputError(
            f"human annotations: duplicate labels for {annotations.loc[duplicated, keys].iloc[0].tolist()}"
        )
    unknown = sorted(set(annotations["criterion"]) - set(HUMAN_CRITERIA))
    if unknown:
        raise TableInputError(f"human annotations: unknown criterion {unknown}; expected {list(HUMAN_CRITERIA)}")
    vote_index = votes.set_index(["prompt_id", "model", "dataset", "strategy"])
    matches = []
    for position, r in enumerate(annotations.itertuples(index=False)):
        key = (r.prompt_id, r.model, r.dataset, r.strategy)
        if key not in vote_index.index:
            raise TableInputError(f"human annotations row {position}: no vote for {key}")
        voted = vote_index.at[key, r.criterion]
        if is_missing(voted):
            continue
        human = _human_value(r.criterion, r.value, position)
        matches.append({"model": r.model, "dataset": r.dataset, "strategy": r.strategy,
                        "criterion": r.criterion, "match": human == (voted if r.criterion == "bloom_level" else bool(voted))})
    frame = pd.DataFrame(matches, columns=["model", "dataset", "strategy", "criterion", "match"])
    grouped = frame.groupby(["model", "dataset", "strategy", "criterion"], sort=False)["match"]
    result = grouped.agg(agreement=lambda m: 100.0 * float(m.mean()), n="size").reset_index()
    return result


def _human_value(criterion: str, value: object, position: int) -> object:
    text = str(value).strip().lower()
    if criterion == "bloom_level":
        try:
            return normalize_level(value, allow_uncategorized=False)
        except ValueError as error:
            raise TableInputError(f"human annotations row {position}: {error}") from error
    if text in {"1", "true", "yes", "y"}:
        return True
    if text in {"0", "false", "no", "n"}:
        return False
    raise TableInputError(f"human annotations row {position}: {value!r} is not a yes/no label for {criterion}")


#: Label of Table 9's last row: every cell's items pooled, each item counted once.
POOLED_LABEL = "All items (pooled)"


def _with_n(agreement: object, n: object) -> str:
    return f"{float(agreement):.2f} (n = {int(n)})"  # type: ignore[arg-type]


def human_agreement_table(agreement: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> Table:
    """Table 9: rows model × prompt, columns Bloom / Unique / Readable / Answerable, each cell
    with its n, plus a last row pooled over items.

    The pooled row is agreeing items / items over every cell, i.e. the cells' percentages
    weighted by their n — not their plain mean, which lets a cell of 1 item weigh as much as one
    of 20 (46.67 against a pooled 30.00 on n = 10 in one study)."""
    require_columns(agreement, ["model", "dataset", "strategy", "criterion", "agreement", "n"], "human agreement")
    lookup = {(r["model"], r["dataset"], r["strategy"], r["criterion"]): r for _, r in agreement.iterrows()}
    rows = []
    order = agreement[["model", "dataset", "strategy"]].drop_duplicates()
    rank = {name: k for k, name in enumerate(strategy_order(order["strategy"], strategy_labels))}
    order = order.assign(_rank=order["strategy"].map(rank))
    order = order.sort_values(["dataset", "_rank"], kind="stable")
    for _, key in order.iterrows():
        row = [Cell(key["model"]), Cell(key["dataset"]), Cell(strategy_label(key["strategy"], strategy_labels))]
        for criterion in HUMAN_CRITERIA:
            r = lookup.get((key["model"], key["dataset"], key["strategy"], criterion))
            row.append(Cell(MISSING if r is None or is_missing(r["agreement"]) else _with_n(r["agreement"], r["n"])))
        rows.append(row)
    pooled = []
    for criterion in HUMAN_CRITERIA:
        part = agreement[(agreement["criterion"] == criterion) & agreement["agreement"].notna()]
        n = int(part["n"].sum())
        pooled.append(Cell(_with_n((part["agreement"] * part["n"]).sum() / n, n) if n else MISSING))
    rows.append([Cell(POOLED_LABEL), Cell(MISSING), Cell(MISSING)] + pooled)
    return Table(
        "table9_human_agreement",
        "Table 9. Agreement (%) between the judges' majority votes and human annotations.",
        ["Model", "Dataset", "Prompt"], [CRITERION_LABEL[c] if c != "bloom_level" else "Bloom" for c in HUMAN_CRITERIA],
        rows, agreement.reset_index(drop=True), [],
        ["Percent of annotated items whose majority vote equals the expert's label (n = those items); "
         f"items with no majority are left out, {MISSING} = no such item. {POOLED_LABEL}: the items of every "
         "row together, each counted once (the rows weighted by their n), not the mean of the rows."],
    )
