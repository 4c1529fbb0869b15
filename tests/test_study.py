"""The fixed-vs-auto study report on hand-made runs with known answers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from rlscale.config import build_config
from rlscale.runs import RunRecord
from rlscale.study import cells, median_interval, variant_of


def record(name: str, batch: str, n_envs: int, reach_at: float | None, seconds_per_step: float) -> RunRecord:
    """A CartPole run whose 20-episode mean jumps from 0 to 500 at agent step ``reach_at``."""
    cfg = build_config("cartpole", None, {"n_envs": n_envs, "batch": batch, "min_envs": 4})
    steps = np.arange(1, 201) * 100.0
    returns = np.where(steps >= (reach_at or math.inf), 500.0, 0.0)
    scalars = {
        "rollout/episode_return": (steps, returns),
        "train/updates": (steps, steps / 40), "train/examples": (steps, steps),
        "perf/wall_seconds": (steps, steps * seconds_per_step),
        "batch/optimizer_batch": (steps, np.full(steps.size, n_envs * 5.0)),
    }
    return RunRecord(Path(name), cfg, scalars, None)


def test_median_interval_by_bootstrap():
    median, low, high = median_interval(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert median == 3.0 and low == 1.0 and high == 5.0
    median, _, high = median_interval(np.array([1.0, 2.0, math.inf, math.inf, math.inf]))
    assert median == math.inf and high == math.inf  # most seeds never got there


def test_study_cells_group_variants_and_count_unreached_seeds():
    runs = [record(f"f{s}", "fixed", 8, 5_000 + 1_000 * s, 0.01) for s in range(5)]
    runs += [record(f"a{s}", "auto", 8, 4_000 if s < 3 else None, 0.01) for s in range(5)]
    assert {variant_of(r) for r in runs} == {"fixed 40 lr 0.0007", "auto from 40 lr 0.0007 noise a0.5"}
    table = {c.variant: c for c in cells(runs, [475.0])}
    fixed, auto = table["fixed 40 lr 0.0007"], table["auto from 40 lr 0.0007 noise a0.5"]
    # The 20-episode window is full from step 2,000 on; a jump at step s makes the mean
    # reach 475 when 19 of the last 20 episodes are 500: 18 episodes (1,800 steps) later.
    assert fixed.reached == 5 and fixed.wall[0] == pytest.approx((7_000 + 1_800) * 0.01)
    assert auto.reached == 3 and auto.wall[0] == pytest.approx((4_000 + 1_800) * 0.01)
    assert auto.walls.count(math.inf) == 2
