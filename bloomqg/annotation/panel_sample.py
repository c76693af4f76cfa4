"""Paying the panel for a sample: the judges of ``panel_sample`` (an API panel, say) judge a
random sample of each cell's generated questions; the other judges (the local ones) judge all of
them and alone make the study's votes. Every per-question metric of the calibration module is
then estimated three ways per cell: as the local judges say (their majority over every
question), as the panel's sample alone says, and by PPI++ with the local majority as the
predictions and the panel's majority as the gold — the calibration code with the panel where
people stand (:mod:`bloomqg.annotation.calibration`).

The sample is :func:`bloomqg.annotation.sample.sample_cell`'s draw (seed and cell only), so the
panel's judge jobs and the estimates see the same questions and a rerun draws them again
identically. PPI's guarantee needs local verdicts that never saw the gold: a ``learned`` judge
trained on this study's sampled panel votes would be fitted to it, and is refused
(:func:`panel_sample_settings`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bloomqg.annotation.calibration import panel_outcomes
from bloomqg.annotation.ppi import DEFAULT_PSEUDO_DISAGREEMENTS
from bloomqg.annotation.sample import sample_cell
from bloomqg.store.cells import CELL_COLUMNS, cell_name, cell_of
from bloomqg.inputs.parsing import has_question
from bloomqg.store.config_schema import ConfigError
from bloomqg.store.frames import CALIBRATION_ITEMS

#: Where the panel's sample votes and the estimates go.
PANEL_SAMPLE_DIR = "results/panel_sample"


@dataclass(frozen=True)
class PanelSampleSettings:
    #: the judges entries that judge the sample only
    judges: list[str]
    #: the local judges: every other judges entry, judging every question
    local_judges: list[str]
    items_per_cell: int | None
    fraction: float | None
    seed: int
    confidence: float
    pseudo_disagreements: int

    @property
    def min_valid_votes(self) -> int:
        """Valid votes the panel's majority needs: two, or one when the panel is one judge (a
        single API judge as the gold)."""
        return min(2, len(self.judges))

    def draw(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The panel's sample of one cell's rows (generations or votes): the same questions from
        either, since the draw depends on the seed, the cell and the rows with a question."""
        return draw_panel_sample(frame, self.draw_spec)

    @property
    def draw_spec(self) -> dict[str, Any]:
        """What a panel judge's job is handed: the draw's settings, in its params (a change
        reruns the panel's jobs only)."""
        return {"items_per_cell": self.items_per_cell, "fraction": self.fraction, "seed": self.seed}


def sample_size(questions: int, draw_spec: Mapping[str, Any]) -> int:
    """Questions the panel judges in a cell with ``questions`` generated questions."""
    if draw_spec.get("items_per_cell") is not None:
        return min(int(draw_spec["items_per_cell"]), questions)
    return min(questions, max(2, math.ceil(float(draw_spec["fraction"]) * questions)))


def draw_panel_sample(frame: pd.DataFrame, draw_spec: Mapping[str, Any]) -> pd.DataFrame:
    """The panel's sample of one cell's rows (:attr:`PanelSampleSettings.draw_spec`)."""
    if frame.empty:
        return frame
    questions = int(frame["new_question"].map(has_question).sum())
    return sample_cell(frame, sample_size(questions, draw_spec), int(draw_spec["seed"]))


def panel_sample_settings(config: Mapping[str, Any]) -> PanelSampleSettings | None:
    """The validated ``panel_sample`` section (None: off). Errors name the key: an unknown judge,
    no local judge left, both or neither of items_per_cell and fraction, a learned local judge
    trained on this study's panel sample."""
    section = config.get("panel_sample")
    if section is None:
        return None
    judges = [str(j) for j in section["judges"]]
    for position, judge in enumerate(judges):
        if judge not in config["judges"]:
            raise ConfigError(f"panel_sample.judges[{position}]: {judge!r} is not a judges entry "
                              f"(known: {', '.join(config['judges'])})")
    local = [j for j in config["judges"] if j not in judges]
    if len(local) < 2:
        raise ConfigError(
            f"panel_sample.judges: {len(local)} judge(s) left to judge every question ({', '.join(local) or 'none'}); "
            "the study's votes, the predictions PPI++ corrects, are a strict majority of at least two valid votes: "
            "keep at least two judges out of the sampled panel")
    if ("items_per_cell" in section) == ("fraction" in section):
        raise ConfigError("panel_sample: give exactly one of items_per_cell and fraction")
    for judge in local:
        train = (config["judges"][judge] or {}).get("train") or {}
        if train.get("source") == "votes" and any(PANEL_SAMPLE_DIR in str(p) for p in train.get("votes") or []):
            raise ConfigError(
                f"judges.{judge}.train.votes: a local judge trained on this study's panel sample ({PANEL_SAMPLE_DIR}) "
                "has seen the gold PPI++ corrects it with, and its interval would not hold; train it on an "
                "earlier study's panel votes or the release")
    return PanelSampleSettings(
        judges=judges, local_judges=local,
        items_per_cell=int(section["items_per_cell"]) if "items_per_cell" in section else None,
        fraction=float(section["fraction"]) if "fraction" in section else None,
        seed=int(section.get("seed", config["seed"])),
        confidence=float(section.get("confidence", 0.95)),
        pseudo_disagreements=int(section.get("pseudo_disagreements", DEFAULT_PSEUDO_DISAGREEMENTS)),
    )


def panel_joined(local_votes: Sequence[pd.DataFrame], panel_votes: Sequence[pd.DataFrame],
                 settings: PanelSampleSettings) -> pd.DataFrame:
    """:data:`~bloomqg.store.frames.CALIBRATION_ITEMS` with the panel in the humans' place: every
    generated question of every cell per calibrated metric, ``judge`` the local majority's
    outcome, ``human`` the panel majority's on the sampled questions (null elsewhere, and where
    the panel tied). Refuses panel votes that are not the configured draw of the cell."""
    panels = {cell_of(frame): frame for frame in panel_votes if len(frame)}
    parts = []
    for frame in local_votes:
        if not len(frame):
            continue
        key = cell_of(frame)
        drawn = settings.draw(frame)
        panel = panels.pop(key, frame.iloc[:0])
        if set(panel["prompt_id"]) != set(drawn["prompt_id"]):
            raise ValueError(
                f"panel_sample: the panel's votes of cell {cell_name(*key)} are not the sample drawn from its "
                f"local votes ({len(panel)} judged, {len(drawn)} drawn with seed {settings.seed}): rerun "
                "the panel's judge jobs (snakemake panel_calibrate)")
        local = panel_outcomes(frame)
        gold = panel_outcomes(panel).rename(columns={"judge": "human"})
        joined = local.merge(gold[["prompt_id", "metric", "human"]], on=["prompt_id", "metric"], how="left")
        sampled = joined["prompt_id"].isin(set(drawn["prompt_id"]))
        joined["annotation_id"] = joined["prompt_id"].where(sampled)
        joined["n_annotators"] = joined["human"].notna().astype("int64")
        parts.append(joined)
    if panels:
        raise ValueError(f"panel_sample: panel votes for cells with no local votes: "
                         f"{', '.join(cell_name(*k) for k in panels)}")
    if not parts:
        return pd.DataFrame(columns=CALIBRATION_ITEMS.names)
    joined = pd.concat(parts, ignore_index=True)
    joined["judge"] = joined["judge"].astype("float64")
    joined["human"] = joined["human"].astype("float64")
    return joined[CALIBRATION_ITEMS.names]


def drawn_items(joined: pd.DataFrame) -> pd.DataFrame:
    """One row per sampled question (cell keys and its id): the draw's size per cell, as the
    calibration estimates count it."""
    sampled = joined[joined["annotation_id"].notna()]
    return sampled[[*CELL_COLUMNS, "annotation_id"]].drop_duplicates().reset_index(drop=True)


def sample_note(settings: PanelSampleSettings, joined: pd.DataFrame) -> str:
    """The tables' note: who judged what, and how the sample was drawn."""
    drawn = drawn_items(joined)
    size = (f"{settings.items_per_cell} questions per cell" if settings.items_per_cell is not None
            else f"{settings.fraction:.0%} of each cell's questions (at least 2)")
    return (f"The panel ({', '.join(settings.judges)}) judged a random sample of {size}, drawn with seed "
            f"{settings.seed} ({len(drawn)} questions in all; results/panel_sample/votes); the local judges "
            f"({', '.join(settings.local_judges)}) judged every question and make the study's votes. "
            + ("The gold is that judge's verdict; a question it gave none counts as unlabelled." if len(settings.judges) == 1
               else "The gold is the panel's strict majority; a sampled question on which the panel tied counts as "
                    "unlabelled."))
