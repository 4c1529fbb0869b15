"""Branching: a new run that starts where another run's checkpoint left off (``--init-from``).

The branch takes the trunk's network and optimizer state (RMSprop's or Adam's
running averages) and nothing that counts: agent steps, optimizer steps,
examples, goals and the noise averages start at zero, and the branch trains at
its own batch size, learning rate and seed. So the steps S and examples E that
branches at several batch sizes take to a goal are counted from the branch
point, and ``rlscale pareto`` fits eq. 2.11 to that stretch of
training alone: a critical batch size at that point of training, to hold each
online noise scale against (docs/batch-control.md, "Branching").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlscale.config import Config, loads_saved
from rlscale.errors import UserError
from rlscale.rundir import checkpoint

# What the trunk and its branches must share for the trunk's state to mean the same in the branch.
SHARED = {"env_id": ("env", "env_id"), "algo": ("agent", "algo"), "network": ("agent", "network"),
          "mlp_hidden": ("agent", "mlp_hidden"), "optimizer": ("agent", "optimizer")}


@dataclass(frozen=True)
class BranchPoint:
    checkpoint: Path  # the trunk's checkpoint file
    agent_steps: int  # the trunk's agent steps there
    mean_return: float | None  # the trunk's mean return of its last episodes there
    learner: dict[str, Any]  # the trunk learner's state; the branch takes its model and optimizer

    def describe(self) -> str:
        score = f", mean return {self.mean_return:.1f}" if self.mean_return is not None else ""
        return (f"branched from {self.checkpoint} ({self.agent_steps:,} agent steps{score}): its network and "
                "optimizer state; counters, goals and noise averages start at zero")


def checkpoint_file(source: Path, flag: str = "--init-from") -> Path:
    """A checkpoint file as given, or a run directory's latest checkpoint; ``flag`` names it in errors."""
    if source.is_file():
        return source
    if not source.is_dir():
        raise UserError(f"{flag} {source} does not exist; give a run directory or a ckpt-*.pt file in one")
    found = checkpoint.list_checkpoints(source)
    if not found:
        raise UserError(f"{flag} {source}: no checkpoint in {checkpoint.checkpoint_dir(source)}")
    return found[-1]


def pinned(source: str) -> str:
    """``--init-from`` as the absolute path of the very checkpoint file: a trunk that trains on gets later
    checkpoints, and a sweep's trials (Ray Tune) and the reports run in other directories."""
    return str(checkpoint_file(Path(source)).resolve())


def read_trunk(path: Path, flag: str) -> tuple[dict[str, Any], Config]:
    """A checkpoint a branch or a race may start from: its contents and its run's settings; a UserError (one
    line) for a file that is not one, or a run of another engine."""
    try:
        saved = checkpoint.load(path)
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file is the user's to replace
        raise UserError(f"{flag} {path}: not a readable rlscale checkpoint ({type(err).__name__})") from None
    learner = saved.get("engine", {}).get("learner")
    if saved.get("backend") != "native" or not isinstance(learner, dict) or "model" not in learner:
        raise UserError(f"{flag} {path}: a branch starts from a run of the native engine with one learner "
                        "(not --backend rllib or --learners > 1)")
    return saved, loads_saved(saved["config"], str(path))


def load_branch_point(cfg: Config) -> BranchPoint:
    """The checkpoint ``--init-from`` names, checked to fit this run; a UserError (one line) when it does not."""
    path = checkpoint_file(Path(cfg.run.init_from))
    saved, trunk = read_trunk(path, "--init-from")
    learner = saved["engine"]["learner"]
    differ = {name: (getattr(getattr(cfg, s), f), getattr(getattr(trunk, s), f)) for name, (s, f) in SHARED.items()}
    differ = {name: pair for name, pair in differ.items() if pair[0] != pair[1]}
    if differ:
        theirs = " ".join(f"{name} {pair[1]}" for name, pair in differ.items())
        raise UserError(f"--init-from {path} was trained with {theirs}; a branch must share them")
    window = saved.get("goal_window") or []
    return BranchPoint(path.resolve(), int(saved["trainer"]["agent_steps"]),
                       sum(window) / len(window) if window else None, learner)
