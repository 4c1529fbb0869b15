"""One finished (or running) run directory, read back for reports.

A run directory holds ``config.toml``, TensorBoard event files and, once a
checkpoint was written, ``summary.json``. ``RunRecord`` reads them and
answers the questions the report commands ask: the return curve, when a goal
was reached (in agent steps, optimizer steps, examples and wall time), and
the noise scales averaged up to a point.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlscale.config import Config, load_saved
from rlscale.errors import UserError
from rlscale.events import read_scalars
from rlscale.goals import first_crossing, smoothed_returns, value_at

RETURN_TAG = "rollout/episode_return"
GOAL_WINDOW = 20  # episodes the return is averaged over before a goal counts (as in training)


@dataclass(frozen=True)
class GoalHit:
    agent_steps: float
    updates: float  # optimizer steps S
    examples: float  # observations the optimizer consumed, E
    wall_seconds: float | None  # None for runs that did not log their wall time


@dataclass
class RunRecord:
    path: Path
    cfg: Config
    scalars: dict[str, tuple[np.ndarray, np.ndarray]]
    summary: dict | None

    @property
    def name(self) -> str:
        return self.path.name

    def returns(self) -> tuple[np.ndarray, np.ndarray]:
        return self.scalars.get(RETURN_TAG, (np.zeros(0), np.zeros(0)))

    def final_return(self) -> float | None:
        _, values = self.returns()
        return float(values[-GOAL_WINDOW:].mean()) if values.size else None

    def best_return(self) -> float | None:
        _, values = self.returns()
        smooth = smoothed_returns(values, GOAL_WINDOW)
        return float(np.nanmax(smooth)) if np.isfinite(smooth).any() else None

    def agent_steps(self) -> int:
        steps = [s[-1] for s, _ in self.scalars.values() if s.size]
        return int(max(steps)) if steps else 0

    def wall_seconds(self) -> float | None:
        if "perf/wall_seconds" in self.scalars:
            return float(self.scalars["perf/wall_seconds"][1][-1])
        return float(self.summary["wall_seconds"]) if self.summary else None

    def wall_curve(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(agent steps, training seconds so far), or None when the run cannot tell.

        Runs from before the ``perf/wall_seconds`` tag existed are rebuilt from
        their per-update rollout and learner seconds (which leave out resizes and
        logging, a few percent).
        """
        if "perf/wall_seconds" in self.scalars:
            return self.scalars["perf/wall_seconds"]
        if {"perf/rollout_seconds", "perf/learner_seconds"} <= self.scalars.keys():
            steps, rollout = self.scalars["perf/rollout_seconds"]
            learner_steps, learner = self.scalars["perf/learner_seconds"]
            if np.array_equal(steps, learner_steps):
                return steps, np.cumsum(rollout + learner)
        return None

    def goal(self, goal: float) -> GoalHit | None:
        steps, values = self.returns()
        at = first_crossing(steps, values, goal, GOAL_WINDOW)
        if at is None:
            return None
        return GoalHit(at, self.counter_at("train/updates", at), self.counter_at("train/examples", at),
                       self._wall_at(goal, at))

    def counter_at(self, tag: str, step: float) -> float:
        if tag not in self.scalars:
            raise UserError(f"{self.path}: no '{tag}' scalars; was it written by rlscale.train?")
        return value_at(*self.scalars[tag], step)

    def _wall_at(self, goal: float, step: float) -> float | None:
        if "perf/wall_seconds" in self.scalars:
            return value_at(*self.scalars["perf/wall_seconds"], step)
        hit = (self.summary or {}).get("goals", {}).get(f"{goal:g}")
        return float(hit["wall_seconds"]) if hit else None

    def mean_noise_scale(self, part: str | None = None, until: float | None = None) -> float | None:
        """B_simple (the controller's signal, or one part) averaged over training up to a step.

        Appendix D, eq. D.1: E_min/S_min = (integral of B_noise ds) / (integral of ds),
        with s counted in full-batch steps. An optimizer step at batch B makes
        ds = 1/(1 + B_noise/B) full-batch steps of progress, so each logged value is
        weighted by that: stretches where the noise dominates (B_noise >> B, where
        the estimate also spikes) make little progress and weigh little. Updates
        where B_simple was undefined are not in the log and do not enter.
        """
        tag = "noise/b_simple" if part is None else f"noise/b_simple_{part}"
        if tag not in self.scalars:
            return None
        steps, values = self.scalars[tag]
        if until is not None:
            keep = steps <= until
            steps, values = steps[keep], values[keep]
        if not values.size:
            return None
        batch_tag = "batch/optimizer_batch" if "batch/optimizer_batch" in self.scalars else "batch/size"
        batch = np.interp(steps, *self.scalars[batch_tag]) if batch_tag in self.scalars else np.ones_like(values)
        weights = 1.0 / (1.0 + values / batch)
        return float(np.sum(weights * values) / np.sum(weights))


def load_run(path: Path) -> RunRecord:
    if not (path / "config.toml").is_file():
        raise UserError(f"{path} is not a run directory (no config.toml); give directories made by rlscale.train")
    summary_path = path / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else None
    return RunRecord(path, load_saved(path / "config.toml"), read_scalars(path), summary)


def find_runs(paths: list[Path]) -> list[Path]:
    """Run directories among ``paths`` or directly below them (a sweep directory)."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UserError(f"{path} does not exist")
        if (path / "config.toml").is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(p.parent for p in path.glob("**/config.toml")))
    if not found:
        raise UserError(f"no run directories (with config.toml) in {', '.join(map(str, paths))}")
    return found


def goals_of(runs: list[RunRecord], given: list[float] | None) -> list[float]:
    """The goals to report: those given, else every goal of the runs' presets."""
    if given:
        return sorted(given)
    return sorted({g for r in runs for g in r.cfg.env.goals})


def format_number(value: float | None, spec: str = ",.0f") -> str:
    """A number for a report table; '-' where there is none (or it is not finite)."""
    return "-" if value is None or not math.isfinite(value) else format(value, spec)
