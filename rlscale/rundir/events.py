"""Reading a run's TensorBoard scalars back (for plots and reports)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from rlscale.errors import UserError

# The scalars of a run's event files, as read last time. TensorBoard's reader takes
# ~10 s for a 2M-step MinAtar run (50k updates x ~30 tags): a 45-run sweep took
# 8 min to report. Valid while the event files are unchanged (names, sizes, times).
CACHE_FILE = ".scalars-cache.npz"


def _event_files_key(files: list[Path]) -> np.ndarray:
    return np.array([f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in sorted(files)])


def read_scalars(run_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{tag: (agent steps, values)} of every scalar in the run directory (cached in CACHE_FILE)."""
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a directory; give a run directory (it holds events.out.tfevents.*)")
    files = list(run_dir.glob("events.out.tfevents.*"))
    if not files:
        raise UserError(f"{run_dir} holds no TensorBoard events; is it a run directory?")
    key = _event_files_key(files)
    cached = _read_cache(run_dir / CACHE_FILE, key)
    if cached is not None:
        return cached
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    out = {}
    for tag in events.Tags()["scalars"]:
        scalars = events.Scalars(tag)
        out[tag] = (np.array([s.step for s in scalars]), np.array([s.value for s in scalars]))
    _write_cache(run_dir / CACHE_FILE, key, out)
    return out


def _read_cache(path: Path, key: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            if not np.array_equal(data["key"], key):
                return None
            return {str(tag): (data[f"steps{i}"], data[f"values{i}"]) for i, tag in enumerate(data["tags"])}
    except (OSError, KeyError, ValueError):
        return None  # none yet, or unreadable: read the events


def _write_cache(path: Path, key: np.ndarray, scalars: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Atomically; a run directory one may not write to is read again next time."""
    arrays = {"key": key, "tags": np.array(list(scalars), dtype=str)}
    for i, (steps, values) in enumerate(scalars.values()):
        arrays[f"steps{i}"], arrays[f"values{i}"] = steps, values
    partial = path.with_name(path.name + f".{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        with open(partial, "wb") as f:
            np.savez(f, **arrays)
        os.replace(partial, path)
    with contextlib.suppress(OSError):
        partial.unlink(missing_ok=True)


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
