"""Vector environments built from the config, with episode bookkeeping.

Atari ids (``ALE/<Game>-v5``) use ale-py's native vector env (C++ threads)
with the standard preprocessing done in C++: no-op resets, frame skip with a
max over the last two frames, 84x84 grayscale, a 4-frame stack. Every other
registered gymnasium id uses gymnasium's synchronous vector env. Both run with
same-step autoreset, so the observation after a terminal step is already the
next episode's first one and the terminal observation arrives in ``final_obs``.
``make_atari_env`` builds the one-env version of that preprocessing from
gymnasium's wrappers (for RLlib's env runners and ``rlscale.load(...).make_env``).

Reward clipping lives here and only here: the learner gets clipped rewards,
episode returns are reported unclipped.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
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

    def __init__(self, cfg: EnvConfig, env_ids: list[int], seed: int, render: bool = False) -> None:
        register_envs(cfg.env_id)  # a fresh actor process has not registered them yet
        # A run's seed times 1,000,003 plus its first env id can pass 2**32, where MinAtar's (numpy's legacy)
        # seeding stops; the environments seed themselves seed + i, so keep room below it.
        seed = seed % SEED_RANGE
        self.env_ids = np.asarray(env_ids, dtype=np.int64)
        self.n = len(env_ids)
        self.clip = False
        # render=True makes frames() return what a person would watch (colour frames).
        self.twin = None
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
                self.twin_obs = self.twin.reset(seed=seed)[0]
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
        self.rng = np.random.default_rng(seed)
        self.obs, _ = self.vec.reset(seed=seed)
        self.vec.action_space.seed(seed)
        self.returns = np.zeros(self.n, dtype=np.float64)
        self.lengths = np.zeros(self.n, dtype=np.int64)
        # An episode that began during the random warm-up is not the policy's: not reported.
        self.reportable = np.ones(self.n, dtype=bool)
        self.warmup_steps = self._random_warmup(cfg.warmup_max_steps)

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
        if self.twin is not None:
            self.twin_obs = self.twin.step(actions)[0]
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

    def close(self) -> None:
        self.vec.close()
        if self.twin is not None:
            self.twin.close()


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


def make_atari_env(cfg: EnvConfig, *, episode_cap: bool = True, scale: bool = False,
                   channels_last: bool = False, **make_kwargs: Any) -> gym.Env:
    """One Atari env with the native vector env's preprocessing, from gymnasium's wrappers.

    The config's frame skip (a max over the last two frames), no-op starts and sticky actions;
    84x84 grey frames, 4 stacked (first axis), no life-loss resets; uint8 0-255. ``scale``: float32 in
    [0, 1] instead; ``channels_last``: the stack on the last axis (RLlib's CNN wants HWC);
    ``episode_cap=False`` leaves the id's registered cap (108,000 frames for v5) in place of the
    config's ``max_episode_frames``. ``make_kwargs`` go to ``gym.make`` (say, ``render_mode``).

    With the same seed and actions it plays the native env's game frame for frame, but for the
    starts: ALE's vector env presses FIRE at each reset (one emulator frame, in place of a no-op),
    draws its no-op count (below noop_max; here 1 to noop_max) and its sticky repeats from
    generators of its own, and pads a new episode's stack with black frames where this one
    repeats the first (tests/test_written_once.py).
    """
    register_envs(cfg.env_id)  # in every process that makes one: RLlib's remote env runners too
    if episode_cap:
        make_kwargs["max_num_frames_per_episode"] = cfg.max_episode_frames
    env = gym.make(cfg.env_id, frameskip=1, repeat_action_probability=cfg.sticky_actions, **make_kwargs)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=cfg.noop_max, frame_skip=cfg.frame_skip,
                                          screen_size=ATARI_SCREEN, terminal_on_life_loss=False,
                                          grayscale_obs=True, scale_obs=scale)
    env = gym.wrappers.FrameStackObservation(env, ATARI_STACK)
    if channels_last:
        space = env.observation_space
        space = gym.spaces.Box(np.moveaxis(space.low, 0, -1), np.moveaxis(space.high, 0, -1),
                               dtype=space.dtype)
        env = gym.wrappers.TransformObservation(env, lambda obs: np.moveaxis(obs, 0, -1), space)
    return env


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
