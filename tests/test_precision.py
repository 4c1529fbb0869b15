"""--learner-precision auto: the decision rule, and the start-up measurement on real networks."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from rlscale.env import EnvSpec, sample_observations
from rlscale.nets import build_network
from rlscale.precision import MIN_SPEEDUP, TOLERANCE, choose_precision, pick


def test_bf16_only_when_clearly_faster_and_close_to_fp32():
    assert pick(1.0, 0.5, 0.01) == "bf16"
    assert pick(1.0, 1.0 / MIN_SPEEDUP * 1.01, 0.01) == "fp32"  # within timing noise: fp32 is exact
    assert pick(1.0, 0.5, TOLERANCE * 1.5) == "fp32"  # fast but wrong
    assert pick(0.1, 1.0, 0.0) == "fp32"  # a CPU without bf16 units


def test_networks_without_convolutions_stay_fp32_unmeasured():
    spec = EnvSpec((4,), "float32", 2, False)
    choice = choose_precision(build_network(spec, "auto", 64), torch.zeros(8, 4))
    assert choice.precision == "fp32" and choice.fp32_seconds is None
    assert "not measured" in choice.describe()


@pytest.mark.parametrize("shape", [(10, 10, 4), (4, 84, 84)])  # MinAtar's network, the Nature CNN
def test_the_start_up_measurement_times_both_and_leaves_the_model_alone(shape):
    spec = EnvSpec(shape, "uint8" if shape[0] == 4 else "bool", 3, True)
    torch.manual_seed(0)
    model = build_network(spec, "auto", 64)
    before = copy.deepcopy(model.state_dict())
    obs = torch.from_numpy(sample_observations(spec, 16))
    assert obs.dtype == (torch.uint8 if shape[0] == 4 else torch.bool)
    choice = choose_precision(model, obs, repeats=2)
    assert choice.fp32_seconds > 0 and choice.bf16_seconds > 0
    assert 0 < choice.bf16_error < TOLERANCE  # bf16 rounding, no more
    assert choice.precision == pick(choice.fp32_seconds, choice.bf16_seconds, choice.bf16_error)
    assert f"bf16 {choice.fp32_seconds / choice.bf16_seconds:.2f}x the speed of fp32" in choice.describe()
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, before[name])
    assert all(p.grad is None for p in model.parameters())
    assert np.isfinite(choice.bf16_error)
