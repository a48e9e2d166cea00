# The two commands a fresh machine needs (both build .venv themselves):
#   make cora   -- the main job: the Cora benchmark on its small default
#   make test   -- the test suite
# and make docs builds the documentation site into site/ (mkdocs, warnings are errors).
#   make test-fast    -- the suite without the tests marked slow (subprocesses, torchrun, compile, real-data
#                        training): the check to run while editing
#   make lint / make format -- ruff's linter and formatter (make test runs lint first)
#   make test-install -- a fresh venv, pip install of the package without extras, graph-rma cora and the README's
#                        quick start (tests marked `install`, left out of `make test`)
#   make pages        -- every generated table (results pages, benchmarks page, the README's summary) rendered from
#                        the committed results files: python -m studies.render (--check: write nothing)
# torch==2.13.0 is installed first so that pip never pulls a CUDA build; the package itself asks for torch>=2.4.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
# Offline data root: use ../shared/data when it is there, unless the caller set GRAPH_RMA_DATA.
ifeq ($(origin GRAPH_RMA_DATA), undefined)
  ifneq ($(wildcard ../shared/data),)
    export GRAPH_RMA_DATA := $(abspath ../shared/data)
  endif
endif

.PHONY: cora test test-fast test-install docs env lint format pages
env: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	@# METEOR 1.5 (pycocoevalcap's jar) needs Java: install a headless JRE only if java is missing; never fatal.
	-@command -v java >/dev/null 2>&1 || { (apt-get update -qq && apt-get install -y -qq default-jre-headless) >/dev/null 2>&1 || (sudo -n apt-get update -qq && sudo -n apt-get install -y -qq default-jre-headless) >/dev/null 2>&1 || echo "warning: java missing and not installable: METEOR falls back to nltk (numbers not comparable with METEOR 1.5)"; }
	touch $@

cora: $(VENV)/.installed
	$(VENV)/bin/graph-rma cora $(ARGS)

test: lint
	$(PY) -m pytest -q $(ARGS)

# ruff (configured in pyproject.toml): the linter, then the formatter in check mode; `make format` rewrites
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.installed
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

docs: $(VENV)/.installed
	$(VENV)/bin/mkdocs build --strict -d site
	@# the docstrings are reST rendered through docs/hooks/griffe_rest.py: no raw role or directive may reach a page
	@! grep -rlE ':(class|func|meth|mod|data|attr|exc|math):`|\.\. math::|``' site --include=*.html \
		|| { echo "raw reST in the built site (the pages above): extend docs/hooks/griffe_rest.py"; exit 1; }

test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not slow and not install" $(ARGS)

test-install: $(VENV)/.installed
	$(PY) -m pytest -q -m install $(ARGS)

pages: $(VENV)/.installed
	$(PY) -m studies.render $(ARGS)
