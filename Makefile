# The two set-up commands of the README. Both create/refresh .venv first (idempotent: a stamp
# file means a second run installs nothing unless pyproject.toml changed).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.trishield-installed
# torch's CPU build; the plain `torch` requirement would pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install demo test lint bench clean

# The browser tests drive Debian's chromium through chromium-driver (never a browser download).
BROWSER_PACKAGES := chromium chromium-driver
# Ring 1's calibration genres (src/trishield/eval/genres.py): the Debian Policy Manual and the
# Developer's Reference (policy-legal); news and email come from gensim's wheel (see below).
GENRE_PACKAGES := debian-policy developers-reference
GENRE_FILES := /usr/share/doc/debian-policy/policy.txt.gz \
	/usr/share/developers-reference/developers-reference.txt.gz

$(STAMP): pyproject.toml Makefile
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
		SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(BROWSER_PACKAGES); }
	@ls $(GENRE_FILES) >/dev/null 2>&1 || { \
		SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(GENRE_PACKAGES); }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(VENV)/bin/python -m pip show torch >/dev/null 2>&1 || \
		$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)"
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(VENV)/bin/trishield models install
	$(VENV)/bin/python -m trishield.eval.genres --fetch >/dev/null
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/trishield demo

test: install
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports --no-cache --no-logo

bench: install
	$(VENV)/bin/trishield models install all-mpnet-base-v2
	$(VENV)/bin/python benchmarks/foundation.py

clean:
	rm -rf $(VENV) .trishield .pytest_cache
