#!/bin/bash
# SpaceInvaders' preset with auto from its own start (research/notebook/results.md, entry headed 2026-12-08 00:49 UTC).
# --node-batch only feeds the oracle report (required by auto_study.py; missing from the entry's command).
# Chunks of two seeds side by side; resumable: run again (finished trials are skipped).
cd /tmp/sipreset
export PYTHONPATH=/tmp/sipreset
PY=/work/main/.venv/bin/python
echo "start $(date -u)"
for chunk in "10 11" "12 13" "14 15" "16 17" "18 19"; do
  $PY research/experiments/auto_study.py minatar-spaceinvaders --out /work/runs/si-preset --best 80 --lrs 1.12e-2 --lr-alpha 0.5 --fixed 80 160 --starts 1 --goals 10 20 30 --total-frames 1500000 --node-batch 80 --arms fixed auto --no-report --seeds $chunk
  echo "seeds $chunk done $(date -u +%T)"
done
echo "end $(date -u)"
