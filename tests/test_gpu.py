"""The learner on a CUDA GPU: the same update and the same noise readings as on the CPU.

Skipped where torch sees no GPU (CI has none); run where one is: ``python -m pytest tests/test_gpu.py``.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from rlscale.agents.a2c import A2CLearner
from rlscale.agents.ppo import PPOLearner
from rlscale.config import build_config
from rlscale.models.nets import build_network
from rlscale.models.precision import choose_precision
from rlscale.rollout.worker import flat_weights
from rlscale.train import main
from tests.floats import largest, sum_tolerance
from tests.test_learner import SPECS, random_batch
from tests.test_train import scalars

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch sees none here)")

DEVICES = ("cpu", "cuda")
LEARNERS = {"a2c": A2CLearner, "ppo": PPOLearner}
# Every estimator on every measured batch; each batch measured at once (no settling wait). TF-style RMSprop
# whatever the algorithm: Adam's first steps amplify a gradient's rounding near g = 0 (tests/floats.py; with
# PPO's Adam the two devices' Nature CNN weights differed by 1.5e-3 after 32 steps on an H200).
MEASURE_ALL = {"measure_noise": True, "noise_parts_every": 1, "curvature_every": 1, "noise_settle": 0,
               "learner_precision": "fp32", "optimizer": "rmsprop_tf"}


@pytest.fixture
def exact_fp32():
    """cuDNN's convolutions default to TF32 (10-bit mantissas) on Ampere and later GPUs; against the CPU's
    fp32, off for the comparison (training keeps the default)."""
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = before


@pytest.mark.parametrize("algo", ["a2c", "ppo"])
@pytest.mark.parametrize("kind", ["mlp", "nature_cnn"])
def test_an_update_on_the_gpu_gives_the_cpus_parameters_and_noise_readings(algo, kind, exact_fp32):
    spec = SPECS[kind]
    env = "pong" if spec.is_image else "cartpole"
    cfg = build_config(env, algo, {"n_envs": 8, "n_steps": 16 if algo == "ppo" else 5, **MEASURE_ALL})
    torch.manual_seed(0)
    model = build_network(spec, "auto", 64)
    batch = random_batch(spec, cfg.agent.n_steps, 8)
    batch.logprobs[:] = np.log(1.0 / spec.n_actions)
    start = torch.from_numpy(flat_weights(model))
    learners = {device: LEARNERS[algo].from_config(copy.deepcopy(model).to(device), cfg) for device in DEVICES}
    for learner in learners.values():
        for _ in range(2):
            learner.update(batch)
    assert learners["cuda"].device.type == "cuda"
    cpu, gpu = (torch.from_numpy(flat_weights(learners[d].model)) for d in ("cpu", "cuda"))
    # One learner's updates sum at most the batch's rows per weight, in a different order on each device.
    rows = cfg.agent.n_steps * 8 * (CONV_POSITIONS if spec.is_image else 1)
    torch.testing.assert_close(gpu, cpu, **sum_tolerance(2 * rows, largest(cpu - start)))
    readings = {d: learner.noise.metrics() for d, learner in learners.items()}
    assert readings["cpu"].keys() == readings["cuda"].keys()
    # Every estimator's two averages (a ratio is left out where its denominator averaged <= 0: undefined).
    for tag in ("noise/grad_sq_total", "noise/trace_sigma_total", "noise/gpg", "noise/trace_p_sigma",
                "noise/ghg", "noise/trace_h_sigma", "noise/gphpg", "noise/trace_php_sigma"):
        assert tag in readings["cpu"], tag
    for tag, value in readings["cpu"].items():
        # The estimators difference squared norms (|G_small|^2 - |G_big|^2): rounding is amplified by the
        # ratio of the terms to their difference, at most ~100x for these batches; fp32 carries ~1e-7.
        assert readings["cuda"][tag] == pytest.approx(value, rel=1e-3, abs=1e-6), tag


# The Nature CNN's first conv sums each weight's gradient over its 20x20 output positions per row.
CONV_POSITIONS = 20 * 20


def test_the_precision_probe_on_the_gpu_times_both_and_ignores_the_cpus_flags():
    spec = SPECS["nature_cnn"]
    model = build_network(spec, "auto", 64).cuda()
    obs = torch.randint(0, 256, (256, *spec.obs_shape), dtype=torch.uint8, device="cuda")
    choice = choose_precision(model, obs)
    assert choice.fp32_seconds > 0 and choice.bf16_seconds > 0
    assert choice.bf16_units is None and choice.rounds == 1  # the CPU's flags are no prior for a GPU
    assert "CPU" not in choice.describe()
    assert choice.bf16_error < 0.15  # bf16 autocast on the GPU computes the same gradient within rounding


def test_a_run_trains_its_learner_on_the_gpu_and_measures_every_estimator(tmp_path, capsys):
    run = tmp_path / "run"
    main(["cartpole", "--pool", "serial", "--batch", "critical", "--total-frames", "6000", "--set", "curvature_every=2",
          "--run-dir", str(run)])
    out = capsys.readouterr().out
    assert "learner: cuda" in out
    assert "resize" in out  # the controller moved the batch on what the GPU learner measured
    summary = json.loads((run / "summary.json").read_text())
    assert summary["finished"] and summary["agent_steps"] >= 6000
    logged = scalars(run).Tags()["scalars"]
    for tag in ("noise/b_simple_total", "noise/b_precond", "noise/b_noise", "noise/b_precond_hessian",
                "batch/target"):
        assert tag in logged, tag
