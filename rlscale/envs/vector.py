"""Vector environments built from the config, with episode bookkeeping.

Atari ids (``ALE/<Game>-v5``) use ale-py's native vector env (C++ threads)
with the standard preprocessing done in C++: no-op resets, frame skip with a
max over the last two frames, 84x84 grayscale, a 4-frame stack. Every other
registered gymnasium id uses gymnasium's synchronous vector env. Both run with
same-step autoreset, so the observation after a terminal step is already the
next episode's first one and the terminal observation arrives in ``final_obs``.
``NativeAtariEnv`` is one Atari environment of that native vector env as a
gymnasium ``Env`` (for RLlib's env runners and ``rlscale.load(...).make_env``), so
Atari preprocessing exists once, in ALE, for training, RLlib and the API alike.

Reward clipping lives here and only here: the learner gets clipped rewards,
episode returns are reported unclipped.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlscale.config import EnvConfig
from rlscale.errors import UserError


@dataclass(frozen=True)
class EnvSpec:
    """What the policy needs to know about an environment."""

    obs_shape: tuple[int, ...]
    obs_dtype: str
    n_actions: int
    is_image: bool


@dataclass
class Episode:
    env_id: int  # global id of the environment that played it
    episode_return: float  # unclipped
    length: int  # agent steps


@dataclass
class Step:
    obs: np.ndarray  # next observation (the reset one where an episode ended)
    reward: np.ndarray  # float32, clipped for the learner where configured
    terminated: np.ndarray  # bool
    truncated: np.ndarray  # bool
    final_obs: np.ndarray | None  # terminal observations of truncated envs, rows where truncated
    episodes: list[Episode] = field(default_factory=list)


def _ale_game(env_id: str) -> str:
    """ALE/MontezumaRevenge-v5 -> montezuma_revenge."""
    match = re.fullmatch(r"ALE/([A-Za-z0-9]+)-v\d+", env_id)
    if not match:
        raise UserError(f"malformed ALE id '{env_id}': expected ALE/<Game>-v5, e.g. ALE/Pong-v5")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", match.group(1)).lower()


def register_envs(env_id: str) -> None:
    """Register the ids of the environment packages rlscale ships with (in every process that makes envs).

    ale-py registers ``ALE/...``; MinAtar's ``MinAtar/...`` ids need its register call
    (gymnasium 1.x no longer loads environment plugins on its own).
    """
    import ale_py

    gym.register_envs(ale_py)
    if env_id.startswith("MinAtar/") and env_id not in gym.envs.registry:
        try:
            from minatar.gym import register_envs as register_minatar
        except ImportError:
            raise UserError(f"{env_id} needs MinAtar: pip install minatar") from None
        register_minatar()


def check_env_id(env_id: str) -> None:
    """Fail early, with a fix, on an id nobody registered."""
    register_envs(env_id)
    if env_id not in gym.envs.registry:
        close = difflib.get_close_matches(env_id, list(gym.envs.registry), n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UserError(f"unknown environment id '{env_id}'{hint}; see gymnasium.envs.registry")


SEED_RANGE = 2**31  # a vector env's seeds lie below it, and its environments' (seed + i) below 2**32


class VectorEnv:
    """One vector env: ``n`` environments with global ids, stepped together, with episode tracking."""

    def __init__(self, cfg: EnvConfig, env_ids: list[int], seed: int | None, render: bool = False) -> None:
        """``seed``: see ``reset``; ``None`` suits an env whose first reset seeds it (``NativeAtariEnv``):
        ALE starts unseeded in milliseconds, seeded in about 0.2 s."""
        register_envs(cfg.env_id)  # a fresh actor process has not registered them yet
        self.env_ids = np.asarray(env_ids, dtype=np.int64)
        self.n = len(env_ids)
        self.clip = False
        # render=True makes frames() return what a person would watch (colour frames).
        self.twin = None
        self.twin_info: dict[str, Any] = {}
        if render and cfg.warmup_max_steps:
            raise ValueError("rendering needs warmup_max_steps = 0 (the twin env replays actions only)")
        self.sent: np.ndarray | None = None  # the actions of a step sent and not yet received
        self.broken = False  # a step was lost to an error: the env is out of line with its bookkeeping
        self.native = cfg.env_id.startswith("ALE/")  # ALE's own vector env, which steps on its own thread
        if self.native:
            self.vec = _atari_vector(cfg, self.n)
            if render:
                # The native vector env cannot render. A second emulator with the same
                # seed and actions replays the same game bit for bit (checked in the
                # tests) and yields the max-pooled colour frame the agent's input came from.
                self.twin = _atari_vector(cfg, self.n, grayscale=False, img_height=210,
                                          img_width=160, stack_num=1)
            self.clip = cfg.reward_clip
        else:
            self.vec = gym.make_vec(
                cfg.env_id, self.n, vectorization_mode="sync",
                vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
                **({"render_mode": "rgb_array"} if render else {}),
            )
        if not isinstance(self.vec.single_action_space, gym.spaces.Discrete):
            raise UserError(
                f"{cfg.env_id} has a {type(self.vec.single_action_space).__name__} action space; "
                "rlscale supports discrete actions"
            )
        self.info: dict[str, Any] = {}  # the vector env's info of the last step (final_obs where one ended)
        self.rng = np.random.default_rng(seed)  # the warm-up's draws (reset reseeds it with a seed)
        self.reset(seed)
        self.warmup_steps = self._random_warmup(cfg.warmup_max_steps)

    def reset(self, seed: int | None) -> None:
        """Start every environment's episode anew: from ``seed`` (its environments seed themselves seed + i,
        the warm-up's draws and random actions seed, as at construction), or with ``None`` from where the
        environments' own generators stand (the no-op starts they draw next)."""
        if self.sent is not None or self.broken:
            raise RuntimeError("reset while a step is in flight or after a lost one")
        if seed is not None:
            # A run's seed times 1,000,003 plus its first env id can pass 2**32, where MinAtar's (numpy's
            # legacy) seeding stops; the environments seed themselves seed + i, so keep room below it.
            seed = seed % SEED_RANGE
            self.rng = np.random.default_rng(seed)
            self.vec.action_space.seed(seed)
        self.obs, _ = self.vec.reset(seed=seed)
        if self.twin is not None:  # seeded and stepped as the env, its generators stand where the env's do
            self.twin_obs = self.twin.reset(seed=seed)[0]
        self.returns = np.zeros(self.n, dtype=np.float64)
        self.lengths = np.zeros(self.n, dtype=np.int64)
        # An episode that began during the random warm-up is not the policy's: not reported.
        self.reportable = np.ones(self.n, dtype=bool)

    @property
    def spec(self) -> EnvSpec:
        space = self.vec.single_observation_space
        return EnvSpec(tuple(space.shape), str(space.dtype), int(self.vec.single_action_space.n),
                       len(space.shape) == 3)

    def _random_warmup(self, max_steps: int) -> int:
        """Each env takes its own random number (0..max) of random steps (paper A.4.2).

        All envs step together for max(w) steps; env i is reset after max(w) - w_i
        of them, so it has taken exactly w_i random steps since its reset.
        Episodes that end during warm-up are not reported.
        """
        if max_steps <= 0:
            return 0
        counts = self.rng.integers(0, max_steps + 1, size=self.n)
        self.reportable = counts == 0
        longest = int(counts.max())
        for t in range(longest + 1):
            restart = counts == longest - t
            if restart.any() and t > 0:
                self.obs, _ = self.vec.reset(options={"reset_mask": restart})
            if t < longest:
                self.obs, *_ = self.vec.step(self.vec.action_space.sample())
        return int(counts.sum())

    def frame(self, index: int) -> np.ndarray:
        """The colour frame of environment ``index`` now (needs render=True)."""
        if self.twin is not None:
            return self.twin_obs[index, 0]
        return self.vec.render()[index]

    def step(self, actions: np.ndarray) -> Step:
        self.send(actions)
        return self.receive()

    def send(self, actions: np.ndarray) -> None:
        """Start a step with ``actions``; ``receive`` finishes it. ALE's vector env steps on a thread of its
        own, so a process that sends to several before it receives from any steps them at once (a
        gymnasium vector env steps in ``receive``)."""
        if self.broken:
            raise RuntimeError("this vector env lost a step to an error and cannot step on")
        if self.sent is not None:
            # ALE would queue the second step and hand back the first's results: one step out of line.
            raise RuntimeError("send while a step is in flight: receive it first")
        actions = np.array(actions, copy=True)  # the caller may reuse its buffer before receive
        self.broken = True  # until ALE has taken the step: an error in between leaves it unknown
        if self.native:
            self.vec.send(actions)
        self.sent, self.broken = actions, False

    def receive(self) -> Step:
        """The step ``send`` started."""
        if self.sent is None:
            raise RuntimeError("receive without a send")
        # ALE's recv is called once per step, never again: a second call would wait for a step never sent.
        # Until its results are in hand an error (a Ctrl-C as it returns) leaves the env out of line: broken.
        actions, self.sent, self.broken = self.sent, None, True
        obs, reward, terminated, truncated, info = self.vec.recv() if self.native else self.vec.step(actions)
        self.broken = False
        self.info = info
        if self.twin is not None:
            self.twin_obs, *_, self.twin_info = self.twin.step(actions)
        reward = np.asarray(reward, dtype=np.float64)
        self.returns += reward
        self.lengths += 1
        done = terminated | truncated
        episodes = [
            Episode(int(self.env_ids[i]), float(self.returns[i]), int(self.lengths[i]))
            for i in np.flatnonzero(done & self.reportable)
        ]
        self.reportable |= done
        self.returns[done] = 0.0
        self.lengths[done] = 0
        final_obs = None
        if truncated.any():
            final = info["final_obs"]
            final_obs = np.stack([final[i] for i in np.flatnonzero(truncated)]).astype(obs.dtype)
        learner_reward = np.sign(reward) if self.clip else reward
        self.obs = obs
        return Step(obs, learner_reward.astype(np.float32), terminated.astype(bool),
                    truncated.astype(bool), final_obs, episodes)

    def abandon(self) -> None:
        """After an error between a send and its receive: take a step sent and not yet received off ALE's
        queue (its results dropped), and step no more (the episode bookkeeping has not seen the step)."""
        sent, self.sent, self.broken = self.sent, None, True
        if sent is not None and self.native:
            self.vec.recv()

    def absorb(self, others: list[VectorEnv]) -> None:
        """Take the environments of ``others`` in after this one's, each where it stands, in their order.

        For gymnasium's sync vector envs, which step their environments one after the other in Python:
        one call steps them all as a call each would (the same environments in the same order, the same
        draws), without the cost of a call per vector env, about 0.1 ms a step on MinAtar (a pool
        grown in vector envs of 2 acted 1.6x slower than one vector env of the same 128 environments,
        docs/performance.md). Taking in rebuilds the sync vector env (~50 us an environment): take
        a resize's vector envs in one call."""
        parts = [self, *others]
        if any(v.native or v.twin is not None for v in parts):
            raise ValueError("only gymnasium's sync vector envs without a render twin take others in")
        if any(v.sent is not None or v.broken for v in parts):
            raise RuntimeError("absorb while a step is in flight or after a lost one")
        self.vec = _sync_vector([env for v in parts for env in _released_envs(v.vec)])
        for name in ("env_ids", "obs", "returns", "lengths", "reportable"):
            setattr(self, name, np.concatenate([getattr(v, name) for v in parts]))
        self.n = len(self.env_ids)
        self.info = {}
        for other in others:
            other.n, other.env_ids = 0, other.env_ids[:0]

    def close_last(self, k: int) -> list[int]:
        """Close the last ``k`` of several environments (unfinished episodes are dropped); their ids."""
        if not 0 < k < self.n or self.native or self.twin is not None:
            raise ValueError(f"close_last({k}) of a vector env of {self.n}: close it whole instead")
        if self.sent is not None or self.broken:
            raise RuntimeError("close_last while a step is in flight or after a lost one")
        envs = _released_envs(self.vec)
        for env in envs[-k:]:
            env.close()
        self.vec = _sync_vector(envs[:-k])
        gone = self.env_ids[-k:].tolist()
        self.env_ids, self.obs = self.env_ids[:-k], self.obs[:-k]
        self.returns, self.lengths, self.reportable = self.returns[:-k], self.lengths[:-k], self.reportable[:-k]
        self.n -= k
        self.info = {}
        return gone

    def close(self) -> None:
        self.vec.close()
        if self.twin is not None:
            self.twin.close()


def _released_envs(vec: gym.vector.SyncVectorEnv) -> list[gym.Env]:
    """A sync vector env's environments, taken out of it: it then closes (as it would when collected)
    without closing them."""
    envs, vec.envs = vec.envs, []
    vec.close()
    return envs


def _sync_vector(envs: list[gym.Env]) -> gym.vector.SyncVectorEnv:
    """Environments already built, each where it stands, as one sync vector env (what ``gym.make_vec`` builds)."""
    return gym.vector.SyncVectorEnv([lambda env=env: env for env in envs], autoreset_mode=AutoresetMode.SAME_STEP)


ATARI_SCREEN = 84  # the side of an Atari observation's square grey frames
ATARI_STACK = 4  # frames an Atari observation stacks


def _atari_vector(cfg: EnvConfig, n: int, **image: int | bool):
    from ale_py.vector_env import AtariVectorEnv

    image = {"img_height": ATARI_SCREEN, "img_width": ATARI_SCREEN, "stack_num": ATARI_STACK,
             "grayscale": True, **image}  # the render twin asks for colour frames instead
    return AtariVectorEnv(
        _ale_game(cfg.env_id), n,
        # One emulator thread each: an actor steps its vector envs one after the other on its core;
        # the serial pool steps its several at once (RolloutWorker.vectors_at_once).
        num_threads=1,
        frameskip=cfg.frame_skip, noop_max=cfg.noop_max,
        repeat_action_probability=cfg.sticky_actions,
        max_num_frames_per_episode=cfg.max_episode_frames,
        reward_clipping=False, autoreset_mode=AutoresetMode.SAME_STEP, **image,
    )


class NativeAtariEnv(gym.Env):
    """One Atari environment as a gymnasium ``Env``, played by the native vector env training uses.

    A ``VectorEnv`` of one environment underneath, stepped through the same code: ALE's C++
    preprocessing with the config's frame skip (a max over the last two frames), no-op starts
    (0 to noop_max - 1, drawn by ALE), FIRE at each reset, sticky actions, 84x84 grey frames, 4
    stacked (first axis, uint8 0-255, a new episode's stack padded with black frames), no life-loss
    resets, and the config's ``max_episode_frames`` cap (a truncation). No random warm-up. Rewards
    are the raw game score (the native env clips only what goes to its learner).

    The native env begins the next episode in the step that ends one (same-step autoreset): that
    step returns the ended episode's last observation, and the ``reset()`` without a seed after it
    returns the next episode's first, the one the native env holds, so a game played here is
    the native env's frame for frame. ``reset(seed=s)`` seeds it as ``VectorEnv(cfg, [0], s)``
    does; the first ``reset()`` without a seed draws one. ``render_mode="rgb_array"``: ``render()``
    returns the max-pooled colour frame (the native env's render twin).
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, cfg: EnvConfig, render_mode: str | None = None) -> None:
        if render_mode not in (None, "rgb_array"):
            raise UserError(f"render_mode '{render_mode}': Atari envs render 'rgb_array' only")
        if not cfg.env_id.startswith("ALE/"):
            raise UserError(f"{cfg.env_id} is not an Atari id (ALE/<Game>-v5)")
        self.render_mode = render_mode
        self.native = VectorEnv(replace(cfg, warmup_max_steps=0, reward_clip=False), [0], seed=None,
                                render=render_mode is not None)
        self.observation_space = self.native.vec.single_observation_space
        self.action_space = self.native.vec.single_action_space
        self.seeded = False  # no reset has seeded it yet (the one in VectorEnv's constructor is not the user's)
        self.ended = False  # the last step ended an episode: the native env holds the next one's start
        self._frame: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)  # np_random: where an unseeded first reset draws its seed
        if seed is None and not self.seeded:
            seed = int(self.np_random.integers(SEED_RANGE))
        if seed is not None or not self.ended:
            self.native.reset(seed)
        self.seeded, self.ended = True, False
        if self.render_mode is not None:
            self._frame = self.native.frame(0)
        return self.native.obs[0], {}

    def step(self, action: int):
        step = self.native.step(np.array([action], dtype=np.int64))
        terminated, truncated = bool(step.terminated[0]), bool(step.truncated[0])
        self.ended = terminated or truncated
        obs = self.native.info["final_obs"][0] if self.ended else step.obs[0]
        if self.render_mode is not None:
            self._frame = self.native.twin_info["final_obs"][0][0] if self.ended else self.native.frame(0)
        return obs, float(step.reward[0]), terminated, truncated, {}

    def render(self) -> np.ndarray | None:
        return self._frame

    def close(self) -> None:
        self.native.close()
        super().close()


def sample_observations(spec: EnvSpec, rows: int, seed: int = 0) -> np.ndarray:
    """``rows`` random observations of the spec's shape and dtype (pixels 0-255, grids 0/1)."""
    rng = np.random.default_rng(seed)
    high = 256 if np.dtype(spec.obs_dtype) == np.uint8 else 2
    return rng.integers(0, high, (rows, *spec.obs_shape)).astype(spec.obs_dtype)


def probe_spec(cfg: EnvConfig) -> EnvSpec:
    """The spec of an environment, from a one-env group without warm-up."""
    check_env_id(cfg.env_id)
    probe_cfg = EnvConfig(**{**cfg.__dict__, "warmup_max_steps": 0})
    group = VectorEnv(probe_cfg, [0], seed=0)
    try:
        return group.spec
    finally:
        group.close()
