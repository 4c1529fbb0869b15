#!/bin/bash
# Reports of the ten-seed cluster study (after /work/runs/run-si20.sh; nothing else running).
cd /tmp/si20  # 8150f8c: its labels name the setting's runs "... one node first"
PY=/work/main/.venv/bin/python; export PYTHONPATH=/tmp/si20
R=/work/runs/si20
D=/work/main/research/data/auto-study-2026-12-06-xeon-amx-167/cluster-ten-seeds
mkdir -p $D
cp /work/runs/run-si20.sh $D/run.sh; cp /work/runs/si20-report.sh $D/report.sh
{ echo "# python research/experiments/cluster_seeds.py GOAL FIXED... DEFAULT... SETTING... (the setting's runs read '... for 16 nodes one node first', the default's nothing after 'nodes')"
  echo "## MinAtar SpaceInvaders to 50"
  $PY research/experiments/cluster_seeds.py 50 $R/default/minatar-spaceinvaders/two-core $R/default/minatar-spaceinvaders/cluster $R/node/minatar-spaceinvaders/cluster
  echo "## MinAtar SpaceInvaders to 30"
  $PY research/experiments/cluster_seeds.py 30 $R/default/minatar-spaceinvaders/two-core $R/default/minatar-spaceinvaders/cluster $R/node/minatar-spaceinvaders/cluster
  echo "## CartPole to 475"
  $PY research/experiments/cluster_seeds.py 475 $R/default/cartpole/two-core $R/default/cartpole/cluster $R/node/cartpole/cluster
} > $D/cluster-seeds.txt 2>&1
{ echo "# python research/experiments/run_tables.py paths RUN_DIR... (both arms), one game at a time"
  for g in minatar-spaceinvaders cartpole; do for a in default node; do echo "## $g, $a"; $PY research/experiments/run_tables.py paths $R/$a/$g/cluster/auto-*; done; done; } > $D/envs-paths.txt 2>&1
{ echo "# python research/experiments/run_tables.py decisions RUN_DIR... (both arms)"
  for g in minatar-spaceinvaders cartpole; do for a in default node; do echo "## $g, $a"; $PY research/experiments/run_tables.py decisions $R/$a/$g/cluster/auto-*; done; done; } > $D/decisions.txt 2>&1
{ echo "# python research/experiments/run_tables.py runs SWEEP_DIR... (fixed references)"
  $PY research/experiments/run_tables.py runs $R/default/minatar-spaceinvaders/two-core $R/default/cartpole/two-core; } > $D/fixed-runs.txt 2>&1
echo done
