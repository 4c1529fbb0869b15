#!/usr/bin/env bash
# Issue 61, item 3: how far the critical batch moves on a third MinAtar game (Asterix), from scratch.
# Fixed batches 20, 80, 320 and 1,280 observations (A2C, 5 steps an env), each at the rate of the power
# rule lr = 1.12e-2 (B/80)^0.5 (the MinAtar presets' rule: on Breakout the best rate doubled per 4x batch)
# and at twice it, seeds 0-2, to goals 4, 8 and 12; then `pareto` fits eq. 2.11 at each goal to each
# batch's better rate. Two sweeps at a time, one trial each (one core a trial). Safe to re-run: finished
# trials are skipped, interrupted ones resume.
#   research/experiments/third_game.sh [OUT]      (default /work/third)
set -euo pipefail
OUT=${1:-/work/third}
PY=${PY:-.venv/bin/python}
S="$PY -m rlscale.sweep minatar-spaceinvaders --env-id MinAtar/Asterix-v1 --goals 4 8 12 --stop-return 12
   --seeds 0 1 2 --max-concurrent 1 --learner-precision fp32 --actor-precision fp32 --sweep-dir $OUT/asterix"
( $S --batch-sizes 20 --lrs 5.6e-3 1.12e-2 --total-frames 3000000 && \
  $S --batch-sizes 320 --lrs 2.24e-2 4.48e-2 --total-frames 6000000 ) > "$OUT/sweep-a.log" 2>&1 &
( $S --batch-sizes 80 --lrs 1.12e-2 2.24e-2 --total-frames 4000000 && \
  $S --batch-sizes 1280 --lrs 4.48e-2 8.96e-2 --total-frames 12000000 ) > "$OUT/sweep-b.log" 2>&1 &
wait
$PY -m rlscale.pareto "$OUT/asterix" --goals 4 8 12 | tee "$OUT/pareto.txt"
