"""--pool auto's start-up probe on Pong (or any preset), quiet and beside one busy process, in rounds: what it
timed and chose each time, and (--seconds S) each pool's end-to-end rate over S seconds of updates right after,
to check the probe picks the pool that trains faster.

    python research/experiments/pool_probe.py a2c 16 --rounds 3 --seconds 20
    python research/experiments/pool_probe.py ppo 8 --rounds 2 --env pong

Each probe builds its engine afresh (both pools, then the loser closed), as a run's start does.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench import cpu_kind  # noqa: E402
from benchtiming import busy_process  # noqa: E402

from rlscale.config import build_config  # noqa: E402
from rlscale.rollout.choice import BUDGET_SECONDS, MAX_TIMED, MIN_TIMED, ProbeLimits  # noqa: E402
from rlscale.training.engine import NativeEngine  # noqa: E402


def rate(engine: NativeEngine, seconds: float) -> float:
    """Agent steps per second of updates back to back for ``seconds`` (after two untimed updates)."""
    for _ in range(2):
        engine.update(engine.cfg.agent.lr)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += engine.update(engine.cfg.agent.lr).agent_steps
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("algo")
    parser.add_argument("n_envs", type=int)
    parser.add_argument("--env", default="pong")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.0, help="also time each pool end to end (0: no)")
    parser.add_argument("--no-busy", action="store_true")
    parser.add_argument("--max-timed", type=int, default=MAX_TIMED, help="the probe's most timed updates a pool")
    parser.add_argument("--budget", type=float, default=BUDGET_SECONDS, help="the probe's seconds past its fewest")
    args = parser.parse_args()
    print(f"CPU: {cpu_kind()}; {args.env} {args.algo} {args.n_envs} envs", flush=True)
    for r in range(args.rounds):
        for busy in (False,) if args.no_busy else (False, True):
            with busy_process() if busy else contextlib.nullcontext():
                cfg = build_config(args.env, args.algo, {"n_envs": args.n_envs, "warmup_max_steps": 0})
                engine = NativeEngine(cfg, args.n_envs, probe_limits=ProbeLimits(MIN_TIMED, args.max_timed, args.budget))
                try:
                    c = engine.pool_choice
                    line = (f"round {r} {'busy ' if busy else 'quiet'}: chose {c.chosen:6s} serial {c.serial_speedup:.3f}x "
                            f"the actors ({c.serial_seconds * 1e3:.3f} vs {c.actors_seconds * 1e3:.3f} ms an agent step, "
                            f"{c.timed} timed each, probe {c.probe_seconds:.1f} s; learner started at "
                            f"{engine.threads.start or engine.threads.most if engine.threads else '-'} thread(s))")
                    if args.seconds:
                        line += f"; end to end {c.chosen} {rate(engine, args.seconds):.0f}/s"
                finally:
                    engine.close()
                if args.seconds:
                    other = "actors" if c.chosen == "serial" else "serial"
                    engine = NativeEngine(replace(cfg, run=replace(cfg.run, pool=other)), args.n_envs)
                    try:
                        line += f", {other} {rate(engine, args.seconds):.0f}/s"
                    finally:
                        engine.close()
                print(line, flush=True)


if __name__ == "__main__":
    main()
