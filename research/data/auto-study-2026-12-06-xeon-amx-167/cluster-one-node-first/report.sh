#!/bin/bash
# Reports of the one-node-first study (after /work/runs/run-node.sh; nothing else running).
cd /tmp/node  # 0406df2: its labels name these runs
PY=/work/main/.venv/bin/python; export PYTHONPATH=/tmp/node
OUT=/work/runs/node
P=/work/runs/cluster-1207
A=/work/runs/hold
D=/work/main/research/data/auto-study-2026-12-06-xeon-amx-167/cluster-one-node-first
mkdir -p $D
cp /work/runs/run-node.sh $D/run.sh; cp /work/runs/node-report.sh $D/report.sh
{ echo "# python research/experiments/cluster_seeds.py GOAL FIXED... PARENT... RUNS... (these runs read '... for 16 nodes one node first'; the parent's, 5149fd6, nothing after 'nodes'; Asterix from 40 and CartPole from 10, whose decisions are the held start's, are scored in ../cluster-hold-start/cluster-seeds.txt, made at 838cb39)"
  echo "## MinAtar SpaceInvaders to 50"
  $PY research/experiments/cluster_seeds.py 50 /work/runs/study-1207si/minatar-spaceinvaders/two-core/b* $P/minatar-spaceinvaders/cluster/auto-b160* $OUT/minatar-spaceinvaders/cluster
  echo "## MinAtar Asterix to 12 (fixed 160, 320 of study-1207a; 1,280 of cluster-1207)"
  $PY research/experiments/cluster_seeds.py 12 /work/runs/study-1207a/minatar-asterix/two-core/b*-s1[0-4] $P/minatar-asterix/two-core $P/minatar-asterix/cluster $OUT/minatar-asterix/cluster
  echo "## MinAtar Asterix to 4"
  $PY research/experiments/cluster_seeds.py 4 /work/runs/study-1207a/minatar-asterix/two-core/b*-s1[0-4] $P/minatar-asterix/two-core $P/minatar-asterix/cluster $OUT/minatar-asterix/cluster
  echo "## MinAtar Breakout to 14, from 320"
  $PY research/experiments/cluster_seeds.py 14 /work/runs/study-1207c/minatar-breakout/two-core/b* $P/minatar-breakout/cluster/auto-b320* $OUT/minatar-breakout/cluster
  echo "## CartPole to 475"
  $PY research/experiments/cluster_seeds.py 475 /work/runs/study-1206b/cartpole/two-core/b* $P/cartpole/cluster/auto-b80-* $OUT/cartpole/cluster
} > $D/cluster-seeds.txt 2>&1
{ echo "# python research/experiments/run_tables.py paths RUN_DIR... (these runs), one game at a time"
  for g in minatar-spaceinvaders minatar-asterix minatar-breakout cartpole; do echo "## $g"; $PY research/experiments/run_tables.py paths $OUT/$g/cluster/auto-*; done; } > $D/envs-paths.txt 2>&1
{ echo "# python research/data/auto-study-2026-12-06-xeon-amx-167/cluster-hold-start/crossings.py 1,2,4,8,12 RUN_DIR... (these Asterix runs)"
  $PY research/data/auto-study-2026-12-06-xeon-amx-167/cluster-hold-start/crossings.py 1,2,4,8,12 $OUT/minatar-asterix/cluster/auto-*; } > $D/asterix-crossings.txt 2>&1
{ echo "# python research/experiments/run_tables.py decisions RUN_DIR... (these runs)"
  for g in minatar-spaceinvaders minatar-asterix minatar-breakout cartpole; do $PY research/experiments/run_tables.py decisions $OUT/$g/cluster/auto-*; done; } > $D/decisions.txt 2>&1
echo done
