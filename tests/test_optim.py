"""The optimizers' fast paths (fused Adam, multi-tensor RMSprop) take the steps of their plain formulas."""

from __future__ import annotations

import copy

import torch

from rlscale.agents.optim import make_optimizer
from rlscale.envs.vector import EnvSpec
from rlscale.models.nets import build_network
from tests.floats import largest, sum_tolerance


def nature_cnn_and_gradients(steps: int) -> tuple[torch.nn.Module, list[list[torch.Tensor]]]:
    torch.manual_seed(0)
    model = build_network(EnvSpec((4, 84, 84), "uint8", 6, True), "auto", 64)
    grads = [[torch.randn_like(p) * 1e-2 for p in model.parameters()] for _ in range(steps)]
    return model, grads


def take_steps(model: torch.nn.Module, optimizer: torch.optim.Optimizer, grads: list[list[torch.Tensor]]) -> None:
    for step in grads:
        for p, g in zip(model.parameters(), step, strict=True):
            p.grad = g.clone()
        optimizer.step()


def test_adam_is_fused_and_steps_as_the_single_tensor_adam():
    model, grads = nature_cnn_and_gradients(3)
    reference, start = copy.deepcopy(model), copy.deepcopy(model)
    fused = make_optimizer("adam", model.parameters(), lr=2.5e-4, alpha=0.99, eps=1e-5)
    assert fused.defaults["fused"]  # torch >= 2.4 has a fused CPU Adam
    take_steps(model, fused, grads)
    take_steps(reference, torch.optim.Adam(reference.parameters(), lr=2.5e-4, eps=1e-5, foreach=False), grads)
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        # Elementwise arithmetic in another order: a few roundings of the weight per step.
        torch.testing.assert_close(p.detach(), q.detach(), **sum_tolerance(len(grads), largest(q)))
    # Three steps of ~lr each moved every weight far beyond that tolerance: the comparison says something.
    for p, s in zip(model.parameters(), start.parameters(), strict=True):
        assert float((p - s).detach().abs().mean()) > 1e-4


def test_rmsprop_tf_multi_tensor_step_is_exactly_its_formula():
    """ms <- alpha ms + (1 - alpha) g^2 from ms = 1; p <- p - lr g / sqrt(ms + eps), one tensor at a time."""
    model, grads = nature_cnn_and_gradients(3)
    expected = [p.detach().clone() for p in model.parameters()]
    mean_squares = [torch.ones_like(p) for p in expected]
    for step in grads:
        for p, ms, g in zip(expected, mean_squares, step, strict=True):
            ms.mul_(0.99).addcmul_(g, g, value=0.01)
            p.addcdiv_(g, (ms + 1e-5).sqrt(), value=-7e-4)
    take_steps(model, make_optimizer("rmsprop_tf", model.parameters(), lr=7e-4, alpha=0.99, eps=1e-5), grads)
    for p, q in zip(model.parameters(), expected, strict=True):
        assert torch.equal(p.detach(), q)
