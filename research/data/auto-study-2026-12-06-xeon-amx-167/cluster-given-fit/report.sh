#!/bin/bash
# Reports of the given-fit study (after /work/runs/run-given.sh; nothing else running).
cd /work/main
PY=/work/main/.venv/bin/python
OUT=/work/runs/given
P=/work/runs/cluster-1207
D=research/data/auto-study-2026-12-06-xeon-amx-167/cluster-given-fit
mkdir -p $D
cp /work/runs/run-given.sh $D/run.sh; cp /work/runs/given-report.sh $D/report.sh
{ echo "# python research/experiments/cluster_seeds.py GOAL FIXED... PARENT... GIVEN... (the given-fit runs read '... for 16 nodes given T(B)'; the parent's, 5149fd6, without)"
  echo "## MinAtar Breakout to 14, from 320 and from 40"
  $PY research/experiments/cluster_seeds.py 14 /work/runs/study-1207c/minatar-breakout/two-core/b* $P/minatar-breakout/cluster/auto-b320* $P/minatar-breakout/cluster/auto-b40-* $OUT/minatar-breakout/cluster
  echo "## MinAtar SpaceInvaders to 50"
  $PY research/experiments/cluster_seeds.py 50 /work/runs/study-1207si/minatar-spaceinvaders/two-core/b* $P/minatar-spaceinvaders/cluster/auto-b160* $OUT/minatar-spaceinvaders/cluster
  echo "## MinAtar Asterix to 12 (fixed 160, 320 of study-1207a; 1,280 of cluster-1207)"
  $PY research/experiments/cluster_seeds.py 12 /work/runs/study-1207a/minatar-asterix/two-core/b*-s1[0-4] $P/minatar-asterix/two-core $P/minatar-asterix/cluster/auto-b320* $OUT/minatar-asterix/cluster
  echo "## CartPole to 475"
  $PY research/experiments/cluster_seeds.py 475 /work/runs/study-1206b/cartpole/two-core/b* $P/cartpole/cluster/auto-b10-* $P/cartpole/cluster/auto-b80-* $OUT/cartpole/cluster
} > $D/cluster-seeds.txt 2>&1
{ echo "# python research/experiments/run_tables.py reversals GOAL RUN_DIR... (the given-fit runs; then the parent's)"
  $PY research/experiments/run_tables.py reversals 14 $OUT/minatar-breakout/cluster/auto-*; $PY research/experiments/run_tables.py reversals 14 $P/minatar-breakout/cluster/auto-b320* $P/minatar-breakout/cluster/auto-b40-*
  $PY research/experiments/run_tables.py reversals 50 $OUT/minatar-spaceinvaders/cluster/auto-*; $PY research/experiments/run_tables.py reversals 50 $P/minatar-spaceinvaders/cluster/auto-b160*
  $PY research/experiments/run_tables.py reversals 12 $OUT/minatar-asterix/cluster/auto-*; $PY research/experiments/run_tables.py reversals 12 $P/minatar-asterix/cluster/auto-b320*
  $PY research/experiments/run_tables.py reversals 475 $OUT/cartpole/cluster/auto-*; $PY research/experiments/run_tables.py reversals 475 $P/cartpole/cluster/auto-b10-* $P/cartpole/cluster/auto-b80-*
} > $D/resizes.txt 2>&1
{ echo "# python research/experiments/run_tables.py signal RUN_DIR... (the given-fit runs)"
  $PY research/experiments/run_tables.py signal $OUT/minatar-breakout/cluster/auto-* $OUT/minatar-spaceinvaders/cluster/auto-*; } > $D/signal-by-batch.txt 2>&1
{ echo "# python research/experiments/run_tables.py paths RUN_DIR... (the given-fit runs), one game at a time"
  for g in minatar-breakout minatar-spaceinvaders minatar-asterix cartpole; do echo "## $g"; $PY research/experiments/run_tables.py paths $OUT/$g/cluster/auto-*; done; } > $D/envs-paths.txt 2>&1
{ echo "# python research/data/auto-study-2026-12-06-xeon-amx-167/cluster-reading-band/readings_at_resizes.py RUN_DIR... (the given-fit Breakout runs; r is the run's own fit, not the given one)"
  $PY research/data/auto-study-2026-12-06-xeon-amx-167/cluster-reading-band/readings_at_resizes.py $OUT/minatar-breakout/cluster/auto-*; } > $D/readings-at-resizes.txt 2>&1
echo done
