"""Issue 80's cluster arm per seed: each arm's cluster-clock time and node-hours to GOAL over the fastest fixed cell's
medians (T(B) fitted through the fixed runs' update times, as `rlscale study --cluster-nodes 16` does), with a
percentile-bootstrap interval of each ratio of medians. Usage: cluster_seeds.py GOAL PATH... (sweep folders or runs)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
from cell_ratios import ratio_interval  # this folder, on the path as the script runs

from rlscale.control.cluster_clock import ElasticCluster
from rlscale.reports.runs import load_runs, variant_of
from rlscale.reports.study import cluster_cost, fixed_runs_cost

goal = float(sys.argv[1])
runs = load_runs([Path(p) for p in sys.argv[2:]])
fit = fixed_runs_cost(runs)
cluster = ElasticCluster(16, 16 * runs[0].cfg.observations_per_env, 0.03)
by: dict[str, list[tuple[int, float, float]]] = {}
for run in runs:
    w, n = cluster_cost(run, goal, fit, cluster)
    by.setdefault(variant_of(run), []).append((run.cfg.run.seed, w / 60, n / 3600))
fixed = {v: float(np.median([w for _, w, _ in c])) for v, c in by.items() if v.startswith("fixed")}
fastest = min((v for v in fixed if math.isfinite(fixed[v])), key=lambda v: fixed[v])
ref_w = np.array([w for _, w, _ in by[fastest]])
ref_n = np.array([n for _, _, n in by[fastest]])
rng = np.random.default_rng(0)
print(f"goal {goal:g}; fastest fixed: {fastest} ({np.median(ref_w):.3f} min, {np.median(ref_n):.4f} node-h)")
for v, c in sorted(by.items()):
    c.sort()
    w, n = np.array([x[1] for x in c]), np.array([x[2] for x in c])
    time, node_h = (ratio_interval(list(a), list(b), 10_000, rng) for a, b in ((w, ref_w), (n, ref_n)))
    print(f"  {v}: time {time[0]:.2f}x [{time[1]:.2f}, {time[2]:.2f}], node-h "
          f"{node_h[0]:.2f}x [{node_h[1]:.2f}, {node_h[2]:.2f}]; per seed "
          + " ".join(f"s{s}:{x / np.median(ref_w):.2f}/{y / np.median(ref_n):.2f}" for s, x, y in c))
