"""Does a throughput option change learning per agent step? The same runs with it off and on, seed by seed.

Runs ``python -m rlscale.train GAME --seed S --set KEY=A`` and ``... --set KEY=B`` for every seed, ``--jobs``
at a time (each run's directory gets a ``.done`` marker: the same command skips finished runs and redoes cut
ones), then prints per seed the mean return over training and the agent steps to a mean of ``--goal`` over the
last 20 episodes, with B - A and B / A and their 95 % bootstrap intervals over seeds:

    python research/experiments/option_learning.py minatar-breakout --key learner_compile --a off --b on \
        --seeds 0 1 2 3 4 5 6 7 8 9 --goal 4 --out /work/runs/compile-learning -- \
        --agent ppo --learner-precision bf16 --learner-threads 1 --total-frames 400000
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from rlscale.goals import GOAL_WINDOW, first_crossing
from rlscale.rundir.events import read_scalars
from rlscale.tags import EPISODE_RETURN


def run_one(game: str, run_dir: Path, seed: int, setting: str, extra: list[str]) -> None:
    done = run_dir / ".done"
    if done.exists():
        return
    shutil.rmtree(run_dir, ignore_errors=True)  # cut short: redo it whole
    command = [sys.executable, "-m", "rlscale.train", game, "--seed", str(seed), "--set", setting,
               "--run-dir", str(run_dir), *extra]
    print(f"[{time.strftime('%H:%M:%S')}] {' '.join(command[1:])}", flush=True)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    done.touch()


def read_run(run_dir: Path, goal: float) -> tuple[float, float]:
    """(mean return over every episode of the run, agent steps when the goal window's mean first reached goal)."""
    steps, returns = read_scalars(run_dir)[EPISODE_RETURN]
    at = first_crossing(steps, returns, goal)
    return float(np.mean(returns)), float("nan") if at is None else at


def bootstrap(values: np.ndarray, stat, rng: np.random.Generator, n: int = 10_000) -> tuple[float, float]:
    idx = rng.integers(0, len(values), size=(n, len(values)))
    draws = np.array([stat(values[i]) for i in idx])
    return float(np.nanpercentile(draws, 2.5)), float(np.nanpercentile(draws, 97.5))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("game")
    p.add_argument("--key", required=True, help="the setting compared, e.g. learner_compile")
    p.add_argument("--a", required=True, help="its first value (the baseline)")
    p.add_argument("--b", required=True, help="its second value")
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--goal", type=float, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--jobs", type=int, default=2)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # after --: the rest of every run's command
    args = p.parse_args(argv[:cut])
    args.extra = argv[cut + 1:]
    runs = [(value, seed) for seed in args.seeds for value in (args.a, args.b)]
    with ThreadPoolExecutor(args.jobs) as pool:
        for f in [pool.submit(run_one, args.game, args.out / f"{args.key}-{v}-s{s}", s, f"{args.key}={v}", args.extra)
                  for v, s in runs]:
            f.result()
    rows = {v: np.array([read_run(args.out / f"{args.key}-{v}-s{s}", args.goal) for s in args.seeds])
            for v in (args.a, args.b)}
    a, b = rows[args.a], rows[args.b]
    print(f"{args.game}, {args.key} {args.a} (A) against {args.b} (B), seeds {args.seeds}, goal {args.goal:g} "
          f"(mean of the last {GOAL_WINDOW} episodes); extra: {' '.join(args.extra)}")
    print(f"{'seed':>5} {'mean return A':>14} {'B':>8} {'steps to goal A':>16} {'B':>10}")
    for s, ra, rb in zip(args.seeds, a, b, strict=True):
        print(f"{s:>5} {ra[0]:>14.3f} {rb[0]:>8.3f} {ra[1]:>16,.0f} {rb[1]:>10,.0f}")
    rng = np.random.default_rng(0)
    diff = b[:, 0] - a[:, 0]
    lo, hi = bootstrap(diff, np.mean, rng)
    print(f"mean return over training, B - A: {diff.mean():+.3f} (95 % bootstrap over seeds {lo:+.3f} to {hi:+.3f}); "
          f"A {a[:, 0].min():.2f}-{a[:, 0].max():.2f}, B {b[:, 0].min():.2f}-{b[:, 0].max():.2f} per seed")
    pairs = np.stack([a[:, 1], b[:, 1]], axis=1)
    reached = ~np.isnan(pairs).any(axis=1)
    ratio = lambda x: np.nanmedian(x[:, 1]) / np.nanmedian(x[:, 0])  # noqa: E731
    lo, hi = bootstrap(pairs[reached], ratio, rng)
    print(f"agent steps to {args.goal:g}, median B / median A: {ratio(pairs[reached]):.2f}x (95 % bootstrap "
          f"{lo:.2f}-{hi:.2f}; {int(reached.sum())} of {len(args.seeds)} seeds reached it in both)")


if __name__ == "__main__":
    main()
