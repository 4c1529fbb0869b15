#!/bin/bash
# The files of this folder from run.sh's runs (/work/runs/si-epyc) and the first EPYC sitting's (/work/runs/si-ten).
cd /work/main
D=research/data/auto-study-2026-12-07-epyc-bf16/minatar-spaceinvaders-epyc-1x8x
NEW=/work/runs/si-epyc/minatar-spaceinvaders/two-core
FIRST=/work/runs/si-ten/minatar-spaceinvaders/two-core
PY=.venv/bin/python
{ echo "# python research/experiments/sitting_ratios.py --goal G --reference b160-lr0.0056 FIRST::14-19 NEW (entry of 2026-12-08 01:20 UTC)"
  echo "# the EPYC alone: the first sitting's seeds 14-19 (÷ its fixed 160 over seeds 10-19) with this sitting's 10-13 (÷ its own);"
  echo "# the reading is auto-b160, auto-b1280 and b1280 (auto-b20 here keeps the first sitting's seeds 14-19 only)"
  for g in 50 40 30; do $PY research/experiments/sitting_ratios.py --goal $g --reference b160-lr0.0056 $FIRST::14-19 $NEW; done
  echo "## this sitting alone (seeds 10-13)"
  $PY research/experiments/sitting_ratios.py --goal 50 --reference b160-lr0.0056 $NEW; } > $D/ratios.txt
$PY research/experiments/run_tables.py runs $NEW > $D/runs.txt
$PY research/experiments/run_tables.py paths $NEW/auto-* > $D/envs-paths.txt
$PY research/experiments/run_tables.py decisions $NEW/auto-* > $D/decisions.txt
