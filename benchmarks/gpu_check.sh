#!/usr/bin/env bash
# The one command to run first on a machine lent an NVIDIA GPU: the tests marked `gpu`, the
# engine benchmark and the GPU generation benchmark, judged against their goals, in one JSON
# (stdout, and $OUT/gpu_check.json or results/gpu_check.json), in under 9 minutes. It needs no
# network: it uses the project's .venv when there is one, else $PYTHON or python3 with torch and
# transformers, and installs the wheels carried in .whl/ (benchmarks/gpu_wheels.py: what a served
# engine and its client need) into a temporary folder first. Without a GPU, or with --dry-run, it
# runs the same steps on the CPU (tiny shapes, goals that need a GPU "not judged"); --steps picks
# some. Exit status 1 when a judged goal fails. Logic: benchmarks/gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then
  python=.venv/bin/python
else
  python=${PYTHON:-python3}
  if compgen -G ".whl/*.whl" >/dev/null; then
    site=$(mktemp -d "${TMPDIR:-/tmp}/bloomqg-wheels.XXXXXX")
    "$python" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" benchmarks/gpu_check.py "$@"
