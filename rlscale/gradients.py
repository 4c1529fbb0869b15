"""Gradients by groups of environments: the update and the noise-scale norms in one pass.

The batch is split into k groups of whole environments (groups are
independent even though steps within one trajectory are not). Each group's
mean loss is differentiated on its own; the size-weighted mean of the group
gradients is exactly the gradient of the batch's mean loss, so it is the
update, and the squared norms of the group gradients and of their mean are
what the noise estimator needs (DESIGN §2). k backward passes over B/k
observations cost about one backward pass over B.

Large fully connected layers (the Nature CNN's 3136x512 layer holds 95% of its
parameters) are not differentiated per group by autograd. Their weight gradient
over a group is delta^T X (output gradients times inputs, both captured by
hooks), so its squared norm is sum((delta delta^T) * (X X^T)): two n x n Gram
matrices for a group of n rows, instead of materialising, norming and summing a
1.6M-entry matrix per group. The weight gradient of the whole batch is one
matmul at the end. That is what keeps the measurement's cost near zero
(`scripts/bench_noise.py`).

Each loss is given as two parts, policy and value. On the updates where the
parts are measured, each part gets its own backward pass through the shared
trunk (one forward, two backward passes per group); the total's gradient is
then their sum, so the parts cost one extra backward pass and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

# A group's loss: returns (policy part, value part, statistics to average).
GroupLoss = Callable[[], tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]]


@dataclass
class GroupedGradient:
    sizes: list[int]
    sq_norms: dict[str, list[float]] = field(default_factory=dict)  # per part: |g_j|^2
    big_sq_norms: dict[str, float] = field(default_factory=dict)  # per part: |G_big|^2
    stats: dict[str, float] = field(default_factory=dict)  # size-weighted means
    finite: bool = True


def _sq_norm(grads: Sequence[torch.Tensor]) -> float:
    if not grads:
        return 0.0
    return float(torch.stack(torch._foreach_norm(grads)).square().sum())


def _gram_sq_norm(delta: torch.Tensor, x: torch.Tensor) -> float:
    """|delta^T x|_F^2 without forming delta^T x (in fp32 even when the layer ran in bf16)."""
    delta, x = delta.float(), x.float()
    return float(((delta @ delta.T) * (x @ x.T)).sum())


class _LinearTap:
    """Records a Linear layer's input and the gradients reaching its output."""

    def __init__(self, layer: torch.nn.Linear) -> None:
        self.layer = layer
        self.inputs: torch.Tensor | None = None
        self.delta: torch.Tensor | None = None
        self.handle = layer.register_forward_hook(self._forward)

    def _forward(self, module, args, output) -> None:  # noqa: ARG002 - hook API
        if args[0].dim() != 2:
            raise ValueError("Gram-measured Linear layers need 2-d inputs (rows x features)")
        self.inputs = args[0].detach()
        output.register_hook(self._backward)

    def _backward(self, grad: torch.Tensor) -> None:
        self.delta = grad.detach()

    def take_delta(self) -> torch.Tensor:
        """The output gradient of the last backward pass (zeros if it did not reach the layer)."""
        delta = self.delta if self.delta is not None else torch.zeros(
            self.inputs.shape[0], self.layer.out_features, dtype=self.inputs.dtype, device=self.inputs.device)
        self.delta = None
        return delta


def grouped_gradient(params: list[torch.nn.Parameter], group_losses: Sequence[GroupLoss],
                     sizes: Sequence[int], measure: bool, parts: bool,
                     gram_layers: Sequence[torch.nn.Linear] = ()) -> GroupedGradient:
    """Leave the gradient of the batch's mean loss in ``p.grad``; return the norms.

    ``measure`` records |g_j|^2 of the total loss per group; ``parts`` also
    records them for the policy and value parts separately. The weights of
    ``gram_layers`` (large Linear layers with 2-d inputs, all in ``params``)
    are handled by the Gram route described above while measuring.
    """
    total_size = float(sum(sizes))
    names = ["total", "policy", "value"] if parts else ["total"]
    gram_layers = list(gram_layers) if measure else []
    gram_ids = {id(layer.weight) for layer in gram_layers}
    autograd_params = [p for p in params if id(p) not in gram_ids]
    taps = [_LinearTap(layer) for layer in gram_layers]
    sums = {name: [torch.zeros_like(p) for p in autograd_params] for name in names}
    # Per gram layer: the inputs of every group, and per part the weighted output gradients.
    tap_inputs: list[list[torch.Tensor]] = [[] for _ in taps]
    tap_deltas = {name: [[] for _ in taps] for name in names}
    out = GroupedGradient(sizes=list(sizes))
    for name in names:
        out.sq_norms[name] = []
    stats: dict[str, float] = {}
    try:
        for loss_fn, size in zip(group_losses, sizes, strict=True):
            weight = size / total_size
            policy_loss, value_loss, group_stats = loss_fn()
            if parts:
                g_policy = torch.autograd.grad(policy_loss, autograd_params, retain_graph=True,
                                               materialize_grads=True)
                d_policy = [tap.take_delta() for tap in taps]
                g_value = torch.autograd.grad(value_loss, autograd_params, materialize_grads=True)
                d_value = [tap.take_delta() for tap in taps]
                grads = {"total": torch._foreach_add(g_policy, g_value), "policy": g_policy, "value": g_value}
                deltas = {"total": [a + b for a, b in zip(d_policy, d_value, strict=True)],
                          "policy": d_policy, "value": d_value}
            else:
                grads = {"total": torch.autograd.grad(policy_loss + value_loss, autograd_params,
                                                      materialize_grads=True)}
                deltas = {"total": [tap.take_delta() for tap in taps]}
            for i, tap in enumerate(taps):
                tap_inputs[i].append(tap.inputs)
            for name, g in grads.items():
                if measure:
                    gram = sum(_gram_sq_norm(d, tap.inputs) for d, tap in zip(deltas[name], taps, strict=True))
                    out.sq_norms[name].append(_sq_norm(g) + gram)
                torch._foreach_add_(sums[name], g, alpha=weight)
                for i, d in enumerate(deltas[name]):
                    tap_deltas[name][i].append(weight * d)
            for key, value in group_stats.items():
                stats[key] = stats.get(key, 0.0) + weight * float(value.detach())
    finally:
        for tap in taps:
            tap.handle.remove()
    inputs = [torch.cat(xs) for xs in tap_inputs]
    for name in names:
        deltas = [torch.cat(ds) for ds in tap_deltas[name]]
        out.big_sq_norms[name] = _sq_norm(sums[name]) + sum(
            _gram_sq_norm(d, x) for d, x in zip(deltas, inputs, strict=True))
    out.finite = all(torch.isfinite(torch.tensor(v)) for v in out.big_sq_norms.values()) and all(
        torch.isfinite(torch.tensor(v)) for v in stats.values()
    )
    for p, g in zip(autograd_params, sums["total"], strict=True):
        p.grad = g
    for layer, d, x in zip(gram_layers, (torch.cat(ds) for ds in tap_deltas["total"]), inputs, strict=True):
        # The batch's weight gradient: sum over groups of w_j delta_j^T x_j.
        layer.weight.grad = (d.float().T @ x.float()).to(layer.weight.dtype)
    out.stats = stats
    return out
