"""The HTML report: self-contained, escaped, complete; readings computed from the data."""

from __future__ import annotations

import hashlib
import html.parser
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from bloomqg.store.parquet_io import to_table
from bloomqg.reporting.examples import question_examples
from bloomqg.reporting.figures.write import FIGURE_STEMS
from bloomqg.reporting.provenance_view import ledger_view, provenance_entries
from bloomqg.reporting.readings import gate_summary, strategy_effect
from bloomqg.reporting.report import SCREEN_SCALE, ReportInputError, _figure_entries, build_report
from bloomqg.reporting.tables.write import TABLE_STEMS, write_tables
from bloomqg.store.frames import METRICS
from bloomqg.inputs.strategies import ComparisonSpec
from tests.support.synthetic import synthetic_study

HOSTILE = "<script>alert('x')</script> & <img src=http://example.com/x.png>"


class _Collector(html.parser.HTMLParser):
    """Tags and attributes of a page, to check what a browser would load."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _tiny_pngs(out: Path) -> list[Path]:
    """Stand-in figure files (the report only inlines them; figures have their own tests)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for stem in FIGURE_STEMS:
        buffer = io.BytesIO()
        Image.new("RGB", (40, 30), "white").save(buffer, format="PNG")
        (out / f"{stem}.png").write_bytes(buffer.getvalue())
        (out / f"{stem}.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
        paths += [out / f"{stem}.png", out / f"{stem}.svg"]
    return paths


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    study = synthetic_study(n_models=3, n_items=16)  # ≥ 15 items: cs then has an Uncategorized original
    votes = study.votes.copy()
    first = votes.index[votes["new_question"].notna()][0]
    votes.loc[first, "new_question"] = HOSTILE
    votes.loc[first, "original_question"] = HOSTILE
    out = tmp_path_factory.mktemp("report")
    table_paths = write_tables(study.metrics, study.datasets, study.reliability, out / "tables", paired=study.paired)
    figure_paths = _tiny_pngs(out / "figures")
    path = out / "report.html"
    build_report(
        path, config=study.config, all_metrics=study.metrics, votes=votes, reliability=study.reliability,
        generations=study.generations, generation_provenance=study.generation_provenance,
        judgment_provenance=study.judgment_provenance, ledger=study.ledger, table_paths=table_paths,
        figure_paths=figure_paths, correlations=study.correlations, paired=study.paired,
        git_commit="c0ffee", package_versions={"pandas": "3.0.0", "snakemake": "9.1"},
    )
    page = path.read_text(encoding="utf-8")
    collector = _Collector()
    collector.feed(page)
    return {"study": study, "page": page, "tags": collector.tags, "text": "".join(collector.text)}


def test_report_is_self_contained(built):
    tags = built["tags"]
    assert not [t for t, _ in tags if t in ("script", "link", "iframe", "object")]
    images = [attrs["src"] for tag, attrs in tags if tag == "img"]
    assert len(images) == len(FIGURE_STEMS)
    assert all(src.startswith("data:image/png;base64,") for src in images)
    hrefs = [attrs.get("href", "") for _, attrs in tags if "href" in attrs]
    assert all(h.startswith("#") for h in hrefs), hrefs


def test_model_text_is_escaped(built):
    assert HOSTILE not in built["page"]
    assert "&lt;script&gt;alert(" in built["page"]
    assert HOSTILE in built["text"]  # shown to the reader as text


def test_every_table_and_figure_is_present_with_a_reading(built):
    page = built["page"]
    for stem in TABLE_STEMS:
        assert f'id="table-{stem}"' in page, stem
    for stem in FIGURE_STEMS:
        assert f'id="figure-{stem}"' in page, stem
    assert page.count('class="reading"') >= len(FIGURE_STEMS) + 5


def test_config_provenance_and_ledger_are_shown(built):
    text = built["text"]
    assert "gate:" in text and "alpha: 0.7" in text  # the config as YAML
    assert "c0ffee" in text and "snakemake" in text
    assert "example/glm-4-9b" in text  # a generation's model id
    cost = built["study"].ledger["cost_usd"].sum()
    assert f"{cost:,.4f}" in text


def test_gate_failures_are_listed(built):
    assert "failed the gate" in built["text"]
    assert "qwen2.5-7b" in built["text"]


def test_strategy_effect_sentence():
    frame = pd.DataFrame([
        {"model": m, "dataset": "cs", "strategy": s, "metric": "catcons", "value": v, "ci_low": None,
         "ci_high": None, "n": 10, "ci_method": None, "alpha_gated": False}
        for m, s, v in [("a", "cot", 30.0), ("a", "fgp", 35.0), ("b", "cot", 40.0), ("b", "fgp", 38.0),
                        ("c", "fgp", 50.0)]
    ])
    to_table(frame, METRICS)
    assert strategy_effect(frame, "catcons") == (
        "On cs, FGP raised CatCons against CoT for 1 of 2 models and lowered it for 1; the largest change was a (+5.00 pp, over n = 10 (CoT) and 10 (FGP) questions)."
        " (Each cell's own value, not a comparison: the Answer tests it on the originals with a value under both strategies.)"
    )
    same = frame.assign(value=10.0)
    assert strategy_effect(same, "catcons").startswith("On cs, CatCons has equal values under CoT and FGP for each of the 2 models.")
    assert strategy_effect(frame[frame["strategy"] == "fgp"], "catcons") is None
    one_model = strategy_effect(frame[frame["model"] == "a"], "catcons")
    # one model: the two values, not a signed difference that reads as a finding
    assert one_model.startswith("On cs, CatCons is 30.00% under CoT (n = 10) and 35.00% under FGP (n = 10).")


def test_strategy_effect_covers_every_pair_with_labels():
    rows = [("a", "cot", 30.0), ("a", "fgp", 35.0), ("a", "zeroshot", 29.0),
            ("b", "cot", 40.0), ("b", "fgp", 38.0), ("b", "zeroshot", 40.0)]
    frame = pd.DataFrame([
        {"model": m, "dataset": "cs", "strategy": s, "metric": "catcons", "value": v, "ci_low": None,
         "ci_high": None, "n": 10, "ci_method": None, "alpha_gated": False} for m, s, v in rows])
    labels = {"cot": "CoT", "fgp": "FGP", "zeroshot": "Zero-shot"}
    text = strategy_effect(frame, "catcons", labels)
    assert "On cs, FGP raised CatCons against CoT" in text
    assert "On cs, Zero-shot raised CatCons against CoT for 0 of 2 models and lowered it for 1; " \
           "the largest change was a (-1.00 pp, over n = 10 (CoT) and 10 (Zero-shot) questions)." in text
    every = strategy_effect(frame, "catcons", labels, ComparisonSpec(all_pairs=True))
    assert "Zero-shot raised CatCons against FGP" in every and "ZEROSHOT" not in every
    chosen = strategy_effect(frame, "catcons", labels, ComparisonSpec(baseline="zeroshot"))
    assert chosen.startswith("On cs, CoT raised CatCons against Zero-shot")


def test_gate_summary_states_the_action():
    study = synthetic_study(n_models=2, n_items=6, cells={"cs": ("cot",)})
    flagged = gate_summary(study.reliability)
    assert len(flagged["failures"]) == 1 and "marked †" in flagged["effect"]
    dropped = gate_summary(study.reliability.assign(gate_action="drop"))
    assert "were removed" in dropped["effect"]
    passed = gate_summary(study.reliability.assign(gate_passed=True))
    assert passed["failures"] == [] and "10 reliable" in passed["effect"] and "Nothing was flagged" in passed["effect"]


def test_examples_one_per_model_level_dataset_strategy(built):
    study = built["study"]
    examples = question_examples(study.votes, study.generations)
    assert [m["model"] for m in examples] == list(dict.fromkeys(study.votes["model"]))
    for model in examples:
        for level in model["levels"]:
            cells = [(e["dataset"], e["strategy"], e["hit"]) for e in level["examples"]]
            assert len(cells) == len(set(cells)) <= 10  # one hit and one miss per dataset × strategy
            for e in level["examples"]:  # a hit is judged at the original's level
                assert (e["judged_level"] == e["original_level"]) == e["hit"] or not e["hit"]
    apply_cells = {(e["dataset"], e["strategy"]) for level in examples[0]["levels"] if level["level"] == "Apply"
                   for e in level["examples"]}
    assert ("math", "FGP") in apply_cells and ("cs", "CoT") in apply_cells
    levels = {level["level"] for level in examples[0]["levels"]}
    assert "Uncategorized" in levels  # cs has originals the verb list could not place
    failures = [f for m in examples for f in m["failures"]]
    assert failures and all(f["raw_text"] for f in failures)


def test_provenance_entries_are_named_and_merged():
    generation = {"model_name": "smollm2", "generator": {"model": "HF/SmolLM2"}, "prompt_hashes": ["25b398aea49a8619"],
                  "stage": "generate_questions", "package_versions": {"torch": "2"}}
    entries = provenance_entries([generation, dict(generation), {"judge": "rules"}])
    assert [e["title"] for e in entries] == [
        "smollm2 · HF/SmolLM2 · generate_questions · prompt 25b398aea49a", "rules"]
    assert entries[0]["count"] == 2
    assert ("generator.model", "HF/SmolLM2") in entries[0]["items"]
    assert not any(key.startswith("package_versions") for key, _ in entries[0]["items"])  # shown once, globally
    # the report puts each generation file's cell first, which names the block after the model
    [labelled] = provenance_entries([{"cell": "cs, CoT", **generation}])
    assert labelled["title"] == "smollm2 · cs, CoT · HF/SmolLM2 · generate_questions · prompt 25b398aea49a"


def test_ledger_totals():
    ledger = pd.DataFrame({
        "judge": ["a", "a", None], "model": "m", "dataset": "d", "strategy": "cot", "requests": [1, 2, 3],
        "cached": [0, 1, 0], "prompt_tokens": [10, 20, 30], "completion_tokens": [1, 2, 3],
        "cost_usd": [0.5, 0.25, 0.0],
    })
    view = ledger_view(ledger)
    assert view["total"]["requests"] == 6 and view["total"]["cost_usd"] == 0.75
    assert [row["judge"] for row in view["per_judge"]] == ["a", "generator m"]


def test_figures_are_sized_for_the_screen(built):
    sizes = [(attrs["width"], attrs["height"]) for tag, attrs in built["tags"] if tag == "img"]
    assert sizes and all((w, h) == (str(round(40 * SCREEN_SCALE)), str(round(30 * SCREEN_SCALE)))
                         for w, h in sizes)


def test_a_figure_that_is_not_a_png_is_a_clear_error(tmp_path):
    (tmp_path / "fig.png").write_text("not an image")
    with pytest.raises(ReportInputError, match="fig.png is not a PNG image"):
        _figure_entries([tmp_path / "fig.png"], {})


def test_an_image_of_another_format_named_png_is_a_clear_error(tmp_path):
    Image.new("RGB", (4, 3), "white").save(tmp_path / "fig.png", format="JPEG")
    with pytest.raises(ReportInputError, match="fig.png is not a PNG image"):
        _figure_entries([tmp_path / "fig.png"], {})


def test_missing_figure_file_is_a_clear_error(built, tmp_path):
    study = built["study"]
    with pytest.raises(ReportInputError, match="nowhere.png does not exist"):
        build_report(
            tmp_path / "r.html", config={}, all_metrics=study.metrics, votes=study.votes,
            reliability=study.reliability, generations=study.generations, generation_provenance=[],
            judgment_provenance=[], ledger=study.ledger, table_paths=[], figure_paths=[tmp_path / "nowhere.png"],
            git_commit=None, package_versions={},
        )
    assert not (tmp_path / "r.html").exists()


def _linked_figure(out: Path, sha256: str | None = None) -> list[Path]:
    """A PNG with its ``.links.json``: a bar box and a band outline."""
    out.mkdir(parents=True, exist_ok=True)
    png = out / "fig3_shift_scores.png"
    Image.new("RGB", (400, 300), "white").save(png, format="PNG")
    links = [
        {"fragment": "f.model=m&f.dataset=cs&f.strategy=CoT&m=cogreg_mean", "label": "mean CogReg shift of m, cs, CoT",
         "n": 7, "box": [0.1, 0.2, 0.05, 0.3]},
        {"fragment": "f.model=m&f.dataset=cs&f.strategy=CoT&f.target_level=Apply&f.judged_level=Create&m=catcons",
         "label": "m, cs, CoT: original Apply → judged Create", "n": 1, "box": [0.5, 0.5, 0.2, 0.1],
         "shape": [[0, 1], [1, 0], [1, 1], [-0.0001, 1]]},
    ]
    sidecar = out / "fig3_shift_scores.links.json"
    sidecar.write_text(json.dumps({"figure": "fig3_shift_scores", "links": links, "png": {
        "width": 400, "height": 300, "sha256": sha256 or hashlib.sha256(png.read_bytes()).hexdigest()}}))
    return [png, sidecar]


def test_figure_links_become_boxes_in_percent_of_the_image(tmp_path):
    paths = _linked_figure(tmp_path)
    [entry] = _figure_entries(paths, {}, "explorer/index.html")
    bar, band = entry["links"]
    assert bar == {"href": "explorer/index.html#f.model=m&f.dataset=cs&f.strategy=CoT&m=cogreg_mean",
                   "style": "left:10.000%;top:20.000%;width:5.000%;height:30.000%", "n": "7",
                   "title": "mean CogReg shift of m, cs, CoT: open its 7 questions in the item explorer"}
    assert band["style"].endswith(";clip-path:polygon(0.0% 100.0%,100.0% 0.0%,100.0% 100.0%,0.0% 100.0%)")
    assert band["title"].endswith("open its question in the item explorer")
    assert entry["files"] == ["fig3_shift_scores.png"]  # the sidecar is no download of the figure
    assert _figure_entries(paths, {}, None)[0]["links"] == []  # no explorer beside the report: no links
    assert _figure_entries(paths[:1], {}, "explorer/index.html")[0]["links"] == []  # sidecar not given


def test_figure_links_of_another_drawing_are_a_clear_error(tmp_path):
    with pytest.raises(ReportInputError, match="written for another drawing"):
        _figure_entries(_linked_figure(tmp_path, sha256="0" * 64), {}, "explorer/index.html")
    (tmp_path / "fig3_shift_scores.links.json").write_text("{")
    with pytest.raises(ReportInputError, match="figure links .*fig3_shift_scores.links.json"):
        _figure_entries([tmp_path / "fig3_shift_scores.png", tmp_path / "fig3_shift_scores.links.json"], {}, "x")


def test_figure_marks_are_focusable_links_over_the_image(built, tmp_path):
    study = built["study"]
    build_report(
        tmp_path / "r.html", config={}, all_metrics=study.metrics, votes=study.votes,
        reliability=study.reliability, generations=study.generations, generation_provenance=[],
        judgment_provenance=[], ledger=study.ledger, table_paths=[], figure_paths=_linked_figure(tmp_path / "figures"),
        git_commit=None, package_versions={}, explorer_href="explorer/index.html",
    )
    collector = _Collector()
    collector.feed((tmp_path / "r.html").read_text(encoding="utf-8"))
    marks = [attrs for tag, attrs in collector.tags if tag == "a" and attrs.get("class") == "mark"]
    assert [m["data-n"] for m in marks] == ["7", "1"]
    assert all(m["href"].startswith("explorer/index.html#f.model=m&") and m["aria-label"] == m["title"] for m in marks)
    assert not [t for t, _ in collector.tags if t == "script"]


def test_an_imported_release_costs_unknown_not_zero():
    # The release's authors paid its generations and judges; this run paid nothing for them:
    # the card says the cost is unknown, never "$0.0000".
    from bloomqg.reporting.report import cost_card, overview

    study = synthetic_study(n_models=1, n_items=4)
    imported = study.generations.assign(finish_reason="imported")
    card = overview(study.metrics, study.votes, None, imported)
    assert card["cost_value"] == "unknown" and "$0.0000" not in card["cost_label"]
    assert f"unknown for the {len(imported):,} imported generations" in card["cost_label"]
    assert "not by this run" in card["cost_label"]
    own = overview(study.metrics, study.votes, study.ledger, study.generations)
    assert own["cost_value"] == f"${study.ledger['cost_usd'].sum():,.4f}" and "unknown" not in own["cost_label"]
    assert cost_card(0.5, 3) == ("$0.5000 + unknown", cost_card(0.5, 3)[1])
    assert "this run's own API calls, as the spend ledger records them: $0.5000" in cost_card(0.5, 3)[1]


THREE_LABELS = {"cot": "CoT", "fgp": "FGP", "refine": "Refine", "zeroshot": "Zero-shot"}


def test_a_report_of_three_strategies_names_them_by_label_with_raw_and_holm_p(tmp_path):
    from bloomqg.metrics.robustness import ROBUSTNESS_COLUMNS, STRATEGY_COMPARISON

    study = synthetic_study(n_models=2, n_items=8, cells={"cs": ("cot", "fgp", "zeroshot")})
    assert set(study.paired["strategy_b"]) == {"fgp", "zeroshot"}
    table_paths = write_tables(study.metrics, study.datasets, study.reliability, tmp_path / "tables",
                               paired=study.paired, strategy_labels=THREE_LABELS)
    base = {c: None for c in ROBUSTNESS_COLUMNS}
    robustness = pd.DataFrame([
        {**base, "comparison": STRATEGY_COMPARISON, "dataset": "cs", "strategy": "cot", "strategy_b": "zeroshot",
         "model": "glm-4-9b", "metric": "unique", "n_pairs": 8, "value_a": 50.0, "value_b": 80.0,
         "diff": 30.0, "p_value": 4.9e-06, "verdict": "within judge noise",
         "variants": json.dumps({"dawid_skene": [28.0, 1e-5], "without a": [-2.0, 0.5], "without b": [-1.0, 0.6]})},
    ], columns=list(ROBUSTNESS_COLUMNS))
    path = tmp_path / "report.html"
    build_report(
        path, config=study.config, all_metrics=study.metrics, votes=study.votes, reliability=study.reliability,
        generations=study.generations, generation_provenance=study.generation_provenance,
        judgment_provenance=study.judgment_provenance, ledger=study.ledger, table_paths=table_paths,
        figure_paths=_tiny_pngs(tmp_path / "figures"), correlations=study.correlations, paired=study.paired,
        robustness=robustness, git_commit="c0ffee", package_versions={}, strategy_labels=THREE_LABELS,
    )
    collector = _Collector()
    collector.feed(path.read_text(encoding="utf-8"))
    text = "".join(collector.text)
    assert "cs, Zero-shot" in text and "ZEROSHOT" not in text
    assert "Zero-shot − CoT" in text and "FGP − CoT" in text  # the paired table's pairs and the trust row
    assert "p (Holm)" in text and "after Holm" in text  # raw and adjusted p, in the table and its reading
    # the trust legend states both clauses of "within judge noise", and the row says which holds
    assert "(1) the difference is not significant under the majority" in text  # the legend above the table
    assert "(2) whatever its p, leaving out any one of several judges turns its sign" in text
    assert "significant under the majority before Holm's adjustment (raw p < 0.001), but leaving out any of several judges" in text


def test_the_report_says_which_judge_was_trained_on_what():
    from bloomqg.reporting.trust import trained_judges

    learned = {"source": "release", "rows": 3265, "datasets": ["cs", "math"], "rows_sha256": "ab" * 32,
               "cross_validated": {"bloom_level/*": {"n": 2823, "agreement": 0.719, "cohen_kappa": 0.62}}}
    entries = [{"judge": "rules"}, {"judge": "learned", "learned_model": learned},
               {"judge": "learned", "learned_model": learned}]
    assert trained_judges(entries) == [
        "learned is a classifier trained on the paper's release panel votes (3,265 questions of cs, math; rows "
        "sha256 abababababab). Cross-validated by original item, it agreed with its teacher's Bloom level on 71.9% "
        "of 2,823 questions (Cohen's κ 0.62); its teacher is a panel, not experts."]
    assert trained_judges([{"judge": "rules"}]) == []
    # taught by people, not a panel
    (people,) = trained_judges([{"judge": "learned", "learned_model": {**learned, "source": "annotations"}}])
    assert "trained on annotators' majorities" in people and "(Cohen's κ 0.62)." in people and "panel" not in people


def test_a_judge_run_in_another_precision_than_its_model_wrote_in_says_so():
    from bloomqg.reporting.panel import judge_dtypes, judge_lines

    generation = [{"model_name": "small", "generator": {"dtype": "float32"}}]
    judged = [{"judge": "llm", "judge_spec": {"backend": "hf", "model_ref": "small"}, "text_generator": {"dtype": "bfloat16"}},
              {"judge": "same", "judge_spec": {"backend": "hf", "model_ref": "small"}, "text_generator": {"dtype": "float32"}},
              {"judge": "rules", "judge_spec": {"backend": "rules"}}]
    dtypes = judge_dtypes(judged, generation)
    assert dtypes == {"llm": ("bfloat16", "float32")}
    config = {"judges": {"llm": {"backend": "hf", "model_ref": "small"}}, "models": {"small": {"backend": "hf"}}}
    [line], _ = judge_lines(config, pd.DataFrame(columns=["judge", "criterion"]), frozenset({"llm"}), dtypes)
    assert line["description"].endswith(", its weights run in half precision (bfloat16), the model's questions "
                                        "written in full precision (float32).")


def test_provenance_shows_a_mapping_keyed_by_data_as_json_not_as_dotted_keys():
    """A generation's reply-prefix counts are keyed by the prefix's text: a dotted key ending in
    '{"knowledge_unit": "' reads as a path and broke across lines in the default study's report."""
    from bloomqg.reporting.provenance_view import flatten

    items = dict(flatten({"response_prefill": {"enabled": True, "prefixes": {'{"knowledge_unit": "': 36}},
                          "generator": {"model": "m", "dtype": "float32"}}))
    assert items == {"response_prefill.enabled": "true",
                     "response_prefill.prefixes": '{"{\\"knowledge_unit\\": \\"": 36}',
                     "generator.model": "m", "generator.dtype": "float32"}
