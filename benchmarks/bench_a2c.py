"""Pong A2C throughput, side by side in one run: rlscale's variants against a lean hand-written loop.

(``benchmarks/bench.py`` is the headline: the ceiling and the default runs; this one
takes A2C apart.)

    python benchmarks/bench_a2c.py [--seconds 30] [--envs 16 64] [--no-bf16]
    python benchmarks/bench_a2c.py --bound [--seconds 30] [--envs 16]

Rows, each at 16 and 64 environments (5 steps per update), agent steps per
second and the ratio to the lean loop:

* emulator alone: ale-py's native vector env with random actions;
* lean loop: the single-process A2C a user writes by hand (CleanRL style):
  one vector env, Nature CNN in plain fp32, sample actions, n-step returns,
  one backward pass, TF-style RMSprop; no Ray, no noise scale;
* rlscale serial: rlscale's pool and learner in one process (noise scale on);
* rlscale actors, noise off / noise on: 2 Ray actors step the envs, the
  learner (2 torch threads) runs in this process, one phase after the other;
  and noise on with the actors' precision and layout timed at start-up
  (learner fp32), and with the learner in bf16 autocast (--no-bf16 leaves it
  out); every other row runs the actors in fp32;
* overlap: the actors collect the next batch while the learner trains on this
  one (--overlap), with 2 or 1 actors and 1 learner thread, the noise scale
  off or on, the learner in fp32 or in the precision timed at start-up (auto);
* the A2C defaults: what ``python -m rlscale.train pong --agent a2c`` runs
  (actors and learner timed at start-up), and the same with the actors in fp32.

Every row is the training loop's own engine (``NativeEngine``: pool and learner).
Each row also reports the cores the machine kept busy meanwhile (/proc/stat,
all processes) and the CPU milliseconds per agent step: speed is the one over
the other, so a row beats the lean loop only by keeping more cores busy or by
doing less work per step.

``--bound`` asks how fast the default schedule, whose phases take turns (the
actors collect, then the learner learns: no policy lag), could be here: one
actor's share of the rollout stepped in this process (no Ray: no weights
broadcast, no batch transfer), plus the run's own learner updating alone on
a batch its actors collected (``bench.Bound``; the noise scale measured, as
by default, and not), against the lean loop and the runs it bounds, each
timed in the same run. The default engine's distance to that
bound is its overhead; a target above the bound is out of reach of any
overhead cut of that schedule (the serial pool, another schedule, can beat it).

Then peak resident memory (RSS) of the learner process and of each actor with
16 and 256 environments. Every variant runs for the same wall time, one after
the other in this run; the ratios are the numbers to read (the machine is noisy).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
from bench import rlscale_default, threads_settled
from benchtiming import Rate, timed
from lean import lean_a2c, random_pong

from rlscale.config import build_config
from rlscale.distributed.ray_pool import RayPool
from rlscale.engine.native import NativeEngine


def emulator(n_envs: int, seconds: float) -> Rate:
    with random_pong(n_envs) as step:
        return timed(step, seconds)


def rlscale_loop(n_envs: int, seconds: float, serial: bool = False, measure: bool = True,
                 precision: str = "fp32", overlap: bool | None = False, n_actors: int | None = 2,
                 threads: int | None = 2, parts_every: int | None = None,
                 actors: str | None = "fp32") -> tuple[Rate, dict]:
    """The training loop's own engine (pool + learner), updates back to back; None: the preset's default."""
    settings = {"pool": "serial" if serial else "actors", "measure_noise": measure, "learner_precision": precision,
                "overlap": overlap, "n_actors": n_actors, "learner_threads": threads,
                "noise_parts_every": parts_every, "actor_precision": actors}
    cfg = build_config("pong", "a2c", {"n_envs": n_envs, "warmup_max_steps": 0, "max_envs": max(256, n_envs),
                                      **{k: v for k, v in settings.items() if v is not None}})
    engine = NativeEngine(cfg, n_envs)
    if cfg.pool.actor_precision == "auto":
        print(f"    actors: {engine.pool.describe_inference()}", flush=True)
    try:
        rate = timed(lambda: engine.update(cfg.agent.lr).agent_steps, seconds, settled=threads_settled(engine))
        memory = {} if serial else actor_memory(engine.pool)
    finally:
        engine.close()
    return rate, memory


def actor_memory(pool: RayPool) -> dict:
    return {f"actor {i}": peak_rss_mb(pid) for i, pid in enumerate(pool.worker_pids())}


def peak_rss_mb(pid: int | str = "self") -> float:
    """Peak resident memory of a process (Linux: VmHWM in /proc/<pid>/status, in kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def parts_scan(envs: list[int], seconds: float) -> None:
    """What the policy/value split costs end to end at each --noise-parts-every (fp32, 2 actors)."""
    for n in envs:
        for _ in range(2):  # twice over: the machine drifts by ~5 % between minutes
            lean = lean_a2c(n, seconds).steps_per_s
            noise_off = rlscale_loop(n, seconds, measure=False)[0].steps_per_s
            rows = [("lean single-process A2C, fp32", lean), ("2 Ray actors, noise off", noise_off)]
            for every in (4, 16, 0):
                rows.append((f"2 Ray actors, noise on, parts every {every}",
                             rlscale_loop(n, seconds, measure=True, parts_every=every)[0].steps_per_s))
            for what, rate in rows:
                print(f"{what:44s} {n:4d} envs {rate:8,.0f}/s {rate / lean:6.2f}x lean "
                      f"{rate / noise_off:6.2f}x noise off", flush=True)


def print_bound(n_envs: int, seconds: float, repeats: int = 100) -> None:
    """How fast A2C's default schedule (Ray actors, phases in turn) could go here with nothing lost
    (``bench.Bound``), with the noise scale measured (the defaults) and not, against the lean loop and the
    runs it bounds."""
    lean = lean_a2c(n_envs, seconds).steps_per_s
    print(f"Pong A2C, {n_envs} envs; the lean single-process loop: {lean:7,.0f} agent steps/s", flush=True)
    for what, overrides in (("noise on (the defaults)", {"pool": "actors"}),
                            ("noise off", {"pool": "actors", "measure_noise": False})):
        rate, _, _, schedule, bound = rlscale_default("a2c", seconds, n_envs, overrides, repeats)
        print(f"  {what}: {schedule}", flush=True)
        print(f"    the schedule's bound: one actor's share {1e3 * bound.rollout:.1f} ms + the learner "
              f"{1e3 * bound.learner:.1f} ms -> {bound.steps_per_s:7,.0f} agent steps/s = "
              f"{bound.steps_per_s / lean:.2f}x lean", flush=True)
        print(f"    the run (Ray actors):  {rate.steps_per_s:7,.0f} agent steps/s = {rate.steps_per_s / lean:.2f}x "
              f"lean, {rate.steps_per_s / bound.steps_per_s:.2f}x its bound", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--envs", type=int, nargs="+", default=[16, 64])
    p.add_argument("--no-bf16", action="store_true", help="leave out the bf16 row (slow without bf16 units)")
    p.add_argument("--parts-scan", action="store_true",
                   help="only: lean loop, noise off, and noise on with the policy/value split every 4, 16 "
                        "and never (2 actors, fp32), twice over")
    p.add_argument("--bound", action="store_true",
                   help="only: the default schedule's bound (phases in turn, nothing lost) against the lean loop")
    args = p.parse_args()
    torch.set_num_threads(2)
    if args.bound:
        for n in args.envs:
            print_bound(n, args.seconds)
        return
    if args.parts_scan:
        parts_scan(args.envs, args.seconds)
        return
    rows: list[tuple[str, int, Rate]] = []
    for n in args.envs:
        def row(what: str, n: int = n, **kw) -> None:
            rows.append((what, n, rlscale_loop(n, args.seconds, **kw)[0]))
            print(f"  {what:52s} {n:4d} envs {rows[-1][2].steps_per_s:8,.0f}/s", flush=True)

        rows.append(("emulator alone (random actions)", n, emulator(n, args.seconds)))
        rows.append(("lean single-process A2C, fp32", n, lean_a2c(n, args.seconds)))
        row("rlscale serial, noise on, fp32", serial=True, measure=True)
        row("rlscale 2 Ray actors, noise off, fp32", measure=False)
        row("rlscale 2 Ray actors, noise on, fp32", measure=True)
        row("rlscale 2 Ray actors, noise on, learner fp32, actors auto", measure=True, actors="auto")
        if not args.no_bf16:
            row("rlscale 2 Ray actors, noise on, bf16", measure=True, precision="bf16")
        row("overlap, 2 actors, 1 learner thread, noise on, fp32", measure=True, overlap=True, threads=1)
        row("overlap, 1 actor, 1 learner thread, noise off, fp32", measure=False, overlap=True, n_actors=1,
            threads=1)
        row("overlap, 1 actor, 1 learner thread, noise on, fp32", measure=True, overlap=True, n_actors=1,
            threads=1)
        row("overlap, 1 actor, 1 learner thread, noise on, auto", measure=True, overlap=True, n_actors=1,
            threads=1, precision="auto")
        row("A2C defaults, actors fp32", measure=True, precision="auto", overlap=None, n_actors=None,
            threads=None)
        row("A2C defaults (train pong --agent a2c)", measure=True, precision="auto", overlap=None, n_actors=None,
            threads=None, actors=None)
    print(f"Pong A2C, 5 steps per update, {args.seconds:g} s per row, torch threads 2, {os.cpu_count()} cores")
    print("cores busy: the machine's CPU time over wall time (all processes); CPU ms per step: the work done "
          "per agent step wherever it ran. Speed = cores busy / CPU ms per step, so a row can beat the lean "
          "loop only by keeping more cores busy or by doing less work per step")
    print(f"{'what':52s} {'envs':>5s} {'agent steps/s':>14s} {'vs lean':>8s} {'cores busy':>10s} "
          f"{'CPU ms/step':>11s}")
    for what, n, rate in rows:
        lean = next(r for w, m, r in rows if m == n and w.startswith("lean"))
        print(f"{what:52s} {n:5d} {rate.steps_per_s:14,.0f} {rate.steps_per_s / lean.steps_per_s:8.2f} "
              f"{rate.cores_busy:10.2f} {rate.cpu_ms_per_step:11.3f}")
    print("\npeak resident memory (MB)")
    for n in (16, 256):
        _, memory = rlscale_loop(n, min(args.seconds, 10.0))
        print(f"  {n:3d} envs: " + ", ".join(f"{k} {v:,.0f}" for k, v in memory.items()))
    print(f"  learner process (this one, whole run): {peak_rss_mb():,.0f}")


if __name__ == "__main__":
    main()
