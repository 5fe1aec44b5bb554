# Quick start: `make demo` (set up, then run the end-to-end demo) and `make test` (set up, then run the tests).
.PHONY: setup demo test test-gpu bench
PY := .venv/bin/python

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/driftloop demo

test: setup
	$(PY) -m pytest -q

test-gpu: setup
	$(PY) -m pytest -q -m gpu

bench: setup
	$(PY) bench/run_all.py
