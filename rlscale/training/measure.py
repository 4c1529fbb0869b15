"""--batch measured: the critical batch measured in the run by branching it, then followed.

One call, ``measure_critical_batch(run, why)``: fork the learner's state into branches at several
batch sizes (--branches, multipliers of the current batch; each at the learning rate the run's
rule gives it), train each on the same examples (--branch-window updates' worth at the current
batch; with --progress reach, until each meets the next goal), read B_crit from their progress (eq.
2.11, rlscale/control/critical.py), and continue from the branch nearest to it, so its window is not
wasted (DESIGN §2c; docs/batch-control.md).

The progress measure (--progress) is the fall of the optimised loss on a held-out batch (total,
or its policy part): collected with the trunk's weights before branching, trained on by no
branch, the same rows for every branch (so the comparison is paired: common random numbers where
the noise would otherwise be largest). Or it is the rise of the return (return): the trunk and
each branch play --progress-episodes episodes, sampled, on environments and action draws seeded
alike, so a difference is the policies', not the draw's; their steps count in the agent steps.
Or it is the fork sweep's own measure (reach): each branch trains until the mean return of its own
last GOAL_WINDOW episodes reaches the run's next goal, or until --branch-window updates' worth of
examples, and the examples it took are read by eq. 2.11 (E = E_min·(1 + B/B_crit), so 1/E is its
progress per example); the continued branch has reached the goal, so its examples are the run's.
The training environments are not forked: each branch steps them on from where the last one
left them, except in a race (reach), where every branch starts on new environments seeded alike.
Races run one after the other in the run's engine, or side by side (--branches-at-once), each on an
engine of its own built from the trunk's state in a Ray task (rlscale/distributed/ray_branches.py):
the same races either way for a serial run.

Bookkeeping: every branch's agent steps and examples count in the run's totals (the budget
included), and the optimizer steps of the branches not continued are kept in
``TrainState.branch_optimizer_steps``; only the continued branch's episodes count toward the
goals (the others played other policies). An interrupt inside a measurement puts the trunk's
state back before the checkpoint is written, so a resumed run measures again from the same
point: no steps counted twice, none skipped.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rlscale import tags
from rlscale.config import Config
from rlscale.control.controller import BatchController
from rlscale.control.critical import (
    RESOLVABLE,
    Branch,
    Reading,
    bootstrap_interval,
    fit_critical_batch,
)
from rlscale.control.pareto_fit import MIN_POINTS, fit_pareto
from rlscale.goals import GOAL_WINDOW, GoalWindow
from rlscale.training.engine import NativeEngine
from rlscale.training.logger import RunLogger


class Races(Protocol):
    """Races run side by side, each in its own process (rlscale.distributed.ray_branches.RemoteRaces)."""

    at_once: int

    def race(self, trunk: dict[str, Any], branches: list[BranchRun], scale: float, window_steps: float,
             target: float | None, seeds: list[int]) -> list[BranchRun | BaseException]:
        """Each branch raced from the trunk's state (``train_branch``), in order: what it did, or its error."""
        ...


class Run(Protocol):
    """What a measurement reads and moves of the training loop's run (rlscale.training.trainer.Run)."""

    cfg: Config
    engine: NativeEngine
    controller: BatchController
    logger: RunLogger
    state: Any  # trainer.TrainState
    settled: bool
    window: GoalWindow  # the trunk's last episodes' returns

    races: Races | None  # --branches-at-once: where the races run side by side (None: one after the other here)

    @property
    def signal(self) -> float | None: ...

    def lr_now(self) -> float: ...


@dataclass
class BranchRun:
    """One branch's window: its batch, learning rate, what it consumed and where it ended."""

    multiplier: float
    n_envs: int
    batch: float  # observations per optimizer step
    lr: float  # its base learning rate (before annealing)
    agent_steps: int = 0
    examples: int = 0
    optimizer_steps: int = 0
    seconds: float = 0.0
    warmup_steps: int = 0  # random start-up steps of the environments its resize started
    progress: np.ndarray | None = None  # held-out loss fall, (environments, parts: policy, value)
    returns: np.ndarray | None = None  # --progress return: each episode's return rise over the trunk's
    episodes: list[tuple[float, int]] | None = None
    reached: bool = False  # --progress reach: its own last episodes' mean met the target
    run: int = 0  # --branch-runs: which race of its batch (each on its own environment seeds)
    at_once: bool = False  # ... with its first GOAL_WINDOW episodes: the wait for them, not learning
    end: dict[str, Any] | None = None  # the engine's snapshot at the window's end
    node: str = ""  # --branches-at-once: the Ray node its race ran on


def branch_envs(run: Run, multiplier: float) -> int:
    """Environments for a branch at ``multiplier`` x the current batch, in whole vector envs and the
    controller's bounds."""
    c, unit = run.cfg.control, run.cfg.pool_unit
    vectors = max(1, round(run.state.n_envs * multiplier / unit))
    return min(max(vectors * unit, c.min_envs), c.max_envs)


def plan_branches(run: Run) -> list[BranchRun]:
    """The branches of this measurement: distinct env counts, ascending (bounds can merge two)."""
    per_env = run.cfg.observations_per_env
    run.controller.anchor(run.state.n_envs, run.state.base_lr)  # measuring before the first update
    branches: dict[int, BranchRun] = {}
    for m in sorted(run.cfg.control.branches):
        n = branch_envs(run, m)
        if n not in branches:
            lr = run.controller.lr_for(n * per_env, run.signal, run.state.base_lr)
            branches[n] = BranchRun(m, n, n * per_env, lr)
    return list(branches.values())


def run_branch(run: Run, branch: BranchRun, heldout: Any, before: np.ndarray | None, window_steps: float,
               target: float | None = None, env_seed: int = 0) -> None:
    """Train one branch in the run's own engine (``train_branch``), at the run's annealing as it is now."""
    train_branch(run.engine, run.cfg, branch, lr_scale(run), heldout, before, window_steps, target, env_seed)


def lr_scale(run: Run) -> float:
    """The run's learning-rate annealing as it is now: each branch's rate is its base rate times this."""
    return run.lr_now() / run.state.base_lr if run.state.base_lr > 0 else 1.0


def train_branch(engine: NativeEngine, cfg: Config, branch: BranchRun, scale: float, heldout: Any,
                 before: np.ndarray | None, window_steps: float, target: float | None = None,
                 env_seed: int = 0) -> None:
    """Train one branch on ``engine`` (holding the trunk's state) for ``window_steps`` agent steps' worth of
    updates (at least one); with a ``target`` (--progress reach), until the mean return of its own last
    episodes reaches it, or at most that long, on new environments and action draws seeded by
    ``env_seed``, the same for every branch (common random numbers: each starts as a fork sweep's run
    starts, on new environments; carried on from the branch before, the first episodes were partly
    another policy's). The engine is the run's (one branch after another) or a race's own in another
    process (--branches-at-once: rlscale/distributed/ray_branches.py)."""
    start = time.perf_counter()
    if target is None:
        branch.warmup_steps = engine.resize_now(branch.n_envs)
    else:
        branch.warmup_steps = engine.restart_envs(branch.n_envs, env_seed)
    updates = max(1, round(window_steps / (branch.n_envs * cfg.agent.n_steps)))
    steps_before = engine.optimizer_steps
    branch.episodes = []
    window, seen = GoalWindow(), 0  # its own episodes only, as a branch of a fork sweep counts them
    for _ in range(updates):
        result = engine.update(branch.lr * scale)
        branch.agent_steps += result.agent_steps
        branch.warmup_steps += result.warmup_steps  # environments that joined during the window
        branch.episodes += result.episodes
        if target is not None:
            for episode_return, _length in result.episodes:  # episode by episode, as the run's goals
                window.add(episode_return)
                seen += 1
                if window.reached(target):
                    branch.reached, branch.at_once = True, seen == GOAL_WINDOW
                    break
            if branch.reached:
                break
    branch.examples = branch.agent_steps * cfg.epochs_per_batch
    branch.optimizer_steps = engine.optimizer_steps - steps_before
    if heldout is not None:
        branch.progress = before - engine.heldout_losses(heldout)
    branch.end = engine.snapshot()
    branch.seconds = time.perf_counter() - start


def measure_critical_batch(run: Run, why: str) -> list[tuple[float, int]]:
    """Measure B_crit by branching, and continue from the branch nearest to it; the continued branch's
    episodes (return, length), for the loop to record."""
    s, engine, cfg = run.state, run.engine, run.cfg
    start = time.perf_counter()
    trunk, trunk_state, trunk_envs = engine.snapshot(), replace(s, goals=dict(s.goals)), s.n_envs
    branches = [replace(b, run=k) for b in plan_branches(run) for k in range(cfg.control.branch_runs)]
    by_reach = cfg.control.progress == "reach"
    target = reach_target(run) if by_reach else None
    if by_reach and target is None:
        run.controller.measured(s.agent_steps, run.signal)
        print(f"measurement at {s.agent_steps:,} agent steps skipped: no goal above the mean return "
              f"({run.window.mean or 0:.1f}) left to race the branches to; holding the batch", flush=True)
        return []
    try:
        # The held-out rows are what the losses' progress is read on; a race to a goal needs none.
        heldout = None if by_reach else engine.heldout_batch(cfg.control.heldout_rollouts)
        before = None if by_reach else engine.heldout_losses(heldout)
        by_return = cfg.control.progress == "return"
        # One seed for every branch of this measurement (environments, action draws, episodes played)
        # and another for the run's environments after it; from the run's seed and this point alone.
        episode_seed, after_seed = (int(x) for x in np.random.SeedSequence([cfg.run.seed, s.agent_steps])
                                    .generate_state(2) % 2**31)
        played = 0
        if by_return:
            trunk_returns, played = play_episodes(run, episode_seed)
        window_steps = cfg.control.window_updates * trunk_envs * cfg.agent.n_steps
        seeds = [(episode_seed + 7_919 * branch.run) % 2**31 for branch in branches]
        done = []
        if run.races is not None:  # --branches-at-once: each race in its own process, several at once
            outcomes = run.races.race(trunk, branches, lr_scale(run), window_steps, target, seeds)
        else:
            outcomes = []
            for branch, seed in zip(branches, seeds, strict=True):
                engine.restore(trunk)
                try:
                    run_branch(run, branch, heldout, before, window_steps, target, seed)
                    if by_return:
                        returns, steps = play_episodes(run, episode_seed)
                        branch.returns, played = returns - trunk_returns, played + steps
                    outcomes.append(branch)
                except Exception as err:  # noqa: BLE001 - one branch's failure is reported, not the run's end
                    outcomes.append(err)
        for branch, outcome in zip(branches, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                print(f"measurement: the {branch.multiplier:g}x branch ({branch.n_envs} envs) failed "
                      f"({type(outcome).__name__}: {outcome}); reading the others", flush=True)
            else:
                done.append(outcome)
        heldout_steps = 0 if heldout is None else heldout.size
        readable = [b for b in done if b.reached] if by_reach else done
        # Nothing to compare below two batches (a race's batch counts once all its races met the goal):
        # the trunk goes on at its batch until the next measurement.
        if len(pooled_races(done) if by_reach else readable) < 2:
            engine.restore(trunk)
            warmup = engine.restart_envs(trunk_envs, after_seed) if by_reach else engine.resize_now(trunk_envs)
            count(run, heldout_steps + played, done, None, warmup, time.perf_counter() - start)
            run.controller.measured(s.agent_steps, run.signal)
            what = f"reached the goal {target:g}" if by_reach else "finished"
            hint = (f" (each may take {cfg.control.window_updates:g} updates' worth at the current batch: "
                    "--branch-window)" if by_reach else "")
            print(f"measurement: {len(readable)} of {len(branches)} branches {what}, too few to read{hint}; "
                  "holding the batch until the next measurement", flush=True)
            return []
        branches = done
        measures = ("reach",) if by_reach else ("total", "policy", *(("return",) if by_return else ()))
        readings = {measure: read(branches, measure) for measure in measures}
        reading, (low, high) = readings[cfg.control.progress]
        chosen = choose(readable, reading.critical_batch)
        engine.restore(chosen.end)
        # By reach, on new environments again: the last branch's episodes under way are not the run's.
        warmup = engine.restart_envs(chosen.n_envs, after_seed) if by_reach else engine.resize_now(chosen.n_envs)
        s.n_envs, s.base_lr = chosen.n_envs, chosen.lr
        s.measurements += 1
        elapsed = time.perf_counter() - start
        overhead = count(run, heldout_steps + played, branches, chosen, warmup, elapsed)
    except BaseException:
        # The trunk as it was, so the checkpoint written next resumes before this measurement.
        engine.restore(trunk)
        engine.resize_now(trunk_envs)
        for f in fields(s):
            setattr(s, f.name, getattr(trunk_state, f.name))
        raise
    run.controller.measured(s.agent_steps, run.signal, reading.shown_batch)  # the target chart: the edge, not 1e18
    run.settled = False  # the pool was resized: the next update's time is not a steady one
    interval = f"90 % {low:,.0f}-{high:,.0f}" if math.isfinite(low) else "interval undefined"
    others = "; ".join(f"by {PROGRESS_NAMES[measure]} {other.shown_batch:,.0f}" if other.defined
                       else f"by {PROGRESS_NAMES[measure]} undefined"
                       for measure, (other, _) in readings.items() if measure != cfg.control.progress)
    if by_reach and any(b.at_once for b in readable):
        print(f"measurement: the goal {target:g} was met with the first {GOAL_WINDOW} episodes of the "
              f"{', '.join(f'{b:,.0f}' for b in sorted({b.batch for b in readable if b.at_once}))} branch(es): "
              "their examples are the wait for episodes to end, not learning; give goals further above the "
              "run's score", flush=True)
    if by_reach:
        missed = [f"{b.batch:,.0f}" for b in branches if not b.reached]
        others = (f"to {target:g} in {'/'.join(f'{b.examples:,}' for b in readable)} examples"
                  + (f"; not reached at {', '.join(missed)}" if missed else ""))
    nodes = len({b.node for b in branches})
    at_once = (f" ({run.races.at_once} races at once on {nodes} node{'s' if nodes > 1 else ''})"
               if run.races is not None else "")
    print(f"measured at {s.agent_steps:,} agent steps ({why}), by {PROGRESS_NAMES[cfg.control.progress]}: "
          f"{reading.describe()}, {interval} ({others}); continuing from the {chosen.batch:,.0f} branch "
          f"({chosen.n_envs} envs, lr {chosen.lr:.2e}); {elapsed:.1f} s{at_once}, {overhead:.1f} s and "
          f"{sum(b.examples for b in branches if b is not chosen):,} examples of it on branches not continued",
          flush=True)
    # Every tag at every measurement (NaN where a reading is undefined), so the charts line up.
    metrics = {tags.MEASURED_BATCH: reading.shown_batch, tags.MEASURED_LOW: low, tags.MEASURED_HIGH: high,
               tags.MEASURED_EFFICIENT: reading.merrill_batch, tags.MEASURE_SECONDS: s.measure_seconds,
               tags.MEASURE_EXAMPLES: s.measure_examples, tags.MEASUREMENTS: s.measurements, tags.N_ENVS: s.n_envs,
               # The run's counters as the measurement left them: a run that ends here (its budget or
               # --stop-return spent by the races) logs no update after it, and reports read its goals from them.
               tags.OPTIMIZER_BATCH: chosen.batch, tags.UPDATES: run.optimizer_steps, tags.EXAMPLES: s.examples,
               tags.WALL_SECONDS: s.wall_seconds}
    for measure, (by_measure, _) in readings.items():
        metrics[tags.MEASURED_BATCH_BY.format(progress=measure)] = by_measure.shown_batch
    pooled = {batch: examples for batch, _, examples in pooled_races(branches)} if by_reach else {}
    for b in branches:  # by reach: one goal per 1,000 examples of the batch's races (NaN: one missed it)
        metrics[tags.BRANCH_PROGRESS.format(multiplier=b.multiplier)] = (
            1e3 / pooled.get(b.batch, math.nan) if by_reach
            else 1e3 * float(progress_of(b, cfg.control.progress).sum()) / b.examples)
    if by_reach:
        metrics[tags.MEASURE_TARGET] = target
    run.logger.scalars(metrics, s.agent_steps)
    return chosen.episodes or []


def play_episodes(run: Run, seed: int) -> tuple[np.ndarray, int]:
    """The learner's policy (sampled, not greedy) played for --progress-episodes episodes, each the first of
    its own environment, on environments and action draws seeded by ``seed``: the same for the trunk and
    every branch, so a difference between their returns is their policies', not the luck of the draw
    (common random numbers; a second episode in an environment would start at a step that depends on
    the first one's length, and draw other actions). Each episode's return, by environment, and every
    step taken (all environments step until the last episode ends)."""
    from rlscale.reports.evaluate import Agent, evaluate

    episodes = run.cfg.control.progress_episodes
    model = run.engine.learner.model
    if next(model.parameters()).device.type != "cpu":  # evaluate plays on the CPU
        model = copy.deepcopy(model).to("cpu")
    played = evaluate(Agent(run.cfg, model, Path(), run.state.agent_steps), episodes, seed=seed, n_envs=episodes)
    order = np.argsort([e.env_id for e in played.episodes], kind="stable")
    return played.returns[order], played.steps


def count(run: Run, heldout_steps: int, branches: list[BranchRun], chosen: BranchRun | None, warmup: int,
          elapsed: float) -> float:
    """A measurement's cost in the run's totals, counted once; its overhead in seconds (all of it but
    the continued branch's window). Every branch's agent steps and examples, and the held-out rows'
    steps (collected, not trained on); the optimizer steps of the branches not continued (the
    continued one's are the engine's from here on)."""
    s = run.state
    dropped = [b for b in branches if b is not chosen]
    s.agent_steps += heldout_steps + sum(b.agent_steps for b in branches)
    s.examples += sum(b.examples for b in branches)
    s.warmup_steps += warmup + sum(b.warmup_steps for b in branches)
    s.branch_optimizer_steps += sum(b.optimizer_steps for b in dropped)
    overhead = elapsed - (chosen.seconds if chosen is not None else 0.0)
    s.wall_seconds += elapsed
    s.measure_seconds += overhead
    s.measure_examples += sum(b.examples for b in dropped)
    return overhead


# How a branch's progress is named (config --progress): the fall of the held-out loss's parts, the
# rise of the return over episodes played with common seeds (only where asked: it costs episodes), or
# the goal reached (reach: then alone, for its branches' windows differ).
PROGRESS_NAMES = {"total": "the total loss", "policy": "the policy loss", "return": "the return",
                  "reach": "the examples to the goal"}


def reach_target(run: Run) -> float | None:
    """The goal a --progress reach measurement races its branches to: the lowest of --goals and
    --stop-return above the trunk's mean return of its last episodes (None: none left)."""
    mean = run.window.mean
    return next((g for g in run.cfg.score_goals if mean is None or g > mean), None)


def progress_of(branch: BranchRun, measure: str) -> np.ndarray:
    """The branch's progress per held-out environment by ``measure`` (total, policy or return)."""
    if measure == "return":
        return branch.returns
    parts = branch.progress
    return parts.sum(axis=1) if measure == "total" else parts[:, 0]


def read(branches: list[BranchRun], measure: str) -> tuple[Reading, tuple[float, float]]:
    """B_crit fitted to the branches' progress by ``measure``, and its 90 % interval."""
    if measure == "reach":
        return read_reach(branches)
    progress = np.stack([progress_of(b, measure) for b in branches], axis=1)  # (held-out envs, branches)
    reading = fit_critical_batch([Branch(b.batch, b.examples, b.optimizer_steps, float(progress[:, i].sum()))
                                  for i, b in enumerate(branches)])
    return reading, bootstrap_interval(progress, [b.batch for b in branches], [b.examples for b in branches])


def pooled_races(branches: list[BranchRun]) -> list[tuple[float, float, float]]:
    """(batch, optimizer steps, examples) of each batch whose every race met the goal, geometric means over
    its races (--branch-runs), as ``rlscale pareto`` pools a sweep's seeds; ascending in batch."""
    by_batch: dict[float, list[BranchRun]] = {}
    for b in branches:
        by_batch.setdefault(b.batch, []).append(b)
    return [(batch, float(np.exp(np.mean(np.log([r.optimizer_steps for r in races])))),
             float(np.exp(np.mean(np.log([r.examples for r in races])))))
            for batch, races in sorted(by_batch.items()) if all(r.reached for r in races)]


def read_reach(branches: list[BranchRun]) -> tuple[Reading, tuple[float, float]]:
    """B_crit from the optimizer steps S and examples E each batch's races took to the goal (pooled over
    --branch-runs): eq. 2.11 fitted in log space (``fit_pareto``, as ``rlscale pareto`` reads a fork
    sweep: the reading and its reference by one estimator), with a 90 % interval from the fit's standard
    error. Two batches are solved exactly (``fit_critical_batch``: one goal's progress per example, 1/E,
    falls as 1/(B + B_crit)), without an interval. Merrill's rule reads the same per-example progress."""
    points = pooled_races(branches)
    common = int(round(float(np.mean([e for _, _, e in points]))))
    exact = fit_critical_batch([Branch(b, common, round(s), common / e) for b, s, e in points])
    if len(points) < MIN_POINTS:
        return exact, (math.nan, math.nan)
    batches, steps, examples = (np.array(column) for column in zip(*points, strict=True))
    fit = fit_pareto(steps, examples)
    bound = ("below" if fit.b_crit <= batches.min() / RESOLVABLE else
             "above" if fit.b_crit >= batches.max() * RESOLVABLE else "")
    reading = replace(exact, critical_batch=fit.b_crit, bound=bound, scale=math.nan, residual=fit.rms_log_residual)
    return reading, fit.interval()


def choose(branches: list[BranchRun], critical_batch: float) -> BranchRun:
    """The branch nearest (in log batch) to the measured B_crit; the current batch's where it is undefined."""
    if not (math.isfinite(critical_batch) and critical_batch > 0):
        return min(branches, key=lambda b: abs(math.log(b.multiplier)))
    return min(branches, key=lambda b: abs(math.log(b.batch / critical_batch)))
