"""The report's glossary: every metric, statistic and mark the page uses, in one sentence each,
so a reader who meets a term before its section can look it up (``#glossary-<key>``).

The metrics' sentences are their specs' own (:attr:`bloomqg.metrics.spec.MetricSpec.definition`);
the statistics' are written here once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.metrics.registry import metric_spec
from bloomqg.voting.agreement import GATE_RULE, PREVALENCE_LIMIT
from bloomqg.voting.diagnostics import SUSPICIOUS_REASONS

#: Metrics in the order the glossary lists them.
GLOSSARY_METRICS: tuple[str, ...] = (
    "usability", "catcons", "knowcov", "cogshift", "cogreg", "cogdrift", "cogleap", "unique", "readable", "answerable",
)

_TERMS: tuple[tuple[str, str, str], ...] = (
    ("panel", "Panel, judges", "the automatic raters that judge every generated question; a criterion's label is the "
     "strict majority of their votes (more than half of the votes cast), and without one it has no label."),
    ("cell", "Cell", "one model × dataset × strategy: the questions one model wrote for one dataset under one "
     "prompting strategy. Agreement and every table value are computed per cell."),
    ("criterion", "Criterion", "one thing the judges rate: unique, readable, answerable, the Bloom level, the "
     "knowledge units."),
    ("points", "Points, pp", "percentage points: the difference of two percentages (60% against 50% is +10 points)."),
    ("bloom", "Bloom level",
     f"how demanding a question is, in six ordered levels: {', '.join(BLOOM_LEVELS)} (Bloom's revised taxonomy). "
     "Each original question carries one (unless the dataset leaves it uncategorized); a new question should "
     "hit the same level."),
    ("unit", "Knowledge unit", "the topic a question is about, from the dataset's own list of units."),
    ("useful", "Useful question", "one the judges' majority calls unique, readable and answerable."),
    ("pairs", "Pairs", "original questions with a value of the metric under both strategies (for CatCons, a useful "
     "question with a judged level under each; so a metric's pairs can be fewer than the originals both strategies "
     "answered, and another way of voting can give more): comparing on the same originals removes the originals' own "
     "difficulty from the difference."),
    ("interval", "95% interval (95% CI)", "the range of values compatible with the data; it holds the true value in "
     "95% of studies like this one. Shares take Clopper–Pearson's exact interval (it never claims more certainty "
     "than the data give), means of levels (CogShift) an exact betting interval (built from fair bets against each candidate mean; like Clopper–Pearson it never covers less than 95%), paired differences Tango's score "
     "interval (built for two answers per original; CogShift's the betting interval of the differences, KnowCov's "
     "MOVER, which combines the two arms' own intervals), agreement coefficients a bootstrap over questions. "
     "Near the edge a paired interval can exclude 0 while McNemar's p is just above 0.05: the test is exact, "
     "counting only the originals on which the strategies differ, the interval an approximation (summed over "
     "every possible table, it held the true value at least 95% of the time unless nearly "
     "every original's two answers differ); the verdict follows the test."),
    ("bootstrap", "Bootstrap", "an interval found by re-drawing the questions at random with replacement many "
     "times and recomputing the value each time; the middle 95% of those values is the interval."),
    ("tests", "McNemar, Wilcoxon", "the paired tests: McNemar's for yes/no outcomes (does a question hit its level), "
     "Wilcoxon's signed-rank for graded ones (KnowCov). Their effect sizes say how large a difference is, apart "
     "from how sure it is: Cohen's h for shares (0.2 small, 0.5 medium, 0.8 large) and the rank-biserial "
     "correlation for graded outcomes (−1 to 1)."),
    ("p-value", "p value, significant", "how often a difference at least this large would show by chance alone if the "
     "two strategies were equally good; a difference is significant when its p is below 0.05 (after Holm's "
     "adjustment where the page says so): unlikely to be chance, which is not the same as large or important."),
    ("holm", "Holm's p", "the p value adjusted for the several comparisons made on one metric (Holm's method), "
     "so that the chance of any false finding among them stays at 5%."),
    ("power", "Power", "how likely the study is to find a difference of a given size if there is one; with few pairs "
     "it is low, so finding nothing says little. The Answer asks 8 times in 10 (80%)."),
    ("detectable", "Detectable difference", "the smallest difference this study would find 8 times in 10 with its "
     "number of pairs (the study plan); a smaller true difference may go unseen."),
    ("verdicts", "Verdicts", "higher / lower: a difference after Holm's adjustment; no difference: the judges agree, the "
     "study is big enough, and the interval rules out any difference larger than its far end (said in points); cannot tell: no original has a value under both strategies, the judges do not agree on what the metric needs, or the study is too small "
     "to see a useful difference (one it would find 8 times in 10 is larger than the bound the config sets, answer.max_detectable_difference, "
     "20 points by default; not the same as 'no difference')."),
    ("alpha", "Krippendorff's α", "how much the judges agree beyond chance: 1 = always, 0 = no better than chance, "
     "below 0 = they disagree more than chance would (systematically). The gate asks at least 0.7."),
    ("kappa", "Cohen's κ", "agreement of two raters beyond chance, on the same scale as α."),
    ("ac1", "Gwet's AC1", f"agreement beyond chance that stays meaningful when one answer dominates; used instead of "
     f"α where one answer holds ≥ {PREVALENCE_LIMIT:.0%} of the votes, since α then collapses although the judges "
     "agree; but it reads high for judges that say the common answer whatever the question, so the gate takes it "
     "only where α's interval lies above 0 (chance ruled out)."),
    ("prevalence", "Prevalence", "the share of all votes given to the most common answer."),
    ("gate", "The gate", f"the rule that decides whether the judges rate a criterion reliably in a cell: {GATE_RULE}. "
     "Numbers resting on an unreliable or unmeasured criterion are marked †."),
    ("dagger", "† (dagger)", "a criterion behind the number failed the gate, or its agreement could not be measured."),
    ("ddagger", "‡ (double dagger)", "the number is decided by how the panel is built (e.g. a judge that always "
     "says yes beside one that cannot rate the criterion), not by the judges' votes. Such judges that leave the "
     "others free to change the result are listed apart, without a mark."),
    ("valid", "Valid vote, abstains", "a valid vote is a judge's answer that could be read; a judge that gives "
     "none on a question (it cannot rate the criterion, or its reply did not parse) abstains there."),
    ("by-construction", "By construction", "agreement where at most one judge's votes vary (the others always "
     "give one answer or abstain): it shows how the panel is built, not that judges who rate the questions agree, "
     "so the gate counts it as not measured (α there is at most 0 whatever the questions, its value fixed by how "
     "often the one varying judge dissents)."),
    ("dawid-skene", "Dawid–Skene (DS)", "a model that estimates each judge's accuracy from the votes alone and weighs "
     "the judges by it (its label: the answer it finds likeliest); shown beside the plain majority as a check."),
    ("effective", "Effective judges", "how many independent judges the panel is worth: n / (1 + (n − 1)·ρ̄), with "
     "n the judges whose votes vary (one that always gives the same answer adds nothing) and ρ̄ the mean "
     "correlation of their errors against the Dawid–Skene label; n when they err independently, 1 when they all "
     "make the same mistakes; – with fewer than two such judges. Independence, not accuracy: judges that err "
     "often but each in their own way still count n."),
    ("sensitivity", "Sensitivity, specificity", "of a judge on a yes/no criterion, under Dawid–Skene: how often it "
     "says yes where the Dawid–Skene label is yes (sensitivity) and no where the label is no (specificity). Their "
     "intervals are Jeffreys' (an interval for a share that stays sensible with few votes), over Dawid–Skene's "
     "counts (each vote weighted by how likely its label is)."),
    ("agrees", "Agrees with the others", "how often a judge's vote equals the strict majority of the other judges, "
     "its own vote left out (with it in, a judge of three would make a third of every majority itself)."),
    ("leave-one-out", "Leave-one-judge-out panel", "the panel with one judge removed; a comparison that keeps its "
     "sign and significance without each judge in turn does not rest on any one judge."),
    ("robustness-verdicts", "Holds, within judge noise, depends on X, not assessable", "what becomes of a "
     "comparison under other panels (one judge left out, or Dawid–Skene): holds, every panel gives the same "
     "direction and the same side of p 0.05; holds where measured, the same, but some panels label too few questions "
     "for a value; depends on X, only leaving out judge X changes it; within judge noise, other panels turn its "
     "direction, or give one where the majority finds none; not assessable, no panel with a judge left out has a value. Holding is about the panel, not the "
     "questions: votes that fail the gate can hold and still measure nothing."),
    ("judge-flags", "Judge flags: " + ", ".join(SUSPICIOUS_REASONS),
     "; ".join(f"{name}, {rule}" for name, rule in SUSPICIOUS_REASONS.items())
     + ". A flagged judge's votes carry little information on that criterion in that cell."),
    ("raw-p", "Raw p", "a p value before Holm's adjustment for the several comparisons of a metric."),
    ("ppi", "PPI, PPI++", "prediction-powered inference: a few human labels correct the judges' estimate and its "
     "interval (PPI++ tunes how much the judges are trusted)."),
    ("n", "n", "the number of questions a value is computed over."),
    ("auxiliary", "Classification acc., Knowledge-ID acc.", "under a strategy that asks the model to name the "
     "original's Bloom level and knowledge units first (CoT): how often it named the level, and the exact set of "
     "units, the dataset gives the original."),
    ("parse", "Parse failure", "a reply the workflow could not read a question (or a judge's verdict) from, e.g. "
     "no JSON, or a reply cut off at the length limit before any question could be read from it (one cut off "
     "later still counts as read, its question perhaps unfinished)."),
    ("k-12", "K-12", "the school years from kindergarten to grade 12 (ages about 5 to 18): the paper's math dataset "
     "holds questions from them."),
    ("model-size", "Model size (135m, 8b)", "a model's name often ends in its size, in parameters (the numbers it "
     "learned): 135m is 135 million, 8b 8 billion. The paper's models have billions; a model of millions, like the "
     "one this workflow runs with no GPU, is for trying the workflow out: its questions say little about what a "
     "model of billions writes."),
    ("temperature", "Temperature, random draw, max_new_tokens", "how freely a model picks each next word: at 0 it always takes "
     "the likeliest, so a prompt gives one reply; above 0 it draws at random, so the same prompt can give another "
     "question on another run. Other settings of the configuration shape the draw: do_sample (draw at random, or "
     "always take the likeliest word), top_p (draw only among the likeliest words that together hold this share of "
     "the probability) and max_new_tokens (the longest reply, in word pieces)."),
    ("order", "Same order as the original", "the six Bloom levels in three orders, lower (Remember, Understand), "
     "middle (Apply, Analyze) and higher (Evaluate, Create): a question of the same order as its original is near "
     "its level though not on it. The labels plan counts it; no metric of the paper does."),
    ("llm", "LLM", "large language model: a model that writes text, such as the one that wrote these questions "
     "or the smollm2 judge."),
    ("api", "API, tokens", "API: a model reached over the network as a paid service (OpenAI-compatible); tokens: "
     "the word pieces a model reads (prompt) and writes (completion), what API calls are priced by."),
)


def glossary_entries(strategies: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, str]]:
    """[{key, term, text}] in the page's order: the strategies run (their labels and titles), the
    metrics, then the terms."""
    named = [{"key": f"strategy-{s['name']}", "term": str(s["label"]), "text": f"{s['title']}."} for s in strategies]
    metrics = [{"key": name, "term": metric_spec(name).label, "text": metric_spec(name).definition + "."}
               for name in GLOSSARY_METRICS]
    return named + metrics + [{"key": key, "term": term, "text": text} for key, term, text in _TERMS]
