"""Optimizers, including RMSprop in the form TensorFlow 1 and Baselines' A2C used.

torch.optim.RMSprop starts the running mean square at 0 and adds eps outside
the square root; with lr 7e-4 its first A2C step on Pong is huge (docs/ARCHITECTURE.md:
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
        # One multi-tensor (foreach) call per operation over all parameters: the same
        # numbers as a loop over them, 2.0 ms against 2.2 ms for the Nature CNN (one thread).
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p in params:
                if not self.state[p]:
                    self.state[p]["square_avg"] = torch.ones_like(p)
            grads = [p.grad for p in params]
            square_avgs = [self.state[p]["square_avg"] for p in params]
            torch._foreach_mul_(square_avgs, group["alpha"])
            torch._foreach_addcmul_(square_avgs, grads, grads, value=1 - group["alpha"])
            denominators = torch._foreach_add(square_avgs, group["eps"])
            torch._foreach_sqrt_(denominators)
            torch._foreach_addcdiv_(params, grads, denominators, value=-group["lr"])


def make_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float, alpha: float,
                   eps: float) -> Optimizer:
    if name == "rmsprop_tf":
        return RMSpropTF(params, lr=lr, alpha=alpha, eps=eps)
    if name == "rmsprop":  # torch's: fine on small MLPs (SB3's A2C default), not on Atari
        return torch.optim.RMSprop(params, lr=lr, alpha=alpha, eps=eps)
    if name == "adam":
        # Fused: one kernel for the whole step (1.1 ms against 12 ms for the Nature CNN on a
        # CPU, one thread; the same update up to float rounding). torch < 2.4 has no fused
        # CPU Adam: its multi-tensor one then.
        params = list(params)
        try:
            return torch.optim.Adam(params, lr=lr, eps=eps, fused=True)
        except (RuntimeError, TypeError):
            return torch.optim.Adam(params, lr=lr, eps=eps, foreach=True)
    if name == "sgd":  # plain SGD: the metric B_simple assumes
        return torch.optim.SGD(params, lr=lr)
    raise ValueError(f"unknown optimizer {name}")


def set_lr(optimizer: Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
