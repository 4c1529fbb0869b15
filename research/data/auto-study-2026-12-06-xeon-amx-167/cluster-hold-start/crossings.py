"""Where each run's 100-episode mean return first reaches each level: agent steps, updates and (on the cluster clock's
runs) cluster minutes ("?" before the clock's first log). Usage: python crossings.py 1,2,4,8 RUN_DIR..."""

import sys
from pathlib import Path

import numpy as np

from rlscale.rundir.events import read_scalars


def main() -> None:
    levels = [float(x) for x in sys.argv[1].split(",")]
    for run in sys.argv[2:]:
        scalars = read_scalars(Path(run))
        steps, returns = scalars["rollout/episode_return"]
        update_steps, updates = scalars["train/updates"]
        clock = scalars.get("cluster/wall_seconds")
        mean = np.convolve(returns, np.ones(100) / 100, mode="valid")
        mean_steps = steps[99:]
        cells = []
        for level in levels:
            if not (mean >= level).any():
                cells.append(f"{level:g}:-")
                continue
            at = mean_steps[np.argmax(mean >= level)]
            # The clock logs from the run's second timed size on (its own fit): before that, no minutes.
            logged = clock is not None and clock[0][0] <= at
            minutes = f"/{np.interp(at, *clock) / 60:.2f}m" if logged else ("/?m" if clock is not None else "")
            cells.append(f"{level:g}:{at / 1e3:.0f}k/{np.interp(at, update_steps, updates):.0f}u{minutes}")
        print(run.rstrip("/").split("/")[-1], " ".join(cells))


if __name__ == "__main__":
    main()
