"""The report's glossary: every metric, statistic and mark the page uses, in one sentence each,
so a reader who meets a term before its section can look it up (``#glossary-<key>``).

The metrics' sentences are their specs' own (:attr:`bloomqg.metrics.spec.MetricSpec.definition`);
the statistics' are written here once.
"""

from __future__ import annotations

from bloomqg.bloom import BLOOM_LEVELS
from bloomqg.metrics.registry import metric_spec
from bloomqg.voting.agreement import GATE_RULE, PREVALENCE_LIMIT

#: Metrics in the order the glossary lists them.
GLOSSARY_METRICS: tuple[str, ...] = (
    "usability", "catcons", "knowcov", "cogshift", "cogreg", "cogdrift", "cogleap", "unique", "readable", "answerable",
)

_TERMS: tuple[tuple[str, str, str], ...] = (
    ("bloom", "Bloom level",
     f"how demanding a question is, in six ordered levels: {', '.join(BLOOM_LEVELS)} (Bloom's revised taxonomy). "
     "Each original question carries one; a new question should hit the same level."),
    ("unit", "Knowledge unit", "the topic a question is about, from the dataset's own list of units."),
    ("useful", "Useful question", "one the judges' majority calls unique, readable and answerable."),
    ("pairs", "Pairs", "original questions answered under both strategies: comparing on the same originals removes "
     "the originals' own difficulty from the difference."),
    ("interval", "95% interval", "the range of values compatible with the data; it holds the true value in 95% of "
     "studies like this one."),
    ("holm", "Holm's p", "the p value adjusted for the several comparisons made on one metric (Holm's method), "
     "so that the chance of any false finding among them stays at 5%."),
    ("detectable", "Detectable difference", "the smallest difference this study would find 8 times in 10 with its "
     "number of pairs (the study plan); a smaller true difference may go unseen."),
    ("verdicts", "Verdicts", "higher / lower: a difference after Holm's adjustment; no difference: none beyond the "
     "interval's far end; cannot tell: the judges do not agree on what the metric needs, or the study is too small "
     "to see a useful difference (not the same as 'no difference')."),
    ("alpha", "Krippendorff's α", "how much the judges agree beyond chance: 1 = always, 0 = no better than chance. "
     "The gate asks at least 0.7."),
    ("ac1", "Gwet's AC1", f"agreement beyond chance that stays meaningful when one answer dominates; used instead of "
     f"α where one answer holds ≥ {PREVALENCE_LIMIT:.0%} of the votes, since α then collapses although the judges "
     "agree."),
    ("prevalence", "Prevalence", "the share of all votes given to the most common answer."),
    ("gate", "The gate", f"the rule that decides whether the judges rate a criterion reliably in a cell: {GATE_RULE}. "
     "Numbers resting on an unreliable or unmeasured criterion are marked †."),
    ("dagger", "† (dagger)", "a criterion behind the number failed the gate, or its agreement could not be measured."),
    ("ddagger", "‡ (double dagger)", "the number is decided by how the panel is built (e.g. a judge that cannot "
     "rate the criterion), not by the judges' votes."),
    ("dawid-skene", "Dawid–Skene", "a model that estimates each judge's accuracy from the votes alone and weighs "
     "the judges by it; shown beside the plain majority as a check."),
    ("ppi", "PPI++", "prediction-powered inference: a few human labels correct the judges' estimate and its "
     "interval."),
    ("n", "n", "the number of questions a value is computed over."),
)


def glossary_entries() -> list[dict[str, str]]:
    """[{key, term, text}] in the page's order: the metrics, then the terms."""
    metrics = [{"key": name, "term": metric_spec(name).label, "text": metric_spec(name).definition + "."}
               for name in GLOSSARY_METRICS]
    return metrics + [{"key": key, "term": term, "text": text} for key, term, text in _TERMS]
