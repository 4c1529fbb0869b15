"""Optimizers, including RMSprop in the form TensorFlow 1 and Baselines' A2C used.

torch.optim.RMSprop starts the running mean square at 0 and adds eps outside
the square root; with lr 7e-4 its first A2C step on Pong is huge (DESIGN §7:
gradient norm 0.73 -> 788 after one update). TF's RMSProp starts the mean
square at 1 and puts eps inside the root. Stable-Baselines3 ships the same
fix as ``RMSpropTFLike``.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.optim import Optimizer


class RMSpropTF(Optimizer):
    """ms <- alpha*ms + (1-alpha)*g^2 (ms starts at 1);  p <- p - lr * g / sqrt(ms + eps)."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, alpha: float = 0.99,
                 eps: float = 1e-5) -> None:
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None) -> None:  # noqa: ARG002 - the Optimizer signature
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["square_avg"] = torch.ones_like(p)
                square_avg = state["square_avg"]
                square_avg.mul_(group["alpha"]).addcmul_(p.grad, p.grad, value=1 - group["alpha"])
                p.addcdiv_(p.grad, square_avg.add(group["eps"]).sqrt_(), value=-group["lr"])


def make_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float, alpha: float,
                   eps: float) -> Optimizer:
    if name == "rmsprop_tf":
        return RMSpropTF(params, lr=lr, alpha=alpha, eps=eps)
    if name == "rmsprop":  # torch's: fine on small MLPs (SB3's A2C default), not on Atari
        return torch.optim.RMSprop(params, lr=lr, alpha=alpha, eps=eps)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, eps=eps)
    if name == "sgd":  # plain SGD: the metric B_simple assumes
        return torch.optim.SGD(params, lr=lr)
    raise ValueError(f"unknown optimizer {name}")


def set_lr(optimizer: Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
