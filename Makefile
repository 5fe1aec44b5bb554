# Quick start: `make demo` (set up, then run the end-to-end demo) and `make test` (set up, then run the tests).
.PHONY: setup demo lint test test-gpu bench
PY := .venv/bin/python

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/driftloop demo

# ruff (mistakes, not style) and mypy (monitor, trainer; settings in pyproject.toml).
lint: setup
	.venv/bin/ruff check .
	.venv/bin/mypy

test: lint
	$(PY) -m pytest -q

test-gpu: setup
	$(PY) -m pytest -q -m gpu

bench: setup
	$(PY) bench/run_all.py
