"""Each resize of a cluster run, with the reading and the cost fit logged at it, and the cluster batch that fit gives at
the reading, at the reading / 1.5 and at x 1.5 (the logged values trail the controller's own by up to an update).

    python resizes_offline.py RUN_DIR...   (written 2026-12-07 for the reading band's prediction; model 167)
"""
import sys
from pathlib import Path

import numpy as np

from rlscale.control.cluster_clock import ElasticCluster, cluster_batch
from rlscale.control.cost import Fit
from rlscale.rundir.events import read_scalars

CLUSTER = ElasticCluster(16, 80, 0.03)  # the studies' cluster: 16 nodes of 16 environments x 5 steps, 30 ms
CANDIDATES = [envs * 5.0 for envs in range(4, 513, 4)]

for run in sys.argv[1:]:
    s = read_scalars(Path(run))
    steps, envs = s["batch/n_envs"]

    def at(tag: str, step: float, scalars: dict = s) -> float:
        t, v = scalars[tag]
        return float(v[max(0, np.searchsorted(t, step, side="right") - 1)])

    out = []
    for i in np.nonzero(np.diff(envs))[0][:12]:
        k = steps[i]
        reading = at("noise/b_simple_total", k)
        fit = Fit(at("perf/overhead_seconds", k), at("perf/seconds_per_observation", k))
        if fit.overhead > 0 and fit.per_observation > 0 and reading > 0:
            t, lo, hi = (cluster_batch(fit, CLUSTER, r, 0.05, CANDIDATES) for r in (reading, reading / 1.5, reading * 1.5))
            out.append(f"{k / 1e3:.0f}k {int(envs[i])}->{int(envs[i + 1])} R {reading:.0f}: {t:.0f} (/1.5 {lo:.0f}, x1.5 {hi:.0f})")
    print(Path(run).name, "; ".join(out))
