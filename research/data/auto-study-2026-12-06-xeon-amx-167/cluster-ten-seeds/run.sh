#!/bin/bash
# Issue 80: SpaceInvaders from 160 on the cluster clock over seeds 10-19, the default arm and cluster_one_node_first,
# with fresh fixed references; research/notebook/results.md entry of 2026-12-07 21:00 UTC. Resumable (sweeps skip
# finished trials): rerun this script.
set -e
cd /tmp/si20
PY=/work/main/.venv/bin/python
export PYTHONPATH=/tmp/si20
COMMON="minatar-spaceinvaders --best 160 --lrs 5.6e-3 --lr-alpha 0.5 --starts 1 --goals 30 40 50 --total-frames 3000000 --node-batch 80 --set max_envs=512 --no-report"
echo "start $(date -u +%H:%M:%S)"
for seeds in "10 11" "12 13" "14 15" "16 17" "18 19"; do
  fixed="160 1280"; case "$seeds" in 16*|18*) fixed="1280";; esac
  $PY research/experiments/auto_study.py $COMMON --out /work/runs/si20/default --fixed $fixed --seeds $seeds --arms fixed
  $PY research/experiments/auto_study.py $COMMON --out /work/runs/si20/default --fixed 160 1280 --seeds $seeds --arms cluster
  $PY research/experiments/auto_study.py $COMMON --out /work/runs/si20/node --fixed 160 1280 --seeds $seeds --arms cluster --set cluster_one_node_first=true
  echo "seeds $seeds done $(date -u +%H:%M:%S)"
done
echo "all done $(date -u +%H:%M:%S)"
# CartPole from 1/8x (10), both arms, fixed 80 and 320 as references (fixed 10 and 640 left out: slowest and never
# reaching 475 on the clock at 5149fd6).
CP="cartpole --best 80 --starts 0.125 --lrs 7e-4 --total-frames 500000 --node-batch 80 --set min_envs=2 --set max_envs=256 --set noise_groups=2 --no-report"
for seeds in "10 11" "12 13" "14 15" "16 17" "18 19"; do
  $PY research/experiments/auto_study.py $CP --out /work/runs/si20/default --fixed 80 320 --seeds $seeds --arms fixed cluster
  $PY research/experiments/auto_study.py $CP --out /work/runs/si20/node --fixed 80 320 --seeds $seeds --arms cluster --set cluster_one_node_first=true
  echo "cartpole seeds $seeds done $(date -u +%H:%M:%S)"
done
echo "cartpole done $(date -u +%H:%M:%S)"
