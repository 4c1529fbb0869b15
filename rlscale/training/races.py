"""Races: the critical batch read from branches of one checkpoint raced to a goal (``rlscale measure``).

Each race starts an engine from a run's checkpoint (its network and optimizer state, as ``--init-from``
does), at a multiple of the run's batch and the learning rate the square-root rule gives it, on new
environments seeded alike for every batch, and trains until the mean return of its own last 20
episodes reaches the goal, or at most ``cap_updates`` updates' worth of the run's batch. Each batch is
raced several times (each race on its own seeds). The optimizer steps S and examples E each batch took,
pooled over its races (geometric means, as ``rlscale pareto`` pools a sweep's seeds), are fitted by
eq. 2.11, S = S_min (1 + B_crit/B) and E = E_min (1 + B/B_crit): the fork sweep's read-out at one point
of training (docs/batch-control.md, "Measuring the critical batch").

The races never touch the run they start from: they train engines of their own.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rlscale.config import Config
from rlscale.control.critical import RESOLVABLE, Branch, Reading, fit_critical_batch
from rlscale.control.pareto_fit import MIN_POINTS, fit_pareto
from rlscale.goals import GOAL_WINDOW, GoalWindow


@dataclass
class BranchRun:
    """One race: its batch, learning rate, what it consumed and whether it reached the goal."""

    multiplier: float
    n_envs: int
    batch: float  # observations per optimizer step
    lr: float  # its learning rate (the checkpoint's annealing included)
    agent_steps: int = 0
    examples: int = 0
    optimizer_steps: int = 0
    seconds: float = 0.0
    warmup_steps: int = 0  # random start-up steps of its new environments
    reached: bool = False  # its own last episodes' mean met the goal
    run: int = 0  # which race of its batch (each on its own environment seeds)
    at_once: bool = False  # ... with its first GOAL_WINDOW episodes: the wait for them, not learning
    node: str = ""  # the Ray node it ran on, where races run side by side


def race_seed(seed: int, run: int) -> int:
    """The environment and action seed of a batch's ``run``-th race: the same for every batch (common
    random numbers: a difference between batches is theirs, not the draw's)."""
    return (seed + 7_919 * run) % 2**31


def train_branch(engine: Any, cfg: Config, branch: BranchRun, cap_steps: float, target: float,
                 env_seed: int) -> None:
    """Race one branch on ``engine`` (a NativeEngine holding the checkpoint's state) until the mean return of
    its own last episodes reaches ``target``, or at most ``cap_steps`` agent steps' worth of updates, on new
    environments and action draws seeded by ``env_seed``."""
    start = time.perf_counter()
    branch.warmup_steps = engine.restart_envs(branch.n_envs, env_seed)
    updates = max(1, round(cap_steps / (branch.n_envs * cfg.agent.n_steps)))
    steps_before = engine.optimizer_steps
    window, seen = GoalWindow(), 0  # its own episodes only, as a branch of a fork sweep counts them
    for _ in range(updates):
        result = engine.update(branch.lr)
        branch.agent_steps += result.agent_steps
        branch.warmup_steps += result.warmup_steps
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
    branch.seconds = time.perf_counter() - start


def pooled_races(branches: list[BranchRun]) -> list[tuple[float, float, float]]:
    """(batch, optimizer steps, examples) of each batch whose every race met the goal, geometric means over
    its races, as ``rlscale pareto`` pools a sweep's seeds; ascending in batch."""
    by_batch: dict[float, list[BranchRun]] = {}
    for b in branches:
        by_batch.setdefault(b.batch, []).append(b)
    return [(batch, float(np.exp(np.mean(np.log([r.optimizer_steps for r in races])))),
             float(np.exp(np.mean(np.log([r.examples for r in races])))))
            for batch, races in sorted(by_batch.items()) if all(r.reached for r in races)]


def read_reach(branches: list[BranchRun]) -> tuple[Reading, tuple[float, float]]:
    """B_crit from the optimizer steps S and examples E each batch's races took to the goal: eq. 2.11 fitted
    in log space (``fit_pareto``, as ``rlscale pareto`` reads a fork sweep), with a 90 % interval from the
    fit's standard error. Two batches are solved exactly (``fit_critical_batch``: one goal's progress per
    example, 1/E, falls as 1/(B + B_crit)), without an interval."""
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

