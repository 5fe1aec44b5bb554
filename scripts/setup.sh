#!/usr/bin/env bash
# Installs everything driftloop and its tests need on a fresh Debian machine:
# Debian packages (Prometheus, promtool, Alertmanager, PostgreSQL, Chromium) when missing and we are root,
# then a virtual environment in .venv with the project and its dev extras.
# Idempotent and quick when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v prometheus >/dev/null || need+=(prometheus)
command -v promtool >/dev/null || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null || need+=(prometheus-alertmanager)
command -v amtool >/dev/null || need+=(prometheus-alertmanager)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# Headless browser for the tests that look at MLflow's and Evidently's UIs as a user would.
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing Debian packages: ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "setup: missing Debian packages (${need[*]}); run as root or: sudo apt-get install ${need[*]}" >&2
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.driftloop-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python packages into .venv (first time takes a few minutes)" >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # torch first and pinned: an unpinned resolution pulls a multi-GB CUDA build.
  .venv/bin/python -m pip install -q torch==2.13.0
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch "$stamp"
fi
