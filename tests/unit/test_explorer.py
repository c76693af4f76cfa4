"""The item explorer's table: every metric cell's items are its ``n`` questions, with the value's
numerator (a release's Table 4: its ``n`` published vote lines, planted repeats and a line no
original wrote included); transitions agree with Table 6; the data file round-trips; bad input
is named."""

from __future__ import annotations

from collections import Counter
from urllib.parse import parse_qs, parse_qsl

import pandas as pd
import pytest

from bloomqg.judges.verdict import NOT_JUDGED, NOT_LEARNED, missing_vote
from bloomqg.metrics.cell import score_cell
from bloomqg.metrics.registry import SPEC_BY_NAME
from bloomqg.store.parquet_io import read_frame, read_frames, write_frame
from bloomqg.reporting.display import CRITERION_LABEL, strategy_label
from bloomqg.reporting.explorer.encode import data_script, decode_data_script, encode_table
from bloomqg.reporting.explorer.items import (
    JOINED,
    LINE_ROW,
    METRIC_COLUMN_PREFIX,
    NO_ORIGINAL,
    QUESTION_ROW,
    REPEATED,
    build_items,
    plain_reason,
    transition,
)
from bloomqg.reporting.explorer.links import explorer_level, items_fragment, metric_fragment, metric_link
from bloomqg.reporting.explorer.write import EXPLORER_FILES, write_explorer_from_files
from bloomqg.store.frames import BINARY_CRITERIA, GENERATIONS, JUDGMENTS, METRICS, PUBLISHED_VOTE_LINES, RELIABILITY, VOTES
from tests.support.judged_study import judged_study
from tests.support.release_slice import ORPHAN, SHARED, THRICE, planted_run, score_run


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return judged_study(tmp_path_factory.mktemp("judged") / "results", n_models=2, n_items=20)


@pytest.fixture(scope="module")
def table(study):
    judgments = [read_frame(path, JUDGMENTS) for path in study.judgment_files]
    generations = read_frames(study.generation_files, GENERATIONS)
    return build_items(study.votes, generations=generations, judgments=judgments, reliability=study.reliability,
                       metrics=study.metrics)


def check_metric_cells(table, metrics: pd.DataFrame) -> dict[str, set[str]]:
    """Each metric cell's items in ``table`` are its ``n`` rows and add up to its value; returns
    metric -> the kinds of row (column ``row``) its items are."""
    frame = pd.DataFrame({key: table.values[key] for key in ("dataset", "strategy", "model")})
    kinds = pd.Series(table.values.get("row", [QUESTION_ROW] * len(table)))
    seen: dict[str, set[str]] = {}
    for row in metrics.itertuples(index=False):
        terms = pd.Series(table.values[METRIC_COLUMN_PREFIX + row.metric], dtype=float)
        mine = (frame["dataset"] == row.dataset) & (frame["strategy"] == strategy_label(row.strategy)) & (
            frame["model"] == row.model)
        members = terms[mine].dropna()
        assert len(members) == row.n, (row.model, row.dataset, row.strategy, row.metric)
        spec = SPEC_BY_NAME[row.metric]
        if row.n and spec.kind == "percent":
            assert members.sum() / row.n * 100 == pytest.approx(row.value), row.metric
        elif row.n and spec.kind == "sum":
            assert members.sum() == pytest.approx(row.value), row.metric
        seen.setdefault(row.metric, set()).update(kinds[members.index])
    return seen


def test_each_metric_cell_links_to_its_n_items_and_its_value(study, table):
    kinds = check_metric_cells(table, study.metrics)
    assert len(study.metrics) > 50 and set(kinds) == set(study.metrics["metric"])
    assert "row" not in table.values and "line" not in table.values, "a study's explorer has questions only"


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Two cells of a hand-made release run with repeats and an orphan line: the α gate flags
    one, drops the failed criteria (unique, knowledge units) of the other."""
    folder = tmp_path_factory.mktemp("planted")
    scored = [score_run(planted_run(folder, model), gate_action=action, n_resamples=5)
              for model, action in (("flagged", "flag"), ("dropped", "drop"))]
    votes, reliability, metrics, lines = (pd.concat(frames, ignore_index=True) for frames in zip(*scored))
    return votes, reliability, metrics, lines, folder


def test_release_table4_links_to_its_published_lines(planted):
    votes, reliability, metrics, lines, _ = planted
    table = build_items(votes, reliability=reliability, metrics=metrics, lines=lines)
    assert len(table) == len(votes) + len(lines)
    assert table.values["row"] == [QUESTION_ROW] * len(votes) + [LINE_ROW] * len(lines)
    # Counts and values equal the tables' n and value, Table 4's over lines, the rest over questions.
    kinds = check_metric_cells(table, metrics)
    assert all(kinds[metric] <= {LINE_ROW} for metric in BINARY_CRITERIA)
    assert kinds["unique"] == kinds["readable"] == {LINE_ROW}
    assert all(kinds[metric] == {QUESTION_ROW} for metric in set(kinds) - set(BINARY_CRITERIA) if kinds[metric])
    flagged = metrics[metrics["model"] == "flagged"].set_index("metric")
    assert flagged.loc["unique", "n"] == 25, "24 originals, 22 judged, on 25 lines"
    # The join says otherwise: each judged original counted once, with its own line (the two
    # extra lines of THRICE and the orphan line are no original's).
    joined = score_cell(votes[votes["model"] == "flagged"], reliability, n_resamples=5).set_index("metric")
    assert joined.loc["unique", "n"] == 22 and joined.loc["unique", "value"] != pytest.approx(flagged.loc["unique", "value"])
    dropped = metrics[metrics["model"] == "dropped"].set_index("metric")
    assert dropped.loc["unique", "n"] == 0 and dropped.loc["readable", "n"] == 25, "the gate dropped unique"
    gated = lines[lines["model"] == "dropped"]
    assert gated[["unique", "unique_agreement"]].isna().all().all() and gated["unique_votes"].notna().all()

    def rows(model, text):
        return [i for i, (m, q) in enumerate(zip(table.values["model"], table.values["new_question"]))
                if m == model and q == text]

    shared, thrice, orphan = (rows("flagged", text) for text in (SHARED, THRICE, ORPHAN))
    kind = table.values["row"]
    assert [kind[i] for i in shared] == [QUESTION_ROW] * 2 + [LINE_ROW] * 2
    assert [table.values["line"][i] for i in shared] == ["4", "5", "4", "5"], "each original keeps its own line"
    assert [table.values["joined"][i] for i in shared[2:]] == [JOINED, JOINED]
    assert [table.values["unique"][i] for i in shared] == ["yes", "no", "yes", "no"]
    assert [table.values["joined"][i] for i in thrice] == [None, JOINED, REPEATED, REPEATED]
    assert [kind[i] for i in orphan] == [LINE_ROW] and table.values["joined"][orphan[0]] == NO_ORIGINAL
    assert table.values["line"][orphan[0]] == "25" and table.values[METRIC_COLUMN_PREFIX + "unique"][orphan[0]] == 0.0
    # A line shows its three judges' votes and majority per criterion.
    line = shared[3]
    assert [table.values[f"v.judge {k}.unique"][line] for k in (1, 2, 3)] == ["no", "no", "yes"]
    assert table.values["agree.unique"][line] == "67%" and table.values["judged_units"][line] == ["Stacks"]
    assert table.values["prompt_id"][line] is None and table.values["useful"][line] is None


def test_release_explorer_from_the_workflow_files(planted, tmp_path):
    votes, reliability, metrics, lines, _ = planted
    files = {}
    for model, frame in votes.groupby("model"):
        for name, data, schema in (("votes", frame, VOTES), ("lines", lines[lines["model"] == model], PUBLISHED_VOTE_LINES),
                                   ("reliability", reliability[reliability["model"] == model], RELIABILITY)):
            write_frame(data, tmp_path / f"{model}.{name}.parquet", schema)
            files.setdefault(name, []).append(tmp_path / f"{model}.{name}.parquet")
    write_frame(metrics, tmp_path / "metrics.parquet", METRICS)
    write_explorer_from_files(tmp_path / "explorer", votes=files["votes"], generations=[], judgments=[],
                              reliability=files["reliability"], metrics=tmp_path / "metrics.parquet", title="t",
                              lines=files["lines"])
    document = decode_data_script((tmp_path / "explorer" / "data.js").read_text())
    assert document["n"] == len(votes) + len(lines)
    assert document["cells"]["cs/cot/flagged"]["lines"] == str(tmp_path / "flagged.lines.parquet")
    row = next(c for c in document["columns"] if c["key"] == "row")
    assert row["dict"] == [QUESTION_ROW, LINE_ROW] and row["group"] == "Row"
    with pytest.raises(ValueError, match="without their join"):
        build_items(votes, lines=lines.assign(joined=None))
    with pytest.raises(ValueError, match="cells without votes"):
        build_items(votes[votes["model"] == "flagged"], lines=lines)


def test_transitions_agree_with_the_shift_metrics(table):
    kinds = {"cogreg": "regression", "cogdrift": "drift", "cogleap": "leap"}
    for metric, name in kinds.items():
        counted = [t for t, x in zip(table.values["transition"], table.values[METRIC_COLUMN_PREFIX + metric]) if x == 1]
        assert counted and set(counted) == {name}
    catcons = table.values[METRIC_COLUMN_PREFIX + "catcons"]
    for t, x in zip(table.values["transition"], catcons):
        if x is not None:
            assert (t == "match") == (x == 1)


def test_transition_rule():
    assert transition("Apply", "Apply", None) == "match"
    assert transition("Apply", "Analyze", None) == "drift"
    assert transition("Apply", "Remember", None) == "regression"
    assert transition("Remember", "Apply", None) == "leap"
    assert transition(None, None, "uncategorized") == "match"
    assert transition("Apply", None, "uncategorized") == "uncategorized"
    assert transition("Apply", None, "tie") == "—"


def test_judges_votes_reasons_and_gate_per_item(study, table):
    assert table.judges == ["rules", "minilm", "smollm2"]
    failed = [i for i, issues in enumerate(table.values["judge_issues"]) if issues != ["none"]]
    assert failed, "the study has judge parse failures"
    first = failed[0]
    assert not any(table.values[f"v.{judge}.{criterion}"][first] == "None" for judge in table.judges
                   for criterion in ("unique", "readable", "answerable", "bloom_level", "knowledge_units"))
    assert "— parse failed" in [table.values[f"v.smollm2.{c}"][first] for c in ("unique", "readable", "answerable",
                                                                                 "bloom_level", "knowledge_units")]
    assert any(issue.startswith("smollm2 · ") and issue.endswith(": parse failed") for issue in table.values["judge_issues"][first])
    notes = [table.values[f"r.smollm2.{c}"][first] for c in ("unique", "readable", "answerable", "bloom_level", "knowledge_units")]
    assert any(note and "no JSON object" in note for note in notes)
    gated = study.reliability[study.reliability["judge"].isna() & (study.reliability["gate_passed"] == False)]  # noqa: E712
    assert any(gate != ["passed"] for gate in table.values["gate"]) == (not gated.empty)
    no_question = [i for i, q in enumerate(table.values["new_question"]) if q is None]
    assert no_question and all(table.values["parse"][i] != "ok" for i in no_question)
    assert all(table.values["generation_raw"][i] for i in no_question), "an unparsed generation shows its answer"


def test_a_judge_that_abstains_reads_abstains_and_the_failures_are_the_reports(study, table):
    """minilm does not rate readable, rules abstains where no rule applies: neither is an error,
    and the explorer's judge failures per judge and criterion are the report's parse-failure
    rate (reliability) times the questions asked."""
    cells = [table.values[f"v.{judge}.{criterion}"][i] for judge in table.judges for criterion in
             ("unique", "readable", "answerable", "bloom_level", "knowledge_units") for i in range(len(table))]
    assert not any("error" in str(cell) for cell in cells), "no status-error verdict reads as an error"
    assert "— does not rate this" in table.values["v.minilm.readable"]
    abstaining = Counter(value for values in table.values["judge_abstentions"] for value in values)
    assert abstaining[f"minilm · Readable: does not rate this"] > 0
    failures = Counter(value for values in table.values["judge_issues"] for value in values)
    assert not [issue for issue in failures if issue.startswith(("minilm", "rules"))]
    judges = study.reliability[study.reliability["judge"].notna()]
    failed = (judges["parse_failure_rate"].fillna(0) * judges["n_items"]).round().astype(int)
    expected = failed.groupby([judges["judge"], judges["criterion"]]).sum()
    assert expected.sum() > 0, "the study has parse failures to count"
    for (judge, criterion), count in expected.items():
        assert failures[f"{judge} · {CRITERION_LABEL[criterion]}: parse failed"] == count, (judge, criterion)


def test_the_explorer_says_its_terms_in_words(table):
    """Level shift, the agreement check, why a model stopped and a question's ID carry a legend;
    the shift's says what it counts over (the report's figures: useful questions only)."""
    columns = {column.key: column for column in table.columns}
    assert "useful questions only" in columns["transition"].help and "Figure 3" in columns["transition"].help
    assert "Krippendorff" in columns["gate"].help and "cs-0001:cot is item cs-0001 under CoT" in columns["prompt_id"].help
    assert set(table.values["finish_reason"]) <= {"finished", "ran out of tokens", "—"}
    assert "token budget" in columns["finish_reason"].help
    back = decode_data_script(data_script(encode_table(table, title="t")))
    assert next(c for c in back["columns"] if c["key"] == "transition")["help"] == columns["transition"].help


def test_a_judges_measures_read_in_words():
    rules = plain_reason("token_jaccard=0.33 (max 0.7), char_ratio=0.44 (max 0.85)")
    assert rules.startswith("shares 33% of its words with the original (a copy at 70% or more)")
    assert "(recorded: token_jaccard=0.33" in rules
    cosine = plain_reason("cosine to original 0.660 (threshold 0.95)")
    assert cosine.startswith("similarity of meaning to the original 0.66 (1 = the same meaning; a copy at 0.95 or more)")
    assert plain_reason("verb list") == "verb list"


@pytest.mark.parametrize(("status", "reason", "shown"), [
    ("ok", None, None), ("no_question", "generation produced no question", "no question"),
    ("parse_failed", "no JSON object", "parse failed"), ("error", "judge call failed: timeout", "call failed"),
    ("error", "grader call failed: no answer", "call failed"), ("error", NOT_JUDGED, "does not rate this"),
    ("error", NOT_LEARNED, "does not rate this"), ("error", "no Bloom verb and no known question word: not guessed", "abstains"),
    ("error", "abstained: confidence 0.41 below 0.5 (…)", "abstains"),
])
def test_why_a_judge_cast_no_vote(status, reason, shown):
    assert missing_vote(status, reason) == shown


def test_data_file_round_trips_and_is_deterministic(table):
    document = encode_table(table, title="t")
    text = data_script(document)
    assert data_script(encode_table(table, title="t")) == text
    back = decode_data_script(text)
    assert back["n"] == len(table)
    column = next(c for c in back["columns"] if c["key"] == "original_question")
    assert len(column["dict"]) < len(table) / 2, "originals shared by models and strategies are stored once"
    decoded = [None if code < 0 else column["dict"][code] for code in column["codes"]]
    assert decoded == table.values["original_question"]
    units = next(c for c in back["columns"] if c["key"] == "target_units")
    assert [[units["dict"][x] for x in row] for row in units["codes"]] == table.values["target_units"]


def test_explorer_files_from_the_workflow_files(study, tmp_path):
    paths = write_explorer_from_files(
        tmp_path / "explorer", votes=study.vote_files, generations=study.generation_files,
        judgments=study.judgment_files, reliability=study.reliability_files, metrics=study.metrics_file, title="t",
    )
    assert [p.name for p in paths] == list(EXPLORER_FILES)
    document = decode_data_script((tmp_path / "explorer" / "data.js").read_text())
    cell = document["cells"]["cs/fgp/glm-4-9b"]
    assert cell["generations"]["provenance"]["generator"]["revision"] == "0123abc"
    prompt_hashes = next(c for c in document["columns"] if c["key"] == "prompt_hash")["dict"]
    assert prompt_hashes == ["0123456789abcdef"], "each item names its prompt's hash"
    assert "package_versions" not in cell["generations"]["provenance"]
    assert [j["judge"] for j in cell["judges"]] == ["rules", "minilm", "smollm2"]
    assert cell["judges"][0]["provenance"]["judge_prompt_hash"] == "fedcba9876543210"
    html = (tmp_path / "explorer" / "index.html").read_text()
    assert '<script src="data.js">' in html and "http" not in html


def test_links_encode_the_cell_and_metric():
    fragment = metric_fragment("glm 4/9b", "cs", "fgp", "catcons", show="rest")
    assert parse_qs(fragment) == {"f.model": ["glm 4/9b"], "f.dataset": ["cs"], "f.strategy": ["FGP"],
                                  "m": ["catcons"], "mv": ["rest"]}
    assert metric_link(("m", "cs", "cot", "unique")).startswith("explorer/index.html#f.model=m&")
    with pytest.raises(ValueError, match="show must be"):
        metric_fragment("m", "cs", "cot", "unique", show="wrong")


def test_level_filters_and_fragments_of_any_filters():
    assert explorer_level("Uncategorized", "target_level") == "—"  # an original without a level
    assert explorer_level("Uncategorized", "judged_level") == "Uncategorized"  # a judge's verdict
    assert explorer_level("Apply", "identified_level") == "Apply"
    with pytest.raises(ValueError, match="level column"):
        explorer_level("Apply", "transition")
    fragment = items_fragment([("model", "m"), ("target_level", "—")], "catcons")
    assert parse_qsl(fragment) == [("f.model", "m"), ("f.target_level", "—"), ("m", "catcons")]
    with pytest.raises(ValueError, match="needs a metric"):
        items_fragment([("model", "m")], show="rest")


def _explorer_count(table, fragment: str) -> int:
    """The rows the page keeps for a fragment: every filter's column holds one of its values and,
    with ``m``, the metric's term is not null (explorer.js ``filterMasks``, for one-value columns)."""
    pairs = parse_qsl(fragment)
    filters: dict[str, set[str]] = {}
    for key, value in pairs:
        if key.startswith("f."):
            filters.setdefault(key[2:], set()).add(value)
    metric = dict(pairs).get("m")
    keep = [all(table.values[key][r] in values for key, values in filters.items())
            and (metric is None or table.values[METRIC_COLUMN_PREFIX + metric][r] is not None)
            for r in range(len(table))]
    return sum(keep)


def test_every_figure_mark_opens_as_many_items_as_it_stands_for(study, table):
    """Each linked bar, heat-map cell, band and node of the figures: the explorer's rows for its
    fragment are its n; a bar of a metric value is that value's n in the metrics frame."""
    import matplotlib

    from bloomqg.reporting.figures.links import linked_marks
    from bloomqg.reporting.figures.style import STYLE
    from bloomqg.reporting.figures.write import _BUILDERS

    n_of = study.metrics.set_index(["model", "dataset", "strategy", "metric"])["n"]
    checked: dict[str, int] = {}
    with matplotlib.rc_context(STYLE):
        for stem, build in _BUILDERS.items():
            for _, link in linked_marks(build(study.metrics, study.votes, study.reliability, None)):
                assert _explorer_count(table, link.fragment) == link.n, (stem, link)
                query = dict(parse_qsl(link.fragment))
                if set(query) == {"f.model", "f.dataset", "f.strategy", "m"}:
                    strategy = query["f.strategy"].lower()
                    assert link.n == n_of[(query["f.model"], query["f.dataset"], strategy, query["m"])], link
                checked[stem] = checked.get(stem, 0) + 1
    assert set(checked) == {"fig2_transitions", "fig3_shift_scores", "fig4_knowledge_id", "fig6_confusion",
                            "parse_failures"}, checked
    # minilm rates no readable or answerable (as in the default study): fewer useful questions, fewer marks
    assert sum(checked.values()) > 120, checked


def test_a_band_to_a_judged_uncategorized_opens_its_items(study):
    """A judge's "Uncategorized" verdict is a level of its own in Figure 2 and in the explorer."""
    import matplotlib

    from bloomqg.metrics.rows import JUDGED_UNCATEGORIZED
    from bloomqg.reporting.figures.links import linked_marks
    from bloomqg.reporting.figures.style import STYLE
    from bloomqg.reporting.figures.transitions import plot_transitions

    votes = study.votes.copy()
    chosen = votes.index[(votes["useful"] == True) & votes["bloom_level"].notna()][:5]  # noqa: E712
    votes.loc[chosen, "bloom_level"] = None
    votes.loc[chosen, "bloom_level_null_reason"] = JUDGED_UNCATEGORIZED
    table = build_items(votes)
    with matplotlib.rc_context(STYLE):
        links = [link for _, link in linked_marks(plot_transitions(votes))]
    uncategorized = [link for link in links if "judged Uncategorized" in link.label]
    assert sum(link.n for link in uncategorized if "→" not in link.label) == 5
    for link in links:
        assert _explorer_count(table, link.fragment) == link.n, link


def test_bad_votes_are_named(study):
    with pytest.raises(ValueError, match=r"explorer: the votes lack columns \['useful'\]"):
        build_items(study.votes.drop(columns=["useful"]))
    with pytest.raises(ValueError, match="repeat a"):
        build_items(pd.concat([study.votes.head(2), study.votes.head(1)]))


def test_strategies_are_shown_by_their_labels_and_the_links_use_the_same(study):
    from urllib.parse import parse_qsl

    labels = {"cot": "Chain of thought", "fgp": "Fine-grained"}
    table = build_items(study.votes, metrics=study.metrics, strategy_labels=labels)
    assert set(table.values["strategy"]) == set(labels[s] for s in study.votes["strategy"].unique())
    document = decode_data_script(data_script(encode_table(table, title="t")))
    # the page maps a cell key's strategy name to the label its strategy column and filters show
    assert document["strategy_labels"] == {s: labels[s] for s in study.votes["strategy"].unique()}
    strategy = study.votes["strategy"].iloc[0]
    fragment = dict(parse_qsl(metric_fragment("m", "cs", strategy, "usability", strategy_labels=labels)))
    assert fragment["f.strategy"] == labels[strategy]
    # without labels: the built-ins' own, and an unknown strategy by its name as written
    assert build_items(study.votes.assign(strategy="zeroshot")).values["strategy"][0] == "zeroshot"
