"""Issue 61's controller, `--batch measured --progress reach`, from 1/4x, 1x and 4x a game's best fixed batch
against that batch, on seeds not used to choose it, to the game's top goal (research/notebook/results.md).

    python research/experiments/measured_study.py --out DIR [--game cartpole] [--seeds ...] [--arms ...]

CartPole: best fixed 200 at lr 3e-3 (chosen on seeds 30-34, 2026-11-26), held-out seeds 35-39, goal 475.
MinAtar Breakout: best fixed 320 at lr 2.24e-2 (the fit sweeps of 2026-11-25/26, seeds 0-29), held-out seeds
40-44, goal 14; each start at the power rule's rate, 1.12e-2 (B/80)^0.5, as the branches take theirs; a run
stops at --total-frames 4M agent steps, branches counted, so a run that has not reached 14 by then took more
than ~2.5x the fixed batch's steps.
MinAtar Asterix (the SpaceInvaders preset on MinAtar/Asterix-v1, as the sweep ran it): best fixed 80 at 1.12e-2
(seeds 0-2), held-out seeds 10-12, goal 12, a 3M cap (~4x the fixed batch's steps).

Resumable (a finished run is skipped, an interrupted one resumed). One run at a time, the arms interleaved
seed by seed so they share whatever else the machine runs; serial runs, one learner thread, fp32. Then
``rlscale study`` over them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

FP32_SERIAL = ["--serial", "--learner-threads", "1", "--learner-precision", "fp32", "--actor-precision", "fp32",
               "--log-interval", "600"]


@dataclass(frozen=True)
class Game:
    preset: str
    goals: list[str]
    common: list[str]
    arms: dict[str, list[str]]
    seeds: list[int]
    default_arms: list[str]

    @property
    def flags(self) -> list[str]:
        """What every arm's command line shares: the common flags, the goals, and a stop at the top one."""
        return [*self.common, "--goals", *self.goals, "--stop-return", self.goals[-1]]


def _measured(n_envs: int, lr: str, bounds: list[str]) -> list[str]:
    return ["--n-envs", str(n_envs), "--lr", lr, "--batch", "measured", "--progress", "reach", *bounds]


CARTPOLE_ARMS = {
    "fixed-200": ["--n-envs", "40", "--lr", "3e-3"],
    "measured-from-50": _measured(10, "3e-3", ["--min-envs", "4", "--max-envs", "256"]),
    "measured-from-200": _measured(40, "3e-3", ["--min-envs", "4", "--max-envs", "256"]),
    "measured-from-800": _measured(160, "3e-3", ["--min-envs", "4", "--max-envs", "256"]),
}
# The same measurements with two races at once, each a Ray task of its own (--branches-at-once 2; added
# 2026-11-29 after 22e84df): the same races and readings, the measurement's wall time shared by two cores.
CARTPOLE_ARMS |= {f"{arm}-2-at-once": [*flags, "--branches-at-once", "2"]
                  for arm, flags in CARTPOLE_ARMS.items() if "measured" in arm}
# Breakout: the rate lr0 (B/B0)^0.5 is the preset's rule, so each start's rate is the rule's at its batch
# (B = 5 n_envs); the bounds let the 4x start's 4x branch (5,120 = 1,024 envs) and 1/4x's 0.5x (40) run.
BREAKOUT_BOUNDS = ["--min-envs", "4", "--max-envs", "1024"]
BREAKOUT_ARMS = {
    "fixed-320": ["--n-envs", "64", "--lr", "2.24e-2", "--min-envs", "64", "--max-envs", "64"],
    "measured-from-80": _measured(16, "1.12e-2", BREAKOUT_BOUNDS),
    "measured-from-320": _measured(64, "2.24e-2", BREAKOUT_BOUNDS),
    "measured-from-1280": _measured(256, "4.48e-2", BREAKOUT_BOUNDS),
}
BREAKOUT_DEFAULT_ARMS = list(BREAKOUT_ARMS)
# One measurement, at the start, then held (--remeasure 1e9): the controller's cheapest form, added after the
# default arms' runs re-measured many times (9 measurements to goal 14 from 80 on seed 40), most on the noise scale's trigger.
BREAKOUT_ARMS["measured-once-from-80"] = [*BREAKOUT_ARMS["measured-from-80"], "--remeasure", "1e9"]
# Re-measuring on the agent steps' doubling alone (--remeasure-noise 1e9), added after the once arm ran 2.7x faster.
BREAKOUT_ARMS["measured-steps-from-80"] = [*BREAKOUT_ARMS["measured-from-80"], "--remeasure-noise", "1e9"]
# Asterix (research/data/asterix-sweep-2026-11-29.txt): best fixed 80 at 1.12e-2, chosen on seeds 0-2, goal 12;
# two environments a vector env; at least 4 (--noise-groups 4), so the 1/4x start's 0.5x branch merges into its 1x one.
ASTERIX_BOUNDS = ["--vector-size", "2", "--min-envs", "4", "--max-envs", "1024"]
ASTERIX_ARMS = {
    "fixed-80": ["--n-envs", "16", "--lr", "1.12e-2", "--vector-size", "2", "--min-envs", "16", "--max-envs", "16"],
    "measured-from-20": _measured(4, "5.6e-3", ASTERIX_BOUNDS),
    "measured-from-80": _measured(16, "1.12e-2", ASTERIX_BOUNDS),
    "measured-from-320": _measured(64, "2.24e-2", ASTERIX_BOUNDS),
}
GAMES = {
    "cartpole": Game("cartpole", ["100", "200", "400", "475"],
                     [*FP32_SERIAL, "--total-frames", "3000000"], CARTPOLE_ARMS,
                     [35, 36, 37, 38, 39], ["fixed-200", "measured-from-50", "measured-from-200", "measured-from-800"]),
    "minatar-breakout": Game("minatar-breakout", ["5", "8", "11", "14"], [*FP32_SERIAL, "--total-frames", "4000000"],
                             BREAKOUT_ARMS, [40, 41, 42, 43, 44], BREAKOUT_DEFAULT_ARMS),
    "minatar-asterix": Game("minatar-spaceinvaders", ["4", "8", "12"],
                            [*FP32_SERIAL, "--env-id", "MinAtar/Asterix-v1", "--total-frames", "3000000"],
                            ASTERIX_ARMS, [10, 11, 12], list(ASTERIX_ARMS)),
}
# pbt_against_controller.py runs CartPole's arms.
COMMON = GAMES["cartpole"].flags
ARMS = CARTPOLE_ARMS


def run_study(game: Game, out: Path, seeds: list[int], arms: list[str]) -> None:
    """Every (seed, arm) run not yet finished, one at a time; one line per run with its measurements."""
    for seed in seeds:
        for arm in arms:
            run_dir = out / arm / f"s{seed}"
            summary = run_dir / "summary.json"
            if summary.is_file() and json.loads(summary.read_text()).get("finished"):
                continue
            cmd = [sys.executable, "-m", "rlscale.train", game.preset, *game.flags, *game.arms[arm], "--seed", str(seed),
                   "--run-dir", str(run_dir)]
            if (run_dir / "checkpoints").is_dir():
                cmd = [sys.executable, "-m", "rlscale.train", "--resume", str(run_dir)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            kept = [line for line in done.stdout.splitlines()
                    if line.startswith(("measured at", "measurement", f"goal {game.goals[-1]}", "done:"))]
            print(f"{arm} seed {seed}: rc {done.returncode}", *("  " + line for line in kept), sep="\n", flush=True)
            if done.returncode:
                print(done.stderr[-1500:], flush=True)
    study = subprocess.run([sys.executable, "-m", "rlscale.study", *[str(out / arm / f"s{s}")
                            for arm in arms for s in seeds if (out / arm / f"s{s}" / "summary.json").is_file()],
                            "--goals", *game.goals, "--out", str(out / "study.png")],
                           capture_output=True, text=True)
    print(study.stdout[-6000:], study.stderr[-1500:], flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--game", choices=list(GAMES), default="cartpole")
    p.add_argument("--seeds", type=int, nargs="*", help="default: the game's held-out seeds")
    p.add_argument("--arms", nargs="*", help="default: the game's four arms")
    args = p.parse_args()
    game = GAMES[args.game]
    arms = args.arms or game.default_arms
    unknown = sorted(set(arms) - set(game.arms))
    if unknown:
        p.error(f"{args.game} has no arm {', '.join(unknown)}; its arms: {', '.join(game.arms)}")
    run_study(game, args.out, args.seeds or game.seeds, arms)


if __name__ == "__main__":
    main()
