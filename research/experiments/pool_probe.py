"""--pool auto's start-up probe on Pong (or any preset), quiet and beside one busy process, in rounds: what it
timed and chose each time, and (--seconds S) each pool's end-to-end rate over S seconds of updates right after,
to check the probe picks the pool that trains faster. The two pools' engines are then timed side by side, in
windows of --window seconds in turn: timed one after another, 15 s each, they read 1.16-1.42x apart on a host
whose speed drifts by that much within a minute where side by side they read 1.07x
(research/data/kept-actors-2026-11-30-xeon-amx.txt).

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

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench import cpu_kind  # noqa: E402
from benchtiming import busy_process  # noqa: E402

from rlscale.config import build_config  # noqa: E402
from rlscale.engine.native import NativeEngine  # noqa: E402
from rlscale.rollout.choice import BUDGET_SECONDS, MAX_TIMED, MIN_TIMED, ProbeLimits  # noqa: E402


def rates(engines: list[NativeEngine], seconds: float, window: float) -> list[float]:
    """Each engine's agent steps per second of updates back to back, ``seconds`` of them in all, timed in windows
    of ``window`` seconds taken in turn (the first engine first in even cycles), so that the host's drift weighs
    on all alike; one untimed update opens each window (the first after a switch pays for it). The engines run
    at the thread count set before: their governors would look at other counts in mid-measurement."""
    for engine in engines:
        engine.threads = None
    steps, spent = [0] * len(engines), [0.0] * len(engines)
    cycles = max(1, round(seconds / window))
    for c in range(cycles):
        for i in (range(len(engines)) if c % 2 == 0 else reversed(range(len(engines)))):
            engines[i].update(engines[i].cfg.agent.lr)
            start = time.perf_counter()
            while time.perf_counter() - start < window:
                steps[i] += engines[i].update(engines[i].cfg.agent.lr).agent_steps
            spent[i] += time.perf_counter() - start
    return [s / t for s, t in zip(steps, spent, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("algo")
    parser.add_argument("n_envs", type=int)
    parser.add_argument("--env", default="pong")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.0, help="also time each pool end to end (0: no)")
    parser.add_argument("--window", type=float, default=3.0, help="seconds of each turn of the side-by-side timing")
    parser.add_argument("--no-busy", action="store_true")
    parser.add_argument("--max-timed", type=int, default=MAX_TIMED, help="the probe's most timed updates a pool")
    parser.add_argument("--budget", type=float, default=BUDGET_SECONDS, help="the probe's seconds past its fewest")
    args = parser.parse_args()
    print(f"CPU: {cpu_kind()}; {args.env} {args.algo} {args.n_envs} envs", flush=True)
    for r in range(args.rounds):
        for busy in (False,) if args.no_busy else (False, True):
            with busy_process() if busy else contextlib.nullcontext():
                cfg = build_config(args.env, args.algo, {"n_envs": args.n_envs, "warmup_max_steps": 0})
                engines = [NativeEngine(cfg, args.n_envs, probe_limits=ProbeLimits(MIN_TIMED, args.max_timed, args.budget))]
                try:
                    engine, c = engines[0], engines[0].pool_choice
                    line = (f"round {r} {'busy ' if busy else 'quiet'}: chose {c.chosen:6s} serial {c.serial_speedup:.3f}x "
                            f"the actors ({c.serial_seconds * 1e3:.3f} vs {c.actors_seconds * 1e3:.3f} ms an agent step, "
                            f"{c.timed} timed each, probe {c.probe_seconds:.1f} s; learner started at "
                            f"{engine.threads.start or engine.threads.most if engine.threads else '-'} thread(s))")
                    if args.seconds:
                        # The other pool's engine beside the probe's, with its precision and its thread count (fixed
                        # in both: see rates). A kept serial pool shut its Ray down, so the other starts its own;
                        # kept actors leave the other the serial pool, which needs none.
                        other = "actors" if c.chosen == "serial" else "serial"
                        threads = torch.get_num_threads()
                        engines.append(NativeEngine(replace(
                            engine.cfg, pool=replace(engine.cfg.pool, pool=other),
                            learner=replace(engine.cfg.learner, learner_threads=threads)), args.n_envs))
                        torch.set_num_threads(threads)
                        chosen_rate, other_rate = rates(engines, args.seconds, args.window)
                        line += (f"; side by side at {threads} thread(s) {c.chosen} {chosen_rate:.0f}/s, "
                                 f"{other} {other_rate:.0f}/s")
                finally:
                    for built in reversed(engines):
                        with contextlib.suppress(Exception):  # the others still closed
                            built.close()
                print(line, flush=True)


if __name__ == "__main__":
    main()
