"""Paying the panel for a sample (bloomqg/annotation/panel_sample.py): the settings' errors, the
one draw that the panel's judge jobs and the estimates share, and the panel in the humans' place
of the calibration code."""

from __future__ import annotations

import pandas as pd
import pytest

from bloomqg.annotation.calibration import calibrated_estimates, panel_outcomes
from bloomqg.annotation.panel_sample import (
    drawn_items, panel_joined, panel_sample_settings, sample_note, sample_size)
from bloomqg.store.config_schema import ConfigError
from bloomqg.store.frames import CALIBRATION_ITEMS
from tests.support.judged_study import judged_study

JUDGES = {"rules": {"backend": "rules"}, "minilm": {"backend": "embedding"},
          "api-a": {"backend": "openai"}, "api-b": {"backend": "openai"}}


def _settings(**section):
    return panel_sample_settings({"seed": 5, "judges": JUDGES, "panel_sample": section})


def test_the_settings_split_the_judges_and_name_the_key_they_refuse():
    settings = _settings(judges=["api-a", "api-b"], items_per_cell=10)
    assert settings.local_judges == ["rules", "minilm"] and settings.seed == 5
    assert settings.draw_spec == {"items_per_cell": 10, "fraction": None, "seed": 5}
    assert panel_sample_settings({"seed": 5, "judges": JUDGES}) is None
    with pytest.raises(ConfigError, match=r"panel_sample.judges\[1\]: 'gpt' is not a judges entry"):
        _settings(judges=["api-a", "gpt"], items_per_cell=10)
    assert settings.min_valid_votes == 2 and _settings(judges=["api-a"], fraction=0.1).min_valid_votes == 1
    for too_many in (list(JUDGES), ["api-a", "api-b", "minilm"]):
        with pytest.raises(ConfigError, match="keep at least two judges out of the sampled panel"):
            _settings(judges=too_many, fraction=0.1)
    for both_or_neither in ({"items_per_cell": 3, "fraction": 0.2}, {}):
        with pytest.raises(ConfigError, match="exactly one of items_per_cell and fraction"):
            _settings(judges=["api-a"], **both_or_neither)


def test_a_local_judge_trained_on_this_studys_panel_sample_is_refused():
    judges = {**JUDGES, "learned": {"backend": "learned",
                                    "train": {"source": "votes", "votes": ["results/panel_sample/votes"]}}}
    with pytest.raises(ConfigError, match=r"judges.learned.train.votes: .*has seen the gold"):
        panel_sample_settings({"seed": 5, "judges": judges,
                               "panel_sample": {"judges": ["api-a"], "items_per_cell": 3}})


def test_the_sample_size_is_the_count_or_the_rounded_up_fraction_at_least_two():
    assert sample_size(40, {"items_per_cell": 10}) == 10
    assert sample_size(4, {"items_per_cell": 10}) == 4
    assert sample_size(40, {"items_per_cell": None, "fraction": 0.11}) == 5
    assert sample_size(5, {"items_per_cell": None, "fraction": 0.01}) == 2


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return judged_study(tmp_path_factory.mktemp("panel"), n_models=2, n_items=30,
                        cells={"cs": ("cot", "fgp")}, n_resamples=10)


def test_generations_and_votes_give_the_same_draw(study):
    settings = _settings(judges=["api-a"], items_per_cell=7)
    for generations_file, votes_file in zip(study.generation_files, study.vote_files):
        from_generations = settings.draw(pd.read_parquet(generations_file))
        from_votes = settings.draw(pd.read_parquet(votes_file))
        assert len(from_generations) == 7
        assert from_generations["prompt_id"].tolist() == from_votes["prompt_id"].tolist()
    other_seed = _settings(judges=["api-a"], items_per_cell=7, seed=6)
    frame = pd.read_parquet(study.vote_files[0])
    assert set(other_seed.draw(frame)["prompt_id"]) != set(settings.draw(frame)["prompt_id"])


def _panel_votes(votes: list[pd.DataFrame], settings) -> list[pd.DataFrame]:
    """A panel that disagrees with the local judges on unique wherever they gave a verdict."""
    panel = []
    for frame in votes:
        drawn = settings.draw(frame).copy()
        drawn["unique"] = drawn["unique"].map(lambda v: None if pd.isna(v) else not v)
        panel.append(drawn)
    return panel


def test_the_panel_stands_where_people_stood(study):
    settings = _settings(judges=["api-a"], items_per_cell=8)
    votes = [pd.read_parquet(path) for path in study.vote_files]
    joined = panel_joined(votes, _panel_votes(votes, settings), settings)
    assert list(joined.columns) == CALIBRATION_ITEMS.names
    unique = joined[joined["metric"] == "unique"]
    assert len(unique) == sum(int(v["new_question"].notna().sum()) for v in votes)
    labelled = unique[unique["human"].notna()]
    assert (labelled["human"] == 1 - labelled["judge"]).all()  # the flipped panel is the gold
    assert unique.loc[unique["annotation_id"].isna(), "human"].isna().all()
    # the level metrics are the panel's (here the local majority's) outcomes on the sample
    share = joined[(joined["metric"] == "share_apply") & joined["annotation_id"].notna()]
    assert (share["human"].dropna() == share.loc[share["human"].notna(), "judge"]).all()
    assert drawn_items(joined).groupby(["dataset", "strategy", "model"]).size().eq(8).all()

    estimates = calibrated_estimates(joined, drawn_items(joined), pseudo_disagreements=1)
    row = estimates[estimates["metric"] == "unique"].iloc[0]
    cell = (joined["metric"] == "unique") & (joined["model"] == row["model"]) & (joined["strategy"] == row["strategy"])
    gold = joined.loc[cell, "human"].dropna()
    assert row["n"] == len(gold) and row["big_n"] == int(cell.sum())
    assert row["humans"] == pytest.approx(100 * gold.mean())
    assert "8 questions per cell" in sample_note(settings, joined) and "api-a" in sample_note(settings, joined)


def test_panel_votes_that_are_not_the_draw_are_refused(study):
    settings = _settings(judges=["api-a"], items_per_cell=8)
    votes = [pd.read_parquet(path) for path in study.vote_files]
    other = _settings(judges=["api-a"], items_per_cell=8, seed=99)
    with pytest.raises(ValueError, match=r"are not the sample drawn from its local votes .*seed 5"):
        panel_joined(votes, _panel_votes(votes, other), settings)
    with pytest.raises(ValueError, match="panel votes for cells with no local votes"):
        panel_joined(votes[:1], _panel_votes(votes, settings), settings)


def test_the_panels_outcomes_are_the_calibration_outcomes(study):
    settings = _settings(judges=["api-a"], items_per_cell=5)
    frame = pd.read_parquet(study.vote_files[0])
    joined = panel_joined([frame], [settings.draw(frame)], settings)
    sampled = joined[joined["annotation_id"].notna()]
    expected = panel_outcomes(settings.draw(frame)).set_index(["prompt_id", "metric"])["judge"]
    got = sampled.set_index(["prompt_id", "metric"])["human"]
    pd.testing.assert_series_equal(got.sort_index(), expected.loc[got.index].sort_index().astype("float64"),
                                   check_names=False)


def test_a_learned_judges_votes_source_names_what_it_cannot_use(tmp_path):
    from bloomqg.judges.backends.learned import training_vote_files

    def entry(*votes):
        return {"backend": "learned", "train": {"source": "votes", "votes": list(votes)}}

    folder = tmp_path / "earlier" / "votes" / "cs" / "cot"
    folder.mkdir(parents=True)
    (folder / "m.parquet").write_bytes(b"")
    (folder / "m.reliability.parquet").write_bytes(b"")
    assert training_vote_files("learned", entry(str(tmp_path / "earlier"))) == [str(folder / "m.parquet")]
    with pytest.raises(ConfigError, match="needs the votes files"):
        training_vote_files("learned", {"backend": "learned", "train": {"source": "votes"}})
    with pytest.raises(ConfigError, match=r"judges.learned.train.votes\[1\]: .*does not exist"):
        training_vote_files("learned", entry(str(folder / "m.parquet"), str(tmp_path / "nowhere")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no votes file"):
        training_vote_files("learned", entry(str(tmp_path / "empty")))
    with pytest.raises(ConfigError, match="this study's results/"):
        training_vote_files("learned", entry("results/votes"))


def test_the_reports_sentence_counts_the_sample_and_the_shift(study):
    from bloomqg.reporting.readings import panel_sample_reading

    settings = _settings(judges=["api-a"], items_per_cell=8)
    votes = [pd.read_parquet(path) for path in study.vote_files]
    joined = panel_joined(votes, _panel_votes(votes, settings), settings)
    estimates = calibrated_estimates(joined, drawn_items(joined), pseudo_disagreements=1)
    text = panel_sample_reading(estimates)
    questions = sum(int(v["new_question"].notna().sum()) for v in votes)
    assert text.startswith(f"The panel judged {8 * len(votes)} of {questions} questions in {len(votes)} cells.")
    labelled = estimates[estimates["n"] > 0]
    shift = (labelled["ppi"] - labelled["judges"]).abs()
    assert f"median of {shift.median():.1f} points (at most {shift.max():.1f})" in text
    assert f"in 0 of {len(labelled)} metric" not in text or (
        (labelled["ppi_high"] - labelled["ppi_low"]) >= (labelled["humans_high"] - labelled["humans_low"])).all()
    assert panel_sample_reading(estimates.assign(n=0)) is None



def test_a_learned_judges_annotations_source_names_what_it_cannot_use(tmp_path):
    from bloomqg.judges.backends.learned import training_annotation_files

    def entry(**train):
        return {"backend": "learned", "train": {"source": "annotations", **train}}

    key = tmp_path / "items.parquet"
    key.write_bytes(b"")
    (tmp_path / "round").mkdir()
    (tmp_path / "round" / "a.csv").write_text("annotation_id\n")
    assert training_annotation_files("learned", entry(items=str(key), rounds=[str(tmp_path / "round")])) == {
        "annotation_items": [str(key)], "sheets": [str(tmp_path / "round" / "a.csv")]}
    with pytest.raises(ConfigError, match="needs items .* and rounds"):
        training_annotation_files("learned", entry(items=str(key)))
    with pytest.raises(ConfigError, match=r"train.items: .* does not exist"):
        training_annotation_files("learned", entry(items=str(tmp_path / "no.parquet"), rounds=[str(tmp_path / "round")]))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"train.rounds\[0\]: .*holds no filled sheet"):
        training_annotation_files("learned", entry(items=str(key), rounds=[str(tmp_path / "empty")]))
    with pytest.raises(ConfigError, match="this study's results/"):
        training_annotation_files("learned", entry(items="results/annotation/items.parquet", rounds=["annotations"]))
