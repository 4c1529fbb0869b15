"""RLlib integration (optional extra rlscale[rllib]; CI installs it): gradients, tags, resizing, versions."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest

from rlscale.config import build_config
from rlscale.errors import UserError
from rlscale.integrations import rllib as integration
from rlscale.rundir.checkpoint import list_checkpoints
from tests.conftest import interrupt_when, run_in_process, train_subprocess
from tests.floats import largest, sum_tolerance

try:
    integration.check_rllib_version()
except UserError as err:  # the extra is not installed: the group is skipped, not failed
    pytest.skip(f"RLlib extra not installed ({err})", allow_module_level=True)

# slow: RLlib's PPO as the second engine (CI runs it: .ci/run).
pytestmark = [pytest.mark.slow, pytest.mark.rllib]


@pytest.mark.parametrize("version", ["2.59.0", "1.13.0", "3.0.0", "nightly"])
def test_unsupported_rllib_versions_are_refused_with_a_clear_line(version):
    with pytest.raises(UserError, match=r"RLlib .* is not supported .*pip install 'rlscale\[rllib\]'"):
        integration.check_rllib_version(version)


def test_supported_versions_pass():
    assert integration.check_rllib_version("2.60.0") == "2.60.0"
    assert integration.check_rllib_version("2.61.3") == "2.61.3"


def cartpole_config(**overrides):
    return build_config("cartpole", "ppo", {"n_envs": 4, "n_actors": 1, "backend": "rllib", **overrides})


def sample_cartpole_episodes():
    """An RLlib PPO config for CartPole (4 envs, local runner) and 512 steps sampled with it."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
    from ray.tune.registry import register_env

    register_env("rlscale-env", integration.make_env)
    rl_config = integration.ppo_config(cartpole_config()).env_runners(num_env_runners=0)
    runner = SingleAgentEnvRunner(config=rl_config)
    return rl_config, runner, runner.sample(num_timesteps=512, random_actions=False)


def test_an_env_runner_samples_atari_through_the_native_env():
    """RLlib vectorises the native env's one-env adapter (tests/test_written_once.py compares its frames): each
    episode starts as native ones do (its first stack padded black), ends at the run's episode cap, and
    reaches the learner scaled to [0, 1] with the stack last."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
    from ray.tune.registry import register_env

    register_env("rlscale-env", integration.make_env)
    cfg = build_config("pong", "ppo", {"n_envs": 4, "n_actors": 1, "backend": "rllib", "max_episode_frames": 200})
    runner = SingleAgentEnvRunner(config=integration.ppo_config(cfg).env_runners(num_env_runners=0))
    try:
        episodes = runner.sample(num_timesteps=4 * 60, random_actions=True)  # 50 steps an episode at frame skip 4
    finally:
        runner.stop()
    done = [episode for episode in episodes if episode.is_done]
    assert len(done) == 4 and all(episode.is_truncated and len(episode) == 50 for episode in done)
    assert len(episodes) == 8  # and the 4 episodes that follow them
    for episode in episodes:
        obs = episode.get_observations()
        assert obs.dtype == np.float32 and obs.shape[1:] == (84, 84, 4) and 0 <= obs.min() <= obs.max() <= 1
        assert not obs[0, ..., :3].any() and obs[0, ..., 3].any()


def test_grouped_gradient_equals_stock_ppo_gradient_on_the_same_batch():
    """The noise-scale learner applies the minibatch gradient stock PPO applies."""
    from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

    rl_config, runner, episodes = sample_cartpole_episodes()
    env_ids = {ep.custom_data[integration.GROUP_COLUMN] for ep in episodes}
    assert len(env_ids) == 4  # every episode carries its environment's id

    applied: dict[str, list] = {}

    def spy(cls: type, name: str) -> type:
        def apply_gradients(self, gradients_dict):
            # Keys are the learner's own parameter objects: keep the values, in parameter order.
            applied.setdefault(name, []).append([v.detach().clone() for v in gradients_dict.values()])
            return cls.apply_gradients(self, gradients_dict)
        return type(f"Spy{cls.__name__}", (cls,), {"apply_gradients": apply_gradients})

    learners = {}
    for name, cls in (("grouped", integration.rllib_classes()["NoiseScalePPOLearner"]), ("stock", PPOTorchLearner)):
        config = rl_config.copy(copy_frozen=False).learners(learner_class=spy(cls, name))
        learners[name] = config.build_learner(env=runner.env.unwrapped)
    learners["stock"].module.set_state(learners["grouped"].module.get_state())
    results = {}
    for name, learner in learners.items():
        # One epoch, one minibatch: the whole batch, in the same order for both learners.
        results[name] = learner.update(episodes=copy.deepcopy(episodes), num_epochs=1,
                                       timesteps={"num_env_steps_sampled_lifetime": 512})
    (grouped,), (stock,) = applied["grouped"], applied["stock"]
    assert [g.shape for g in grouped] == [g.shape for g in stock]
    # Group-weighted sums against one pass over the 512 rows: rounding only.
    tolerance = sum_tolerance(512, largest(stock))
    for mine, theirs in zip(grouped, stock, strict=True):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), **tolerance)
    samples = results["grouped"]["rlscale"]["noise_grad_sq"].peek()
    assert len(samples) == 1 and np.isfinite(samples[0])  # the grouped path ran and measured
    assert "rlscale" not in results["stock"]

    # The controller's learning rate holds through RLlib's per-update scheduler reset.
    grouped_learner = learners["grouped"]
    grouped_learner.set_lr(1.234e-3)
    grouped_learner.update(episodes=copy.deepcopy(episodes), num_epochs=1,
                           timesteps={"num_env_steps_sampled_lifetime": 1024})
    (_, optimizer), = grouped_learner.get_optimizers_for_module("default_policy")
    assert [g["lr"] for g in optimizer.param_groups] == [1.234e-3]
    runner.stop()


def test_first_epoch_minibatches_are_shuffled_so_env_groups_are_balanced():
    """RLlib walks a train batch's first epoch in episode order; the noise-scale learner shuffles it."""
    rl_config, runner, episodes = sample_cartpole_episodes()
    learner_class = integration.rllib_classes()["NoiseScalePPOLearner"]
    measured: list[tuple[np.ndarray, list[int]]] = []

    def groups(self, batch):
        found = learner_class._groups(self, batch)
        (sub,) = batch.values()
        measured.append((sub[integration.GROUP_COLUMN].numpy(), [len(rows) for rows in found]))
        return found

    spy = type("SpyLearner", (learner_class,), {"_groups": groups})
    learner = rl_config.copy(copy_frozen=False).learners(learner_class=spy).build_learner(env=runner.env.unwrapped)
    learner.update(episodes=episodes, minibatch_size=128, num_epochs=1, shuffle_batch_per_epoch=True,
                   timesteps={"num_env_steps_sampled_lifetime": 512})
    assert len(measured) >= 4  # 512 steps (plus a masked bootstrap row per episode) in minibatches of 128
    for envs, sizes in measured:
        # In episode order the env id changes only at episode boundaries (a handful per
        # minibatch); shuffled rows of 4 envs change it at about 3 rows in 4.
        assert np.count_nonzero(envs[1:] != envs[:-1]) > len(envs) // 2
        assert len(sizes) == 4 and min(sizes) >= 10, sizes  # 32 rows each on average
    runner.stop()


# The two closed-loop runs go through ``main`` in this process, on one Ray for both (as
# tests/test_train.py's): a ``python -m`` each cost ~10 s more in imports and Ray start-up.
# The command line itself is exercised below (the interrupted run).
@pytest.mark.timeout(600)
def test_closed_loop_rllib_run_writes_native_tags_and_changes_its_env_count(ray_instance, tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlscale.train import main

    run_dir = tmp_path / "rllib"
    # A low r and no cool-down: the sqrt target sits far below 8 envs x 32 observations, so
    # the controller must shrink the pool once it has an estimate.
    assert main(["cartpole", "--backend", "rllib", "--n-actors", "2",
                 "--n-envs", "8", "--n-steps", "128", "--total-frames", "6000",
                 "--set", "batch=sqrt", "--set", "r=4", "--set", "cooldown=0", "--min-envs", "2",
                 "--max-envs", "16", "--set", "vector_size=2", "--set", "noise_groups=2",
                 "--run-dir", str(run_dir)]) == 0
    # Down by up to max_shrink_factor (4) at once: to 4 or, at the --min-envs bound, 2.
    assert re.search(r"resize 8 -> [24] envs \(shrink", capsys.readouterr().out)
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for tag in ("noise/b_simple_total", "noise/grad_sq_total", "noise/trace_sigma_total", "rollout/episode_return",
                "batch/n_envs", "batch/size", "batch/target", "train/lr", "train/approx_kl",
                "train/explained_variance", "train/policy_loss", "train/value_loss", "train/entropy"):
        assert tag in tags, tag
    n_envs = [e.value for e in events.Scalars("batch/n_envs")]  # after each update's resize
    assert min(n_envs) < 8
    sizes = [e.value for e in events.Scalars("batch/size")]
    assert sizes[0] >= 8 * 128 and min(sizes) < 8 * 128  # the train batch followed the env count
    returns = [e.value for e in events.Scalars("rollout/episode_return")]
    assert returns and all(r >= 8 for r in returns)  # raw CartPole returns (an episode lasts >= 8 steps)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["finished"] and summary["backend"] == "rllib"
    assert summary["agent_steps"] >= 6_000


@pytest.mark.timeout(600)
def test_auto_batch_control_on_the_rllib_engine_probes_and_identifies_its_cost_model(ray_instance, tmp_path, capsys):
    """--batch auto --backend rllib: RLlib's batches vary by a few observations (episode ends);
    the cost model is keyed by the env count's batch, so it is identified after the probe."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlscale.train import main

    run_dir = tmp_path / "rllib-auto"
    assert main(["cartpole", "--backend", "rllib", "--n-actors", "2",
                 "--n-envs", "8", "--n-steps", "32", "--set", "vector_size=2", "--set", "noise_groups=2",
                 "--batch", "auto", "--min-envs", "2", "--max-envs", "32", "--set", "cooldown=500",
                 "--total-frames", "15000", "--run-dir", str(run_dir)]) == 0
    out = capsys.readouterr().out
    # Down while nothing is learned (auto does not grow before the return rises), up after.
    learned = out.find("auto may now grow the batch")
    probe = out.index("probe: timing a second batch size")
    direction = "resize 8 -> 4 envs (shrink: " if learned < 0 or probe < learned else "resize 8 -> 16 envs (grow: "
    assert out.rfind("\n", 0, probe) == out.rfind(direction, 0, probe) - 1
    # Identified after the probe: the model's tags (whether B* then leaves the hysteresis
    # band depends on this machine's a and b).
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    assert {"perf/overhead_seconds", "perf/seconds_per_observation", "batch/exchange_rate",
            "batch/predicted_speedup"} <= set(events.Tags()["scalars"])
    assert all(e.value > 0 for e in events.Scalars("perf/seconds_per_observation"))


def test_rllib_backend_bad_input_is_one_line():
    result = run_in_process(["rlscale.train", "cartpole", "--backend", "rllib", "--agent", "a2c"])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --backend rllib runs PPO only: add --agent ppo (or leave --agent out)"]


@pytest.mark.timeout(600)
def test_interrupted_rllib_run_resumes_without_gaps_or_duplicates(ray_instance, tmp_path, capsys):
    """Interrupted as a user would interrupt ``python -m rlscale.train``; resumed through ``main`` on
    the module's Ray (a second interpreter and Ray start-up cost ~10 s)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlscale.train import main

    run_dir = tmp_path / "run"
    proc = train_subprocess(["cartpole", "--backend", "rllib", "--n-actors", "1", "--n-envs", "4",
                             "--total-frames", "4000", "--checkpoint-every", "16", "--run-dir", str(run_dir)])
    err = interrupt_when(proc, lambda: bool(list_checkpoints(run_dir)), timeout=240)
    assert proc.returncode == 130
    assert "resume with: python -m rlscale.train --resume" in err
    before = json.loads((run_dir / "summary.json").read_text())
    assert 0 < before["agent_steps"] < 4000 and not before["finished"]
    assert main(["--resume", str(run_dir)]) == 0
    assert f"resuming from {before['agent_steps']:,} agent steps" in capsys.readouterr().out
    after = json.loads((run_dir / "summary.json").read_text())
    assert after["finished"] and after["agent_steps"] >= 4000
    assert after["episodes"] > before["episodes"]
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    steps = [e.step for e in events.Scalars("batch/size")]
    assert steps == sorted(set(steps)) and steps[-1] == after["agent_steps"]  # no duplicates
    # One checkpoint layout for both engines: RLlib's own files sit beside each checkpoint
    # file under its name, and go with it when it is pruned (--keep-checkpoints 3).
    saved = list_checkpoints(run_dir)
    rllib_dirs = sorted((run_dir / "checkpoints").glob("ckpt-*.rllib"))
    assert 1 <= len(saved) <= 3 and [p.stem for p in rllib_dirs] == [p.stem for p in saved]
