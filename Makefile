# The two set-up commands of the README. Both create/refresh .venv first (idempotent: stamp
# files mean a second run installs nothing unless pyproject.toml or this file changed).
# `make demo` installs what TriShield needs to run (the package and its models); `make test`
# adds what only the tests need: the dev extra (pytest, selenium, ...), Debian's chromium for
# the browser tests and the clean-text genres of Ring 1's calibration tests.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.trishield-installed
DEV_STAMP := $(VENV)/.trishield-dev-installed
# torch's CPU build; the plain `torch` requirement would pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
# The suite on one process per CPU, at most 4 (each loads its own models: ~2 GB): on 2 cores
# it takes about half the wall time of one process. PYTEST_ARGS= runs it on one.
PYTEST_ARGS ?= --numprocesses=auto --maxprocesses=4
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install install-runtime demo test lint bench dist clean

# The browser tests drive Debian's chromium through chromium-driver (never a browser download).
BROWSER_PACKAGES := chromium chromium-driver
# Ring 1's calibration genres (src/trishield/eval/genres.py): the Debian Policy Manual and the
# Developer's Reference (policy-legal); news and email come from gensim's wheel (see below).
GENRE_PACKAGES := debian-policy developers-reference
GENRE_FILES := /usr/share/doc/debian-policy/policy.txt.gz \
	/usr/share/developers-reference/developers-reference.txt.gz

# What the demo (and any use of TriShield) needs: the package and its hash-verified models.
$(STAMP): pyproject.toml Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(VENV)/bin/python -m pip show torch >/dev/null 2>&1 || \
		$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)"
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e .
	$(VENV)/bin/trishield models install
	touch $(STAMP)

# What only the tests need, on top of the above.
$(DEV_STAMP): $(STAMP) pyproject.toml Makefile
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
		SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(BROWSER_PACKAGES); }
	@ls $(GENRE_FILES) >/dev/null 2>&1 || { \
		SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(GENRE_PACKAGES); }
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(VENV)/bin/python -m trishield.eval.genres --fetch >/dev/null
	touch $(DEV_STAMP)

# everything: TriShield and what its tests need
install: $(DEV_STAMP)

# TriShield alone (what `make demo` needs)
install-runtime: $(STAMP)

demo: install-runtime
	$(VENV)/bin/trishield demo

test: install
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/lint-imports --no-cache --no-logo

bench: install
	$(VENV)/bin/trishield models install all-mpnet-base-v2
	$(VENV)/bin/python benchmarks/foundation.py

# the sdist and the wheel in dist/ (the wheel built from the sdist), as a user installs them
dist: install
	$(VENV)/bin/python -m build --no-isolation --outdir dist .

clean:
	rm -rf $(VENV) .trishield .pytest_cache dist
