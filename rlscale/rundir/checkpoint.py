"""A run directory's files: atomic checkpoints that load without executing code.

A checkpoint is written to a temporary file in the same directory, flushed to
disk and renamed over its final name, so a crash leaves either the old or the
new file, never half of one. Loading uses ``torch.load(weights_only=True)``,
which only rebuilds tensors and plain containers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from rlscale.errors import UserError

CONFIG_FILE = "config.toml"  # the resolved config of a run directory
SUMMARY_FILE = "summary.json"  # counters, goals and the mean return at the last checkpoint

# Layout: checkpoints/ckpt-<agent steps>.pt holds the loop's, the controller's and the
# engine's state; an engine may write files of its own beside it under the same
# prefix (RLlib: ckpt-<agent steps>.rllib/), which are removed with it.
FORMAT = "rlscale-checkpoint-2"
_NAME = re.compile(r"ckpt-(\d+)\.pt")


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def prefix(run_dir: Path, step: int) -> Path:
    """checkpoints/ckpt-<step>: the checkpoint file adds .pt, an engine's own files other suffixes."""
    folder = checkpoint_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"ckpt-{step:012d}"


def save(run_dir: Path, state: dict[str, Any], step: int, keep: int) -> Path:
    """Write the checkpoint of ``step`` atomically; keep the newest ``keep`` (and their engine files)."""
    final = prefix(run_dir, step).with_suffix(".pt")
    tmp = final.with_name(f".{final.name}.tmp")
    with open(tmp, "wb") as fh:
        torch.save({"format": FORMAT, **state}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, final)
    for old in list_checkpoints(run_dir)[:-keep]:
        old.unlink(missing_ok=True)
        for engine_files in old.parent.glob(f"{old.stem}.*"):
            if engine_files.is_dir():
                shutil.rmtree(engine_files, ignore_errors=True)
            else:
                engine_files.unlink(missing_ok=True)
    return final


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically (temporary file in the same directory, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


def list_checkpoints(run_dir: Path) -> list[Path]:
    folder = checkpoint_dir(run_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _NAME.fullmatch(p.name))


def load(path: Path) -> dict[str, Any]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise UserError(f"checkpoint {path} does not exist") from None
    except Exception as err:  # noqa: BLE001 - any unpickling failure means a bad file
        raise UserError(
            f"checkpoint {path} is corrupt or not an rlscale checkpoint "
            f"({type(err).__name__}); resume from an earlier one or start a new run"
        ) from None
    if not isinstance(state, dict) or not str(state.get("format", "")).startswith("rlscale-checkpoint"):
        raise UserError(f"{path} is not an rlscale checkpoint (format {FORMAT} expected)")
    if state["format"] != FORMAT:
        raise UserError(f"{path} has the checkpoint format {state['format']} of an older rlscale; this "
                        f"version reads {FORMAT}: evaluate or resume it with the rlscale that wrote it")
    return state


def step_of(path: Path) -> int:
    """The agent steps a checkpoint file was written at (its name says)."""
    match = _NAME.fullmatch(path.name)
    if match is None:
        raise UserError(f"{path} is not a checkpoint file (ckpt-<agent steps>.pt)")
    return int(match.group(1))


def latest(run_dir: Path) -> Path:
    found = list_checkpoints(run_dir)
    if not found:
        raise UserError(f"no checkpoint in {checkpoint_dir(run_dir)}; nothing to resume")
    return found[-1]
