"""The rollout pool on real environments and a real embedded Ray."""

from __future__ import annotations

import os
import signal
from collections import Counter

import numpy as np
import pytest
import ray
import torch

from rlscale.config import build_config
from rlscale.distributed.ray_pool import RayPool
from rlscale.envs.vector import VectorEnv, probe_spec
from rlscale.errors import ActorFailures
from rlscale.models.nets import build_network
from rlscale.models.precision import INFERENCE_CANDIDATES, inference_label, network_forward
from rlscale.rollout.worker import Batch, RolloutWorker, SerialPool, flat_weights, load_flat_weights


def cartpole(**overrides):
    return build_config("cartpole", None, {"n_actors": 2, **overrides})


def weights_for(cfg):
    spec = probe_spec(cfg.env)
    torch.manual_seed(0)
    return spec, flat_weights(build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden))


def check_layout(batch: Batch, n_steps: int, n_envs: int, obs_shape) -> None:
    assert batch.obs.shape == (n_steps, n_envs, *obs_shape)
    for name in ("actions", "rewards", "terminated", "truncated", "truncation_values", "values", "logprobs"):
        assert getattr(batch, name).shape == (n_steps, n_envs), name
    assert batch.bootstrap_values.shape == (n_envs,)
    assert len(set(batch.env_ids.tolist())) == n_envs  # each column is one environment
    assert batch.size == n_steps * n_envs
    assert np.all(batch.logprobs <= 0)


def test_serial_and_actor_pools_give_the_same_layout(ray_instance):
    cfg = cartpole(n_envs=8)
    spec, weights = weights_for(cfg)
    serial = SerialPool(cfg, spec)
    actors = RayPool(cfg, spec)
    try:
        a, b = serial.collect(weights), actors.collect(weights)
        for batch in (a, b):
            check_layout(batch, cfg.agent.n_steps, 8, spec.obs_shape)
            assert sorted(batch.env_ids.tolist()) == list(range(8))
        assert a.obs.dtype == b.obs.dtype and a.actions.dtype == b.actions.dtype
        assert len(set(actors.worker_pids())) == 2 and actors.vector_envs_per_worker == [2, 2]
    finally:
        serial.close()
        actors.close()


def test_a_worker_samples_its_actions_as_a_categorical_distribution_would():
    """The worker's shortcut past torch.distributions: the same actions and log-probabilities, bit for bit."""
    cfg = build_config("cartpole", None, {"actor_precision": "fp32"})
    spec, weights = weights_for(cfg)
    worker = RolloutWorker.of_run(cfg, spec, seed=3)
    load_flat_weights(worker.policy, weights)
    obs = np.random.default_rng(0).normal(size=(64, *spec.obs_shape)).astype(np.float32) * 3
    state = worker.generator.get_state()
    with torch.no_grad():
        actions, logprobs, values = worker._act(obs)
        logits, expected_values = worker.policy(torch.from_numpy(obs))
    dist = torch.distributions.Categorical(logits=logits)
    expected = torch.multinomial(dist.probs, 1, generator=torch.Generator().set_state(state)).squeeze(1)
    assert len(set(actions.tolist())) == 2  # both actions drawn: the draw is not degenerate
    np.testing.assert_array_equal(actions, expected.numpy())
    np.testing.assert_array_equal(logprobs, dist.log_prob(expected).numpy())
    np.testing.assert_array_equal(values, expected_values.numpy())


def test_flat_weights_load_into_a_channels_last_model_and_keep_its_layout():
    spec = probe_spec(build_config("minatar-breakout", None, {}).env)
    torch.manual_seed(0)
    source = build_network(spec, "auto", 64)
    target = build_network(spec, "auto", 64).to(memory_format=torch.channels_last)
    load_flat_weights(target, flat_weights(source))
    for (name, a), b in zip(source.named_parameters(), target.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
        if b.dim() == 4:
            assert b.is_contiguous(memory_format=torch.channels_last), name
    with pytest.raises(ValueError, match="weights for a model of"):
        load_flat_weights(target, flat_weights(source)[:-1])


@pytest.mark.parametrize("precision, channels_last", [("bf16", True), ("fp32", True), ("bf16", False)])
def test_an_actor_in_bf16_or_channels_last_acts_like_one_in_fp32(precision, channels_last):
    """Same weights and seed: the logged log-probabilities and values agree within bf16 rounding."""
    def worker(**run):
        cfg = build_config("minatar-breakout", None, {"n_envs": 8, "warmup_max_steps": 0, **run})
        w = RolloutWorker.of_run(cfg, probe_spec(cfg.env), seed=3, inference_rows=8)
        w.add_vector_env(list(range(4)), seed=11)
        w.add_vector_env(list(range(4, 8)), seed=12)
        return w

    spec, weights = weights_for(build_config("minatar-breakout", None, {}))
    fp32 = worker(actor_precision="fp32")
    other = worker(actor_precision=precision, actor_channels_last=channels_last)
    try:
        assert (other.inference.precision, other.inference.channels_last) == (precision, channels_last)
        a = fp32.rollout(weights, 1)  # one step: the same observations in both
        b = other.rollout(weights, 1)
        np.testing.assert_array_equal(a.obs, b.obs)
        tolerance = 1e-5 if precision == "fp32" else 0.05
        np.testing.assert_allclose(b.values, a.values, rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(np.exp(b.logprobs), np.exp(a.logprobs), atol=tolerance)
        conv = next(p for p in other.policy.parameters() if p.dim() == 4)
        assert conv.is_contiguous(memory_format=torch.channels_last) == channels_last
        if precision == "bf16":
            # Its weights are kept in bf16: what autocast over the fp32 weights gives, bit for bit.
            assert {p.dtype for p in other.policy.parameters()} == {torch.bfloat16}
            obs = torch.from_numpy(a.obs[0])
            with torch.no_grad():
                kept = network_forward(other.policy, obs, True, channels_last)
                cast = network_forward(fp32.policy, obs, True, False)
            for mine, autocast in zip(kept, cast, strict=True):
                torch.testing.assert_close(mine, autocast, rtol=0, atol=0)
    finally:
        fp32.close()
        other.close()


def test_each_actor_times_its_inference_at_start_up(ray_instance):
    cfg = build_config("minatar-breakout", None, {"n_envs": 8, "n_actors": 2, "warmup_max_steps": 0,
                                                  "actor_precision": "auto"})
    pool = RayPool(cfg, probe_spec(cfg.env))
    try:
        assert pool.inference_rows == 4
        choices = pool.inference()
        assert len(choices) == 2
        labels = {inference_label(*c) for c in INFERENCE_CANDIDATES}
        for choice in choices:
            assert set(choice.seconds) == labels and choice.label in labels
        assert "measured" in pool.describe_inference()
    finally:
        pool.close()


def test_a_rollout_in_flight_runs_with_the_weights_it_started_with(ray_instance):
    """--overlap's policy lag: a started rollout keeps its weights, and a resize ordered meanwhile waits for it."""
    cfg = cartpole(n_envs=8)
    spec, weights = weights_for(cfg)
    pool = RayPool(cfg, spec)
    try:
        pool.start(np.zeros_like(weights))  # zero weights: uniform policy, zero values
        with pytest.raises(RuntimeError, match="already in flight"):
            pool.start(weights)
        pool.resize(12)
        lagged = pool.collect()
        assert not pool.in_flight
        check_layout(lagged, cfg.agent.n_steps, 8, spec.obs_shape)
        np.testing.assert_allclose(lagged.logprobs, np.log(0.5), rtol=1e-6)
        assert np.all(lagged.values == 0)
        fresh = pool.collect(weights)
        check_layout(fresh, cfg.agent.n_steps, 12, spec.obs_shape)
        assert not np.allclose(fresh.logprobs, np.log(0.5))
        with pytest.raises(RuntimeError, match="no rollout in flight"):
            pool.collect()
    finally:
        pool.close()


def test_the_serial_pool_keeps_the_same_policy_lag():
    """--overlap --pool serial: no concurrency, but the batch still comes from the weights given at start."""
    cfg = cartpole(n_envs=4, pool="serial")
    spec, weights = weights_for(cfg)
    pool = SerialPool(cfg, spec)
    try:
        zeros = np.zeros_like(weights)
        pool.start(zeros)
        zeros[:] = 1.0  # the learner changes its weights in place meanwhile: the pool kept its own
        np.testing.assert_allclose(pool.collect().logprobs, np.log(0.5), rtol=1e-6)
    finally:
        pool.close()


def test_atari_batch_layout_serial():
    cfg = build_config("pong", "a2c", {"n_envs": 8, "warmup_max_steps": 20})
    spec, weights = weights_for(cfg)
    assert spec.obs_shape == (4, 84, 84) and spec.n_actions == 6
    pool = SerialPool(cfg, spec)
    try:
        batch = pool.collect(weights)
        check_layout(batch, 5, 8, (4, 84, 84))
        assert batch.obs.dtype == np.uint8
    finally:
        pool.close()


def test_vector_envs_stepped_at_once_give_the_batch_they_give_one_after_the_other():
    """The serial pool sends every vector env its actions before it receives from any (each emulates on a
    thread of its own): the same seeds and weights give the same batch, bit for bit, episodes included."""
    cfg = build_config("pong", "a2c", {"n_envs": 8, "warmup_max_steps": 30, "actor_precision": "fp32"})
    spec, weights = weights_for(cfg)

    def rollouts(at_once: bool) -> list[Batch]:
        worker = RolloutWorker.of_run(cfg, spec, seed=3, inference_rows=8, vectors_at_once=at_once)
        try:
            worker.add_vector_env(list(range(4)), seed=11)
            worker.add_vector_env(list(range(4, 8)), seed=12)
            return [worker.rollout(weights, 64) for _ in range(4)]
        finally:
            worker.close()

    at_once, in_turn = rollouts(True), rollouts(False)
    pool = SerialPool(cfg, spec)
    try:
        assert pool.worker.vectors_at_once  # the pool that owns every core steps them at once
    finally:
        pool.close()
    for a, b in zip(at_once, in_turn, strict=True):
        for name in ("obs", "actions", "rewards", "terminated", "truncated", "values", "logprobs",
                     "bootstrap_values"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        assert a.episodes == b.episodes
    assert any(b.rewards.any() for b in in_turn)  # points were scored: the games moved


def test_a_worker_steps_the_vector_envs_it_took_in_as_it_would_step_them_apart(monkeypatch):
    """Gymnasium's vector envs join the worker's newest one (one call a step for all): grown in the background,
    shrunk by a vector env, the batches are those of a worker that steps each vector env apart, bit for bit."""
    # fp32 set: "auto" times bf16 against fp32 per worker, and under load the two workers may choose apart.
    cfg = build_config("minatar-breakout", "a2c", {"n_envs": 4, "vector_size": 2, "warmup_max_steps": 30,
                                                     "actor_precision": "fp32"})
    spec, weights = weights_for(cfg)

    def rollouts(apart: bool) -> tuple[list[Batch], int]:
        if apart:
            monkeypatch.setattr(RolloutWorker, "_keep", lambda self, venvs: self.vector_envs.extend(venvs))
        else:  # each taking-in rebuilds the whole vector env: a grow's vector envs join in one
            real_absorb = VectorEnv.absorb
            monkeypatch.setattr(VectorEnv, "absorb", lambda self, others: absorbed.append(len(others))
                                or real_absorb(self, others))
        worker = RolloutWorker.of_run(cfg, spec, seed=3, inference_rows=4)
        try:
            assert worker.add_vector_env([0, 1], seed=11) > 0 and worker.add_vector_env([2, 3], seed=13) > 0
            batches = [worker.rollout(weights, 16) for _ in range(3)]
            worker.resize([([4, 5], 15), ([6, 7], 17), ([8, 9], 19)], removes=0, background=True)
            for building, _ in worker.starting:  # both ready before the next rollout: it takes both in
                building.result()
            batches += [worker.rollout(weights, 16) for _ in range(3)]
            assert worker.remove_vector_env() == [8, 9]
            batches += [worker.rollout(weights, 16) for _ in range(2)]
            assert worker.remove_vector_envs(2) == [4, 5, 6, 7]
            batches += [worker.rollout(weights, 16) for _ in range(3)]
            return batches, len(worker.vector_envs)
        finally:
            worker.close()
            monkeypatch.undo()

    absorbed: list[int] = []
    (joined, joined_vectors), (apart, apart_vectors) = rollouts(False), rollouts(True)
    assert absorbed == [1, 3]  # the second vector env, then the grow's three at once
    assert (joined_vectors, apart_vectors) == (1, 2)
    assert [b.n_envs for b in joined][-1] == 4 and max(b.n_envs for b in joined) == 10
    for a, b in zip(joined, apart, strict=True):
        for name in ("obs", "actions", "rewards", "terminated", "truncated", "values", "logprobs",
                     "bootstrap_values", "env_ids"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        assert a.episodes == b.episodes and a.warmup_steps == b.warmup_steps
    assert sum(len(b.episodes) for b in joined) > 0  # episodes ended: the bookkeeping was carried along



def test_a_step_in_flight_is_never_answered_out_of_line():
    """ALE queues a second send and answers it with the first step's results: a send while a step is in flight
    is refused, and an env that lost a step to an error steps no more."""
    cfg = build_config("pong", "a2c", {"n_envs": 4, "warmup_max_steps": 0})
    env = VectorEnv(cfg.env, [0, 1, 2, 3], seed=5)
    try:
        actions = np.array([2, 3, 2, 3])
        with pytest.raises(RuntimeError, match="receive without a send"):
            env.receive()
        env.send(actions)
        with pytest.raises(RuntimeError, match="in flight"):
            env.send(actions)
        env.abandon()  # as after an error: the step is taken off ALE's queue and dropped
        with pytest.raises(RuntimeError, match="lost a step"):
            env.send(actions)
    finally:
        env.close()


# A wait inside ALE's recv holds signals back, so the thread method: on a hang it ends the worker (red), not waits.
@pytest.mark.timeout(60, method="thread")
def test_a_ctrl_c_as_a_step_is_received_stops_the_rollout_without_waiting_for_a_step_never_sent():
    """A Ctrl-C acted on as ALE's recv returns raises after the step was taken: the rollout stops at once (a
    second recv for the same step would wait forever), and its envs step no more."""
    cfg = build_config("pong", "a2c", {"n_envs": 8, "warmup_max_steps": 0, "actor_precision": "fp32"})
    spec, weights = weights_for(cfg)
    worker = RolloutWorker.of_run(cfg, spec, seed=3, inference_rows=8, vectors_at_once=True)
    try:
        worker.add_vector_env(list(range(4)), seed=11)
        worker.add_vector_env(list(range(4, 8)), seed=12)
        first = worker.vector_envs[0]
        real_recv = first.vec.recv

        def interrupted_recv():
            real_recv()
            raise KeyboardInterrupt

        first.vec.recv = interrupted_recv
        with pytest.raises(KeyboardInterrupt):
            worker.rollout(weights, 5)
        assert all(v.broken and v.sent is None for v in worker.vector_envs)
    finally:
        worker.close()


@pytest.mark.timeout(120)
def test_atari_rewards_are_clipped_for_the_learner_and_returns_are_not():
    """Ms. Pac-Man pays 10 a pellet: with clipping the learner sees 1, the episode return keeps the 10s.

    The same seed and weights with and without --reward-clip play the same game; each episode is cut
    at 400 frames (100 agent steps), so both report one episode per environment within 5 batches.
    """
    def play(clip: bool):
        cfg = build_config("ALE/MsPacman-v5", "a2c", {"n_envs": 4, "vector_size": 4, "noise_groups": 2,
                                                      "n_steps": 25, "warmup_max_steps": 0,
                                                      "max_episode_frames": 400, "reward_clip": clip})
        spec, weights = weights_for(cfg)
        pool = SerialPool(cfg, spec)
        try:
            batches = [pool.collect(weights) for _ in range(5)]
        finally:
            pool.close()
        assert all(b.env_ids.tolist() == batches[0].env_ids.tolist() for b in batches)
        rewards = np.concatenate([b.rewards for b in batches])  # [125 steps, 4 envs]
        done = np.concatenate([b.terminated | b.truncated for b in batches])
        episodes = [(e.env_id, e.episode_return, e.length) for b in batches for e in b.episodes]
        return batches[0].env_ids.tolist(), rewards, done, episodes

    env_ids, clipped, clipped_done, clipped_episodes = play(True)
    same_ids, raw, raw_done, raw_episodes = play(False)
    assert same_ids == env_ids
    np.testing.assert_array_equal(clipped_done, raw_done)  # the same game
    assert raw.max() >= 10  # pellets were eaten: raw rewards above 1, so clipping has work to do
    np.testing.assert_array_equal(clipped, np.sign(raw))  # the learner's reward: clipped to its sign
    # Episode returns are the raw score whatever the learner saw: the sum of the unclipped
    # rewards of the steps the episode took, in both runs.
    assert clipped_episodes == raw_episodes
    assert sorted(e for e, _, _ in raw_episodes) == sorted(env_ids)  # one episode per environment
    for env_id, episode_return, length in raw_episodes:
        col = env_ids.index(env_id)
        end = int(np.flatnonzero(raw_done[:, col])[0])
        assert length == end + 1 == 100
        assert episode_return == raw[: end + 1, col].sum() > clipped[: end + 1, col].sum() > 0


def test_warmup_gives_each_env_its_own_random_start():
    cfg = build_config("cartpole", None, {"warmup_max_steps": 500})
    group = VectorEnv(cfg.env, list(range(8)), seed=3)
    try:
        assert 0 < group.warmup_steps <= 8 * 500
        # Different random starting points: the observations are not all alike.
        assert len({tuple(np.round(o, 5)) for o in group.obs}) == 8
    finally:
        group.close()


def episode_ledger(pool, weights, updates: int, ledger: dict, dones: Counter, steps: Counter) -> Batch:
    """Collect ``updates`` batches, counting done flags, steps and reported episodes per env."""
    for _ in range(updates):
        batch = pool.collect(weights)
        done = batch.terminated | batch.truncated
        for col, env_id in enumerate(batch.env_ids):
            dones[int(env_id)] += int(done[:, col].sum())
            steps[int(env_id)] += batch.n_steps
        for ep in batch.episodes:
            ledger.setdefault(ep.env_id, []).append(ep.length)
    return batch


def assert_episodes_consistent(ledger: dict, dones: Counter, steps: Counter) -> None:
    """Every done flag the learner saw is exactly one reported episode of that env,
    and no env reported more steps of play than it took."""
    assert {e: len(v) for e, v in ledger.items()} == {e: n for e, n in dones.items() if n}
    for env_id, lengths in ledger.items():
        assert sum(lengths) <= steps[env_id]


def test_resize_keeps_layout_and_loses_or_duplicates_no_episode(ray_instance):
    """2 -> 32 -> 4 environments; without warm-up every finished episode is reportable."""
    cfg = cartpole(n_envs=2, vector_size=2, warmup_max_steps=0, noise_groups=2, min_envs=2)
    spec, weights = weights_for(cfg)
    pool = RayPool(cfg, spec)
    ledger: dict[int, list[int]] = {}
    dones: Counter = Counter()
    steps: Counter = Counter()
    try:
        for n_envs in (2, 32, 4):
            pool.resize(n_envs, background=True)
            assert pool.n_envs == n_envs
            # New environments start in the background and join within a few updates;
            # every batch until then is consistent, just narrower.
            for _ in range(200):
                batch = episode_ledger(pool, weights, 1, ledger, dones, steps)
                assert batch.n_envs + batch.starting_envs == n_envs
                if batch.n_envs == n_envs:
                    break
            batch = episode_ledger(pool, weights, 12, ledger, dones, steps)
            check_layout(batch, 5, n_envs, spec.obs_shape)
            assert batch.starting_envs == 0
        assert_episodes_consistent(ledger, dones, steps)
        # The grown envs played (ids 2..31), and after the shrink only 4 remain.
        assert max(ledger) > 2 and set(ledger) <= set(range(32))
        assert set(batch.env_ids.tolist()) <= set(range(32)) and batch.n_envs == 4
    finally:
        pool.close()


def test_background_grow_joins_with_its_warmup_counted():
    """Atari envs built on the worker's thread join the batch once warmed up."""
    cfg = build_config("pong", "a2c", {"n_envs": 4, "warmup_max_steps": 50, "noise_groups": 2})
    spec, weights = weights_for(cfg)
    pool = SerialPool(cfg, spec)
    try:
        first_warmup = pool.warmup_steps
        assert pool.resize(12, background=True).warmup_steps == 0
        joined, shapes = 0, []
        for _ in range(500):
            batch = pool.collect(weights)
            shapes.append(batch.n_envs)
            joined += batch.warmup_steps
            if batch.n_envs == 12:
                break
        assert shapes[-1] == 12 and shapes == sorted(shapes)  # envs only join, in order
        assert 0 < joined <= 8 * 50  # the new envs' random steps, reported once
        assert first_warmup > 0
        # Shrinking while a grow is still starting drops the starting envs first.
        pool.resize(20, background=True)
        pool.resize(12, background=True)
        for _ in range(20):
            batch = pool.collect(weights)
        assert batch.n_envs == 12 and batch.starting_envs == 0
    finally:
        pool.close()


def test_256_environments_run_on_two_cores(ray_instance):
    """256 environments on 2 actors all step: nearly every one finishes a reported episode in 100 steps."""
    cfg = cartpole(n_envs=256, vector_size=16, min_envs=16, max_envs=256, warmup_max_steps=10)
    spec, weights = weights_for(cfg)
    pool = RayPool(cfg, spec)
    try:
        assert pool.vector_envs_per_worker == [8, 8]  # 16 vector envs packed onto 2 actors
        finished: set[int] = set()
        for _ in range(20):  # 100 agent steps per environment
            batch = pool.collect(weights)
            check_layout(batch, 5, 256, spec.obs_shape)
            finished |= {e.env_id for e in batch.episodes}
        # A random CartPole policy ends an episode in ~22 steps on average. An environment
        # reports from its second episode on (the first began in its random warm-up), so
        # 100 steps report one for nearly every environment; none can without stepping.
        assert len(finished) >= 250, len(finished)
    finally:
        pool.close()


@pytest.mark.parametrize("serial", [True, False])
def test_same_seed_same_first_batch(serial, ray_instance):
    cfg = cartpole(n_envs=4, vector_size=2, pool="serial" if serial else "actors")
    spec, weights = weights_for(cfg)
    batches = []
    for _ in range(2):
        pool = SerialPool(cfg, spec) if serial else RayPool(cfg, spec)
        try:
            batches.append(pool.collect(weights))
        finally:
            pool.close()
    np.testing.assert_array_equal(batches[0].obs, batches[1].obs)
    np.testing.assert_array_equal(batches[0].actions, batches[1].actions)


@pytest.mark.parametrize("serial", [True, False])
def test_a_restart_with_a_seed_steps_alike_whatever_ran_before(serial, ray_instance):
    """Pool.restart (the races of rlscale measure): new environments and action draws seeded
    by the seed alone, at any size; another seed steps otherwise."""
    cfg = cartpole(n_envs=4, vector_size=2, pool="serial" if serial else "actors")
    spec, weights = weights_for(cfg)
    pool = SerialPool(cfg, spec) if serial else RayPool(cfg, spec)
    try:
        pool.collect(weights)
        pool.restart(8, seed=7)
        first = [pool.collect(weights) for _ in range(3)]
        pool.resize(2)
        pool.collect(weights)
        pool.restart(8, seed=7)
        again = [pool.collect(weights) for _ in range(3)]
        pool.restart(8, seed=8)
        other = pool.collect(weights)
    finally:
        pool.close()
    for a, b in zip(first, again, strict=True):
        assert a.n_envs == b.n_envs == 8
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.actions, b.actions)
        assert [(e.episode_return, e.length) for e in a.episodes] == [(e.episode_return, e.length) for e in b.episodes]
    assert not np.array_equal(first[0].obs, other.obs)


def test_a_restart_seeds_minatar_with_a_measurements_seed():
    """A measurement's seed (over a million) seeds environments that take seeds under 2**32 only."""
    cfg = build_config("minatar-breakout", None, {"n_envs": 8, "vector_size": 8, "min_envs": 8, "pool": "serial"})
    spec, weights = weights_for(cfg)
    pool = SerialPool(cfg, spec)
    try:
        pool.restart(16, seed=1_000_003 + 7_919 * 3)
        assert pool.collect(weights).n_envs == 16
    finally:
        pool.close()


def test_minatar_runs_with_a_seed_whose_environment_seeds_pass_2_to_the_32():
    """A run's seed 100,000 makes its environments' 100,000 x 1,000,003: MinAtar takes seeds under 2**32 only."""
    cfg = build_config("minatar-breakout", None, {"n_envs": 8, "vector_size": 8, "min_envs": 8, "pool": "serial",
                                                  "seed": 100_000})
    spec, weights = weights_for(cfg)
    pool = SerialPool(cfg, spec)
    try:
        assert pool.collect(weights).n_envs == 8
    finally:
        pool.close()


def test_too_many_actor_failures_stop_with_a_clear_error(ray_instance):
    cfg = cartpole(n_envs=4, vector_size=2, max_actor_failures=1)
    spec, weights = weights_for(cfg)
    pool = RayPool(cfg, spec)
    try:
        os.kill(pool.worker_pids()[0], signal.SIGKILL)
        assert pool.collect(weights).n_envs == 4  # first failure: replaced
        os.kill(pool.worker_pids()[1], signal.SIGKILL)
        with pytest.raises(ActorFailures, match="2 rollout actor failures"):
            pool.collect(weights)
    finally:
        pool.close()


def test_a_replacement_that_dies_as_it_starts_is_started_again(ray_instance):
    """Until Ray marks a lost node dead it may place the replacement there, where it dies at once
    (CI: a run's thread crashed with ActorDiedError). Here the first replacement is killed as it starts."""
    cfg = cartpole(n_envs=4, vector_size=2)
    spec, weights = weights_for(cfg)

    class FirstReplacementDies(RayPool):
        started = 0

        def _new_actor(self, index, cpus=None):
            actor = super()._new_actor(index, cpus)
            if self.failures == 1:  # a replacement, not one of the pool's first actors
                self.started += 1
                if self.started == 1:
                    ray.kill(actor)
            return actor

    pool = FirstReplacementDies(cfg, spec)
    try:
        os.kill(pool.worker_pids()[0], signal.SIGKILL)
        assert pool.collect(weights).n_envs == 4  # the dead actor's part collected by the second replacement
        assert pool.started == 2 and pool.failures == 1
        assert len(set(pool.worker_pids())) == 2
    finally:
        pool.close()


def test_shrink_that_leaves_only_starting_envs_waits_for_them():
    cfg = cartpole(n_envs=2, vector_size=2, warmup_max_steps=200, noise_groups=2, min_envs=2)
    spec, weights = weights_for(cfg)
    pool = SerialPool(cfg, spec)
    try:
        pool.resize(4, background=True)  # the new pair starts on the builder thread...
        pool.worker.vector_envs, old = pool.worker.vector_envs[1:], pool.worker.vector_envs[0]
        old.close()  # ...and the running pair is gone: only the starting pair is left
        batch = pool.collect(weights)
        assert batch.n_envs == 2 and batch.starting_envs == 0
    finally:
        pool.close()
