"""Why the Ray actors ran slower in an engine whose start-up probe chose them than in one pinned to them.

The engines (--variants: any of these) live side by side in one process (one Ray, a logical CPU for each
actor), each timed in turn in windows of updates back to back (agent steps/s), so that the host's drift
weighs on all alike:

    chosen    --pool auto with the probe's choice forced to the actors (rlscale.rollout.choice.choose)
    pinned    --pool actors, no probe
    restart   --pool actors, then restart_envs (the probe's last step)
    serial    --pool serial (the other pool, for the ratio the probe reads)

The learner's threads are fixed (--learner-threads, 2 by default) so the thread governor is not in it.

    python research/experiments/kept_actors.py --cycles 8 --window 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from unittest import mock

import ray

from rlscale.config import build_config
from rlscale.engine import native as engine_module
from rlscale.engine.native import NativeEngine
from rlscale.rollout import choice


def window(engine: NativeEngine, seconds: float) -> float:
    """Agent steps/s of updates back to back for ``seconds`` (after one untimed update)."""
    engine.update(engine.cfg.agent.lr)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += engine.update(engine.cfg.agent.lr).agent_steps
    return steps / (time.perf_counter() - start)


def build(variant: str, algo: str, env: str, n_envs: int, threads: int) -> NativeEngine:
    settings = {"n_envs": n_envs, "warmup_max_steps": 0, "learner_threads": threads,
                "pool": {"chosen": "auto", "serial": "serial"}.get(variant, "actors")}
    cfg = build_config(env, algo, settings)
    with (mock.patch.object(choice, "choose", lambda serial, actors, margin=choice.MARGIN: "actors"),
          mock.patch.object(engine_module, "pool_is_timed", lambda cfg: cfg.pool.pool == "auto")):
        engine = NativeEngine(cfg, n_envs)
    if variant == "restart":
        engine.restart_envs(n_envs, cfg.run.seed)
    return engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="a2c")
    parser.add_argument("--env", default="pong")
    parser.add_argument("--n-envs", type=int, default=16)
    parser.add_argument("--learner-threads", type=int, default=2)
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--window", type=float, default=3.0)
    parser.add_argument("--variants", default="chosen,pinned,restart")
    args = parser.parse_args()
    names = args.variants.split(",")
    engines = {}
    # One Ray for all three engines, started as rlscale starts its own (ray_pool._start_or_join) but with a
    # logical CPU for each of their actors (each asks for one); the probe is let run in it.
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(address="local", include_dashboard=False, logging_level="ERROR", num_cpus=2 * len(names),
             _system_config={"worker_niceness": 0})
    try:
        for name in names:
            engines[name] = build(name, args.algo, args.env, args.n_envs, args.learner_threads)
        print(f"{args.env} {args.algo} {args.n_envs} envs, {args.learner_threads} learner threads; agent steps/s "
              f"per {args.window:.0f}-s window, engines in turn", flush=True)
        rates: dict[str, list[float]] = {name: [] for name in names}
        for c in range(args.cycles):
            order = names[c % len(names):] + names[:c % len(names)]  # each engine first in turn
            for name in order:
                rates[name].append(window(engines[name], args.window))
            print(f"cycle {c}: " + "  ".join(f"{n} {rates[n][-1]:.0f}" for n in names), flush=True)
        print("median: " + "  ".join(f"{n} {statistics.median(rates[n]):.0f}" for n in names), flush=True)
    finally:
        for engine in reversed(list(engines.values())):
            engine.close()
        ray.shutdown()


if __name__ == "__main__":
    main()
