#!/bin/bash
# SpaceInvaders from 1x and 8x on the EPYC, seeds 10-13 (research/notebook/results.md, entry headed 2026-12-08 01:20 UTC), at 8b3d2bb.
# Chunks of two seeds side by side; resumable: run again (finished trials are skipped).
cd /tmp/siepyc
export PYTHONPATH=/tmp/siepyc
PY=/work/main/.venv/bin/python
echo "start $(date -u)"
for chunk in "10 11" "12 13"; do
  $PY research/experiments/auto_study.py minatar-spaceinvaders --out /work/runs/si-epyc --best 160 --lrs 5.6e-3 --lr-alpha 0.5 --goals 30 40 50 --total-frames 3000000 --node-batch 80 --set max_envs=512 --arms fixed auto --no-report --fixed 160 1280 --starts 1 8 --seeds $chunk
  echo "seeds $chunk done $(date -u +%T)"
done
echo "end $(date -u)"
