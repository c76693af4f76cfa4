"""Rule judge_validation_summary: every validated judge against the release's panel."""
import pandas as pd

from bloomqg.annotation.judge_validation import judge_agreement, judge_throughput, throughput_frame
from bloomqg.annotation.reporting import validation_summary
from bloomqg.store.atomic import write_text_atomic
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, read_frames, read_provenance, write_frame
from bloomqg.store.frames import JUDGE_THROUGHPUT, JUDGMENTS, LEVEL_CONFUSION, RATER_AGREEMENT, VOTES

snakemake = globals()["snakemake"]
start_job(snakemake)
params, output = snakemake.params, snakemake.output
votes = read_frames(snakemake.input.votes, VOTES)
judgments = {path: read_frame(path, JUDGMENTS) for path in snakemake.input.judgments}
by_judge = pd.concat(judgments.values(), ignore_index=True).groupby("judge", sort=False)
agreements, confusions = zip(*(
    judge_agreement(votes, frame, n_resamples=params.bootstrap["n_resamples"],
                    confidence=params.bootstrap["confidence"], seed=params.seed)
    for _, frame in by_judge
))
throughput = throughput_frame([judge_throughput(frame, read_provenance(path)["elapsed_s"])
                               for path, frame in judgments.items()])
agreement, confusion = pd.concat(agreements, ignore_index=True), pd.concat(confusions, ignore_index=True)
write_frame(agreement, output.agreement, RATER_AGREEMENT)
write_frame(confusion, output.confusion, LEVEL_CONFUSION)
write_frame(throughput, output.throughput, JUDGE_THROUGHPUT)
write_text_atomic(output.summary, validation_summary(agreement, confusion, throughput, params.strategy_labels))
