"""Rule annotation_plan: human labels per cell and headline metric for PPI++ to reach the target
half-width, from the judges' votes and a pilot round's agreement (when calibrated) or an assumed one
where the panel passed the gate."""
import pandas as pd

from bloomqg.annotation.calibration_tables import plan_table
from bloomqg.annotation.plan import annotation_plan
from bloomqg.annotation.reporting import write_table
from bloomqg.store.frames import ANNOTATION_PLAN, CALIBRATION_ITEMS, RELIABILITY, VOTES
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame

snakemake = globals()["snakemake"]
start_job(snakemake)
params, output = snakemake.params, snakemake.output
votes = [read_frame(path, VOTES) for path in snakemake.input.votes]
reliability = pd.concat([read_frame(path, RELIABILITY) for path in snakemake.input.reliability], ignore_index=True)
pilot = read_frame(snakemake.input.pilot[0], CALIBRATION_ITEMS) if snakemake.input.pilot else None
plan = annotation_plan(votes, half_width=params.half_width, confidence=params.confidence,
                       assumed_agreement=params.assumed_agreement, pilot=pilot, reliability=reliability)
write_frame(plan, output.plan, ANNOTATION_PLAN, {"half_width": params.half_width, "confidence": params.confidence,
                                                 "assumed_agreement": dict(params.assumed_agreement),
                                                 "pilot": list(snakemake.input.pilot)})
write_table(plan_table(plan, annotated=pilot is not None and bool(pilot["human"].notna().any()),
                       strategy_labels=params.strategy_labels), output.tables)
