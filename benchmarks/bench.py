"""Pong's ceiling on this machine, and rlscale's default runs against it and the lean peers, quiet and busy.

    python benchmarks/bench.py [--seconds 60] [--no-busy]

1. **The ceiling.** CPU milliseconds per agent step of each part of the work,
   one thread each, timed in this process: the emulator (ale-py's native
   vector env, 8 envs, random actions), the rollout's inference (the Nature
   CNN's forward pass and an action sample on 8 rows, the fastest of the
   actors' precisions and layouts, run as they run it) and the learner
   (PPO: 16 minibatch updates of 256 rows per 1,024 steps, CleanRL's
   settings; A2C: one update of 16 envs x 5 steps), in fp32 and, on a CPU
   with bf16 units, with the learner in bf16 autocast. With perfect overlap
   on all cores the machine cannot step faster than cores / (the parts' sum).
   The same parts are timed again with every core running one at once (one
   process each): cores that share a cache, memory and a power budget give
   each part less than one alone, and the ceiling "side by side" counts that.
2. **The rows**, each the same wall time, one after the other: rlscale's
   default PPO (what ``python -m rlscale.train pong`` runs: its engine, 2 Ray
   actors, precisions and learner threads as it chooses them) against the
   lean single-process PPO, and the A2C defaults at 16 envs against the
   lean A2C; then all four again beside one busy process (a one-core Python
   loop, started before each row so that its start-up sees the load).
   Each rlscale row's start-up chooses its pool (``--pool auto``: Ray
   actors or the serial pool, whichever its updates ran faster with).
   After each quiet rlscale row on Ray actors, its **schedule's bound**
   (``Bound``): one actor's share of the rollout stepped in this process,
   no Ray, plus the run's own learner updating alone on a batch its actors
   collected: how fast the collect-then-learn schedule could go here with
   nothing lost (``--no-bound`` leaves it out). And the A2C row again with
   the pool its start-up did not choose, to check the choice
   (``--no-other-pool`` leaves it out).
3. **Small learners** (``--small-frames``): serial CartPole (an MLP) and
   MinAtar Breakout (a small CNN) runs with rlscale's choice of learner
   threads, quiet and beside the busy process: training seconds and
   busy/quiet (``bench_small_learners.py`` also runs them with two threads).

Each row prints agent steps per second, the fraction of the ceiling (of the
precision the row's learner took), the ratio to its lean peer, and busy
against quiet. Then, for rlscale's rows, where their updates went: the median
seconds of each update's two phases as the run logs them
(``perf/rollout_seconds``: weights out, the actors' rollout, the batch back,
of which ``perf/acting_seconds`` the slowest actor's own stepping;
``perf/learner_seconds``), each against its share of the ceiling (its parts'
CPU time per update spread over every core, alone and side by side): a phase
at 1.00x loses nothing. And the schedule each rlscale row chose: its actors,
learner threads (at the start and after the governor), precision, and whether
the rollout overlaps the learner.
The CPU's kind (bf16 units or not, and oneDNN's cap when one
is emulated with ``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``) heads
the output. Speed targets live here, not in timed tests: machines differ.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from bench_small_learners import SmallRows
from bench_small_learners import measure as small_learner_rows
from benchtiming import Rate, busy_process, cpu_kind, timed
from lean import lean_a2c, lean_ppo, pong_network, random_pong

from rlscale import tags
from rlscale.config import build_config
from rlscale.engine.native import NativeEngine
from rlscale.engine.threads import cores_busy_elsewhere
from rlscale.envs.vector import probe_spec, sample_observations
from rlscale.models.precision import (
    INFERENCE_CANDIDATES,
    bf16_units,
    inference_model,
    network_forward,
)
from rlscale.rollout.worker import RolloutWorker, sample_actions


def cpu_ms_per_step(run: Callable[[], int], seconds: float) -> float:
    """CPU milliseconds of this process per agent step of ``run`` (it returns its steps), one torch thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run()
        steps, wall, cpu = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - wall < seconds:
            steps += run()
        return 1e3 * (time.process_time() - cpu) / steps
    finally:
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class Parts:
    emulator: float  # CPU ms per agent step
    inference: float
    learner: dict[str, float]  # precision -> CPU ms per agent step

    def ceiling(self, precision: str) -> float:
        """Agent steps per second with every core busy and no time lost: cores / the work per step."""
        return (os.cpu_count() or 1) * 1e3 / (self.emulator + self.inference + self.learner[precision])


def emulator_part(seconds: float, n_envs: int = 8) -> float:
    with random_pong(n_envs) as step:
        return cpu_ms_per_step(step, seconds)


def pong_rows(rows: int) -> torch.Tensor:
    return torch.from_numpy(sample_observations(probe_spec(build_config("pong", "ppo", {}).env), rows))


@torch.no_grad()
def inference_part(seconds: float, rows: int = 8) -> float:
    """The forward pass and an action sample on ``rows`` rows in the fastest of the actors' candidates
    (fp32 and, with bf16 units, bf16; NCHW and channels-last), each run as the actors run it."""
    obs = pong_rows(rows)

    def act_in(precision: str, channels_last: bool) -> Callable[[], int]:
        model = inference_model(pong_network("ppo"), precision, channels_last)

        def act() -> int:
            logits, _ = network_forward(model, obs, precision == "bf16", channels_last)
            sample_actions(logits)
            return rows

        return act

    candidates = [c for c in INFERENCE_CANDIDATES if c[0] == "fp32" or bf16_units()]
    return min(cpu_ms_per_step(act_in(*c), seconds / len(candidates)) for c in candidates)


def learner_part(seconds: float, precision: str, rows: int, steps_per_pass: float) -> float:
    """One minibatch update (forward, a PPO-style loss, backward, clip, Adam) of ``rows`` rows,
    counted as ``steps_per_pass`` agent steps (PPO: 1,024 steps / 16 passes = 64)."""
    model = pong_network("ppo").to(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), lr=2.5e-4, eps=1e-5)
    obs = pong_rows(rows).contiguous(memory_format=torch.channels_last)
    actions, advantages, returns = torch.randint(0, 6, (rows,)), torch.randn(rows), torch.randn(rows)

    def minibatch() -> float:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits, value = model(obs)
        dist = torch.distributions.Categorical(logits=logits.float())
        ratio = (dist.log_prob(actions) - dist.log_prob(actions).detach()).exp()
        loss = (torch.max(-advantages * ratio, -advantages * ratio.clamp(0.9, 1.1)).mean()
                + 0.5 * (value.float() - returns).pow(2).mean() - 0.01 * dist.entropy().mean())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        return steps_per_pass

    return cpu_ms_per_step(minibatch, seconds)


SIDE_BY_SIDE_TIMEOUT = 600.0  # seconds for one part on every core, start-up included


def _part_in_process(part: Callable[..., float], args: tuple, start: Any, results: Any) -> None:
    """One core's copy of a part: its reading, or what went wrong, goes back through ``results``."""
    try:
        start.wait(timeout=SIDE_BY_SIDE_TIMEOUT)  # all copies start up, then measure together
        results.put(part(*args))
    except BaseException as error:  # the parent waits for a reading from every copy
        results.put(f"{type(error).__name__}: {error}")
        raise


def side_by_side(part: Callable[..., float], *args: Any) -> float:
    """A part's CPU ms per agent step with every core running it at the same time (one process each)."""
    context = multiprocessing.get_context("spawn")
    cores = os.cpu_count() or 1
    start, results = context.Barrier(cores), context.Queue()
    processes = [context.Process(target=_part_in_process, args=(part, args, start, results)) for _ in range(cores)]
    for process in processes:
        process.start()
    try:
        readings = [results.get(timeout=SIDE_BY_SIDE_TIMEOUT) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
    failed = [r for r in readings if isinstance(r, str)]
    if failed:
        raise RuntimeError(f"{part.__name__} side by side failed: {failed[0]}")
    return float(np.mean(readings))


def measure_parts(seconds: float, learner_rows: int, steps_per_pass: float, together: bool = False) -> Parts:
    """The parts, one thread each; ``together``: with every core running each part at once."""
    precisions = ["fp32"] + (["bf16"] if bf16_units() else [])
    measure = side_by_side if together else (lambda part, *args: part(*args))
    return Parts(measure(emulator_part, seconds), measure(inference_part, seconds),
                 {p: measure(learner_part, seconds, p, learner_rows, steps_per_pass) for p in precisions})


@dataclass(frozen=True)
class Split:
    """Where an engine's update went: median seconds of its two phases, as the run logs them."""

    agent_steps: int  # per update
    rollout: float  # perf/rollout_seconds: weights out, the actors' rollout, the batch back
    acting: float  # perf/acting_seconds: the slowest actor's own part of the rollout
    learner: float  # perf/learner_seconds

    def against(self, parts: Parts, precision: str) -> str:
        """Each phase against its share of the ceiling: its parts' CPU time spread over every core."""
        cores = os.cpu_count() or 1
        rollout_share = self.agent_steps * (parts.emulator + parts.inference) / cores / 1e3
        learner_share = self.agent_steps * parts.learner[precision] / cores / 1e3
        return (f"per update of {self.agent_steps:,} agent steps: rollout {self.rollout:.3f} s (the actors "
                f"{self.acting:.3f}, the trip through Ray {self.rollout - self.acting:.3f}) = "
                f"{self.rollout / rollout_share:.2f}x its share of the ceiling ({rollout_share:.3f} s), "
                f"learner {self.learner:.3f} s = {self.learner / learner_share:.2f}x ({learner_share:.3f} s)")


def schedule_of(engine: NativeEngine) -> str:
    """The schedule an engine runs: its actors and learner as its header says them, the learner's threads
    at the end (the governor may have changed them), and whether the phases overlap."""
    threads = engine.threads.kept if engine.threads is not None else torch.get_num_threads()
    return (f"{engine.describe()}; {threads} learner thread{'s' if threads > 1 else ''} kept at the end; "
            f"{'rollout overlapped with the learner' if engine.cfg.pool.overlap else 'rollout, then learner'}")


@dataclass(frozen=True)
class Bound:
    """How fast the default schedule (Ray actors collect, then the learner learns: no policy lag) could
    go here with nothing lost between or around its phases, and the row's own phases to set beside it.

    Not the fastest lag-free schedule there is: on one 2-core machine A2C's serial pool, its vector
    envs stepped at once, came within ~10 % of this bound (docs/performance.md). The rollout phase can end no sooner
    than one actor steps its share of the environments (the actors step theirs at once, one core each:
    two copies side by side took what one alone took, 25.0 against 24.3 ms for A2C's, 2026-11-29), and
    the learner phase no sooner than the run's own learner updates on a batch alone. Both are timed in
    this process: the share by a rollout worker of one thread with the inference the run's first actor
    chose and the learner's weights, as in an actor process, without Ray (no weights out, no batch
    back); the learner is the engine's own, with its precision, compiled passes, noise measurement and
    the thread count its governor keeps, on a batch the engine collected. Means, not medians, on both
    sides: the run's rate holds its periodic measurements (A2C's policy/value split every 4th update,
    B_P and B_noise every 100th batch), and 100 A2C updates hold them as often; 8 PPO updates hold the
    100th batch's only if the row's updates end within 8 of one (~12 % of that mean; the rows of 45 s
    run ~30).
    """

    agent_steps: int  # per update
    rollout: float  # mean seconds of one actor's share of the rollout, in this process
    learner: float  # mean seconds of the engine's learner update on one of its batches, alone
    row_rollout: float  # the row's own mean seconds of each phase, for comparison
    row_learner: float

    @property
    def steps_per_s(self) -> float:
        return self.agent_steps / (self.rollout + self.learner)


def mean_seconds(call: Callable[[], object], repeats: int) -> float:
    """Mean seconds of ``repeats`` calls after one warm-up call."""
    call()
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - start) / repeats


def phases_bound(engine: NativeEngine, repeats: int, row_phases: np.ndarray) -> Bound:
    """``Bound`` for an engine of Ray actors, timed after its row (the learner's parameters move on);
    ``row_phases``: the row's updates' (agent steps, rollout, acting, learner) seconds."""
    cfg = engine.cfg
    if cfg.pool.in_this_process or cfg.pool.overlap:
        raise ValueError("the bound is the Ray actors' collect-then-learn schedule's")
    share = max(engine.pool.vector_envs_per_worker) * engine.pool.vector_size
    weights = engine.learner.flat_weights()  # the actors' and the in-process share's (timing, not learning)
    batch = engine.pool.collect(weights)
    inference = engine.pool.inference()[0]
    actor_cfg = replace(cfg, pool=replace(cfg.pool, actor_precision=inference.precision,
                                         actor_channels_last=inference.channels_last))
    threads = torch.get_num_threads()
    worker: RolloutWorker | None = None
    try:
        # The governor's kept count: a row can end inside one of its trials (a quiet run tries one
        # thread fewer once, ~20 s in, and goes back after its trial).
        torch.set_num_threads(engine.threads.kept if engine.threads is not None else threads)
        learner = mean_seconds(lambda: engine.learner.update(batch, cfg.agent.lr), repeats)
        worker = RolloutWorker.of_run(actor_cfg, probe_spec(cfg.env), cfg.run.seed, torch_threads=1, inference_rows=share)  # one thread, as an actor
        size = cfg.env.vector_size
        for i in range(share // size):
            worker.add_vector_env(list(range(i * size, (i + 1) * size)), i)
        rollout = mean_seconds(lambda: worker.rollout(weights, cfg.agent.n_steps), repeats)
    finally:
        if worker is not None:
            worker.close()
        torch.set_num_threads(threads)
    _, row_rollout, _, row_learner = row_phases.mean(axis=0)
    return Bound(batch.size, rollout, learner, float(row_rollout), float(row_learner))


def threads_settled(engine: NativeEngine) -> Callable[[], bool] | None:
    """For ``timed``'s warm-up: whether the learner's thread governor has ended its first look (None where the
    threads are held). A run's first look at one thread fewer comes ~20 s in (rlscale/engine/threads.py), and
    beside a busy process a 45-s row was otherwise half start-up at two threads, which an hour's run pays once."""
    governor = engine.threads
    return None if governor is None else lambda: governor.looked


def rlscale_default(algo: str, seconds: float, n_envs: int, overrides: dict | None = None,
                    bound_repeats: int = 0) -> tuple[Rate, str, Split, str, Bound | None]:
    """The default run's engine (``train pong`` / ``train pong --agent a2c``, with ``overrides``), updates back
    to back: its rate, the learner's precision, where its updates' time went, the schedule it chose and,
    with ``bound_repeats``, its schedule's bound timed after the rows (``phases_bound``)."""
    cfg = build_config("pong", algo, {"n_envs": n_envs, "warmup_max_steps": 0, **(overrides or {})})
    engine = NativeEngine(cfg, n_envs)
    phases: list[tuple[int, float, float, float]] = []

    def update() -> int:
        result = engine.update(cfg.agent.lr)
        phases.append((result.agent_steps, result.metrics[tags.ROLLOUT_SECONDS],
                       result.metrics[tags.ACTING_SECONDS], result.metrics[tags.LEARNER_SECONDS]))
        return result.agent_steps

    try:
        # Timed once the learner's threads have settled; the row prints how long its start took.
        rate = timed(update, seconds, warmup=2, settled=threads_settled(engine))
        row_phases = np.array(phases[rate.warmup_loops:])
        steps, rollout, acting, learner = np.median(row_phases, axis=0)
        schedule = schedule_of(engine)
        # The bound is the actors' schedule's; a row whose start-up chose the serial pool has no Ray to lose.
        timed_bound = bound_repeats and not engine.cfg.pool.in_this_process
        bound = phases_bound(engine, bound_repeats, row_phases) if timed_bound else None
        return rate, engine.cfg.learner.learner_precision, Split(int(steps), float(rollout), float(acting),
                                                             float(learner)), schedule, bound
    finally:
        engine.close()


@dataclass
class Row:
    what: str
    rate: Rate
    precision: str  # the learner's: the ceiling it is held to
    peer: str  # the lean row it is compared with ("" for a lean row)
    split: Split | None  # where an rlscale row's updates went (None for a lean row)
    schedule: str = ""  # what an rlscale row chose: actors, learner threads, precision, overlap
    bound: Bound | None = None  # an rlscale quiet row's schedule's bound (phases_bound)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="wall time of each row (default: 60)")
    p.add_argument("--part-seconds", type=float, default=10.0, help="time of each part of the ceiling")
    p.add_argument("--no-busy", action="store_true", help="leave out the rows beside a busy process")
    p.add_argument("--small-frames", type=int, default=20_000,
                   help="frames of each small-learner run (CartPole, MinAtar Breakout; 0 leaves them out)")
    p.add_argument("--no-other-pool", action="store_true",
                   help="leave out the quiet A2C row with the pool its start-up did not choose")
    p.add_argument("--no-bound", action="store_true",
                   help="leave out the schedule's bound timed after each quiet rlscale row on Ray actors (~15 s each)")
    args = p.parse_args()
    print(f"CPU: {cpu_kind()}", flush=True)
    others = cores_busy_elsewhere(2.0)  # the reading a run's start takes, over a longer window
    print(f"cores busy before the benchmark (other processes): {others:.2f}"
          + ("  -- not a quiet machine: the quiet rows are not quiet" if others > 0.2 else ""), flush=True)
    torch.set_num_threads(os.cpu_count() or 1)  # the lean peers use every core, as the default run does

    print(f"timing the ceiling's parts ({args.part_seconds:g} s each, alone, then on every core at once)...",
          flush=True)
    ppo, a2c, ppo_side, a2c_side = (measure_parts(args.part_seconds, rows, steps_per_pass, together)
                                    for together in (False, True)
                                    for rows, steps_per_pass in ((256, 1024 / 16), (16 * 5, 16 * 5)))
    for heading, parts_of in (("one thread each, alone", (ppo, a2c)),
                              (f"side by side: each part on all {os.cpu_count()} cores at once", (ppo_side, a2c_side))):
        print(f"the ceiling: CPU ms per agent step of each part, {heading}", flush=True)
        for name, parts in zip(("PPO (8 x 128, 16 minibatches of 256)", "A2C (16 x 5)"), parts_of, strict=True):
            learner = ", ".join(f"{k} {v:.2f}" for k, v in parts.learner.items())
            ceilings = ", ".join(f"{k} learner {parts.ceiling(k):,.0f}" for k in parts.learner)
            print(f"  {name}: emulator {parts.emulator:.2f}, inference {parts.inference:.2f}, learner {learner}"
                  f" -> {os.cpu_count()}-core ceiling {ceilings} agent steps/s", flush=True)

    rows: dict[tuple[str, bool], Row] = {}
    for busy in (False, True) if not args.no_busy else (False,):
        # The bound's repeats (Bound says why): ~12 s of PPO's updates, ~6 s of A2C's; quiet rows only.
        ppo_repeats, a2c_repeats = (0, 0) if busy or args.no_bound else (8, 100)
        for key, run in (("lean PPO", lambda: (lean_ppo(args.seconds), "fp32", None, "", None)),
                         ("rlscale PPO", functools.partial(rlscale_default, "ppo", args.seconds, 8, None, ppo_repeats)),
                         ("lean A2C", lambda: (lean_a2c(16, args.seconds), "fp32", None, "", None)),
                         ("rlscale A2C", functools.partial(rlscale_default, "a2c", args.seconds, 16, None, a2c_repeats))):
            with busy_process() if busy else contextlib.nullcontext():
                rate, precision, split, schedule, bound = run()
            peer = "" if key.startswith("lean") else key.replace("rlscale", "lean")
            rows[key, busy] = Row(key, rate, precision, peer, split, schedule, bound)
            settling = f", timed after {rate.warmup_seconds:.0f} s of updates" if not key.startswith("lean") else ""
            print(f"  {key:12s} {'busy' if busy else 'quiet'}: {rate.steps_per_s:7,.0f} agent steps/s "
                  f"(learner {precision}{settling})", flush=True)

    other_a2c = None
    if not args.no_other_pool:
        # The pool the A2C row's start-up did not choose (--pool auto: the serial pool, its vector envs stepped
        # at once in the learner's process, or Ray actors): whether the probe chose the faster; quiet only.
        other = "actors" if rows["rlscale A2C", False].schedule.startswith("serial") else "serial"
        other_a2c = other, rlscale_default("a2c", args.seconds, 16, {"pool": other})[0]
        print(f"  rlscale A2C --pool {other} quiet: {other_a2c[1].steps_per_s:7,.0f} agent steps/s", flush=True)

    small = None
    if args.small_frames and not args.no_busy:
        print(f"small learners: serial runs of {args.small_frames:,} frames with rlscale's choice of threads, "
              "quiet and beside a busy process...", flush=True)
        small = small_learner_rows(args.small_frames, rounds=1, settings=((0, "rlscale's choice"),))

    print(f"\nPong, {args.seconds:g} s per row; CPU: {cpu_kind()}")
    print(f"{'':12s} {'quiet /s':>9s} {'x ceiling':>9s} {'x side by side':>14s} {'x lean':>7s} {'busy /s':>8s} "
          f"{'x lean':>7s} {'busy/quiet':>10s}")
    for key in ("lean PPO", "rlscale PPO", "lean A2C", "rlscale A2C"):
        quiet = rows[key, False]
        line = f"{key:12s} {quiet.rate.steps_per_s:9,.0f} "
        alone, side = (ppo, ppo_side) if "PPO" in key else (a2c, a2c_side)
        for parts, width in ((alone, 9), (side, 14)):
            ceiling = parts.ceiling(quiet.precision) if quiet.precision in parts.learner else float("nan")
            line += f"{quiet.rate.steps_per_s / ceiling:{width}.2f} "
        line += (f"{quiet.rate.steps_per_s / rows[quiet.peer, False].rate.steps_per_s:7.2f} " if quiet.peer
                 else f"{'':7s} ")
        if (key, True) in rows:
            busy = rows[key, True]
            line += f"{busy.rate.steps_per_s:8,.0f} "
            line += (f"{busy.rate.steps_per_s / rows[busy.peer, True].rate.steps_per_s:7.2f} " if busy.peer
                     else f"{'':7s} ")
            line += f"{busy.rate.steps_per_s / quiet.rate.steps_per_s:10.2f}"
            if busy.precision != quiet.precision:
                line += f"  (busy start-up took {busy.precision}, quiet {quiet.precision})"
        print(line)
    print_bounds(rows)
    if other_a2c is not None:
        other, rate = other_a2c
        print(f"\nA2C with the pool its start-up did not choose (--pool {other}), quiet: {rate.steps_per_s:,.0f} agent "
              f"steps/s = {rate.steps_per_s / rows['lean A2C', False].rate.steps_per_s:.2f}x lean, "
              f"{rate.steps_per_s / rows['rlscale A2C', False].rate.steps_per_s:.2f}x the row with the chosen pool")
    print("\nthe schedule each rlscale row chose (its header, the learner's threads kept at the end, overlap):")
    for (key, busy), row in rows.items():
        if row.schedule:
            print(f"  {key} {'busy' if busy else 'quiet'}: {row.schedule}")
    if small:
        print_small_learners(small)
    print("\nwhere rlscale's updates went (medians; each phase against the ceiling's parts spread over every core,"
          " the parts alone, then side by side):")
    for (key, busy), row in rows.items():
        for how, parts in zip(("alone", "side by side"), (ppo, ppo_side) if "PPO" in key else (a2c, a2c_side),
                              strict=True):
            if row.split is not None and row.precision in parts.learner:
                print(f"  {key} {'busy' if busy else 'quiet'} ({how}), {row.split.against(parts, row.precision)}")


def print_bounds(rows: dict[tuple[str, bool], Row]) -> None:
    """Each quiet rlscale row against its schedule's bound (``Bound``): what Ray and the hand-overs cost."""
    bounded = [row for (_, busy), row in rows.items() if not busy and row.bound is not None]
    if not bounded:
        return
    print("\nthe default schedule's bound (actors collect, then the learner learns, nothing lost): one actor's "
          "share of the rollout in this process, then the run's learner alone; means, s per update")
    for row in bounded:
        b = row.bound
        lean = rows[row.peer, False].rate.steps_per_s
        print(f"  {row.what}: rollout share {b.rollout:.3f} + learner {b.learner:.3f} -> {b.steps_per_s:,.0f} "
              f"agent steps/s ({b.steps_per_s / lean:.2f}x lean); the row {row.rate.steps_per_s:,.0f} = "
              f"{row.rate.steps_per_s / b.steps_per_s:.2f}x its bound (its own phases: rollout "
              f"{b.row_rollout:.3f} + learner {b.row_learner:.3f})")


def print_small_learners(small: SmallRows) -> None:
    print("\nsmall learners: training seconds of serial runs (the run's wall_seconds), quiet and beside a busy "
          "process; the threads each chose")
    for line in small.lines():
        print(f"  {line}")


if __name__ == "__main__":
    main()
