#!/bin/bash
# Issue 80: auto on a cluster trains on one node until the learning line (cluster_one_node_first); research/notebook/results.md 18:57 entry.
# Resumable: rlscale sweep skips finished trials; rerun this script to resume.
set -e
cd /tmp/node
PY=/work/main/.venv/bin/python
export PYTHONPATH=/tmp/node
OUT=/work/runs/node
H="--set cluster_one_node_first=true"
echo "start $(date -u +%H:%M:%S)"
$PY research/experiments/auto_study.py minatar-spaceinvaders --out $OUT --best 160 --lrs 5.6e-3 --lr-alpha 0.5 --fixed 160 1280 --starts 1 --goals 30 40 50 --seeds 10 11 12 13 14 --total-frames 3000000 --node-batch 80 --set max_envs=512 $H --arms cluster --no-report
echo "spaceinvaders done $(date -u +%H:%M:%S)"
$PY research/experiments/auto_study.py minatar-spaceinvaders --env-id MinAtar/Asterix-v1 --name minatar-asterix --out $OUT --best 80 --lrs 1.12e-2 --lr-alpha 0.5 --fixed 1280 --starts 4 32 --goals 4 8 12 --seeds 10 11 12 13 14 --total-frames 3000000 --node-batch 80 --set max_envs=512 --set min_envs=2 --set vector_size=2 --set noise_groups=2 $H --arms cluster --no-report
echo "asterix done $(date -u +%H:%M:%S)"
$PY research/experiments/auto_study.py minatar-breakout --out $OUT --best 320 --lrs 2.24e-2 --lr-alpha 0.5 --fixed 80 640 1280 2560 --starts 1 --goals 5 8 11 14 --seeds 10 11 12 13 14 --total-frames 6000000 --node-batch 80 --set max_envs=512 $H --arms cluster --no-report
echo "breakout 1x done $(date -u +%H:%M:%S)"
$PY research/experiments/auto_study.py cartpole --out $OUT --best 80 --fixed 10 80 320 640 --starts 1 --seeds 10 11 12 13 14 --lrs 7e-4 --total-frames 500000 --node-batch 80 --set min_envs=2 --set max_envs=256 --set noise_groups=2 $H --arms cluster --no-report
echo "cartpole done $(date -u +%H:%M:%S)"
