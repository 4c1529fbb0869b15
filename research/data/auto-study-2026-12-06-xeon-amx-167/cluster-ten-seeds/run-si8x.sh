#!/bin/bash
# Issue 80: SpaceInvaders from 1/8x and 8x on the cluster at the default (cluster_one_node_first on); notebook entry of
# 2026-12-07 22:50 UTC. Resumable: rerun this script.
set -e
cd /tmp/si8
PY=/work/main/.venv/bin/python
export PYTHONPATH=/tmp/si8
echo "start $(date -u +%H:%M:%S)"
$PY research/experiments/auto_study.py minatar-spaceinvaders --out /work/runs/si8 --best 160 --lrs 5.6e-3 --lr-alpha 0.5 --fixed 160 1280 --starts 0.125 8 --goals 30 40 50 --seeds 10 11 12 13 14 --total-frames 3000000 --node-batch 80 --set max_envs=512 --arms cluster --no-report
echo "done $(date -u +%H:%M:%S)"
