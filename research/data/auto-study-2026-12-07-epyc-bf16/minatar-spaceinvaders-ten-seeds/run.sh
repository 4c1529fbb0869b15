#!/bin/bash
# SpaceInvaders on two cores over ten seeds (research/notebook/results.md, entry headed 2026-12-07 23:40 UTC).
# Chunks of two seeds side by side; resumable: run again (finished trials are skipped).
cd /tmp/si10
export PYTHONPATH=/tmp/si10
PY=/work/main/.venv/bin/python
COMMON="minatar-spaceinvaders --out /work/runs/si-ten --best 160 --lrs 5.6e-3 --lr-alpha 0.5 --goals 30 40 50 --total-frames 3000000 --node-batch 80 --set max_envs=512 --arms fixed auto --no-report"
echo "start $(date -u)"
for chunk in "15 16" "17 18" "14 19"; do
  $PY research/experiments/auto_study.py $COMMON --fixed 160 1280 --starts 0.125 1 8 --seeds $chunk
  echo "seeds $chunk done $(date -u +%T)"
done
for chunk in "10 11" "12 13"; do
  $PY research/experiments/auto_study.py $COMMON --fixed 160 --starts 0.125 --seeds $chunk
  echo "seeds $chunk done $(date -u +%T)"
done
echo "end $(date -u)"
