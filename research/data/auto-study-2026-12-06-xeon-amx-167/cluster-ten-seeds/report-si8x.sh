#!/bin/bash
cd /tmp/si8
PY=/work/main/.venv/bin/python; export PYTHONPATH=/tmp/si8
D=/work/main/research/data/auto-study-2026-12-06-xeon-amx-167/cluster-ten-seeds
cp /work/runs/run-si8.sh $D/run-si8x.sh; cp /work/runs/si8-report.sh $D/report-si8x.sh
{ echo "# python research/experiments/cluster_seeds.py GOAL FIXED... RUNS... (fixed: this folder's SpaceInvaders references, /work/runs/si20; runs: run-si8x.sh, from 20 and 1,280 at the default, '... one node first')"
  for g in 50 30; do echo "## MinAtar SpaceInvaders to $g"; $PY research/experiments/cluster_seeds.py $g /work/runs/si20/default/minatar-spaceinvaders/two-core /work/runs/si8/minatar-spaceinvaders/cluster; done
  echo "## run_tables.py paths"; $PY research/experiments/run_tables.py paths /work/runs/si8/minatar-spaceinvaders/cluster/auto-*
  echo "## run_tables.py decisions"; $PY research/experiments/run_tables.py decisions /work/runs/si8/minatar-spaceinvaders/cluster/auto-*
} > $D/cluster-seeds-si-eighth-8x.txt 2>&1
echo done
