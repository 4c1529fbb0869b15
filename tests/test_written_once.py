"""Atari preprocessing and action sampling, each written once and shared by its callers.

Atari: the native vector env (ALE's C++ preprocessing), RLlib's env creator and
``rlscale.load(...).make_env`` (both ``rlscale.envs.vector.make_atari_env``).
Actions: rollouts, evaluation and ``rlscale.load(...).act`` (``rlscale.models.nets.sample_actions``).
"""

from __future__ import annotations

from types import SimpleNamespace

import ale_py
import gymnasium as gym
import numpy as np
import pytest
import torch

from rlscale.api import Policy
from rlscale.config import EnvConfig, build_config
from rlscale.envs.vector import VectorEnv, make_atari_env, probe_spec
from rlscale.integrations.rllib import _env_config
from rlscale.integrations.rllib import make_env as rllib_env
from rlscale.models.nets import build_network, sample_actions

STEPS = 40  # a short prefix of a Pong episode


def pong_policy(**overrides) -> Policy:
    cfg = build_config("pong", None, overrides)
    torch.manual_seed(0)
    model = build_network(probe_spec(cfg.env), "auto", 64)
    return Policy(SimpleNamespace(cfg=cfg, model=model), seed=7)


def random_actions(seed: int = 1) -> list[int]:
    return np.random.default_rng(seed).integers(0, 6, STEPS).tolist()


@pytest.mark.parametrize("overrides", [{}, {"noop_max": 5, "frame_skip": 3, "sticky_actions": 0.25}])
def test_the_api_and_rllib_see_the_same_atari_frames(overrides):
    """Both build make_atari_env's env: RLlib's frames are the policy env's, scaled to [0, 1], stack last."""
    pytest.importorskip("cv2")  # gymnasium's AtariPreprocessing resizes with OpenCV
    policy = pong_policy(**overrides)
    mine, theirs = policy.make_env(), rllib_env(_env_config(policy.agent.cfg))
    try:
        assert mine.observation_space.shape == (4, 84, 84) and mine.observation_space.dtype == np.uint8
        assert theirs.observation_space == gym.spaces.Box(0.0, 1.0, (84, 84, 4), np.float32)
        a, _ = mine.reset(seed=5)
        b, _ = theirs.reset(seed=5)
        for action in [None, *random_actions()]:
            if action is not None:
                a, reward, terminated, truncated, _ = mine.step(action)
                b, clipped, *ends, _ = theirs.step(action)
                assert clipped == np.sign(reward) and ends == [terminated, truncated]
            assert a.dtype == np.uint8 and b.dtype == np.float32
            np.testing.assert_array_equal(b, np.moveaxis(a, 0, -1).astype(np.float32) / 255.0)
    finally:
        mine.close()
        theirs.close()


def test_the_native_vector_env_plays_make_atari_envs_game_but_for_its_start():
    """ALE's C++ preprocessing and gymnasium's wrappers give the same frames, step for step, once the
    native env's start is copied: a FIRE press (one emulator frame) at reset, black frames padding the
    first stack. (Its no-op count comes from a generator of its own, so no no-ops here.)"""
    pytest.importorskip("cv2")  # gymnasium's AtariPreprocessing resizes with OpenCV
    cfg = EnvConfig(env_id="ALE/Pong-v5", noop_max=0, warmup_max_steps=0)
    native = VectorEnv(cfg, [0], seed=5)
    env = make_atari_env(cfg)
    game = env.unwrapped
    reset = game.reset

    def reset_pressing_fire(**kwargs):
        out = reset(**kwargs)
        game.ale.act(ale_py.Action.FIRE)  # what ALE's vector env does at each reset
        return out

    game.reset = reset_pressing_fire
    try:
        obs, _ = env.reset(seed=5)
        np.testing.assert_array_equal(native.obs[0, -1], obs[-1])  # the first frame
        assert not native.obs[0, :-1].any() and (obs[:-1] == obs[-1]).all()  # padded black / with it
        for t, action in enumerate(random_actions()):
            step = native.step(np.array([action]))
            obs, reward, terminated, truncated, _ = env.step(action)
            new = slice(max(0, 2 - t), None)  # the frames both stacks hold by now
            np.testing.assert_array_equal(step.obs[0, new], obs[new])
            assert step.reward[0] == np.sign(reward)  # the native env clips for the learner
            assert (step.terminated[0], step.truncated[0]) == (terminated, truncated)
        np.testing.assert_array_equal(step.obs[0], obs)
    finally:
        native.close()
        env.close()


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
    policy = pong_policy()
    obs = np.random.default_rng(0).integers(0, 256, (8, 4, 84, 84), dtype=np.uint8)
    with torch.no_grad():
        logits, _ = policy.agent.model(torch.from_numpy(obs))
    expected, _ = sample_actions(logits, torch.Generator().manual_seed(7))
    np.testing.assert_array_equal(policy.act(obs), expected)
    assert policy.act(obs[0], greedy=True) == int(logits[0].argmax())
