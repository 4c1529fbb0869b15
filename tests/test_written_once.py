"""Atari preprocessing and action sampling, each written once and shared by its callers.

Atari: the native vector env (ALE's C++ preprocessing) that training steps, and, one environment of it
at a time (``rlscale.envs.vector.NativeAtariEnv``), RLlib's env creator and ``rlscale.load(...).make_env``.
Actions: rollouts, evaluation and ``rlscale.load(...).act`` (``rlscale.models.nets.sample_actions``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlscale.api import Policy
from rlscale.config import build_config
from rlscale.envs.vector import NativeAtariEnv, VectorEnv, probe_spec
from rlscale.integrations.rllib import _env_config
from rlscale.integrations.rllib import make_env as rllib_env
from rlscale.models.nets import build_network, sample_actions

SEED = 5
# (overrides of Pong's preset, actions, episodes the actions end): Pong's preset plays to a game over;
# with sticky actions on, episodes cut at 600 frames (200 steps at frame skip 3); Ms. Pac-Man scores
# 10 a dot, where a raw score and a clipped one differ.
CASES = {
    "game over": ({}, 900, {(True, False): 1}),
    "sticky, capped": ({"noop_max": 5, "frame_skip": 3, "sticky_actions": 0.25, "max_episode_frames": 600},
                       500, {(False, True): 2}),
    "raw score": ({"env_id": "ALE/MsPacman-v5", "max_episode_frames": 400}, 150, {(False, True): 1}),
}


def atari_policy(**overrides) -> Policy:
    cfg = build_config("pong", None, overrides)
    torch.manual_seed(0)
    model = build_network(probe_spec(cfg.env), "auto", 64)
    return Policy(SimpleNamespace(cfg=cfg, model=model), seed=7)


def random_actions(n: int, seed: int = 1) -> list[int]:
    return np.random.default_rng(seed).integers(0, 6, n).tolist()


@dataclass
class Game:
    """What an env showed for a list of actions: its observations (at an episode's end the ended
    episode's last, then the next one's first), rewards, (terminated, truncated) and episode returns."""

    frames: list[np.ndarray] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    ends: list[tuple[bool, bool]] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)


def native_game(cfg, actions: list[int]) -> Game:
    """A native vector env of one environment, as training steps it (its rewards clipped for the learner,
    its episode returns raw)."""
    env = VectorEnv(replace(cfg, warmup_max_steps=0), [0], seed=SEED)
    game = Game(frames=[env.obs[0]])
    try:
        for action in actions:
            step = env.step(np.array([action]))
            end = (bool(step.terminated[0]), bool(step.truncated[0]))
            if any(end):  # ALE's own terminal observation, then the next episode's first it moved on to
                game.frames += [env.info["final_obs"][0], step.obs[0]]
                if end[1]:
                    np.testing.assert_array_equal(step.final_obs[0], game.frames[-2])
            else:
                game.frames.append(step.obs[0])
            game.rewards.append(float(step.reward[0]))
            game.ends.append(end)
            game.returns += [episode.episode_return for episode in step.episodes]
    finally:
        env.close()
    return game


def play(env: gym.Env, actions: list[int]) -> Game:
    """A gymnasium env reset with the seed, stepped with the actions, reset (unseeded) after each end."""
    obs, _ = env.reset(seed=SEED)
    game, total = Game(frames=[obs]), 0.0
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        game.frames.append(obs)
        game.rewards.append(float(reward))
        game.ends.append((terminated, truncated))
        total += reward
        if terminated or truncated:
            # RLlib's env clips its rewards: RecordEpisodeStatistics, under the clip, has the raw return.
            game.returns.append(float(info["episode"]["r"]) if "episode" in info else total)
            obs, _ = env.reset()
            game.frames.append(obs)
            total = 0.0
    return game


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    """A case's policy (its run's config), actions and the native env's game for them."""
    overrides, steps, ends = CASES[request.param]
    policy = atari_policy(**overrides)
    actions = random_actions(steps)
    native = native_game(policy.agent.cfg.env, actions)
    assert {end: native.ends.count(end) for end in set(native.ends) - {(False, False)}} == ends
    return policy, actions, native


def assert_same_game(game: Game, native: Game, clipped: bool = False, frame=lambda obs: obs) -> None:
    assert len(game.frames) == len(native.frames)
    for t, (mine, theirs) in enumerate(zip(game.frames, native.frames, strict=True)):
        np.testing.assert_array_equal(mine, frame(theirs), err_msg=f"frame {t}")
    assert game.ends == native.ends
    # The native env clips its learner's rewards and reports its episodes' raw returns.
    assert (game.rewards if clipped else np.sign(game.rewards).tolist()) == native.rewards
    assert game.returns == native.returns


def test_the_native_atari_env_plays_the_native_vector_envs_game(case):
    """Frame for frame, across episode ends (the first frames padded black, FIRE at each reset, ALE's
    no-op draws, sticky repeats and episode cap); rewards the raw game score."""
    policy, actions, native = case
    env = NativeAtariEnv(policy.agent.cfg.env)
    try:
        assert env.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        game = play(env, actions)
        assert not game.frames[0][:-1].any() and game.frames[0][-1].any()
        assert_same_game(game, native)
        assert max(map(abs, game.rewards)) == (10 if policy.env_id == "ALE/MsPacman-v5" else 1)  # unclipped
        # Seeded again, it plays the same game again.
        again = play(env, actions[:50])
        for mine, theirs in zip(again.frames, native.frames, strict=False):
            np.testing.assert_array_equal(mine, theirs)
    finally:
        env.close()


def test_a_loaded_policys_env_is_the_native_atari_env(case):
    """rlscale.load(run).make_env(): the frames the policy trained on, the run's episode cap included."""
    policy, actions, native = case
    env = policy.make_env()
    try:
        assert isinstance(env, NativeAtariEnv)
        assert_same_game(play(env, actions), native)
    finally:
        env.close()


def test_rllibs_env_is_the_native_atari_env_scaled_with_the_stack_last(case):
    """RLlib's env creator: the same game, float32 in [0, 1] with the stack on the last axis, rewards clipped
    for the learner and the episodes' raw returns reported."""
    policy, actions, native = case
    env = rllib_env(_env_config(policy.agent.cfg))
    try:
        assert env.observation_space == gym.spaces.Box(0.0, 1.0, (84, 84, 4), np.float32)
        game = play(env, actions)
        assert all(obs.dtype == np.float32 for obs in game.frames)
        assert_same_game(game, native, clipped=True,
                         frame=lambda obs: np.moveaxis(obs, 0, -1).astype(np.float32) / 255.0)
    finally:
        env.close()


def test_the_native_atari_env_renders_the_colour_frames_of_its_game():
    """render_mode="rgb_array" adds the native env's colour twin; the game stays the same."""
    policy = atari_policy(max_episode_frames=200)  # an episode end within the actions
    plain, shown = policy.make_env(), policy.make_env(render_mode="rgb_array")
    twin = VectorEnv(replace(policy.agent.cfg.env, warmup_max_steps=0), [0], seed=SEED, render=True)
    try:
        assert plain.render() is None
        plain.reset(seed=SEED)
        shown.reset(seed=SEED)
        assert shown.render().shape == (210, 160, 3) and shown.render().dtype == np.uint8
        np.testing.assert_array_equal(shown.render(), twin.frame(0))
        ends = 0
        for action in random_actions(70):
            obs, *_, terminated, truncated, _ = shown.step(action)
            np.testing.assert_array_equal(obs, plain.step(action)[0])
            twin.step(np.array([action]))
            if terminated or truncated:  # the ended episode's last colour frame, then the next one's first
                ends += 1
                np.testing.assert_array_equal(shown.render(), twin.twin_info["final_obs"][0][0])
                np.testing.assert_array_equal(shown.reset()[0], plain.reset()[0])
            np.testing.assert_array_equal(shown.render(), twin.frame(0))
        assert ends == 1
    finally:
        plain.close()
        shown.close()
        twin.close()


LOGITS = torch.randn(4096, 6, generator=torch.Generator().manual_seed(3)) * 2


def test_sampled_actions_are_a_categorical_distributions_and_the_old_callers():
    """Categorical(logits)'s draw and log_prob, bit for bit; and the actions evaluation and the API drew
    before they shared this (multinomial on softmax(logits); the probs may differ in the last bit)."""
    actions, logprobs = sample_actions(LOGITS, torch.Generator().manual_seed(4))
    dist = torch.distributions.Categorical(logits=LOGITS)
    expected = torch.multinomial(dist.probs, 1, generator=torch.Generator().manual_seed(4)).squeeze(1)
    np.testing.assert_array_equal(actions, expected)
    np.testing.assert_array_equal(logprobs, dist.log_prob(expected))
    before = torch.multinomial(torch.softmax(LOGITS, dim=1), 1, generator=torch.Generator().manual_seed(4))
    np.testing.assert_array_equal(actions, before.squeeze(1))
    assert len(set(actions.tolist())) == 6


def test_greedy_actions_are_the_argmax_and_draw_nothing():
    generator = torch.Generator().manual_seed(4)
    state = generator.get_state()
    actions, logprobs = sample_actions(LOGITS, generator, greedy=True)
    np.testing.assert_array_equal(actions, LOGITS.argmax(dim=1))
    np.testing.assert_array_equal(logprobs, torch.distributions.Categorical(logits=LOGITS).log_prob(actions))
    assert torch.equal(generator.get_state(), state)


def test_a_loaded_policy_acts_through_the_shared_sampler():
    policy = atari_policy()
    obs = np.random.default_rng(0).integers(0, 256, (8, 4, 84, 84), dtype=np.uint8)
    with torch.no_grad():
        logits, _ = policy.agent.model(torch.from_numpy(obs))
    expected, _ = sample_actions(logits, torch.Generator().manual_seed(7))
    np.testing.assert_array_equal(policy.act(obs), expected)
    assert policy.act(obs[0], greedy=True) == int(logits[0].argmax())
