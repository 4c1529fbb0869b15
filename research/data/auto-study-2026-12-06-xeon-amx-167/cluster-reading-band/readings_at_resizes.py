"""Each resize of a run: the reading (B_simple of the total loss), the controller's logged target and the cost model's
exchange rate a/b at the last logged update before it and at the first after (the shrinks from 512 environments came
as the reading fell within one update).

    python readings_at_resizes.py RUN_DIR...   (written 2026-12-07 after the reading band's runs; model 167)
"""
import sys
from pathlib import Path

import numpy as np

from rlscale.rundir.events import read_scalars

for run in sys.argv[1:]:
    s = read_scalars(Path(run))
    steps, envs = s["batch/n_envs"]

    def at(tag: str, step: float, scalars: dict = s) -> tuple[float, float]:
        t, v = scalars[tag]
        j = max(0, np.searchsorted(t, step, side="right") - 1)
        return float(v[j]), float(t[j])

    print(Path(run).name)
    for i in np.nonzero(np.diff(envs))[0]:
        before, after = steps[i], steps[i + 1]
        rows = []
        for k in (before, after):
            reading, when = at("noise/b_simple_total", k)
            rows.append(f"{when / 1e3:.1f}k R {reading:.0f} target {at('batch/target', k)[0]:.0f} "
                        f"r {at('batch/exchange_rate', k)[0]:.0f}")
        print(f"  {int(envs[i])}->{int(envs[i + 1])}: " + " | ".join(rows))
