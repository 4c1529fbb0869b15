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


def break_gaps(steps: np.ndarray, values: np.ndarray,
               update_steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Insert NaN between two points of a series where updates were logged without it (e.g.
    while B_simple was undefined), so plots show the gap.

    ``update_steps``: the step of every logged update (a tag logged at each one). A gap is
    an update between two points, not a long step interval: a batch that grows 8x
    spaces its updates 8x wider without skipping any.
    """
    if steps.size < 2:
        return steps.astype(float), values.astype(float)
    update_steps = np.sort(update_steps)
    between = (np.searchsorted(update_steps, steps[1:], side="left")
               - np.searchsorted(update_steps, steps[:-1], side="right"))
    gaps = np.flatnonzero(between > 0)
    return (np.insert(steps.astype(float), gaps + 1, np.nan),
            np.insert(values.astype(float), gaps + 1, np.nan))
