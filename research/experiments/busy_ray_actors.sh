#!/bin/bash
# A preset on Ray actors (its default), 20,000 frames: the run's wall seconds quiet and beside one busy process.
# ROUNDS="1 2 3" ENV=cartpole research/experiments/busy_ray_actors.sh (from the repository root);
# ARGS="--learners 2" adds options to every run (data-parallel learners there).
cd "$(dirname "$0")/../.."
for round in $ROUNDS; do
  for mode in quiet busy; do
    d=/tmp/busycp-$ENV-$mode-$round; rm -rf $d
    if [ $mode = busy ]; then python3 -c 'while True: pass' & B=$!; fi
    # shellcheck disable=SC2086  # ARGS is a list of options
    .venv/bin/python -m rlscale.train $ENV --total-frames 20000 --log-interval 600 --run-dir $d $ARGS > $d.log 2>&1
    [ $mode = busy ] && kill $B
    python3 -c "import json; s=json.load(open('$d/summary.json')); print('$mode', $round, round(s['wall_seconds'],1))"
    grep -m1 ' | ' $d.log | tr '|' '\n' | grep -i 'learner\|chosen\|Ray actors on' | sed 's/^ *//'
  done
done
