"""The recorded path a ``batch replay`` run follows, read from the recorded run's directory.

The schedule itself is pure (``rlscale.control.schedule``); this reads it from
the run's config and TensorBoard events and checks that the replaying run can
follow it: the same start (environments, learning rate), the same optimizer
batch per environment, and every recorded environment count within its bounds.
"""

from __future__ import annotations

from pathlib import Path

from rlscale import tags
from rlscale.config import Config, load_saved, spelled
from rlscale.control.schedule import Schedule
from rlscale.errors import UserError
from rlscale.rundir.checkpoint import CONFIG_FILE
from rlscale.rundir.events import read_scalars


def load_schedule(cfg: Config) -> Schedule:
    source = Path(cfg.control.replay_from)
    if not (source / CONFIG_FILE).is_file():
        raise UserError(f"replay_from {source}: no {CONFIG_FILE} there; give the directory of a finished run")
    recorded = load_saved(source / CONFIG_FILE)
    if recorded.agent.anneal_lr:
        raise UserError(f"replay_from {source}: that run annealed its learning rate, so its events do not "
                        "record the rate its controller set; replay a run trained without anneal_lr")
    # What the schedule's env counts and rates mean depends on these: the replaying run must share them.
    shared = {"algo": (cfg.agent.algo, recorded.agent.algo), "n_steps": (cfg.agent.n_steps, recorded.agent.n_steps),
              "n_envs": (cfg.env.n_envs, recorded.env.n_envs), "lr": (cfg.agent.lr, recorded.agent.lr),
              "vector_size": (cfg.env.vector_size, recorded.env.vector_size)}
    if cfg.agent.algo == "ppo":
        shared["n_minibatches"] = (cfg.agent.n_minibatches, recorded.agent.n_minibatches)
    differ = {name: pair for name, pair in shared.items() if pair[0] != pair[1]}
    if differ:
        theirs = " ".join(f"{spelled(name)} {pair[1]}" for name, pair in differ.items())
        raise UserError(f"replay_from {source} started with {theirs}; give this run the same")
    scalars = read_scalars(source)
    if tags.N_ENVS not in scalars or tags.LR not in scalars:
        raise UserError(f"replay_from {source}: its events hold no {tags.N_ENVS} or {tags.LR}; is it a run?")
    try:
        schedule = Schedule.from_logged(*scalars[tags.N_ENVS], *scalars[tags.LR])
    except ValueError as err:
        raise UserError(f"replay_from {source}: {err}") from None
    c = cfg.control
    outside = sorted({n for n in schedule.n_envs if not c.min_envs <= n <= c.max_envs or n % cfg.env.vector_size})
    if outside:
        raise UserError(f"replay_from {source} took {outside} environments, outside this run's "
                        f"[--min-envs {c.min_envs}, --max-envs {c.max_envs}] or not multiples of vector_size "
                        f"{cfg.env.vector_size}")
    return schedule


def describe(schedule: Schedule, source: str) -> str:
    """One line for the run's start: what it will follow."""
    changes = sum(a != b for a, b in zip(schedule.n_envs, schedule.n_envs[1:], strict=False))
    return (f"replaying {source}: {changes} resizes, {min(schedule.n_envs)}-{max(schedule.n_envs)} envs and "
            f"lr {min(schedule.lrs):.2e}-{max(schedule.lrs):.2e} over its {schedule.last_step:,} agent steps; "
            f"after them its last ({schedule.n_envs[-1]} envs, lr {schedule.lrs[-1]:.2e}) holds")
