"""The default Pong engine's updates back to back, one line each (rollout and learner seconds, learner threads)
and a summary line: how a run's speed moves over minutes, and what a fixed thread count does beside a busy process.

    python research/experiments/update_series.py ppo 8 150                      # every update of 150 s
    python research/experiments/update_series.py a2c 16 40 learner_threads=1 --summary   # after 3 warm-up updates

Settings after the seconds go to build_config as they are (numbers as ints). The pool is pinned to the Ray
actors (no start-up probe), as in bench.py's bound rows.
"""

from __future__ import annotations

import statistics
import sys
import time

from rlscale import tags
from rlscale.config import build_config
from rlscale.engine.native import NativeEngine

if __name__ == "__main__":
    summary_only = "--summary" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--summary"]
    algo, n_envs, seconds = args[0], int(args[1]), float(args[2])
    overrides = {k: (int(v) if v.isdigit() else v) for k, v in (a.split("=", 1) for a in args[3:])}
    cfg = build_config("pong", algo, {"n_envs": n_envs, "warmup_max_steps": 0, "pool": "actors", **overrides})
    engine = NativeEngine(cfg, n_envs)
    rows: list[tuple[float, float, float]] = []
    try:
        if summary_only:
            for _ in range(3):
                engine.update(cfg.agent.lr)
        start, steps = time.time(), 0
        while time.time() - start < seconds:
            began = time.time()
            result = engine.update(cfg.agent.lr)
            m, steps = result.metrics, steps + result.agent_steps
            rows.append((m[tags.ROLLOUT_SECONDS], m[tags.LEARNER_SECONDS], m[tags.LEARNER_THREADS]))
            if not summary_only:
                print(f"{len(rows) - 1:3d} t={time.time() - start:6.1f} wall={time.time() - began:.3f} "
                      f"roll={rows[-1][0]:.3f} learn={rows[-1][1]:.3f} thr={rows[-1][2]}", flush=True)
        rate = steps / (time.time() - start)
    finally:
        engine.close()
    if not rows:
        sys.exit("no update finished within the seconds given")
    print(f"RESULT {algo} {overrides}: {rate:.0f} agent steps/s; median rollout "
          f"{statistics.median(r[0] for r in rows):.3f} learner {statistics.median(r[1] for r in rows):.3f}; "
          f"threads {sorted({r[2] for r in rows})}", flush=True)
