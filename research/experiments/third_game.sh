#!/usr/bin/env bash
# Issue 61, item 3: how far the critical batch moves on a third MinAtar game (Asterix), from scratch.
# Fixed batches 20, 80, 320 and 1,280 observations (A2C, 5 steps an env) at the power rule's rate
# lr = 1.12e-2 (B/80)^0.5 (the MinAtar presets' rule: on Breakout the best rate doubled per 4x batch),
# 80, 320 and 1,280 also at half and twice it (batch 20's runs take longest: one rate), seeds 0-2, to
# goals 4, 8 and 12; then `pareto` fits eq. 2.11 at each goal to each batch's best rate. Two chains at a
# time, one trial each (one core a trial). Safe to re-run: finished trials are skipped, interrupted
# ones resume. A chain can run alone: CHAIN=a or CHAIN=b (then no pareto).
#   research/experiments/third_game.sh [OUT]      (default /work/third)
set -euo pipefail
OUT=${1:-/work/third}
PY=${PY:-.venv/bin/python}
S="$PY -m rlscale.sweep minatar-spaceinvaders --env-id MinAtar/Asterix-v1 --goals 4 8 12 --stop-return 12
   --seeds 0 1 2 --max-concurrent 1 --learner-precision fp32 --actor-precision fp32 --sweep-dir $OUT/asterix"
chain_a() { $S --batch-sizes 20 --lrs 5.6e-3 --total-frames 3000000 && \
            $S --batch-sizes 320 --lrs 1.12e-2 2.24e-2 4.48e-2 --total-frames 6000000; }
chain_b() { $S --batch-sizes 80 --lrs 5.6e-3 1.12e-2 2.24e-2 --total-frames 4000000 && \
            $S --batch-sizes 1280 --lrs 2.24e-2 4.48e-2 8.96e-2 --total-frames 12000000; }
case "${CHAIN:-both}" in
  a) chain_a > "$OUT/sweep-a.log" 2>&1; exit ;;
  b) chain_b > "$OUT/sweep-b.log" 2>&1; exit ;;
esac
chain_a > "$OUT/sweep-a.log" 2>&1 &
chain_b > "$OUT/sweep-b.log" 2>&1 &
wait
$PY -m rlscale.pareto "$OUT/asterix" --goals 4 8 12 | tee "$OUT/pareto.txt"
