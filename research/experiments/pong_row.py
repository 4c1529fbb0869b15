"""One row of benchmarks/bench.py's rlscale runs, in a process of its own, for A/B tests of settings that
act at process start (environment variables such as GOMP_SPINCOUNT, read when torch loads libgomp).

    python research/experiments/pong_row.py ppo 8 30
    GOMP_SPINCOUNT=10000 python research/experiments/pong_row.py a2c 16 25 '{"serial": true}'

Prints the row's agent steps/s and the median rollout and learner milliseconds of an update. Alternate
the variants' processes, a few rounds: the machine drifts by 5-10 % between minutes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench import rlscale_default  # noqa: E402

if __name__ == "__main__":
    algo, envs, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    overrides = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    rate, _, split, _, _ = rlscale_default(algo, seconds, envs, overrides)
    print(f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', 'unset')} {algo} {overrides} {rate.steps_per_s:.0f} "
          f"rollout {split.rollout * 1e3:.1f} learner {split.learner * 1e3:.1f}", flush=True)
