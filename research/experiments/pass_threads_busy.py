"""One Nature CNN pass of 256 rows by a team of 2 threads, by 1 thread and by 2 passes side by side, quiet and
beside one busy process, in turns (2026-11-29).

    python research/experiments/pass_threads_busy.py fp32|bf16
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import numpy as np
import torch

from rlscale.agents.ppo import PPOLearner
from rlscale.agents.side_by_side import SideBySide
from rlscale.config import build_config
from rlscale.envs.vector import EnvSpec
from rlscale.models.nets import build_network


def main() -> None:
    precision = sys.argv[1] if len(sys.argv) > 1 else "fp32"
    spec = EnvSpec((4, 84, 84), "uint8", 6, True)  # Pong's frames
    torch.manual_seed(0)
    learner = PPOLearner.from_config(build_network(spec, "auto", 64), build_config("pong", "ppo", {"learner_precision": precision}))
    obs = torch.randint(0, 255, (256, *spec.obs_shape), dtype=torch.uint8)

    def grad(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits, value = learner.forward(x)
        return torch.autograd.grad(logits.float().mean() + value.float().mean(), learner.params)

    side = SideBySide(2)

    def team() -> None:
        torch.set_num_threads(2)
        grad(obs)

    def one() -> None:
        torch.set_num_threads(1)
        grad(obs)

    def side_by_side() -> None:
        torch.set_num_threads(2)
        side.gradients(lambda part: (list(grad(obs[torch.from_numpy(part)])), {}), np.arange(len(obs)))

    runs = {"team2": team, "one1": one, "side2": side_by_side}
    try:
        for load in ("quiet", "busy", "quiet", "busy"):
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load == "busy" else None
            try:
                time.sleep(0.5)
                for run in runs.values():
                    run()
                times: dict[str, list[float]] = {name: [] for name in runs}
                for _ in range(5):
                    for name, run in runs.items():
                        start = time.perf_counter()
                        run()
                        times[name].append(time.perf_counter() - start)
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
            m = {name: statistics.median(t) for name, t in times.items()}
            print(precision, load, " ".join(f"{name} {1e3 * t:.0f} ms" for name, t in m.items()),
                  f"| side2 vs one1: {m['one1'] / m['side2']:.2f}x, team2 vs one1: {m['one1'] / m['team2']:.2f}x",
                  flush=True)
    finally:
        side.close()


if __name__ == "__main__":
    main()
