# Paying the panel for a sample (panel_sample): the panel's judges judge a random sample of each
# cell, the local judges every question; the panel's majority on its sample corrects the local
# numbers by PPI++ (docs/judge-reliability.md, "Paying the panel for a sample").


if PANEL_SAMPLE:

    rule vote_panel_sample:
        """The panel's majority on a cell's sampled questions, with its α (the study's gate and vote)."""
        input:
            generations="results/generations/{dataset}/{strategy}/{model}.parquet",
            judgments=expand(
                "results/judgments/{{dataset}}/{{strategy}}/{{model}}/{judge}.parquet",
                judge=PANEL_SAMPLE.judges,
            ),
        output:
            votes=f"{PANEL_SAMPLE_DIR}/votes/{{dataset}}/{{strategy}}/{{model}}.parquet",
            reliability=f"{PANEL_SAMPLE_DIR}/votes/{{dataset}}/{{strategy}}/{{model}}.reliability.parquet",
        log:
            "logs/vote_panel_sample/{dataset}/{strategy}/{model}.log",
        benchmark:
            "logs/benchmarks/vote_panel_sample/{dataset}/{strategy}/{model}.tsv"
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            draw=PANEL_SAMPLE.draw_spec,
            min_valid_votes=PANEL_SAMPLE.min_valid_votes,
            gate=CFG["gate"],
            vote=CFG["vote"],
            bootstrap=CFG["bootstrap"],
            seed=CFG["seed"],
            code=CODE["voting"],
        script:
            "../workflow_scripts/vote_panel_sample.py"

    rule panel_calibrate:
        """Target: per cell and per-question metric, the local judges', the panel sample's and
        PPI++'s estimates, and the paired strategy differences (results/panel_sample)."""
        input:
            local=cell_paths("results/votes/{dataset}/{strategy}/{model}.parquet"),
            panel=cell_paths(f"{PANEL_SAMPLE_DIR}/votes/{{dataset}}/{{strategy}}/{{model}}.parquet"),
        output:
            joined=f"{PANEL_SAMPLE_DIR}/items.parquet",
            estimates=f"{PANEL_SAMPLE_DIR}/estimates.parquet",
            paired=f"{PANEL_SAMPLE_DIR}/paired.parquet",
            tables=[f"{PANEL_SAMPLE_DIR}/{PANEL_NAME}.{ext}" for ext in ("md", "csv", "tex", "json")],
            paired_tables=[
                f"{PANEL_SAMPLE_DIR}/{PANEL_PAIRED_NAME}.{ext}" for ext in ("md", "csv", "tex", "json")
            ],
        log:
            "logs/panel_calibrate.log",
        benchmark:
            "logs/benchmarks/panel_calibrate.tsv"
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            settings=PANEL_SAMPLE,
            strategy_labels=STRATEGY_LABELS,
            config={"comparisons": CFG.get("comparisons")},
            code=CODE_ANNOTATION,
        script:
            "../workflow_scripts/panel_calibrate.py"
