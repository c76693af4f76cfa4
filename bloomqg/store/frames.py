"""Frame schemas: the explicit pyarrow schema of every Parquet file the workflow writes.

(Not to be confused with ``schemas/config.schema.yaml``, the JSON schema of the config, which
:mod:`bloomqg.store.config_schema` loads.)

One module holds them all so that a producer and its consumers cannot drift apart: writers pass
their frame through :func:`bloomqg.store.parquet_io.write_frame` with one of these schemas, which
casts, checks nullability and refuses unknown or missing columns.

File contracts (paths relative to the working directory):

- ``results/datasets/{dataset}.parquet``  -> :data:`DATASET`
- ``results/prompts/{dataset}/{strategy}.parquet`` -> :data:`PROMPTS`
- ``results/generations/{dataset}/{strategy}/{model}.parquet`` -> :data:`GENERATIONS`
- ``results/judgments/{dataset}/{strategy}/{model}/{judge}.parquet`` -> :data:`JUDGMENTS`
- ``results/votes/{dataset}/{strategy}/{model}.parquet`` -> :data:`VOTES`
- ``results/votes/{dataset}/{strategy}/{model}.reliability.parquet`` -> :data:`RELIABILITY`
- ``results/release/votes/{dataset}/{strategy}/{model}.lines.parquet`` -> :data:`PUBLISHED_VOTE_LINES`
- ``results/release/import_report.parquet`` -> :data:`UNJOINED_LINES`
- ``results/metrics/{dataset}/{strategy}/{model}.parquet`` and ``results/metrics/all.parquet``
  -> :data:`METRICS`
"""

from __future__ import annotations

import pyarrow as pa

_str = pa.string()
_units = pa.list_(pa.string())


def _schema(*fields: pa.Field) -> pa.Schema:
    return pa.schema(list(fields))


def f(name: str, type_: pa.DataType, nullable: bool = True) -> pa.Field:
    """A field; ``nullable=False`` marks columns that must never hold a null."""
    return pa.field(name, type_, nullable=nullable)


#: One row per original item of a dataset.
DATASET = _schema(
    f("item_id", _str, False),  # "<dataset>-<4-digit row>", stable across reruns
    f("dataset", _str, False),
    f("source_row", pa.int64(), False),  # 1-based data row in the source file (header excluded)
    f("question", _str, False),
    f("bloom_level", _str),  # one of bloom.BLOOM_LEVELS; null = Uncategorized
    f("bloom_source", _str, False),  # "label" (given by the file) | "verb_list" | "fixed"
    f("knowledge_units", _units, False),  # at least one unit
)

#: One row per (item, target): the chat messages a generator receives.
PROMPTS = _schema(
    f("prompt_id", _str, False),  # "<item_id>:<strategy>"
    f("item_id", _str, False),
    f("dataset", _str, False),
    f("strategy", _str, False),  # a defined strategy's name (cot, fgp, refine, the config's)
    f("original_question", _str, False),
    f("original_bloom_level", _str),
    f("original_knowledge_units", _units, False),
    f("target_bloom_level", _str),  # a strategy that gives targets (FGP): the original's level; else null
    f("target_knowledge_units", _units),  # likewise the original's units
    f("exemplar_ids", _units, False),  # few-shot items, same knowledge unit, never the item
    f("messages_json", _str, False),  # JSON list of {"role", "content"}
    f("prompt_hash", _str, False),  # sha256 of the template file(s), first 16 hex digits
    # JSON list, one per pass: {"name", "answer_fields"}; after the first also "messages", with
    # {previous_question}/{previous_answer} for the generation stage to fill
    f("passes_json", _str, False),
)

#: GENERATIONS ``finish_reason`` of a row imported from a published release (no call of ours).
IMPORTED = "imported"
#: GENERATIONS ``finish_reason`` of a reply that ran to its token limit (cut off, maybe mid-question).
CUT_OFF = "length"

#: One row per prompt: what a model wrote, parsed.  Self-contained for judging (carries the
#: original question and its labels) so imported runs need no prompts file.
GENERATIONS = _schema(
    f("prompt_id", _str, False),
    f("item_id", _str, False),
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("original_question", _str, False),
    f("original_bloom_level", _str),
    f("original_knowledge_units", _units, False),
    f("raw_text", _str),  # the model's full answer; null only when the call itself failed
    f("new_question", _str),  # null when parsing failed
    f("identified_bloom_level", _str),  # CoT: the model's level for the original
    f("identified_knowledge_units", _units),  # CoT: the model's units for the original
    f("parse_status", _str, False),  # "ok" | "failed" | "error" (generation call failed)
    f("parse_error", _str),  # why parsing failed; on "ok" rows, a note (e.g. CoT level not recognised)
    f("finish_reason", _str),  # "stop" | "length" | "error" | "imported"
    f("n_prompt_tokens", pa.int64()),
    f("n_completion_tokens", pa.int64()),
    f("latency_s", pa.float64()),
    f("batch_index", pa.int64()),
    f("seed", pa.int64()),
    f("prompt_hash", _str),
    # API generators: answered from the call cache; what the spend ledger records as paid for
    # the call (a cached answer paid in an earlier attempt included); the call's cache key
    f("cached", pa.bool_()),
    f("cost_usd", pa.float64()),
    f("cache_key", _str),
    # JSON list, one record per pass of the strategy (one for CoT/FGP): pass, raw_text,
    # new_question, parse_status, parse_error, finish_reason, n_prompt_tokens,
    # n_completion_tokens, latency_s, cached, cost_usd, cache_key. The row's own raw_text,
    # question and parse columns are the last pass's (what is judged and scored); its token,
    # latency and cost columns are the sums over the passes; null for imported rows.
    f("passes_json", _str),
)

#: GENERATIONS columns only the cost ledger and audits read: judging and voting do without them.
GENERATION_COST_COLUMNS: tuple[str, ...] = ("cached", "cost_usd", "cache_key", "passes_json")

#: Judging criteria, in the order of the paper's rubric (Table 3).
BINARY_CRITERIA: tuple[str, ...] = ("unique", "readable", "answerable")
CRITERIA: tuple[str, ...] = BINARY_CRITERIA + ("bloom_level", "knowledge_units")
#: Criteria Dawid–Skene can aggregate (one label per vote); knowledge units are sets and stay a
#: majority of sets.
POSTERIOR_CRITERIA: tuple[str, ...] = BINARY_CRITERIA + ("bloom_level",)

#: Status values of a criterion verdict (JUDGMENTS' ``status`` column).
STATUS_OK = "ok"
STATUS_PARSE_FAILED = "parse_failed"
STATUS_ERROR = "error"
#: the cell's generation held no question: no judge was asked
STATUS_NO_QUESTION = "no_question"

#: Long format: one row per (generated question, criterion) for one judge.
JUDGMENTS = _schema(
    f("prompt_id", _str, False),
    f("item_id", _str, False),
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("judge", _str, False),
    f("criterion", _str, False),  # one of CRITERIA
    f("value_bool", pa.bool_()),  # unique / readable / answerable
    f("value_level", _str),  # bloom_level
    f("value_units", _units),  # knowledge_units (one or more, from the dataset's list)
    f("status", _str, False),  # "ok" | "parse_failed" | "error" (incl. abstained) | "no_question"
    f("reason", _str),  # why a value is missing
    f("raw_text", _str),  # the judge's raw answer (LLM judges), for audit
    f("cached", pa.bool_()),  # answered from the call cache
    f("n_prompt_tokens", pa.int64()),
    f("n_completion_tokens", pa.int64()),
    f("cost_usd", pa.float64()),  # the spend ledger's figure, also for a cached answer paid earlier
    f("cache_key", _str),  # the call's cache key (= its spend-ledger key); null for judges without calls
    # a choices-mode LLM judge's probability of each option of the criterion, as JSON
    # {option: prob} ("true"/"false", level names, unit names; bloomqg.judges.choices); null otherwise
    f("choice_probs", _str),
)

#: One row per generated question: majority votes, per-criterion agreement and gate state.
VOTES = _schema(
    f("prompt_id", _str, False),
    f("item_id", _str, False),
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("original_question", _str, False),
    f("original_bloom_level", _str),
    f("original_knowledge_units", _units, False),
    f("new_question", _str),
    f("identified_bloom_level", _str),
    f("identified_knowledge_units", _units),
    f("parse_status", _str, False),
    # the model's answer has text (GENERATIONS raw_text not blank), a question or not; False: an
    # empty answer, a failed call, a release row without an output. Usability counts an answered
    # row whose parse failed as generated and not useful (bloomqg.metrics.quality)
    f("answered", pa.bool_(), False),
    f("n_judges", pa.int64(), False),
    # strict-majority votes; null = tie, too few valid votes, or gated out (see *_null_reason)
    f("unique", pa.bool_()),
    f("readable", pa.bool_()),
    f("answerable", pa.bool_()),
    f("bloom_level", _str),
    f("knowledge_units", _units),
    # the individual votes as strings ("1"/"0", level names, JSON unit lists); null = no vote
    f("unique_votes", _units),
    f("readable_votes", _units),
    f("answerable_votes", _units),
    f("bloom_level_votes", _units),
    f("knowledge_units_votes", _units),
    # share of valid votes that agree with the majority (null when no majority)
    f("unique_agreement", pa.float64()),
    f("readable_agreement", pa.float64()),
    f("answerable_agreement", pa.float64()),
    f("bloom_level_agreement", pa.float64()),
    f("knowledge_units_agreement", pa.float64()),
    f("unique_null_reason", _str),
    f("readable_null_reason", _str),
    f("answerable_null_reason", _str),
    f("bloom_level_null_reason", _str),
    f("knowledge_units_null_reason", _str),
    f("useful", pa.bool_()),  # unique ∧ readable ∧ answerable (3-valued: one False is False)
    f("alpha_gated", pa.bool_(), False),  # some criterion of this cell failed the α gate
    f("aggregation", _str),  # "majority" | "dawid_skene" (null: written before the choice existed)
    # Dawid-Skene posterior probability of the voted label (null under majority)
    f("unique_posterior", pa.float64()),
    f("readable_posterior", pa.float64()),
    f("answerable_posterior", pa.float64()),
    f("bloom_level_posterior", pa.float64()),
)

#: One row per line of an imported run's published votes file, as published: a question text
#: judged on several lines is here several times (the rows Table 4 is computed over).
PUBLISHED_VOTE_LINES = _schema(
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("line", pa.int64(), False),  # 1-based line number in the votes file
    f("question", _str, False),
    f("unique", pa.bool_()),  # the published majority; null only when the α gate dropped it
    f("readable", pa.bool_()),
    f("answerable", pa.bool_()),
    f("knowledge_units", _units),  # the published majority topic, split into units
    # each judge's vote as VOTES writes it ("1"/"0", JSON unit lists)
    f("unique_votes", _units),
    f("readable_votes", _units),
    f("answerable_votes", _units),
    f("knowledge_units_votes", _units),
    # share of the votes that agree with the majority (null when the gate dropped it)
    f("unique_agreement", pa.float64()),
    f("readable_agreement", pa.float64()),
    f("answerable_agreement", pa.float64()),
    f("knowledge_units_agreement", pa.float64()),
    # prompt_ids of the originals the join gives this line's votes to (the first line with their
    # text); empty: a later line of a text, or a text no original produced; null: not joined
    f("joined", _units),
)

#: The import report of a release: one row per published vote line that gives its votes to no
#: generated question (:func:`bloomqg.release.runs.unjoined_lines`), with why.
UNJOINED_LINES = _schema(
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("line", pa.int64(), False),  # 1-based line number in the votes file
    f("question", _str, False),  # the line's text
    f("reason", _str, False),  # "placeholder" | "judged_again" | "no_row" (release.runs.UNJOINED_REASONS)
    # prompt_ids: the placeholder row the line judges, or the rows that wrote a text judged again
    f("rows", _units, False),
    f("detail", _str, False),  # the reason as a sentence
)

#: Krippendorff's α and judge diagnostics per criterion of one cell (model×dataset×strategy).
RELIABILITY = _schema(
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("criterion", _str, False),
    f("judge", _str),  # null for the panel-level row; a judge's name for its own diagnostics
    f("alpha", pa.float64()),  # panel rows only
    f("alpha_ci_low", pa.float64()),
    f("alpha_ci_high", pa.float64()),
    f("level_of_measurement", _str),  # "nominal" | "ordinal" (Bloom) | "jaccard" (unit sets)
    f("n_items", pa.int64()),
    f("n_judges", pa.int64()),
    f("gate_threshold", pa.float64()),
    f("gate_action", _str),  # "flag" | "drop"
    f("gate_passed", pa.bool_()),
    f("agreement_with_majority", pa.float64()),  # judge rows
    f("parse_failure_rate", pa.float64()),  # judge rows
    # -- agreement that survives prevalence (panel rows; bloomqg.voting.agreement) --
    f("gate_coefficient", _str),  # "alpha" | "ac1": what the gate compared with gate_threshold
    f("gate_status", _str),  # "reliable" | "unreliable" | "not_measured" (bloomqg.voting.agreement.gate_decision)
    f("gate_reason", _str),  # why not measured, as gate_decision said it; null where measured
    f("percent_agreement", pa.float64()),  # share of agreeing pairs of votes (Gwet's pa)
    f("percent_agreement_ci_low", pa.float64()),
    f("percent_agreement_ci_high", pa.float64()),
    f("unanimous_share", pa.float64()),  # items whose votes are all equal
    f("prevalence", pa.float64()),  # share of all votes in the majority category
    f("majority_category", _str),
    f("ac1", pa.float64()),  # Gwet's AC1 (nominal)
    f("ac1_ci_low", pa.float64()),
    f("ac1_ci_high", pa.float64()),
    f("n_effective_judges", pa.float64()),  # n / (1 + (n-1) mean error correlation)
    f("n_varying_judges", pa.int64()),  # judges whose votes take two answers or more (the gate needs two)
    f("n_items_rare_agreed", pa.int64()),  # questions where two judges gave the same answer but the commonest
    f("aggregation", _str),  # "majority" | "dawid_skene": how the cell's labels were voted
    # -- per-judge diagnostics (judge rows; bloomqg.voting.diagnostics) --
    f("vote_rate", pa.float64()),  # yes-rate (yes/no criteria) or share of its modal category
    f("vote_distribution", _str),  # JSON {category: share}
    f("agreement_with_others", pa.float64()),  # with the strict majority of the other judges
    f("kappa_with_others", pa.float64()),  # Cohen's kappa with that majority
    f("kappa_pairwise", _str),  # JSON {other judge: Cohen's kappa}
    f("ds_sensitivity", pa.float64()),  # Dawid-Skene P(yes | true yes), yes/no criteria
    f("ds_sensitivity_ci_low", pa.float64()),
    f("ds_sensitivity_ci_high", pa.float64()),
    f("ds_specificity", pa.float64()),  # Dawid-Skene P(no | true no)
    f("ds_specificity_ci_low", pa.float64()),
    f("ds_specificity_ci_high", pa.float64()),
    f("ds_accuracy", pa.float64()),  # prior-weighted diagonal of its confusion matrix
    f("ds_confusion", _str),  # JSON {labels, rows_true_columns_said}
)

#: Tidy metrics: one row per (model, dataset, strategy, metric).
METRICS = _schema(
    f("model", _str, False),
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("metric", _str, False),
    f("value", pa.float64()),  # percentages in 0..100; CogShift and shift totals as raw scores
    f("ci_low", pa.float64()),
    f("ci_high", pa.float64()),
    f("n", pa.int64()),  # the denominator the value was computed over
    f("ci_method", _str),  # how the interval was made (bloomqg.metrics.intervals); null: none
    f("alpha_gated", pa.bool_(), False),  # a criterion feeding this metric failed the α gate
)

# -- validating the raters (bloomqg.annotation) --------------------------------------------------
# results/annotation/items.parquet -> ANNOTATION_ITEMS; results/annotation/agreement.parquet ->
# RATER_AGREEMENT; results/judge_validation/agreement.parquet -> RATER_AGREEMENT;
# results/judge_validation/confusion.parquet -> LEVEL_CONFUSION.

#: The annotation key: one row per sampled generated question, with the panel's majorities
#: (never shown to annotators).
ANNOTATION_ITEMS = _schema(
    f("annotation_id", _str, False),  # "A0001", … in the annotators' (shuffled) order
    f("prompt_id", _str, False),
    f("item_id", _str, False),
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("original_question", _str, False),
    f("original_bloom_level", _str),  # the target level shown to annotators; null = Uncategorized
    f("original_knowledge_units", _units, False),
    f("new_question", _str, False),
    f("unit_choices", _units, False),  # the dataset's knowledge units, offered to annotators
    f("panel_unique", pa.bool_()),  # the panel's majority; null = no majority
    f("panel_readable", pa.bool_()),
    f("panel_answerable", pa.bool_()),
    f("panel_bloom_level", _str),
    f("panel_knowledge_units", _units),
)

#: Agreement between raters, per cell (or pooled: dataset/strategy/model "all") and criterion.
RATER_AGREEMENT = _schema(
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("criterion", _str, False),  # one of CRITERIA
    f("rater", _str, False),  # "human majority", an annotator's id, "annotators", a judge's name
    f("reference", _str, False),  # what it is compared with: "panel", or "panel + annotators"
    f("statistic", _str, False),  # "percent_agreement" (0..100) | "cohen_kappa" | "krippendorff_alpha"
    f("value", pa.float64()),  # NaN/null when undefined (no variation, too few items)
    f("ci_low", pa.float64()),
    f("ci_high", pa.float64()),
    f("n", pa.int64(), False),  # items the statistic was computed over
)

#: Bloom-level confusion of a judge against the panel: one row per (panel level, judge level).
LEVEL_CONFUSION = _schema(
    f("judge", _str, False),
    f("dataset", _str, False),  # "all" for the pooled matrix
    f("strategy", _str, False),
    f("model", _str, False),
    f("panel_level", _str, False),
    f("judge_level", _str, False),
    f("count", pa.int64(), False),
)

#: Time and cost of a judge per 1,000 questions (results/judge_validation/throughput.parquet).
JUDGE_THROUGHPUT = _schema(
    f("judge", _str, False),
    f("dataset", _str, False),  # "all" for the judge's pooled row
    f("strategy", _str, False),
    f("model", _str, False),
    f("n_questions", pa.int64(), False),
    f("seconds", pa.float64(), False),  # the job's wall time, model loading included
    f("seconds_per_1000", pa.float64()),
    f("cost_usd", pa.float64(), False),  # API cost from the judgments' ledger; 0 offline
    f("cost_per_1000_usd", pa.float64()),
)

# -- judges under test (results/judge_bias, target judge_bias) ------------------------------

#: One judge's verdicts on the bias probes of one cell's sample: per question, probe and
#: criterion. ``probe``: ``base`` (the lists in canonical order, the study's seed: the same call
#: as judge_questions), ``repeat`` (the same prompt, another seed) or ``order`` (the Bloom levels
#: and knowledge units listed in a permuted order).
JUDGE_PROBES = _schema(
    f("prompt_id", _str, False),
    f("item_id", _str),
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("judge", _str, False),
    f("probe", _str, False),
    f("criterion", _str, False),
    f("value_bool", pa.bool_()),
    f("value_level", _str),
    f("value_units", _units),
    f("status", _str, False),
    f("level_order", _units, False),  # the Bloom levels as the prompt listed them
    f("unit_order", _units, False),  # the knowledge units as the prompt listed them
    f("question_words", pa.int64(), False),
    f("cached", pa.bool_()),
    f("cost_usd", pa.float64()),  # once per call (on its first criterion row)
    f("n_prompt_tokens", pa.int64()),  # once per call, as cost_usd
    f("n_completion_tokens", pa.int64()),
    f("cache_key", _str),  # the call's cache key: the report's ledger counts a base probe's call once
)

#: The bias estimates of every probed judge (results/judge_bias/estimates.parquet).
BIAS_ESTIMATES = _schema(
    f("judge", _str, False),
    f("probe", _str, False),  # order | position | consistency | self_preference | length
    f("criterion", _str, False),
    f("statistic", _str, False),
    f("value", pa.float64()),  # NaN when undefined (no variation, no comparison group)
    f("ci_low", pa.float64()),
    f("ci_high", pa.float64()),
    f("n", pa.int64(), False),  # questions the statistic was computed over
    f("detected", pa.bool_(), False),  # the CI excludes the no-bias value
    f("note", _str),
)

#: Order probe: how often a judge's Bloom level was listed at each position (1 = first).
BIAS_POSITIONS = _schema(
    f("judge", _str, False),
    f("position", pa.int64(), False),
    f("chosen", pa.int64(), False),  # the order probe's verdict was listed here
    f("expected", pa.int64(), False),  # the base verdict, under the same permuted list, was here
)

#: The alternative annotator test per rater (a judge, or the panel's majority) and criterion
#: (results/annotation/alt_test.parquet); the per-annotator comparisons are ALT_TEST_COMPARISONS.
ALT_TEST = _schema(
    f("rater", _str, False),
    f("criterion", _str, False),
    f("epsilon", pa.float64(), False),
    f("q", pa.float64(), False),  # FDR of the Benjamini-Yekutieli correction
    f("n_annotators", pa.int64(), False),  # annotators tested (enough items)
    f("n_won", pa.int64(), False),
    f("winning_rate", pa.float64()),  # ω; null when no annotator could be tested
    f("advantage_probability", pa.float64()),  # ρ
    f("passed", pa.bool_()),  # ω >= 0.5; null when not tested
    f("verdict", _str, False),
)

#: The rater against each left-out annotator (results/annotation/alt_test_annotators.parquet).
ALT_TEST_COMPARISONS = _schema(
    f("rater", _str, False),
    f("criterion", _str, False),
    f("annotator", _str, False),
    f("n", pa.int64(), False),
    f("rater_advantage", pa.float64(), False),
    f("annotator_advantage", pa.float64(), False),
    f("t_statistic", pa.float64()),
    f("p_value", pa.float64(), False),
    f("won", pa.bool_(), False),
)

# Calibration (rule calibrate): results/calibration/items.parquet -> CALIBRATION_ITEMS;
# estimates.parquet -> CALIBRATION_ESTIMATES; paired.parquet -> CALIBRATION_PAIRED;
# agreement.parquet -> CALIBRATION_AGREEMENT; results/calibration/plan.parquet -> ANNOTATION_PLAN.

#: One row per (generated question of an annotated cell, calibrated metric): the per-item
#: outcome (0..1) as the humans and as the panel give it. ``human`` is null for the items no
#: annotator labelled (and for all but the export's random within-cell sample).
CALIBRATION_ITEMS = _schema(
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("prompt_id", _str, False),
    f("item_id", _str, False),
    f("metric", _str, False),  # bloomqg.annotation.calibration.OUTCOMES
    f("annotation_id", _str),  # the item's id on the sheets; null = not drawn for annotation
    f("n_annotators", pa.int64(), False),  # annotators who labelled it (0 = unlabelled)
    f("human", pa.float64()),  # mean of the annotators' 0/1 outcomes; null = unlabelled
    f("judge", pa.float64()),  # the panel's 0/1 outcome; null = the panel gave no verdict
)

#: One row per (cell, metric): the judges' estimate, the humans'-only one and PPI++'s, each with
#: its normal interval, percent of questions; n labelled, N judged.
CALIBRATION_ESTIMATES = _schema(
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("metric", _str, False),
    f("granularity", _str, False),  # "six levels" | "three levels" | "criterion"
    f("n", pa.int64(), False),  # items with a human label (the random within-cell sample)
    f("n_sampled", pa.int64(), False),  # items the export drew for annotation
    f("big_n", pa.int64(), False),  # items in the metric's population, all judged
    f("judges", pa.float64()),  # percent; the panel's mean over its verdicts
    f("judges_low", pa.float64()),
    f("judges_high", pa.float64()),
    f("humans", pa.float64()),
    f("humans_low", pa.float64()),
    f("humans_high", pa.float64()),
    f("ppi", pa.float64()),
    f("ppi_low", pa.float64()),
    f("ppi_high", pa.float64()),
    f("lam", pa.float64()),  # PPI++'s power-tuning λ̂ in [0, 1]
    f("pseudo_disagreements", pa.int64(), False),  # pseudo-labelled errors of each kind added (ppi.py)
    f("confidence", pa.float64(), False),
)

#: One row per (model, dataset, strategy pair, metric): the paired difference b − a (percentage
#: points) over the items both cells generated, judged and PPI++-corrected on the items labelled
#: in both cells.
CALIBRATION_PAIRED = _schema(
    f("dataset", _str, False),
    f("model", _str, False),
    f("strategy_a", _str, False),
    f("strategy_b", _str, False),
    f("metric", _str, False),
    f("n", pa.int64(), False),  # items labelled in both cells
    f("big_n", pa.int64(), False),  # items both cells generated and the panel judged
    f("judges", pa.float64()),
    f("judges_low", pa.float64()),
    f("judges_high", pa.float64()),
    f("humans", pa.float64()),
    f("humans_low", pa.float64()),
    f("humans_high", pa.float64()),
    f("ppi", pa.float64()),
    f("ppi_low", pa.float64()),
    f("ppi_high", pa.float64()),
    f("lam", pa.float64()),
    f("pseudo_disagreements", pa.int64(), False),
    f("confidence", pa.float64(), False),
)

#: Judge-human agreement on the Bloom level at six levels and at three (lower / middle /
#: higher order), per cell and pooled (dataset/strategy/model "all").
CALIBRATION_AGREEMENT = _schema(
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("granularity", _str, False),  # "six levels" | "three levels"
    f("n", pa.int64(), False),  # (item, annotator) pairs with a panel level
    f("percent_agreement", pa.float64()),
)

#: The sampling plan: per (cell, headline metric), the human labels needed for the target
#: half-width of PPI++'s interval (results/calibration/plan.parquet).
ANNOTATION_PLAN = _schema(
    f("dataset", _str, False),
    f("strategy", _str, False),
    f("model", _str, False),
    f("metric", _str, False),
    f("big_n", pa.int64(), False),  # items in the metric's population, judged
    f("judges", pa.float64()),  # the judges' estimate, percent
    f("judges_n", pa.int64()),  # the questions of big_n with a verdict: the estimate's n
    f("disagreement", pa.float64()),  # assumed or pilot share of items judge ≠ human; null: labels alone
    f("agreement_source", _str, False),  # "assumed" | "pilot (n labelled items)" | "labels alone (why)"
    f("half_width", pa.float64(), False),  # target, percentage points
    f("n_needed", pa.int64(), False),  # labels for the target; big_n when it is not reachable
    f("reachable", pa.bool_(), False),  # False: even labelling every item misses the target
    f("half_width_at_n", pa.float64(), False),  # the predicted half-width with n_needed labels
)
