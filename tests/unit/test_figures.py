"""Figures: the fixed file set, honest no-data panels, legible fonts and correct drawings."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
from urllib.parse import parse_qsl
from xml.etree import ElementTree

import matplotlib
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.metrics.registry import SPEC_BY_NAME
from bloomqg.reporting.explorer.items import _columns
from bloomqg.reporting.figures.bars import plot_knowledge_id, plot_shift_scores
from bloomqg.reporting.figures.confusion import confusion_matrix, plot_confusion
from bloomqg.reporting.figures.correlations import plot_correlations
from bloomqg.reporting.figures.diagnostics import plot_parse_failures, plot_reliability
from bloomqg.reporting.figures.links import FIGURE_EXPLORER_HREF, MIN_BOX_PX, linked_marks
from bloomqg.reporting.figures.style import DPI, LEVEL_COLOR, OKABE_ITO, SHIFT_COLOR, STRATEGY_COLOR, STYLE
from bloomqg.reporting.figures.transitions import draw_alluvial, plot_transitions, spread_labels
from bloomqg.reporting.figures.write import FIGURE_FILES, FIGURE_STEMS, _BUILDERS, save_figure, write_figures
from bloomqg.reporting.display import strategy_label
from tests.support.synthetic import synthetic_study

MIN_FONT_PT = 7


@pytest.fixture(scope="module")
def study():
    return synthetic_study(n_models=3, n_items=12)


@pytest.fixture(scope="module")
def written(study, tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    return out, write_figures(study.metrics, study.votes, study.reliability, study.correlations, out)


def _texts(fig):
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip() and t.get_visible()]


def _all_text(fig) -> str:
    return "\n".join(t.get_text() for t in _texts(fig))


def test_writes_exactly_the_declared_files(written):
    out, paths = written
    assert [p.name for p in paths] == list(FIGURE_FILES)
    assert sorted(p.name for p in out.iterdir()) == sorted(FIGURE_FILES)


def test_png_is_200_dpi_and_svg_is_xml(written):
    out, _ = written
    for stem in FIGURE_STEMS:
        with Image.open(out / f"{stem}.png") as image:
            assert round(image.info["dpi"][0]) == DPI
            assert image.width >= 600 and image.height >= 300
        root = ElementTree.parse(out / f"{stem}.svg").getroot()
        assert root.tag.endswith("svg")


def test_every_text_is_at_least_7_pt(study):
    with matplotlib.rc_context(STYLE):
        for stem, build in _BUILDERS.items():
            fig = build(study.metrics, study.votes, study.reliability, study.correlations)
            small = [(t.get_text(), t.get_fontsize()) for t in _texts(fig) if t.get_fontsize() < MIN_FONT_PT]
            assert not small, f"{stem}: text below {MIN_FONT_PT} pt: {small[:5]}"


def test_single_model_gets_explicit_no_data_panels(tmp_path):
    single = synthetic_study(n_models=1, n_items=8, cells={"cs": ("cot", "fgp")})
    paths = write_figures(single.metrics, single.votes, single.reliability, None, tmp_path)
    assert [p.name for p in paths] == list(FIGURE_FILES)
    with matplotlib.rc_context(STYLE):
        fig = plot_correlations(single.metrics, None)
    text = _all_text(fig)
    assert text.count("No data for this view") == 2 and "needs ≥ 3 models" in text


def test_empty_inputs_draw_no_data_panels(study):
    empty_votes = study.votes.iloc[0:0]
    no_shift = study.metrics[~study.metrics["metric"].str.endswith("_mean")]
    no_reliability = study.reliability.iloc[0:0]
    with matplotlib.rc_context(STYLE):
        for fig in (plot_transitions(empty_votes), plot_confusion(empty_votes),
                    plot_shift_scores(no_shift), plot_reliability(no_reliability),
                    plot_knowledge_id(study.metrics[study.metrics["metric"] != "knowledge_id_acc"])):
            assert "No data for this view" in _all_text(fig)


def test_cells_that_were_not_run_are_labelled(study):
    with matplotlib.rc_context(STYLE):
        fig = plot_shift_scores(study.metrics)
    assert "math, CoT was not run" in _all_text(fig)  # math runs under FGP only
    undefined = study.metrics.copy()
    undefined.loc[undefined["dataset"] == "math", "value"] = float("nan")
    with matplotlib.rc_context(STYLE):
        fig = plot_shift_scores(undefined)
    assert "no shift score" in _all_text(fig)  # run, but every value undefined: said so, not blank


def test_alluvial_band_heights_follow_the_counts():
    from matplotlib.figure import Figure
    from matplotlib.patches import PathPatch, Rectangle

    counts = pd.DataFrame({
        "original_level": ["Remember", "Remember", "Apply", "Create"],
        "other_level": ["Remember", "Analyze", "Understand", "Create"],
        "count": [6, 2, 4, 8],
    })
    ax = Figure().subplots()
    draw_alluvial(ax, counts)
    bands = [p for p in ax.patches if isinstance(p, PathPatch)]
    nodes = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bands) == 4
    assert len(nodes) == 3 + 4  # left: R, Ap, C; right: R, U, An, C
    left = sorted((n for n in nodes if n.get_x() == 0.0), key=lambda n: n.get_y())
    heights = np.array([n.get_height() for n in left])
    np.testing.assert_allclose(heights / heights.sum(), np.array([8, 4, 8]) / 20)  # R, Ap, C from the bottom
    # The Remember → Analyze band rises: its right end is higher than its left end.
    rising = [b for b in bands if b.get_facecolor()[:3] == matplotlib.colors.to_rgb(LEVEL_COLOR["Remember"])]
    ends = [(b.get_path().vertices[0][1], b.get_path().vertices[3][1]) for b in rising]
    assert any(right > left_y for left_y, right in ends)


def test_node_labels_are_spread_apart():
    spread = spread_labels([0.05, 0.9, 0.95, 0.99], 0.1)
    assert spread[0] == 0.05 and spread[-1] == 1.0
    assert all(b - a >= 0.1 - 1e-9 for a, b in itertools.pairwise(spread))
    assert spread_labels([0.1, 0.5, 0.9], 0.1) == [0.1, 0.5, 0.9]  # already apart: unchanged


def test_confusion_rows_sum_to_100():
    counts = pd.DataFrame({
        "original_level": ["Apply", "Apply", "Create", "Uncategorized"],
        "other_level": ["Apply", "Understand", "Create", "Apply"],
        "count": [3, 1, 2, 5],
    })
    matrix = confusion_matrix(counts)
    assert list(matrix.index) == list(BLOOM_LEVELS)
    assert matrix.loc["Apply", "Apply"] == 75.0 and matrix.loc["Apply", "Understand"] == 25.0
    assert matrix.loc["Create"].sum() == 100.0
    assert matrix.loc["Remember"].isna().all()  # no item: no percentage, not zero


def test_palette_is_okabe_ito():
    palette = set(OKABE_ITO.values())
    assert set(SHIFT_COLOR.values()) <= palette
    assert set(STRATEGY_COLOR.values()) <= palette
    assert {c for level, c in LEVEL_COLOR.items() if level in BLOOM_LEVELS} <= palette


def test_scatter_labels_do_not_overlap(study):
    with matplotlib.rc_context(STYLE):
        fig = plot_correlations(study.metrics, study.correlations)
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            boxes = [t.get_window_extent(renderer) for t in ax.texts]
            assert len(boxes) == study.metrics.query("metric == 'catcons' and strategy == 'cot'").shape[0]
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    assert not a.overlaps(b), "two model labels overlap"


def test_svg_is_reproducible(study, tmp_path):
    with matplotlib.rc_context(STYLE):
        first = save_figure(plot_knowledge_id(study.metrics), tmp_path / "a", "fig")
        second = save_figure(plot_knowledge_id(study.metrics), tmp_path / "b", "fig")
    assert first[1].read_bytes() == second[1].read_bytes()


#: Figures whose marks open the explorer, and those that do not (docs/explorer.md says why).
LINKED = ("fig2_transitions", "fig3_shift_scores", "fig4_knowledge_id", "fig6_confusion", "parse_failures")
UNLINKED = ("fig5_correlations", "reliability")


def _links(out, stem) -> dict:
    return json.loads((out / f"{stem}.links.json").read_text(encoding="utf-8"))


def test_every_link_opens_explorer_columns_with_a_well_formed_fragment(written):
    out, _ = written
    columns = {column.key for column in _columns([])}
    for stem in FIGURE_STEMS:
        document = _links(out, stem)
        png = (out / f"{stem}.png").read_bytes()
        with Image.open(io.BytesIO(png)) as image:
            assert document["png"] == {"width": image.width, "height": image.height,
                                       "sha256": hashlib.sha256(png).hexdigest()}
        assert document["explorer"] == FIGURE_EXPLORER_HREF == "../explorer/index.html"
        links = document["links"]
        assert (len(links) > 0) == (stem in LINKED), stem
        for link in links:
            pairs = parse_qsl(link["fragment"], keep_blank_values=True, strict_parsing=True)
            keys = [key for key, _ in pairs]
            assert all(key == "m" or (key.startswith("f.") and key[2:] in columns) for key in keys), link
            assert keys.count("m") == 1 and SPEC_BY_NAME.get(dict(pairs)["m"]), link
            assert {"f.model", "f.strategy"} <= set(keys) and dict(pairs)["f.strategy"] in ("CoT", "FGP"), link
            assert all(value for _, value in pairs), link
            assert link["label"] and link["n"] >= 1
            left, top, width, height = link["box"]
            assert 0 <= left and 0 <= top and left + width <= 1 + 1e-6 and top + height <= 1 + 1e-6, link
            assert width * document["png"]["width"] >= MIN_BOX_PX - 1e-6 <= height * document["png"]["height"]


def test_the_svg_links_each_mark_relative_to_the_figures_folder(written):
    out, _ = written
    for stem in LINKED:
        root = ElementTree.parse(out / f"{stem}.svg").getroot()
        hrefs = {a.get("{http://www.w3.org/1999/xlink}href") for a in root.iter("{http://www.w3.org/2000/svg}a")}
        assert hrefs == {f"../explorer/index.html#{link['fragment']}" for link in _links(out, stem)["links"]}, stem


def _pixel(image: np.ndarray, box: list[float], fx: float, fy: float) -> np.ndarray:
    """The PNG's colour at (fx, fy) of a link's box (fractions of the box, from its top left)."""
    left, top, width, height = box
    return image[int((top + fy * height) * image.shape[0]), int((left + fx * width) * image.shape[1])].astype(int)


def _rgb(color) -> np.ndarray:
    return np.array([round(255 * c) for c in matplotlib.colors.to_rgb(color)])


@pytest.mark.parametrize("build", [plot_shift_scores, plot_knowledge_id], ids=["fig3", "fig4"])
def test_a_bars_box_is_its_data_rectangle_on_the_saved_png(study, tmp_path, build):
    with matplotlib.rc_context(STYLE):
        fig = build(study.metrics)
        png, _, links = save_figure(fig, tmp_path, "bars")
        fig.savefig(io.BytesIO(), format="png", dpi=DPI)  # the PNG's layout again, for transData below
    boxes = json.loads(links.read_text())["links"]
    marks = linked_marks(fig)
    assert len(marks) == len(boxes) > 0
    image = np.asarray(Image.open(png).convert("RGB"))
    height_px, width_px = image.shape[:2]
    for (bar, link), entry in zip(marks, boxes):
        assert entry["fragment"] == link.fragment and entry["n"] == link.n
        (x0, y0), (x1, y1) = bar.axes.transData.transform(
            [(bar.get_x(), bar.get_y()), (bar.get_x() + bar.get_width(), bar.get_y() + bar.get_height())])
        expected = [min(x0, x1) / width_px, 1 - max(y0, y1) / height_px, abs(x1 - x0) / width_px, abs(y1 - y0) / height_px]
        if abs(x1 - x0) >= MIN_BOX_PX and abs(y1 - y0) >= MIN_BOX_PX:
            np.testing.assert_allclose(entry["box"], expected, atol=2e-5)
            # and the saved PNG shows that bar there (away from the error bar at its middle)
            assert np.abs(_pixel(image, entry["box"], 0.25, 0.7) - _rgb(bar.get_facecolor())).max() <= 3, entry["label"]


def test_a_heatmap_cells_box_shows_that_cell_on_the_saved_png(study, written):
    out, _ = written
    with matplotlib.rc_context(STYLE):  # drawn again, not saved: the cells' colours, in link order
        figures = {"fig6_confusion": plot_confusion(study.votes),
                   "parse_failures": plot_parse_failures(study.metrics, study.reliability)}
    for stem, fig in figures.items():
        boxes = _links(out, stem)["links"]
        image = np.asarray(Image.open(out / f"{stem}.png").convert("RGB"))
        assert len(boxes) == len(linked_marks(fig)) > 0
        for (cell, link), entry in zip(linked_marks(fig), boxes):
            assert entry["fragment"] == link.fragment
            assert np.abs(_pixel(image, entry["box"], 0.12, 0.12) - _rgb(cell.get_facecolor())).max() <= 3, entry


def test_transition_bands_and_nodes_count_their_questions(study):
    from bloomqg.metrics.transitions import transition_counts

    with matplotlib.rc_context(STYLE):
        fig = plot_transitions(study.votes)
    marks = linked_marks(fig)
    model, dataset, strategy = study.votes[["model", "dataset", "strategy"]].iloc[0]
    cell = study.votes[(study.votes["model"] == model) & (study.votes["dataset"] == dataset)
                       & (study.votes["strategy"] == strategy)]
    counts = transition_counts(cell, kind="judged")
    mine = [link for _, link in marks if link.label.startswith(f"{model}, {dataset}, {strategy_label(strategy)}:")]
    bands = {link.label.split(": ", 1)[1]: link.n for link in mine if "→" in link.label}
    assert bands == {f"original {o} → judged {j}": n for o, j, n in counts.itertuples(index=False)}
    left = {link.label.split(": ", 1)[1]: link.n for link in mine if "→" not in link.label and "original" in link.label}
    assert left == {f"original {o}": n for o, n in counts.groupby("original_level")["count"].sum().items()}
    shapes = [p for p, _ in marks if not isinstance(p, matplotlib.patches.Rectangle)]
    assert len(shapes) == sum(1 for _, link in marks if "→" in link.label)  # bands are outlines, nodes boxes


THREE_LABELS = {"cot": "CoT", "fgp": "FGP", "refine": "Refine", "zeroshot": "Zero-shot"}


def test_every_strategy_has_a_stable_colour_whichever_a_figure_shows():
    from bloomqg.reporting.figures.style import strategy_colors

    colors = strategy_colors(THREE_LABELS)
    assert colors["cot"] == STRATEGY_COLOR["cot"] and colors["fgp"] == STRATEGY_COLOR["fgp"]
    # the others take the next unused Okabe–Ito colour by their position in the defined order
    assert colors["refine"] == OKABE_ITO["green"] and colors["zeroshot"] == OKABE_ITO["purple"]
    assert len(set(colors.values())) == len(colors)
    assert strategy_colors(THREE_LABELS, ["zeroshot"]) == colors  # what a figure shows does not shift them
    assert strategy_colors(None, ["mine"])["mine"] == OKABE_ITO["purple"]  # after the built-ins


def test_three_strategies_are_drawn_with_their_labels_and_colours():
    from matplotlib.colors import to_hex

    from bloomqg.reporting.figures.style import strategy_colors

    study = synthetic_study(n_models=3, n_items=8, cells={"cs": ("cot", "fgp", "zeroshot")})
    with matplotlib.rc_context(STYLE):
        shift = _all_text(plot_shift_scores(study.metrics, THREE_LABELS))
        assert "cs, Zero-shot" in shift and "ZEROSHOT" not in shift
        # CoT and Zero-shot both identify (their metrics carry knowledge-ID accuracy): one series each, in its colour
        fig = plot_knowledge_id(study.metrics, THREE_LABELS)
        legend = {t.get_text(): to_hex(h.get_facecolor()) for h, t in zip(fig.legends[0].legend_handles, fig.legends[0].texts)}
        colors = strategy_colors(THREE_LABELS)
        assert legend == {"cs, CoT": colors["cot"].lower(), "cs, Zero-shot": colors["zeroshot"].lower()}
        correlation_titles = [ax.get_title() for ax in plot_correlations(study.metrics, study.correlations, THREE_LABELS).axes]
        assert any(title.endswith("(CoT, Zero-shot)") for title in correlation_titles)
        # the classified view follows the identification columns: give Zero-shot's answers CoT's
        votes = study.votes.copy()
        cot = votes[votes["strategy"] == "cot"].set_index(["model", "item_id"])["identified_bloom_level"]
        mine = votes["strategy"] == "zeroshot"
        keys = pd.MultiIndex.from_frame(votes.loc[mine, ["model", "item_id"]])
        votes.loc[mine, "identified_bloom_level"] = cot.reindex(keys).to_numpy()
        titles = [ax.get_title() for ax in plot_confusion(votes, THREE_LABELS).axes]
        assert any(t.startswith("Classified (CoT)") for t in titles)
        assert any(t.startswith("Classified (Zero-shot)") for t in titles)
        assert not any(t.startswith("Classified (FGP)") for t in titles)
        assert any(t.startswith("Judged (Zero-shot)") for t in titles)
        none = plot_confusion(votes.assign(identified_bloom_level=None), THREE_LABELS)
        assert "— No data for this view:\nno strategy run asks the model to classify the original" in _all_text(none)


def test_figure5_legend_sits_outside_the_data_area_and_its_key_is_no_data_point(study):
    with matplotlib.rc_context(STYLE):
        fig = plot_correlations(study.metrics, study.correlations)
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            legend = ax.get_legend()
            assert legend is not None
            assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer)), \
                "the legend covers the data area"
            for handle in legend.legend_handles:
                assert handle.get_marker() in ("None", "", None) and handle.get_linestyle() == "--", \
                    "a legend key drawn as a dot reads as one more data point"
            assert all(" models" in text.get_text() for text in legend.get_texts())


def test_figure3_states_each_bars_n(study):
    from bloomqg.reporting.figures.bars import plot_shift_scores

    with matplotlib.rc_context(STYLE):
        fig = plot_shift_scores(study.metrics)
    rows = study.metrics[study.metrics["metric"].str.endswith("_mean")].dropna(subset=["value"])
    shown = sorted(text.get_text() for ax in fig.axes for text in ax.texts if text.get_text().startswith("n="))
    assert shown and shown == sorted(f"n={int(n)}" for n in rows["n"])


def test_figure4_states_each_bars_n(study):
    from bloomqg.reporting.figures.bars import plot_knowledge_id

    with matplotlib.rc_context(STYLE):
        fig = plot_knowledge_id(study.metrics)
    rows = study.metrics.query("metric == 'knowledge_id_acc'").dropna(subset=["value"])
    shown = sorted(text.get_text() for text in fig.axes[0].texts)
    assert shown == sorted(f"n={int(n)}" for n in rows["n"])
