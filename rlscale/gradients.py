"""Gradients by groups of environments: the update and the noise-scale norms in one pass.

The batch is split into k groups of whole environments (groups are
independent even though steps within one trajectory are not). Each group's
mean loss is differentiated on its own; the size-weighted mean of the group
gradients is exactly the gradient of the batch's mean loss, so it is the
update, and the squared norms of the group gradients and of their mean are
what the noise estimator needs (DESIGN §2). k backward passes over B/k
observations cost about one backward pass over B.

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
    return float(torch.stack(torch._foreach_norm(grads)).square().sum())


def grouped_gradient(params: list[torch.nn.Parameter], group_losses: Sequence[GroupLoss],
                     sizes: Sequence[int], measure: bool, parts: bool) -> GroupedGradient:
    """Leave the gradient of the batch's mean loss in ``p.grad``; return the norms.

    ``measure`` records |g_j|^2 of the total loss per group; ``parts`` also
    records them for the policy and value parts separately.
    """
    total_size = float(sum(sizes))
    names = ["total", "policy", "value"] if parts else ["total"]
    sums = {name: [torch.zeros_like(p) for p in params] for name in names}
    out = GroupedGradient(sizes=list(sizes))
    for name in names:
        out.sq_norms[name] = []
    stats: dict[str, float] = {}
    for loss_fn, size in zip(group_losses, sizes, strict=True):
        weight = size / total_size
        policy_loss, value_loss, group_stats = loss_fn()
        if parts:
            g_policy = torch.autograd.grad(policy_loss, params, retain_graph=True,
                                           materialize_grads=True)
            g_value = torch.autograd.grad(value_loss, params, materialize_grads=True)
            g_total = torch._foreach_add(g_policy, g_value)
            grads = {"total": g_total, "policy": g_policy, "value": g_value}
        else:
            grads = {"total": torch.autograd.grad(policy_loss + value_loss, params)}
        for name, g in grads.items():
            if measure:
                out.sq_norms[name].append(_sq_norm(g))
            torch._foreach_add_(sums[name], g, alpha=weight)
        for key, value in group_stats.items():
            stats[key] = stats.get(key, 0.0) + weight * float(value.detach())
    for name in names:
        out.big_sq_norms[name] = _sq_norm(sums[name])
    out.finite = all(torch.isfinite(torch.tensor(v)) for v in out.big_sq_norms.values()) and all(
        torch.isfinite(torch.tensor(v)) for v in stats.values()
    )
    for p, g in zip(params, sums["total"], strict=True):
        p.grad = g
    out.stats = stats
    return out
