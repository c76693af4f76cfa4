"""Rule answer: each planned comparison's verdict, the instrument before the test."""
from bloomqg.store.frames import RELIABILITY
from bloomqg.runtime.job import start_job
from bloomqg.metrics.answer import AnswerSpec, answer_table
from bloomqg.store.parquet_io import read_frame, read_frames

snakemake = globals()["snakemake"]
start_job(snakemake)
import pandas as pd

answer = answer_table(
    pd.read_parquet(snakemake.input.paired),
    pd.read_parquet(snakemake.input.study_plan),
    read_frames(snakemake.input.reliability, RELIABILITY),
    AnswerSpec.from_config(snakemake.params.answer),
)
answer.to_parquet(snakemake.output[0])
