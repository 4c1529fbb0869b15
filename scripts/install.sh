#!/usr/bin/env bash
# One-time set-up, safe to re-run: a virtual environment in .venv with rlscale
# installed in editable mode. torch is pinned to the CPU build 2.13.0 here (it
# lies on this machine's disk); on a GPU machine install your CUDA torch first
# and run: pip install -e ".[test,rllib]".
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
stamp=.venv/.rlscale-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet "torch==2.13.0" -e ".[test,rllib]"
    touch "$stamp"
fi
