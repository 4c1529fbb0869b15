#!/bin/bash
# The files of this folder from the runs of run.sh (/work/runs/si-ten) and 694fff2's runs.txt.
cd /work/main
H=/work/runs/si-ten/minatar-spaceinvaders/two-core
O=research/data/auto-study-2026-12-06-xeon-amx-167
PY=.venv/bin/python
{ echo "# python research/experiments/sitting_ratios.py --goal G --reference b160-lr0.0056 SOURCES (rule: research/notebook/results.md, 2026-12-07 23:40)"
  for g in 50 40 30; do
    echo "## this sitting alone, seeds 10-19 (arms other than fixed 160 and auto from 20: seeds 14-19); the rule reads auto-b20 here"
    $PY research/experiments/sitting_ratios.py --goal $g --reference b160-lr0.0056 $H
    echo "## pooled: 694fff2's seeds 10-14 (its own fixed 160) and this sitting's seeds 15-19 (the rule reads auto-b160 and auto-b1280 here; auto-b20 here keeps seeds 15-19 only)"
    $PY research/experiments/sitting_ratios.py --goal $g --reference b160-lr0.0056 $O/minatar-spaceinvaders-1x8x-694fff2/runs.txt::10-14 $H::15-19
  done; } > research/data/auto-study-2026-12-07-epyc-bf16/minatar-spaceinvaders-ten-seeds/ratios.txt
$PY research/experiments/run_tables.py runs $H > research/data/auto-study-2026-12-07-epyc-bf16/minatar-spaceinvaders-ten-seeds/runs.txt
$PY research/experiments/run_tables.py paths $H/auto-* > research/data/auto-study-2026-12-07-epyc-bf16/minatar-spaceinvaders-ten-seeds/envs-paths.txt
$PY research/experiments/run_tables.py decisions $H/auto-* > research/data/auto-study-2026-12-07-epyc-bf16/minatar-spaceinvaders-ten-seeds/decisions.txt
