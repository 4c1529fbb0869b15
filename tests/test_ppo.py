"""PPO: GAE by hand, measurement equivalence, learning, tags, the controller."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from rlscale.agents.ppo import PPOLearner, gae_advantages
from rlscale.config import build_config
from rlscale.models.nets import build_network
from rlscale.rollout.worker import Batch, flat_weights
from rlscale.train import main
from tests.floats import largest, sum_tolerance
from tests.test_learner import SPECS, random_batch
from tests.test_train import scalars

# In-process runs share the module's embedded Ray (conftest.ray_instance) instead of starting their own.
pytestmark = pytest.mark.usefixtures("ray_instance")


def test_gae_by_hand_with_termination_and_truncation():
    b = Batch(
        obs=np.zeros((3, 2, 1), np.float32), actions=np.zeros((3, 2), np.int64),
        rewards=np.array([[1, 1], [2, 1], [3, 1]], np.float32),
        terminated=np.array([[0, 0], [1, 0], [0, 0]], bool),
        truncated=np.array([[0, 1], [0, 0], [0, 0]], bool),
        truncation_values=np.array([[0, 4], [0, 0], [0, 0]], np.float32),
        values=np.array([[0.5, 2], [1.0, 2], [1.5, 2]], np.float32),
        logprobs=np.zeros((3, 2), np.float32),
        bootstrap_values=np.array([10, 6], np.float32), env_ids=np.arange(2),
    )
    adv = gae_advantages(b, gamma=0.5, lam=0.5)
    # env 0: A2 = 3 + .5*10 - 1.5 = 6.5; A1 = 2 - 1 = 1 (terminal); A0 = (1 + .5*1 - .5) + .25*1 = 1.25
    # env 1: A2 = 1 + .5*6 - 2 = 2; A1 = (1 + .5*2 - 2) + .25*2 = .5; A0 = 1 + .5*4 - 2 = 1 (truncated)
    np.testing.assert_allclose(adv[:, 0], [1.25, 1.0, 6.5])
    np.testing.assert_allclose(adv[:, 1], [1.0, 0.5, 2.0])


def ppo_config(**overrides):
    # noise_settle 0: these tests read the first batches' measurements (tests/test_learner.py has the wait).
    return build_config("cartpole", "ppo", {"n_envs": 8, "n_steps": 16, "noise_settle": 0, **overrides})


def test_ppo_update_with_measurement_equals_update_without():
    spec = SPECS["mlp"]
    torch.manual_seed(0)
    model = build_network(spec, "auto", 64)
    batch = random_batch(spec, 16, 8)
    batch.logprobs[:] = np.log(0.5)
    params = []
    start = torch.from_numpy(flat_weights(model))
    for measure in (False, True):
        learner = PPOLearner.from_config(copy.deepcopy(model), ppo_config(measure_noise=measure, noise_parts_every=1,
                                                              optimizer="rmsprop_tf"))  # tests/floats.py
        metrics = learner.update(batch)
        params.append(torch.from_numpy(flat_weights(learner.model)))
        assert learner.updates == 16  # 4 epochs x 4 minibatches
        assert {"train/approx_kl", "train/clipfrac", "train/explained_variance"} <= set(metrics)
    torch.testing.assert_close(params[1], params[0], **sum_tolerance(16 * 8 // 4, largest(params[0] - start)))


def test_ppo_measures_only_the_first_epoch():
    spec = SPECS["mlp"]
    learner = PPOLearner.from_config(build_network(spec, "auto", 64), ppo_config(noise_parts_every=1, noise_minibatches=0))
    batch = random_batch(spec, 16, 8)
    learner.update(batch)
    # --noise-minibatches 0: all 4 minibatches measured in epoch 1; epochs 2-4 reuse the data and are not.
    assert learner.noise.emas["total"].samples == 4 and learner.noise.emas["policy"].samples == 4


def test_ppo_measuring_one_minibatch_keeps_the_horizon_in_training_observations():
    """--noise-minibatches 1 (the default): one measured minibatch per batch, and the unmeasured minibatches' fresh rows are
    credited to the next measurement, so the average's horizon stays in observations trained on."""
    spec = SPECS["mlp"]
    learner = PPOLearner.from_config(build_network(spec, "auto", 64), ppo_config(noise_parts_every=1))  # the default: 1
    batch = random_batch(spec, 16, 8)  # 128 rows: minibatches of 32
    for _ in range(2):
        learner.update(batch)
    ema = learner.noise.emas["total"]
    assert ema.samples == 2 and learner.noise.emas["policy"].samples == 2
    # The first measurement saw 32 fresh rows; the second, its own 32 and the first batch's other 96.
    assert ema.weight == pytest.approx(1 - np.exp(-(32 + 128) / learner.noise_settings.noise_horizon), rel=1e-12)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ppo_learns_cartpole(tmp_path):
    """Mean return >= 450 over the last 20 episodes within 300k agent steps."""
    run_dir = tmp_path / "ppo"
    # CleanRL ppo.py's classic-control settings (4 envs, clip 0.2, entropy 0.01) but lr 1e-3, 4x
    # CleanRL's: 450 at 62,976 and 87,040 agent steps for seeds 0 and 1 (134,656 at 2.5e-4).
    code = main(["cartpole", "--agent", "ppo", "--pool", "serial", "--n-envs", "4", "--set", "vector_size=2",
                 "--set", "clip_coef=0.2", "--ent-coef", "0.01", "--lr", "1e-3", "--total-frames", "300000",
                 "--stop-return", "450", "--log-interval", "30", "--run-dir", str(run_dir)])
    assert code == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["mean_return"] >= 450
    tags = set(scalars(run_dir).Tags()["scalars"])
    assert {"noise/b_simple_total", "noise/b_simple_policy", "noise/b_simple_value",
            "train/approx_kl", "train/clipfrac", "train/explained_variance"} <= tags


@pytest.mark.timeout(240)
def test_controller_resizes_a_ppo_run_on_ray(tmp_path, capsys):
    """--batch critical on CartPole: B_simple reads ~2-10 while the optimizer batch is 8 x 32 / 4 = 64
    observations, far below 64 / 1.5 (the hysteresis), so the controller shrinks the run, by at most
    2x (the largest resize factor): 8 -> 4 environments, --min-envs, where it stays."""
    run_dir = tmp_path / "ppo-adaptive"
    code = main(["cartpole", "--agent", "ppo", "--n-actors", "2", "--batch", "critical", "--n-envs", "8",
                 "--set", "vector_size=2", "--n-steps", "32", "--min-envs", "4", "--max-envs", "64",
                 "--set", "cooldown=1000", "--set", "noise_parts_every=1", "--total-frames", "1536",
                 "--run-dir", str(run_dir)])
    assert code == 0
    events = scalars(run_dir)
    # Each update logs the environments it leaves for the next one and the optimizer batch it trained on.
    n_envs = [e.value for e in events.Scalars("batch/n_envs")]
    assert n_envs[0] == 8.0 and 4.0 in n_envs, n_envs
    shrink = n_envs.index(4.0)  # the update that decided the shrink
    assert shrink > 0 and set(n_envs[:shrink]) == {8.0} and set(n_envs[shrink:]) == {4.0}
    optimizer_batch = [e.value for e in events.Scalars("batch/optimizer_batch")]
    assert optimizer_batch == [64.0] * (shrink + 1) + [32.0] * (len(n_envs) - shrink - 1)
    # What the controller shrank for: the target it logged at that update.
    targets = {e.step: e.value for e in events.Scalars("batch/target")}
    assert 0 < targets[events.Scalars("batch/n_envs")[shrink].step] < 64 / 1.5
    assert "resize 8 -> 4 envs (shrink: target batch" in capsys.readouterr().out


@pytest.mark.parametrize("bad", [["--n-minibatches", "0"], ["--set", "gae_lambda=2"]])
def test_ppo_bad_numbers(bad, tmp_path, capsys):
    assert main(["cartpole", "--agent", "ppo", *bad, "--run-dir", str(tmp_path / "r")]) == 2
    assert "error:" in capsys.readouterr().err


def test_ppo_checkpoints_when_its_update_count_passes_each_multiple(tmp_path):
    """16 optimizer steps per batch never land on a multiple of 20 except every 5th batch; every pass counts."""
    from rlscale.rundir.checkpoint import list_checkpoints

    run_dir = tmp_path / "ppo-ckpt"
    code = main(["cartpole", "--agent", "ppo", "--pool", "serial", "--n-envs", "4", "--set", "vector_size=2",
                 "--n-steps", "32", "--total-frames", str(10 * 128), "--checkpoint-every", "20",
                 "--keep-checkpoints", "100", "--run-dir", str(run_dir)])
    assert code == 0
    saved = {int(p.stem.split("-")[1]) for p in list_checkpoints(run_dir)}
    passes = {128 * k for k in range(1, 11) if 16 * k // 20 > 16 * (k - 1) // 20}
    assert len(passes) == 8 and passes <= saved
