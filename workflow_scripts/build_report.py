"""Rule build_report: one self-contained HTML page explaining the run (this study's, or the
runs imported from a published release: no judgments there, the release publishes votes)."""
from bloomqg.runtime.job import start_job
from bloomqg.reporting.report import build_report_from_files
from bloomqg.inputs.strategies import ComparisonSpec

snakemake = globals()["snakemake"]
start_job(snakemake)
inputs = snakemake.input
build_report_from_files(
    snakemake.output.report,  # and its facts frame beside it, output.facts
    config=snakemake.params.config,
    config_meanings=snakemake.params.config_meanings,
    metrics=inputs.metrics,
    correlations=inputs.correlations,
    paired=inputs.paired,
    robustness=inputs.robustness,  # "Can these judges be trusted?"
    votes=inputs.votes,
    reliability=inputs.reliability,
    generations=inputs.generations,  # an imported run's provenance: the release's commit and hashes
    judgments=inputs.judgments,
    tables=[*inputs.tables, *inputs.annotation, *inputs.plan, *inputs.panel_sample],  # Table 9; labels plan; panel sample
    figures=[*inputs.figures, *inputs.annotation],
    title=snakemake.params.title,
    judge_bias=inputs.judge_bias,  # the "Judge bias" section's table (.json) and figure (.png)
    explorer_href=snakemake.params.explorer_href,  # the item explorer beside the report
    strategy_labels=snakemake.params.strategy_labels,  # {name: label}, defined order
    comparison=ComparisonSpec.from_config({"comparisons": snakemake.params.comparisons}),
    strategy_order=snakemake.params.strategy_order,  # the first listed is the default baseline
    probes=inputs.probes,  # the judge-bias probes' calls, in the cost ledger
    answer=inputs.answer,  # the Answer's verdicts (rule answer)
    strategies=snakemake.params.strategies,  # each strategy run, in full words, with its prompts
)
