# bloomqg: LLM-generated questions at a target Bloom level, judged, voted and scored.
# This file only loads the config and includes the rules; all logic lives in bloomqg/.
from snakemake.utils import min_version

# pyproject.toml pins snakemake>=9.0: an older one stops here with that message.
min_version("9.0")

# config.yaml is the default study; a --configfile (e.g. configs/paper.yaml) replaces it whole
# rather than merging into it, so a preset never inherits the default's datasets or models.
if not workflow.overwrite_configfiles:
    workflow.configfile(f"{workflow.basedir}/config.yaml")


# `snakemake --report report.zip`: this description, plus every output marked with report().
report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/datasets.smk"
include: "rules/generation.smk"
include: "rules/judging.smk"
include: "rules/judge_bias.smk"
include: "rules/metrics.smk"
include: "rules/report.smk"
include: "rules/release.smk"
include: "rules/annotation.smk"
include: "rules/panel_sample.smk"
include: "rules/inspect.smk"


rule all:
    default_target: True
    input:
        "results/report.html",
        explorer_outputs("results"),
        "results/report_bundle",  # the report with its explorer, for `snakemake --report`
        "results/metrics/all.parquet",
        "results/metrics/study_plan.parquet",
        TABLE_OUTPUTS,
        FIGURE_OUTPUTS,
        INSPECT_ALL,  # inspect.export: true
        panel_sample_outputs(),  # panel_sample: the panel-corrected estimates
