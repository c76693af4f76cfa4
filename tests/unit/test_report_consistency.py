"""A report shaped like the default study (and one with a strategy of the user's own) says the
same thing wherever it says it: tests/support/report_consistency.py, and that it catches what
it checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.report_consistency import report_inconsistencies

DEFAULT_SHAPE = {"cs": ["cot", "fgp"], "math": ["fgp"], "social": ["cot", "fgp"]}


def render(out: Path, cells: dict, labels: dict | None = None, edit_votes=None) -> str:
    """The report of a one-model synthetic study of ``cells``; ``edit_votes`` (votes → votes), if
    given, changes the votes the report reads (the metrics stay the study's)."""
    from bloomqg.metrics.answer import answer_table
    from bloomqg.metrics.paired import paired_comparisons
    from bloomqg.reporting.report import build_report
    from bloomqg.reporting.tables.write import write_tables
    from tests.support.synthetic import synthetic_study, trust_frames

    study = synthetic_study(n_models=1, n_items=18, cells=cells)
    if edit_votes is not None:
        study.votes = edit_votes(study.votes)
    reliability, robustness = trust_frames(study)
    paired = paired_comparisons(study.votes, n_resamples=50, strategy_order=list(labels or {}))
    tables = write_tables(study.metrics, study.datasets, reliability, out / "tables", paired=paired,
                          strategy_labels=labels)
    build_report(out / "report.html", config=study.config, all_metrics=study.metrics, votes=study.votes,
                 reliability=reliability, robustness=robustness, generations=study.generations,
                 generation_provenance=study.generation_provenance, judgment_provenance=study.judgment_provenance,
                 ledger=study.ledger, table_paths=tables, figure_paths=[], correlations=study.correlations,
                 paired=paired, git_commit="0" * 40, package_versions={}, strategy_labels=labels,
                 strategy_order=list(labels or {}), answer=answer_table(paired, None, reliability))
    return (out / "report.html").read_text()


@pytest.fixture(scope="module")
def default_shaped(tmp_path_factory) -> str:
    return render(tmp_path_factory.mktemp("default-shaped"), DEFAULT_SHAPE)


def test_the_default_shaped_report_answers_first_and_contradicts_itself_nowhere(default_shaped):
    assert default_shaped.index('<section id="answer">') < default_shaped.index('<section id="overview">')
    assert "FGP against CoT, " in default_shaped and "math (glm-4-9b: ran FGP only)" in default_shaped
    assert report_inconsistencies(default_shaped) == []


@pytest.mark.parametrize("tamper, found", [
    (lambda page: re.sub(r'(<table class="answer">.*?<span class="small">)18( pairs</span>)', r"\g<1>17\2", page,
                         count=1, flags=re.S), "the paired table"),
    (lambda page: page.replace("<p class=\"reading\">", "<p class=\"reading\">Unique ranged from 50.0% (a, cs) to "
                               "50.0% (a, social). ", 1), "'from X to X'"),
    (lambda page: page.replace("no question could have changed it", "no question changed it"), "stated 0 times"),
    (lambda page: re.sub(r"not measured \([^)]*\) †", "α 0.000 †", page, count=1), "listed in the gate table"),
])
def test_the_checks_catch_what_they_check(default_shaped, tamper, found):
    assert any(found in problem for problem in report_inconsistencies(tamper(default_shaped)))


def test_a_strategy_of_ones_own_is_named_by_its_label_everywhere(tmp_path):
    labels = {"cot": "CoT", "fgp": "FGP", "socratic": "Socratic"}
    page = render(tmp_path, {"biology": ["cot", "fgp", "socratic"]}, labels)
    shown = page[:page.index('<section id="config">')]  # the configuration and provenance record raw names
    assert "Socratic against CoT, " in shown and "· socratic" not in shown
    assert report_inconsistencies(page) == []
