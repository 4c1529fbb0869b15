"""The policy/value split's cadence at a trained, fixed policy (issue 19, docs/notebook/performance.md).

    python benchmarks/parts_cadence.py run TRAINED_RUN EVERY SEED OUT_DIR
    python benchmarks/parts_cadence.py report DIR

``run`` loads the weights of a trained MinAtar Breakout run's last checkpoint
into a fresh run at lr 1e-9 (so the policy stays as trained and the true noise
scale is constant: every wobble of the logged estimates is estimation noise)
and trains 150,000 agent steps with ``--noise-parts-every EVERY``, serial, one
thread. ``report`` prints, per run under DIR, the standard deviation of log
B_simple of the total and of each part over the logged updates after 40,000
agent steps, and in how many updates each part's estimate was defined (> 0).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from rlscale.config import build_config
from rlscale.reports.evaluate import load_agent
from rlscale.reports.runs import load_runs
from rlscale.training import trainer

SETTLED = 40_000  # agent steps: two EMA horizons (20,000 observations each) after the start


def run(trained: Path, every: int, seed: int, out: Path) -> int:
    weights = load_agent(trained).model.state_dict()
    cfg = build_config("minatar-breakout", None, {
        "batch": "fixed", "pool": "serial", "learner_threads": 1, "lr": 1e-9, "total_frames": 150_000,
        "noise_parts_every": every,
        "seed": seed, "run_dir": str(out), "learner_precision": "fp32", "actor_precision": "fp32",
        "log_interval": 60.0})
    build = trainer.build

    def build_with_trained_weights(*args, **kwargs):  # a new run that starts from the trained policy
        training = build(*args, **kwargs)
        training.engine.learner.model.load_state_dict(weights)
        return training

    trainer.build = build_with_trained_weights
    return trainer.run(cfg, out)


def report(folder: Path) -> None:
    for record in sorted(load_runs([folder]), key=lambda r: r.path.name):
        phrases = []
        for part in ("total", "policy", "value"):
            steps, values = record.scalars[f"noise/b_simple_{part}"]
            settled = values[steps > SETTLED]
            defined = settled[np.isfinite(settled) & (settled > 0)]
            logged = int((record.scalars["noise/b_simple_total"][0] > SETTLED).sum())
            phrases.append(f"{part} log-std {np.std(np.log(defined)):.3f} ({defined.size}/{logged} defined)")
        print(record.path.name, " | ".join(phrases))


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"] and len(sys.argv) == 6:
        sys.exit(run(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])))
    if sys.argv[1:2] == ["report"] and len(sys.argv) == 3:
        report(Path(sys.argv[2]))
        sys.exit(0)
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    sys.exit(2)
