"""``--learner-passes auto``'s start-up probe, quiet and beside one busy process, in turns (2026-11-29).

    python research/experiments/pass_schedule_probe.py [--precision fp32] [--rows 256] [--rounds 2]

Times a Nature CNN pass of ``--rows`` rows (PPO's minibatch at the defaults) by a team of 2 threads and by
2 passes side by side (rlscale.agents.side_by_side.choose_pass_schedule), on a quiet machine and beside
``python -c "while True: pass"``, and prints what the probe chose and measured each time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import torch

from rlscale.agents.ppo import PPOLearner
from rlscale.agents.side_by_side import SideBySide, choose_pass_schedule
from rlscale.config import build_config
from rlscale.envs.vector import EnvSpec
from rlscale.models.nets import build_network


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    spec = EnvSpec((4, 84, 84), "uint8", 6, True)  # Pong's frames
    torch.manual_seed(0)
    learner = PPOLearner.from_config(build_network(spec, "auto", 64),
                         build_config("pong", "ppo", {"learner_precision": args.precision}))
    obs = torch.randint(0, 255, (args.rows, *spec.obs_shape), dtype=torch.uint8)
    for _ in range(args.rounds):
        for load in ("quiet", "busy"):
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load == "busy" else None
            try:
                time.sleep(0.5)
                workers = SideBySide(2)
                try:
                    choice = choose_pass_schedule(learner.params, learner.forward, obs, workers)
                finally:
                    workers.close()
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
            print(f"{args.precision} {args.rows} rows, {load:5s}: {choice.kind} ({choice.why})", flush=True)


if __name__ == "__main__":
    main()
