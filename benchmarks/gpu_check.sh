#!/usr/bin/env bash
# The one command to run first on a machine lent an NVIDIA GPU: the tests marked `gpu` and the
# GPU benchmark, judged against their goals, in one JSON (stdout, and $OUT/gpu_check.json or
# results/gpu_check.json), in under 8 minutes. It installs nothing and needs no network: it uses
# the project's .venv when there is one, else $PYTHON or python3 with torch and transformers.
# Without a GPU, or with --dry-run, it runs the same steps on the CPU (tiny shapes, goals that
# need a GPU "not judged"). Exit status 1 when a judged goal fails. Logic: benchmarks/gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then
  python=.venv/bin/python
else
  python=${PYTHON:-python3}
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" benchmarks/gpu_check.py "$@"
