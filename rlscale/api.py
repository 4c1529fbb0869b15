"""rlscale from Python: what ``rlscale.train(...)`` returns, and ``rlscale.load(...)``, a run's policy.

    import rlscale
    run = rlscale.train("cartpole", total_frames=20_000, seed=0)
    policy = rlscale.load(run.dir)
    env = policy.make_env()
    obs, _ = env.reset(seed=0)
    action = policy.act(obs)

``rlscale.train`` is the ``rlscale train`` command called from Python (rlscale/train.py): it takes
the command line's settings as keywords (``n_envs=16``, ``batch="auto"``, ``agent="ppo"``) and goes
through the command's own parser, so a bad setting raises ``rlscale.UserError`` with the one line
the command would print.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlscale.config import FIELDS, FLAGS, SET_FLAG, cli_flag, toml_value
from rlscale.errors import UserError


@dataclass(frozen=True)
class TrainedRun:
    """What a finished run left: its directory and its summary.json."""

    dir: Path
    summary: dict[str, Any] = field(repr=False)

    @property
    def agent_steps(self) -> int:
        return int(self.summary["agent_steps"])

    @property
    def mean_return(self) -> float | None:
        """The mean return of the run's last episodes (None before any ended)."""
        return self.summary.get("mean_return")

    @property
    def goals_reached(self) -> dict[float, int]:
        """Each goal the run reached, with the agent step it first got there."""
        return {float(goal): int(at["agent_steps"]) for goal, at in self.summary.get("goals", {}).items()}


def settings_argv(env: str | None, settings: dict[str, Any]) -> list[str]:
    """The command line that says what the keywords say (so both are checked by one parser)."""
    argv = [env] if env is not None else []
    for key, value in settings.items():
        if key in ("agent", "resume"):
            argv += [f"--{key}", str(value)]
            continue
        if key not in FIELDS:
            raise UserError(f"unknown setting '{key}': use a setting's name (a flag's with underscores: "
                            "total_frames, n_envs, batch, ...); rlscale train --help-all lists them")
        if key not in FLAGS:  # a setting without a flag: --set NAME=VALUE, the value in TOML
            argv += [SET_FLAG, f"{key}={toml_value(value)}"]
            continue
        flag = cli_flag(key)
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag.removeprefix("--"))
        elif isinstance(value, list | tuple):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, repr(value) if isinstance(value, float) else str(value)]
    return argv


class Policy:
    """A trained policy that acts on the observations of its environment."""

    def __init__(self, agent: Any, seed: int = 0) -> None:
        from rlscale.envs.vector import probe_spec

        self.agent = agent
        self.obs_shape = tuple(probe_spec(agent.cfg.env).obs_shape)  # one observation's, to tell it from a batch
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def env_id(self) -> str:
        return self.agent.cfg.env.env_id

    def make_env(self, **kwargs: Any) -> gym.Env:
        """A gymnasium environment whose observations are the ones the policy was trained on.

        Atari: ``rlscale.envs.vector.NativeAtariEnv``, one environment of the native vector env
        training steps (ALE's 84x84 grey frames, 4 stacked, the run's frame skip, no-op starts,
        sticky actions and episode cap, FIRE at each reset), rewards the raw game score;
        ``render_mode="rgb_array"`` is its one keyword. Other ids: ``gym.make(env_id, **kwargs)``."""
        from rlscale.envs.vector import NativeAtariEnv, register_envs

        cfg = self.agent.cfg.env
        if cfg.env_id.startswith("ALE/"):
            return NativeAtariEnv(cfg, **kwargs)
        register_envs(cfg.env_id)
        return gym.make(cfg.env_id, **kwargs)

    @torch.no_grad()
    def act(self, obs: Any, greedy: bool = False) -> int | np.ndarray:
        """The action for one observation (an int), or for a batch of them (an array)."""
        from rlscale.models.nets import sample_actions

        x = torch.as_tensor(np.asarray(obs))
        single = tuple(x.shape) == self.obs_shape
        logits, _ = self.agent.model(x.unsqueeze(0) if single else x)
        actions, _ = sample_actions(logits, self.generator, greedy=greedy)
        return int(actions[0]) if single else actions.numpy()


def load(path: str | Path, seed: int = 0) -> Policy:
    """The policy of a run directory's latest checkpoint (or of a ckpt-*.pt file)."""
    from rlscale.reports.evaluate import load_agent

    return Policy(load_agent(Path(path)), seed)
