#!/bin/bash
# Issue 80: cluster_one_node_first on SpaceInvaders from 160, seeds 15-19; research/notebook/results.md 20:08 entry. Resumable.
set -e
cd /tmp/si10
PY=/work/main/.venv/bin/python
export PYTHONPATH=/tmp/si10
echo "start $(date -u +%H:%M:%S)"
$PY research/experiments/auto_study.py minatar-spaceinvaders --out /work/runs/node --best 160 --lrs 5.6e-3 --lr-alpha 0.5 --fixed 160 1280 --starts 1 --goals 30 40 50 --seeds 15 16 17 18 19 --total-frames 3000000 --node-batch 80 --set max_envs=512 --set cluster_one_node_first=true --arms cluster --no-report
echo "spaceinvaders done $(date -u +%H:%M:%S)"
