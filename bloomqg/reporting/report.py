"""One self-contained HTML report of a run: config, provenance, tables, figures, reliability,
cost and browsable examples, each figure and table with a one-sentence reading from the data.

The page has no external resource (images are inlined as base64 PNG, CSS is inline, there is no
script), so it can be mailed or archived as one file; its links into the item explorer (table
cells, and the marks of a figure whose ``<stem>.links.json`` is given) need the explorer folder
beside it. It is rendered by Jinja2 from
``bloomqg/report_templates/report.html.j2`` with autoescaping on: every text from a model, a
judge or a dataset is escaped.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import re
import io
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.store.atomic import write_text_atomic
from bloomqg.store.frames import CUT_OFF, IMPORTED
from bloomqg.reporting.answer import answer_context, usability_of_read
from bloomqg.reporting.construction import construction_facts, mark_by_construction, forced_level_warnings
from bloomqg.reporting.display import (
    EMPTY, MISSING, StrategyLabels, annotated_config_yaml, is_missing, ordered_unique, strategy_label,
)
from bloomqg.reporting.display import strategy_order as display_order
from bloomqg.reporting.examples import panel_judges, question_examples
from bloomqg.reporting.glossary import glossary_entries
from bloomqg.reporting.panel import copies_voted_unique, judge_dtypes, small_writers, judge_lines, level_leanings, modal_share, self_judges, study_setup
from bloomqg.reporting.explorer.links import item_fragment, metric_link
from bloomqg.reporting.provenance_view import (
    code_versions,
    call_failures,
    generation_usage,
    ledger_view,
    plain,
    provenance_entries,
)
from bloomqg.reporting.readings import (
    classification_accuracy, classification_counts, figure_readings, named_unit_counts, gate_summary, labels_plan_reading, level_moves, panel_sample_reading,
    table_readings)
from bloomqg.reporting.tables.model import TableInputError, check_metrics, gated_cells
from bloomqg.reporting.tables.view import long_form, read_view
from bloomqg.reporting.tables.model import DAGGER
from bloomqg.voting.agreement import PREVALENCE_LIMIT
from bloomqg.voting.construction import MARK, construction_flags
from bloomqg.reporting.trust import trained_judges, trust_context
from bloomqg.inputs.prompts import response_prefix
from bloomqg.inputs.strategies import ComparisonSpec


log = logging.getLogger(__name__)

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "report_templates"
TEMPLATE_NAME = "report.html.j2"

_LEVELS = "R, U, Ap, An, E, C: Remember, Understand, Apply, Analyze, Evaluate, Create."

#: How to read each figure, shown with it when it is opened (its caption stays one line).
FIGURE_LEGENDS: dict[str, str] = {
    "fig2_transitions": f"All datasets are drawn; the reading above compares strategies on the datasets every "
    f"strategy ran. {_LEVELS}",
    "fig3_shift_scores": "Shift score: how many Bloom levels (|Δ|) a useful question lands from its original's, "
    "averaged over the questions that regressed (2+ levels lower), drifted (1 level) or leapt (2+ levels higher); "
    "whiskers: 95% confidence intervals (a drift is 1 level by definition, so it has none); n: questions per bar. "
    "Not CogShift (the table of CogShift, question classification and knowledge identification), which averages |Δ| over every useful question, "
    "0 for one at its original's level.",
    "fig4_knowledge_id": "Knowledge-identification accuracy: the share of originals whose knowledge units the model "
    "named exactly before writing its question.",
    "fig6_confusion": "Pooled over all datasets, so a plot's n can differ from Figure 2's comparison on the datasets "
    f"every strategy ran. Each row sums to 100% of the originals at that level the plot places: in a Classified plot "
    f"the originals the model classified (its n; the reading's accuracy counts the others as wrong), in a Judged plot "
    f"the useful questions with a judged level; a row of dots has none. {_LEVELS}",
    "reliability": f"The gate reads Krippendorff's α, or Gwet's AC1 where one answer holds ≥ {PREVALENCE_LIMIT:.0%} of the votes "
    "and α's interval lies above 0 (the glossary gives the whole rule); the dashed line is its threshold.",
}

#: Short captions shown under each figure of the HTML report (the Snakemake report's captions
#: live in ``report/captions/*.rst``).
FIGURE_CAPTIONS: dict[str, str] = {
    "fig2_transitions": "Figure 2. Bloom-level transitions from the original question (left) to the judged level "
    "of the generated question (right), useful questions only; band width = share of the plot's questions (each plot is scaled to its own n).",
    "fig3_shift_scores": "Figure 3. Mean shift score (|Δ|: how many Bloom levels a question lands from its original's) of the questions that regressed, drifted or leapt, each type alone, per cell (model × dataset × strategy).",
    "fig4_knowledge_id": "Figure 4. Knowledge-identification accuracy under each strategy whose answers name the "
    "original's knowledge unit (CoT's), with 95% confidence intervals.",
    "fig5_correlations": "Figure 5. Correlations across models under each strategy whose answers identify level and "
    "units (CoT's): (a) classification accuracy vs CatCons, (b) knowledge-identification accuracy vs KnowCov.",
    "fig6_confusion": "Figure 6. Original Bloom level vs the model's own classification (each strategy that asks "
    "for it, as CoT does) and vs the judged level of its question, pooled over datasets.",
    "reliability": "Judge reliability: per criterion and cell, the coefficient the gate reads, with 95% CI.",
    "parse_failures": "Parse failures of generations and of judges' answers (%).",
    "judge_bias_positions": "Judge bias, order probe: share of each judge's Bloom levels by the position the "
    "permuted list gave them (bars), and where an order-blind judge's would stand (dashes).",
    "human_agreement": "Table 9 as a figure: agreement (%) of the annotators' majority with the panel's per "
    "criterion and cell, with 95% bootstrap CIs (only when the study configures annotation).",
}


class ReportInputError(ValueError):
    """An input of the report is missing or malformed; the message names it."""


#: Display size of a figure on screen relative to its 200-dpi pixels: 130 CSS px per inch, so
#: 7-pt text shows at about 12.6 px and the PNG stays sharp on high-density screens.
SCREEN_SCALE = 130 / 200


def png_size(data: bytes, where: Path) -> tuple[int, int]:
    """(width, height) in pixels of a PNG image (Pillow reads only its header)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format == "PNG":
                return image.size
    except UnidentifiedImageError:
        pass
    raise ReportInputError(f"figure file {where} is not a PNG image")


def _figure_entries(
    figure_paths: Sequence[Path], readings: Mapping[str, str], explorer_href: str | None = None
) -> list[dict[str, Any]]:
    entries = []
    given = [Path(p) for p in figure_paths]
    for path in given:
        if path.suffix.lower() != ".png":
            continue
        if not path.is_file():
            raise ReportInputError(f"figure file {path} does not exist")
        raw = path.read_bytes()
        width, height = png_size(raw, path)
        data = base64.b64encode(raw).decode("ascii")
        sidecar = path.with_name(f"{path.stem}.links.json")
        entries.append({
            "stem": path.stem, "data_uri": f"data:image/png;base64,{data}",
            # the caption names the files this figure was given as, no format it was not written in
            "files": [p.name for p in given if p.parent == path.parent and p.stem == path.stem],
            "width": round(width * SCREEN_SCALE), "height": round(height * SCREEN_SCALE),
            "caption": FIGURE_CAPTIONS.get(path.stem, path.stem), "legend": FIGURE_LEGENDS.get(path.stem, ""),
            "reading": readings.get(path.stem, ""),
            # a reading that opens with the empty mark says why nothing is drawn: no empty frame
            "empty": readings.get(path.stem, "").startswith(EMPTY),
            "links": figure_links(sidecar, raw, explorer_href) if explorer_href and sidecar in given else [],
        })
    return entries


def figure_links(sidecar: Path, png: bytes, explorer_href: str) -> list[dict[str, str]]:
    """The report's overlays of one figure from its ``<stem>.links.json``: per linked mark, the
    explorer address, its box (and outline) in percentages of the image, and what it opens.

    The sidecar must be the one written with this PNG (its SHA-256): a box of another drawing
    would open the wrong questions.
    """
    try:
        document = json.loads(sidecar.read_text(encoding="utf-8"))
        written_for = document["png"]["sha256"]
        links = document["links"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ReportInputError(f"figure links {sidecar}: {error}") from error
    if written_for != hashlib.sha256(png).hexdigest():
        raise ReportInputError(f"figure links {sidecar} were written for another drawing than the PNG beside it")
    out = []
    for link in links:
        try:
            left, top, width, height = (100 * float(v) for v in link["box"])
            style = f"left:{left:.3f}%;top:{top:.3f}%;width:{width:.3f}%;height:{height:.3f}%"
            if link.get("shape"):
                points = ",".join(f"{_percent(x)}% {_percent(y)}%" for x, y in link["shape"])
                style += f";clip-path:polygon({points})"
            n = int(link["n"])
            title = f"{link['label']}: open {'its question' if n == 1 else f'its {n:,} questions'} in the item explorer"
            out.append({"href": f"{explorer_href}#{link['fragment']}", "style": style, "title": title, "n": str(n)})
        except (KeyError, TypeError, ValueError) as error:
            raise ReportInputError(f"figure links {sidecar}: a malformed link {link!r}: {error}") from error
    return out


def _percent(fraction: object) -> str:
    return f"{100 * float(fraction):.1f}".replace("-0.0", "0.0")  # type: ignore[arg-type]


def _cell_links(sources: list[list[list[str] | None]] | None, explorer_href: str | None,
                strategy_labels: StrategyLabels | None = None) -> list[list[str | None]] | None:
    """Per table cell, the explorer address filtered to the items behind it (None: no link)."""
    if sources is None or explorer_href is None:
        return None
    return [[None if source is None else metric_link(tuple(source), explorer_href, strategy_labels) for source in row]
            for row in sources]


def _table_entries(
    table_paths: Sequence[Path], readings: Mapping[str, str], explorer_href: str | None = None,
    strategy_labels: StrategyLabels | None = None,
) -> list[dict[str, Any]]:
    entries = []
    for path in table_paths:
        path = Path(path)
        if path.suffix.lower() != ".json":
            continue
        try:
            parsed = long_form(read_view(path))  # cells as rows: a page shows every column
        except (OSError, TableInputError) as error:
            raise ReportInputError(f"table file {path}: {error}") from error
        entries.append({
            "stem": parsed.name, "caption": parsed.caption, "groups": parsed.groups,
            "has_groups": any(label for label, _ in parsed.groups), "header": parsed.header,
            "rows": parsed.rows, "notes": parsed.notes, "reading": readings.get(parsed.name, ""),
            "empty": all_empty(parsed.rows, parsed.align),
            "align": parsed.align, "links": _cell_links(parsed.sources, explorer_href, strategy_labels),
            "sources": parsed.sources,
            "files": sorted(p.name for p in path.parent.glob(f"{path.stem}.*") if p.suffix in (".csv", ".md", ".tex")),
        })
    return entries


def all_empty(rows: Sequence[Sequence[str]], align: Sequence[str]) -> bool:
    """Every value cell (right-aligned: the numbers) of a table with rows has no value: not
    drawn, one line says why."""
    values = [str(cell).strip() for row in rows for cell, side in zip(row, align) if side == "right"]
    return bool(rows) and bool(values) and all(v in (MISSING, EMPTY, "") for v in values)


def section_notes(tables: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The Tables section's footnotes, each once (in order of first use), with an anchor; each
    table's ``notes`` become the list of its notes' anchors (``note_refs``), in place."""
    notes: dict[str, str] = {}
    for table in tables:
        refs = []
        for note in table["notes"]:
            anchor = notes.setdefault(note, f"note-{len(notes) + 1}")
            refs.append({"anchor": anchor, "number": anchor.removeprefix("note-")})
        table["note_refs"] = refs
    return [{"anchor": anchor, "number": anchor.removeprefix("note-"), "text": text} for text, anchor in notes.items()]


#: Names that must not break inside, tried in this order at each place: a cell (model · dataset ·
#: strategy), a strategy pair, the criteria, Dawid–Skene, then any hyphenated name (smollm2-135m,
#: glm-4-9b: browsers break lines after hyphens, which CSS cannot forbid short of ``nowrap``).
#: One alternation, so a name inside a cell label is wrapped once, with its label.
_ATOM = re.compile(r"[^\s·<>;,()]+(?: · [^\s·<>;,()]+)+|[^\s;,]+ − [^\s;,]+|Bloom level|Knowledge units|Dawid–Skene"
                   r"|(?<![\w.-])[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)+(?![\w.-])")


def _atoms(text: Any) -> Any:
    """Text escaped, each name of :data:`_ATOM` in a ``nowrap`` span so it never breaks inside."""
    from markupsafe import Markup, escape

    return Markup(_ATOM.sub(lambda m: f'<span class="atom">{m.group(0)}</span>', str(escape(text))))


def _n_below(text: Any) -> Any:
    """"48.15% (n=27)" with its n on a line of its own: a narrow column in the Answer's table."""
    from markupsafe import Markup, escape

    return Markup(str(escape(text)).replace(" (n=", "<br>(n=", 1))


def _interval_atoms(text: Any) -> Any:
    """"-0.31 [-0.43, -0.18]" that may break only before its interval: a narrow column's value
    above its interval, neither cut inside."""
    from markupsafe import Markup, escape

    value, bracket, rest = str(text).partition(" [")
    if not bracket:
        return escape(text)
    return Markup(f'<span class="atom">{escape(value)}</span> <span class="atom">[{escape(rest)}</span>')


def _marked(text: Any) -> Any:
    """A table cell with its marks as links to their notes: † to the gate's, ‡ to the rule of
    numbers decided by construction; hyphenated names kept whole (:func:`_atoms`)."""
    from markupsafe import Markup

    out = str(_atoms(text))
    out = out.replace(DAGGER, f'<a class="mark-ref" href="#mark-gate">{DAGGER}</a>')
    # inside the closed block: the browser opens a <details> that holds the fragment's target
    out = out.replace(MARK, f'<a class="mark-ref" href="#construction-rule">{MARK}</a>')
    return Markup(out)


def _table_data(table_paths: Sequence[Path], name: str) -> pd.DataFrame | None:
    """The data (CSV) of the table whose file ``name`` is, or whose view (.json) sits beside it."""
    for path in map(Path, table_paths):
        csv = path.with_suffix(".csv")
        if csv.name == name and csv.is_file():
            return pd.read_csv(csv)
    return None


def cost_card(cost_usd: float, n_imported: int) -> tuple[str, str]:
    """(value, label) of the overview's API cost card. Imported questions were generated and
    judged by a release's authors: what that cost is unknown, not zero, and this run did not
    pay it, so the card says so rather than "$0.0000"."""
    paid = f"${cost_usd:,.4f}"
    if not n_imported:
        return paid, "paid for API calls (see Cost and tokens)"
    own = f"; this run's own API calls, as the spend ledger records them: {paid}" if cost_usd else ""
    return (
        f"{paid} + unknown" if cost_usd else "unknown",
        f"API cost: unknown for the {n_imported:,} imported generations and their judgments (paid by the "
        f"release's authors, not by this run){own}",
    )


def token_limits(generation_provenance: Sequence[Mapping[str, Any]]) -> list[int]:
    """The generators' ``max_new_tokens`` over the generation files (their provenance's decoding),
    each once: the limit a cut-off reply hit, said beside the count."""
    limits = {int(p["decoding"]["max_new_tokens"]) for p in generation_provenance
              if isinstance(p.get("decoding"), Mapping) and p["decoding"].get("max_new_tokens") is not None}
    return sorted(limits)


def overview(
    all_metrics: pd.DataFrame, votes: pd.DataFrame, ledger: pd.DataFrame | None, generations: pd.DataFrame | None = None,
    strategy_labels: StrategyLabels | None = None,
) -> dict[str, Any]:
    """Headline counts for the top of the report; ``generations`` tells imported rows apart."""
    useful = votes["useful"].map(lambda v: not is_missing(v) and bool(v)) if len(votes) else pd.Series(dtype=bool)
    cost = float(pd.to_numeric(ledger["cost_usd"], errors="coerce").fillna(0).sum()) if ledger is not None and len(ledger) else 0.0
    n_imported = int((generations["finish_reason"] == IMPORTED).sum()) if generations is not None and len(generations) else 0
    cost_value, cost_label = cost_card(cost, n_imported)
    cut_off = (generations["finish_reason"] == CUT_OFF) if generations is not None and len(generations) else None
    return {
        "models": ordered_unique(all_metrics["model"]),
        "datasets": ordered_unique(all_metrics["dataset"]),
        "strategies": [strategy_label(s, strategy_labels) for s in display_order(all_metrics["strategy"], strategy_labels)],
        "n_cells": int(all_metrics[["model", "dataset", "strategy"]].drop_duplicates().shape[0]),
        "n_generated": int(votes["new_question"].notna().sum()) if len(votes) else 0,
        "n_prompts": len(votes),
        "n_useful": int(useful.sum()),
        # questions whose Bloom level no strict majority decides: left out of every level metric
        "n_no_level": int((votes["new_question"].notna() & votes["bloom_level"].isna()).sum()) if len(votes) else 0,
        # useful rests on Usability's criteria: marked † where the gate flagged them in some cell
        "useful_gated": any(metric == "usability" for *_, metric in gated_cells(all_metrics)),
        "n_replies": 0 if cut_off is None else len(cut_off),
        "n_cut_off": 0 if cut_off is None else int(cut_off.sum()),
        "n_cut_off_read": 0 if cut_off is None else int((cut_off & generations["new_question"].notna()).sum()),
        # per strategy: a strategy whose replies are cut off more often is judged on fewer finished questions
        "cut_off_by_strategy": [] if cut_off is None else [
            {"strategy": s, "label": strategy_label(s, strategy_labels), "n_cut_off": int(cut_off[mine].sum()),
             "n_replies": int(mine.sum())}
            for s in display_order(generations["strategy"], strategy_labels)
            for mine in [generations["strategy"] == s]],
        "cost_usd": cost,
        "cost_value": cost_value,
        "cost_label": cost_label,
    }


def _min_answer_rate(config: Mapping) -> float:
    """The answer-rate floor the judges' jobs ran under: the config's, else the schema's default
    (the report's config is in canonical form, a default left out)."""
    from bloomqg.store.config_schema import file_schema

    value = config.get("min_answer_rate")
    return float(file_schema().default_of("min_answer_rate") if value is None else value)


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
    environment.filters["marked"] = _marked
    environment.filters["atoms"] = _atoms
    environment.filters["n_below"] = _n_below
    environment.filters["interval_atoms"] = _interval_atoms
    return environment.get_template(TEMPLATE_NAME).render(**context)


def _format_number(value: Any, decimals: int = 0) -> str:
    if is_missing(value):
        return MISSING
    return f"{float(value):,.{decimals}f}"


def build_report(
    out_path: Path,
    *,
    config: Mapping,
    config_meanings: Mapping[str, str] | None = None,
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
    robustness: pd.DataFrame | None = None,
    git_commit: str | None,
    package_versions: Mapping,
    title: str = "bloomqg report",
    judge_bias: Sequence[Path] = (),
    explorer_href: str | None = None,
    strategy_labels: StrategyLabels | None = None,
    comparison: ComparisonSpec = ComparisonSpec(),
    strategy_order: Sequence[str] = (),
    judgments: pd.DataFrame | None = None,
    answer: pd.DataFrame | None = None,
    strategies: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Write one self-contained HTML report of the run to ``out_path`` (atomically).

    ``answer``: ``metrics/answer.parquet`` (:mod:`bloomqg.metrics.answer`), the Answer section's
    verdicts; ``strategies``: :func:`bloomqg.inputs.strategies.strategy_descriptions` of the strategies
    run, for the section that names them in full with their prompts.

    ``strategy_labels`` ({name: label}, defined order) name and order the strategies;
    ``comparison`` and ``strategy_order`` choose the strategy pairs the readings compare, as the
    paired table does. ``judgments``: the judges' calls, whose failures the overview counts
    judge by judge.

    ``judge_bias``: the judge_bias target's table view (``.json``) and figure (``.png``); given,
    the report has a "Judge bias" section.
    ``explorer_href``: the item explorer's address relative to the report; when given, the
    report links to it, every metric cell of a table opens it on the items behind the value, and
    so does every linked mark of a figure whose ``<stem>.links.json`` is among ``figure_paths``.

    Tables are read back from their view files (``.json``) in ``table_paths`` (CSV, Markdown and
    LaTeX files are listed as downloads, not read); figures are the PNG files of ``figure_paths``
    inlined as base64, with the links of their ``.links.json`` files laid over them.
    """
    check_metrics(all_metrics)
    labels = strategy_labels
    flags = construction_flags(votes, panel_judges(reliability))
    readings = figure_readings(all_metrics, votes, reliability, correlations, labels, flags)
    t_readings = table_readings(all_metrics, reliability, paired, _table_data(table_paths, "table1_datasets.csv"),
                                strategy_labels=labels, comparison=comparison, strategy_order=strategy_order)
    panel = _table_data(table_paths, "panel_sample_estimates.csv")
    if panel is not None and (reading := panel_sample_reading(panel)):
        t_readings["panel_sample_estimates"] = reading
    plan = _table_data(table_paths, "annotation_plan.csv")
    if plan is not None and (reading := labels_plan_reading(plan)):
        t_readings["annotation_plan"] = reading
    gate = gate_summary(reliability, labels, flags)
    copies = copies_voted_unique(votes, reliability, config.get("judges"))
    context = {
        "copies": copies,
        "title": title,
        "answer": answer_context(answer, all_metrics, gate=gate, strategy_labels=labels, comparison=comparison,
                                 strategy_order=strategy_order,
                                 strategy_titles={s["name"]: s["title"] for s in strategies}, construction=flags,
                                 read_usability=usability_of_read(votes), robustness=robustness,
                                 leanings=level_leanings(reliability),
                                 copies=copies),
        # each pass's JSON opening: a model with response_prefill has its reply begun with it
        "strategies": [{**s, "passes": [{**p, "opening": response_prefix(p["text"])} for p in s["passes"]]}
                       for s in strategies],
        "glossary": glossary_entries(strategies),
        "generated_at": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "overview": {**overview(all_metrics, votes, ledger, generations, labels),
                     "token_limits": token_limits(generation_provenance),
                     "call_failures": call_failures(judgments, generations),
                     "min_answer_rate": _min_answer_rate(config)},
        "config_yaml": annotated_config_yaml(plain(dict(config)), config_meanings or {}),
        "git_commit": git_commit or "unknown (not a git checkout)",
        "package_versions": sorted(plain(dict(package_versions)).items()),
        "generation_provenance": provenance_entries(generation_provenance),
        "code_versions": code_versions([*generation_provenance, *judgment_provenance]),
        "judgment_provenance": provenance_entries(judgment_provenance),
        "tables": _table_entries(table_paths, t_readings, explorer_href, labels),
        "explorer_href": explorer_href,
        "figures": _figure_entries(figure_paths, readings, explorer_href),
        "gate": gate,
        "trust": {**trust_context(reliability, robustness, labels, flags), "trained": trained_judges(judgment_provenance)},
        "ledger": ledger_view(ledger, labels),
        "generation_usage": generation_usage(generations, labels),
        "examples": question_examples(votes, generations, judges=panel_judges(reliability), strategy_labels=labels,
                                      forced_cells=frozenset((f.model, f.dataset, f.strategy) for f in flags
                                                             if f.forced_to_original)),
        "judge_bias": {"tables": _table_entries(judge_bias, {}), "figures": _figure_entries(judge_bias, {})}
        if judge_bias else None,
    }
    if explorer_href:  # each strategy's value in the Answer opens the questions it counts
        for example in (ex for m in context["examples"]
                        for ex in [*(e for level in m["levels"] for e in level["examples"]), *m["failures"]]):
            example["link"] = f"{explorer_href}#" + item_fragment(
                example["model"], str(example["dataset"]), example["strategy_name"], str(example["prompt_id"]), labels)
        for block in context["answer"]["blocks"]:
            for row in block["rows"]:
                row["link_a"], row["link_b"] = (metric_link(row[key], explorer_href, labels)
                                                for key in ("source_a", "source_b"))
    scoring = (frozenset(judgments.loc[judgments["choice_probs"].notna(), "judge"].astype(str))
               if judgments is not None and "choice_probs" in judgments else frozenset())
    context["judges"], context["artefacts"] = judge_lines(config, reliability, scoring,
                                                          judge_dtypes(judgment_provenance, generation_provenance))
    context["forced_levels"] = forced_level_warnings(flags, labels)
    context["self_judges"] = self_judges(config, context["overview"]["models"])
    context["small_writers"] = small_writers(config, context["overview"]["models"])
    context["setup"] = study_setup(config, all_metrics, labels, generation_provenance)
    context["construction"] = mark_by_construction(context["tables"], flags, labels)
    context["table_notes"] = section_notes(context["tables"])
    html = render_report(context)
    out_path = Path(out_path)
    facts = report_facts(context, config=config, all_metrics=all_metrics, reliability=reliability, votes=votes,
                         labels=labels, answer=answer, paired=paired,
                         robustness=robustness, correlations=correlations, ledger=ledger, generations=generations,
                         table_paths=table_paths, comparison=comparison, strategy_order=strategy_order)
    write_facts(facts, facts_path(out_path))
    write_text_atomic(out_path, html)
    log.info("wrote report %s (%.1f MB)", out_path, out_path.stat().st_size / 1e6)


def facts_path(report_path: Path) -> Path:
    """Where a report's facts frame lies: ``report_facts.parquet`` beside it."""
    return Path(report_path).with_name("report_facts.parquet")


def report_facts(context: Mapping[str, Any], *, config: Mapping, all_metrics: pd.DataFrame, reliability: pd.DataFrame,
                 votes: pd.DataFrame, labels: StrategyLabels | None,
                 answer: pd.DataFrame | None, paired: pd.DataFrame | None, robustness: pd.DataFrame | None,
                 correlations: pd.DataFrame | None, ledger: pd.DataFrame, generations: pd.DataFrame,
                 table_paths: Sequence[Path], comparison: ComparisonSpec,
                 strategy_order: Sequence[str]) -> pd.DataFrame:
    """The facts frame (:mod:`bloomqg.reporting.facts`) of the report ``context`` renders."""
    from bloomqg.metrics.intervals import IntervalSpec
    from bloomqg.metrics.paired import FEW_PAIRS, SIGNIFICANCE, ordered_strategies
    from bloomqg.reporting.facts import study_facts
    from bloomqg.reporting.trust import few_pair_panels, untrusted_holds

    overview_ = context["overview"]
    gate = context["gate"]
    counts: dict[str, tuple[Any, str]] = {
        "overview.models": (len(overview_["models"]), "models that wrote questions"),
        "overview.datasets": (len(overview_["datasets"]), "datasets"),
        "overview.strategies": (len(overview_["strategies"]), "prompting strategies run"),
        "overview.cells": (overview_["n_cells"], "model × dataset × strategy cells"),
        "overview.prompts": (overview_["n_prompts"], "prompts sent to the generators"),
        "overview.generated": (overview_["n_generated"], "prompts that produced a question"),
        "overview.useful": (overview_["n_useful"], "useful questions (unique, readable and answerable by the votes)"),
        "overview.no_level": (overview_["n_no_level"], "questions whose Bloom level no majority of the judges decides"),
        "overview.replies": (overview_["n_replies"], "the generators' replies"),
        "overview.cut_off": (overview_["n_cut_off"], "replies cut off at the token limit"),
        "overview.cut_off_read": (overview_["n_cut_off_read"], "replies cut off at the token limit that still held a question"),
        **{f"overview.token_limit.{limit}": (limit, "a generator's max_new_tokens, the token limit a reply is cut off at")
           for limit in overview_["token_limits"]},
        **{f"overview.cut_off.{c['strategy']}": (c["n_cut_off"], f"replies under {c['label']} cut off at the token limit")
           for c in overview_["cut_off_by_strategy"]},
        **{f"overview.replies.{c['strategy']}": (c["n_replies"], f"the generators' replies under {c['label']}")
           for c in overview_["cut_off_by_strategy"]},
        "overview.cost_usd": (overview_["cost_usd"], "paid for API calls, US dollars"),
        "overview.min_answer_rate": (overview_["min_answer_rate"], "share of a job's calls that must be answered"),
        "trust.voted_unique": (context["copies"][1], "questions the panel voted unique in the cells where Unique passed the gate"),
        "trust.copies_voted_unique": (context["copies"][0], "of those, the ones the rules judge's copy measures call a copy of their original"),
    }
    for strategy, (classified, total) in classification_counts(votes, labels).items():
        counts[f"figure6.{strategy}.classified"] = (classified, "originals the models classified (Figure 6's n)")
        counts[f"figure6.{strategy}.originals"] = (total, "originals with a Bloom level under a classifying strategy")
    for (model, dataset, strategy), (named, _) in named_unit_counts(votes).items():
        counts[f"figure4.{model}.{dataset}.{strategy}.named"] = (named, "originals the model named a knowledge unit for")
    counts["significance"] = (SIGNIFICANCE, "the level a p value must be below to count as significant")
    counts["plan.power_in_10"] = (8, "the study plan's power (80%), written as times in 10")
    counts["robustness.untrusted_holds"] = (len(untrusted_holds(robustness, reliability)),
                                             "held comparisons resting on agreement the gate did not find reliable in a cell of theirs")
    counts["robustness.few_pair_panels"] = (len(few_pair_panels(robustness)),
                                            f"robustness panels comparing fewer than {FEW_PAIRS} pairs")
    for row in context["trust"]["effective"]:
        counts[f"trust.effective.{row['criterion']}.median"] = (row["median_value"],
                                                              "effective number of judges, median over cells")
    counts["confidence"] = (IntervalSpec.from_config(dict(config)).confidence, "the intervals' confidence level")
    # the lengths of the lists the page shows ("Show the table (6 rows)")
    listings = {
        "trust.coefficients": context["trust"]["coefficients"], "trust.flagged": context["trust"]["flagged"],
        "trust.judges": context["trust"]["judges"], "trust.robustness": context["trust"]["robustness"],
        "trust.effective": context["trust"]["effective"],
        "construction.marked": context["construction"].get("marked") or [],
        "construction.uninformative": context["construction"].get("uninformative") or [],
        "table_notes": context["table_notes"], "gate.failures": gate["failures"],
        "ledger.rows": context["ledger"]["rows"], "generation_usage": context["generation_usage"],
        **{f"table.{entry.get('stem')}.rows": entry.get("rows") or [] for entry in context["tables"]},
    }
    for name, listed in listings.items():
        counts[f"{name}.count"] = (len(listed), f"rows of the page's list {name}")
    # the flagged judges' counts the trust section states ("smollm2 in 14 criterion × cell pairs",
    # "minilm in 2 of 5 cells")
    flagged = pd.DataFrame(context["trust"]["flagged"])
    if len(flagged) and {"judge", "criterion"} <= set(flagged.columns):
        for judge, n in flagged.groupby("judge", sort=False).size().items():
            counts[f"trust.flagged.{judge}"] = (int(n), "criterion × cell pairs where the judge is flagged")
        for (judge, criterion), n in flagged.groupby(["judge", "criterion"], sort=False).size().items():
            counts[f"trust.flagged.{judge}.{criterion}"] = (int(n), "cells where the judge is flagged on the criterion")
    if paired is not None and len(paired):
        for (a, b), rows in paired.groupby(["strategy_a", "strategy_b"], sort=False):
            counts[f"paired.{a}.{b}.tested"] = (int(rows["p_value"].notna().sum()), "paired-table rows with a test")
            counts[f"paired.{a}.{b}.untested"] = (int(rows["p_value"].isna().sum()),
                                                  "paired-table rows without pairs to test")
    counts["gate.agreements"] = (gate["n_panel"], "criterion × cell agreements the gate decided on")
    for status, n in gate["status_counts"].items():
        counts[f"gate.{status}"] = (n, f"criterion × cell agreements the gate found {status.replace('_', ' ')}")
    counts["gate.flagged"] = (len(gate["failures"]), "criterion × cell agreements flagged †")
    counts["gate.reliable_by_construction"] = (len(gate["by_construction"]), "criterion × cell agreements the gate "
                                               "found reliable where at most one judge's votes vary")
    counts["gate.flagged_cells"] = (len({(f["model"], f["dataset"], f["strategy"]) for f in gate["failures"]}),
                                    "cells with a flagged agreement")
    from bloomqg.voting import diagnostics as flag_rules

    # the thresholds the flag reasons state ("Each judge"): each a number of the page
    for name, definition in (("ALWAYS_SAME_RATE", "share of one answer that makes a yes/no judge constant"),
                             ("OTHERS_OPPOSITE_RATE", "how often the others must give the other answer"),
                             ("CONSTANT_SHARE", "share of one answer that flags a judge on a many-answer criterion"),
                             ("CHANCE_YOUDEN", "sensitivity + specificity − 1 at or below which a judge is a coin"),
                             ("CONTRARIAN_KAPPA", "κ with the others' majority below which a judge is contrarian")):
        counts[f"judge_flag.{name.lower()}"] = (getattr(flag_rules, name), definition)
    for threshold in gate["thresholds"]:
        counts[f"gate.threshold.{threshold:g}"] = (threshold, "the gate's threshold (config)")
    for entry in context["figures"]:
        counts[f"figure.{entry.get('stem')}.links"] = (len(entry.get("links") or []), "marks of the figure that open the explorer")
    judges = reliability[reliability["judge"].notna()] if len(reliability) else reliability
    for (judge, criterion), rows in (judges.groupby(["judge", "criterion"], sort=False) if len(judges) else ()):
        if "vote_distribution" in rows and (modal := modal_share(rows)) is not None:
            counts[f"judge.{judge}.{criterion}.modal_share"] = (
                modal[1], "share of the questions a judge gave its cell's commonest answer, pooled over cells")
    derived: list[dict[str, Any]] = construction_facts(context["construction"].get("flags") or [])
    for strategy, (n, same, up, down) in level_moves(votes, labels).items():
        for name, count in (("kept", same), ("up", up), ("down", down)):
            derived.append({"quantity": f"transitions.{name}", "value": count / n if n else None, "n": n,
                            "strategy": strategy, "source": "votes",
                            "definition": f"share of useful questions with a judged level that moved {name} "
                                          "(kept: stayed at the original's level), on the datasets every strategy ran"})
    for strategy, accuracy in classification_accuracy(votes, labels).items():
        for row in accuracy.to_dict("records"):
            derived.append({"quantity": "classification.level_accuracy", "value": row["accuracy"], "n": row["n"],
                            "strategy": strategy, "subject": row["original_level"], "source": "votes",
                            "definition": "the model's own classification of the originals at one level, percent correct"})
    pairs = []
    for dataset in ordered_unique(all_metrics["dataset"]):
        run = ordered_unique(all_metrics.loc[all_metrics["dataset"] == dataset, "strategy"])
        pairs += [(dataset, a, b) for a, b in comparison.pairs(ordered_strategies(run, strategy_order))]
    plans = {name: _table_data(table_paths, f"{name}.csv")
             for name in ("annotation_plan", "panel_sample_estimates", "table1_datasets")}
    return study_facts(all_metrics=all_metrics, reliability=reliability, answer=answer, paired=paired,
                       robustness=robustness, correlations=correlations, ledger=ledger,
                       usage=generation_usage(generations), counts=counts, extra_frames=plans, pairs=pairs,
                       derived=derived)


def write_facts(facts: pd.DataFrame, path: Path) -> None:
    from bloomqg.store.parquet_io import write_frame
    from bloomqg.reporting.facts import facts_schema

    write_frame(facts, path, facts_schema())


def _frame_cell(frame: pd.DataFrame, strategy_labels: StrategyLabels | None) -> str:
    """``cs, CoT``: the cell(s) a generation file's rows belong to."""
    rows = frame[["dataset", "strategy"]].drop_duplicates()
    return "; ".join(f"{d}, {strategy_label(s, strategy_labels)}" for d, s in rows.itertuples(index=False))


def build_report_from_files(
    out_path: Path,
    *,
    config: Mapping,
    config_meanings: Mapping[str, str] | None = None,
    metrics: Path,
    correlations: Path,
    paired: Path,
    votes: Sequence[Path],
    reliability: Sequence[Path],
    generations: Sequence[Path],
    judgments: Sequence[Path],
    tables: Sequence[Path],
    figures: Sequence[Path],
    robustness: Path | None = None,
    title: str = "bloomqg report",
    judge_bias: Sequence[Path] = (),
    explorer_href: str | None = None,
    strategy_labels: StrategyLabels | None = None,
    comparison: ComparisonSpec = ComparisonSpec(),
    strategy_order: Sequence[str] = (),
    probes: Sequence[Path] = (),
    answer: Path | None = None,
    strategies: Sequence[Mapping[str, Any]] = (),
) -> None:
    """:func:`build_report` from the workflow's files (what the report rules hand over).
    ``answer``: ``metrics/answer.parquet`` (the Answer's verdicts).
    ``probes``: the judge-bias probe files, whose calls the cost ledger counts with the judges'.

    ``judgments`` may be empty (an imported release publishes votes, not the judges' calls):
    the judgments provenance and the cost ledger are then empty too.
    """
    from bloomqg.api.ledger import study_ledger
    from bloomqg.store.parquet_io import read_frame, read_frames, read_provenance
    from bloomqg.store.provenance import git_commit, package_versions
    from bloomqg.store.frames import GENERATIONS, JUDGE_PROBES, JUDGMENTS, METRICS, RELIABILITY, VOTES

    generation_frames = [read_frame(path, GENERATIONS) for path in generations]
    generation_frame = pd.concat(generation_frames, ignore_index=True)
    judgment_frame = read_frames(judgments, JUDGMENTS) if judgments else None
    ledger = study_ledger(generations=generation_frame, judgments=judgment_frame,
                          probes=read_frames(probes, JUDGE_PROBES) if probes else None)
    build_report(
        Path(out_path),
        config=config,
        config_meanings=config_meanings,
        all_metrics=read_frame(metrics, METRICS),
        votes=read_frames(votes, VOTES),
        reliability=read_frames(reliability, RELIABILITY),
        generations=generation_frame,
        # each generation file's cell first: its provenance names the model, not the dataset and strategy
        generation_provenance=[{"cell": _frame_cell(frame, strategy_labels), **read_provenance(path)}
                               for path, frame in zip(generations, generation_frames)],
        judgment_provenance=[read_provenance(p) for p in judgments],
        ledger=ledger,
        table_paths=[Path(p) for p in tables],
        figure_paths=[Path(p) for p in figures],
        correlations=pd.read_parquet(correlations),
        paired=pd.read_parquet(paired),
        robustness=pd.read_parquet(robustness) if robustness else None,
        git_commit=git_commit(),
        package_versions=package_versions(),
        title=title,
        judge_bias=[Path(p) for p in judge_bias],
        explorer_href=explorer_href,
        strategy_labels=strategy_labels,
        comparison=comparison,
        strategy_order=strategy_order,
        judgments=judgment_frame,
        answer=pd.read_parquet(answer) if answer else None,
        strategies=strategies,
    )
