#!/bin/bash
# The files of this folder from the runs of run.sh (/work/runs/si-preset).
cd /work/main
H=/work/runs/si-preset/minatar-spaceinvaders/two-core
D=research/data/auto-study-2026-12-07-epyc-bf16/minatar-spaceinvaders-preset
PY=.venv/bin/python
{ echo "# python research/experiments/cell_ratios.py $H --goal G --reference b80-lr0.0112 (rule: research/notebook/results.md, 2026-12-08 00:49)"
  for g in 30 20 10; do $PY research/experiments/cell_ratios.py $H --goal $g --reference b80-lr0.0112; done; } > $D/cells.txt
$PY research/experiments/run_tables.py runs $H > $D/runs.txt
$PY research/experiments/run_tables.py paths $H/auto-* > $D/envs-paths.txt
$PY research/experiments/run_tables.py decisions $H/auto-* > $D/decisions.txt
