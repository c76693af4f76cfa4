"""One fact per number: every number a report prints is a row of its facts frame
(bloomqg.reporting.facts, written beside the report), checked by tests/support/report_facts.py on
a report shaped like the default study and on one of four strategies; and the check catches a
number the report made up."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from bloomqg.reporting.facts import FACT_COLUMNS, cell_mean, judge_means
from bloomqg.reporting.report import facts_path
from tests.support.report_facts import role_of, unmatched_numbers
from tests.unit.test_report_consistency import DEFAULT_SHAPE, render

FOUR = {"cot": "CoT", "fgp": "FGP", "zeroshot": "Zero-shot", "socratic": "Socratic"}


@pytest.fixture(scope="module")
def default_shaped(tmp_path_factory):
    out = tmp_path_factory.mktemp("facts-default")
    page = render(out, DEFAULT_SHAPE)
    return page, pd.read_parquet(facts_path(out / "report.html"))


@pytest.fixture(scope="module")
def four_strategies(tmp_path_factory):
    out = tmp_path_factory.mktemp("facts-four")
    page = render(out, {"cs": list(FOUR), "social": ["cot", "fgp", "zeroshot", "socratic"]}, FOUR)
    return page, pd.read_parquet(facts_path(out / "report.html"))


def test_the_facts_frame_defines_and_sources_every_fact(default_shaped):
    _, facts = default_shaped
    assert list(facts.columns) == list(FACT_COLUMNS)
    assert facts["definition"].str.len().gt(0).all() and facts["source"].notna().all()
    assert (facts["value"].notna() | facts["n"].notna()).all()
    # a metric's fact is its metrics row: value, n and interval
    catcons = facts[facts["quantity"] == "catcons"]
    assert len(catcons) and catcons["method"].notna().any() and catcons["definition"].str.startswith("category").all()


@pytest.mark.parametrize("study", ["default_shaped", "four_strategies"])
def test_every_printed_number_is_a_fact(study, request):
    page, facts = request.getfixturevalue(study)
    assert unmatched_numbers(page, facts) == []


@pytest.mark.parametrize("tamper, found", [
    # the Answer's first strategy value, one unit off in its last place
    (lambda page: re.sub(r'(<table class="answer">.*?<td[^>]*>(?:<a [^>]*>)?)(\d+)\.(\d\d)(%?(?: |<br>)\(n=)',
                         lambda m: f"{m[1]}{m[2]}.{(int(m[3]) + 7) % 100:02d}{m[4]}", page, count=1, flags=re.S),
     "answer:"),
    # an n the data does not have
    (lambda page: page.replace("<p class=\"reading\">", "<p class=\"reading\">Of n = 9137 questions. ", 1), "9137"),
    # a share printed as a percentage that is no fact's
    (lambda page: page.replace("<p class=\"reading\">", "<p class=\"reading\">61.07% of them. ", 1), "61.07"),
])
def test_the_check_catches_a_number_no_fact_explains(default_shaped, tamper, found):
    page, facts = default_shaped
    tampered = tamper(page)
    assert tampered != page
    assert any(found in problem for problem in unmatched_numbers(tampered, facts))


def test_a_number_is_read_as_an_n_an_interval_end_or_a_value():
    text = "48.15 (n = 27) 31.82 [3.3, 56.4] points"
    assert role_of(text, text.index("27"), text.index("27") + 2) == "n"
    assert role_of(text, text.index("3.3"), text.index("3.3") + 3) == "interval"
    assert role_of(text, text.index("56.4"), text.index("56.4") + 4) == "interval"
    assert role_of(text, 0, 5) == "value"


def test_the_aggregates_the_readings_state_are_computed_once():
    metrics = pd.DataFrame({"model": ["m", "m", "m"], "dataset": ["cs", "social", "math"], "strategy": ["cot"] * 3,
                            "metric": ["parse_failure_rate"] * 3, "value": [10.0, 20.0, None], "n": [4, 6, 2]})
    mean = cell_mean(metrics, "parse_failure_rate")
    assert (mean.value, mean.n_cells, mean.n_items) == (15.0, 2, 10)
    reliability = pd.DataFrame({"judge": ["a", "a", "b", None], "criterion": ["unique", "readable", "unique", "unique"],
                                "agreement_with_majority": [0.5, 1.0, 0.25, 0.9]})
    assert judge_means(reliability, "agreement_with_majority").to_dict() == {"a": 75.0, "b": 25.0}


def test_figure_6_counts_its_originals_where_no_strategy_names_a_unit(tmp_path):
    # Figure 6's counts do not depend on Figure 4's: a study whose classifying strategy named no
    # unit still records how many originals it classified and had, under that strategy
    def no_units(votes):
        return votes.assign(identified_knowledge_units=None)

    page = render(tmp_path, {"cs": ["cot", "fgp"], "social": ["cot", "fgp"]}, edit_votes=no_units)
    facts = pd.read_parquet(facts_path(tmp_path / "report.html"))
    quantities = set(facts["quantity"])
    assert {"figure6.cot.classified", "figure6.cot.originals"} <= quantities, sorted(
        q for q in quantities if q.startswith("figure"))
    assert unmatched_numbers(page, facts) == []
