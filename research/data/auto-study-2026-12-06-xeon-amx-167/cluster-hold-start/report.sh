#!/bin/bash
# Reports of the start-held study (after /work/runs/run-hold.sh; nothing else running).
cd /work/main
PY=/work/main/.venv/bin/python
OUT=/work/runs/hold
P=/work/runs/cluster-1207
D=research/data/auto-study-2026-12-06-xeon-amx-167/cluster-hold-start
mkdir -p $D
cp /work/runs/run-hold.sh $D/run.sh; cp /work/runs/hold-report.sh $D/report.sh
{ echo "# python research/experiments/cluster_seeds.py GOAL FIXED... PARENT... HELD... (the held runs read '... for 16 nodes start held'; the parent's, 5149fd6, without)"
  echo "## MinAtar Asterix to 12 (fixed 160, 320 of study-1207a; 1,280 of cluster-1207)"
  $PY research/experiments/cluster_seeds.py 12 /work/runs/study-1207a/minatar-asterix/two-core/b*-s1[0-4] $P/minatar-asterix/two-core $P/minatar-asterix/cluster $OUT/minatar-asterix/cluster
  echo "## MinAtar Asterix to 4"
  $PY research/experiments/cluster_seeds.py 4 /work/runs/study-1207a/minatar-asterix/two-core/b*-s1[0-4] $P/minatar-asterix/two-core $P/minatar-asterix/cluster $OUT/minatar-asterix/cluster
  echo "## MinAtar SpaceInvaders to 50"
  $PY research/experiments/cluster_seeds.py 50 /work/runs/study-1207si/minatar-spaceinvaders/two-core/b* $P/minatar-spaceinvaders/cluster/auto-b160* $OUT/minatar-spaceinvaders/cluster
  echo "## CartPole to 475"
  $PY research/experiments/cluster_seeds.py 475 /work/runs/study-1206b/cartpole/two-core/b* $P/cartpole/cluster/auto-b10-* $P/cartpole/cluster/auto-b80-* $OUT/cartpole/cluster
  echo "## MinAtar Breakout: not run (stopped at 18:50 UTC, once SpaceInvaders had failed the rule)"
} > $D/cluster-seeds.txt 2>&1
{ echo "# python research/experiments/run_tables.py paths RUN_DIR... (the held runs), one game at a time"
  for g in minatar-asterix minatar-spaceinvaders cartpole; do echo "## $g"; $PY research/experiments/run_tables.py paths $OUT/$g/cluster/auto-*; done; } > $D/envs-paths.txt 2>&1
{ echo "# python $D/crossings.py 1,2,4,8,12 RUN_DIR...: the kept fixed runs, the parent's cluster runs, the held runs"
  $PY $D/crossings.py 1,2,4,8,12 /work/runs/study-1207a/minatar-asterix/two-core/b*-s1[0-4] $P/minatar-asterix/two-core/b* $P/minatar-asterix/cluster/auto-* $OUT/minatar-asterix/cluster/auto-*; } > $D/asterix-crossings.txt 2>&1
{ echo "# python research/experiments/run_tables.py decisions RUN_DIR... (the held runs)"
  $PY research/experiments/run_tables.py decisions $OUT/minatar-asterix/cluster/auto-*; $PY research/experiments/run_tables.py decisions $OUT/minatar-spaceinvaders/cluster/auto-*; } > $D/decisions.txt 2>&1
echo done
