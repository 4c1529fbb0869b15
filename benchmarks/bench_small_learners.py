"""Small learners quiet and beside one busy process: the training time of short runs, side by side.

    python benchmarks/bench_small_learners.py [--frames 20000] [--rounds 2]

For CartPole (an MLP) and MinAtar Breakout (a small CNN), serial: each row trains the preset for
``--frames`` with the learner's threads as rlscale chooses them (``--learner-threads 0``) and with
two forced, once on a quiet machine and once beside one busy process (a one-core Python loop), in
turns. It prints each run's training time (the run's own ``wall_seconds``), the busy/quiet ratio of
each setting, and the threads each run started with. Compare only rows of one invocation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benchtiming import busy_process


def train_seconds(preset: str, threads: int, frames: int, run_dir: Path) -> tuple[float, str]:
    out = subprocess.run([sys.executable, "-m", "rlscale.train", preset, "--pool", "serial", "--total-frames", str(frames),
                          "--learner-threads", str(threads), "--log-interval", "600", "--run-dir", str(run_dir),
                          "--batch", "fixed"],  # the preset's batch throughout: auto would resize by its timings
                         capture_output=True, text=True, check=True)
    header = next(line for line in out.stdout.splitlines() if " | " in line)
    learner = next(part for part in header.split(" | ") if part.startswith("learner on"))
    return json.loads((run_dir / "summary.json").read_text())["wall_seconds"], learner.split(",")[0]


PRESETS = ("cartpole", "minatar-breakout")
SETTINGS = ((0, "rlscale's choice"), (2, "2 threads"))  # --learner-threads: 0 lets rlscale choose


@dataclass
class SmallRows:
    """Training seconds of each (preset, setting, load), one per round, and the threads each setting started with."""

    seconds: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    learners: dict[tuple[str, str], str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"{'preset':<17} {'threads':<16} {'quiet s':>8} {'busy s':>8} {'busy/quiet':>10}  started with"]
        for preset, name in self.learners:
            quiet = statistics.median(self.seconds[(preset, name, "quiet")])
            busy = statistics.median(self.seconds[(preset, name, "busy")])
            out.append(f"{preset:<17} {name:<16} {quiet:8.1f} {busy:8.1f} {busy / quiet:10.2f}  "
                       f"{self.learners[(preset, name)]}")
        return out


def measure(frames: int, rounds: int, settings: tuple[tuple[int, str], ...] = SETTINGS) -> SmallRows:
    """Each preset and setting trained for ``frames``, quiet and beside a busy core, in turns, ``rounds`` times."""
    rows = SmallRows()
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(rounds):
            for load in ("quiet", "busy"):
                with busy_process() if load == "busy" else contextlib.nullcontext():
                    for preset in PRESETS:
                        for threads, name in settings:
                            run_dir = Path(tmp) / f"{preset}-{threads}-{load}-{round_}"
                            seconds, learner = train_seconds(preset, threads, frames, run_dir)
                            rows.seconds.setdefault((preset, name, load), []).append(seconds)
                            rows.learners[(preset, name)] = learner
                            print(f"  {preset:<17} {name:<16} {load:<5} {seconds:6.1f} s  ({learner})", flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    print()
    print("\n".join(measure(args.frames, args.rounds).lines()))


if __name__ == "__main__":
    main()
