"""Reading a run's TensorBoard scalars back (for plots and reports)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlscale.errors import UserError


def read_scalars(run_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{tag: (agent steps, values)} of every scalar in the run directory."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a directory; give a run directory (it holds events.out.tfevents.*)")
    if not list(run_dir.glob("events.out.tfevents.*")):
        raise UserError(f"{run_dir} holds no TensorBoard events; is it a run directory?")
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    out = {}
    for tag in events.Tags()["scalars"]:
        scalars = events.Scalars(tag)
        out[tag] = (np.array([s.step for s in scalars]), np.array([s.value for s in scalars]))
    return out


def break_gaps(steps: np.ndarray, values: np.ndarray, factor: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
    """Insert NaN where a series skips (e.g. while B_simple is undefined), so plots show the gap."""
    if steps.size < 3:
        return steps, values.astype(float)
    diffs = np.diff(steps)
    gaps = np.flatnonzero(diffs > factor * np.median(diffs))
    return (np.insert(steps.astype(float), gaps + 1, np.nan),
            np.insert(values.astype(float), gaps + 1, np.nan))
