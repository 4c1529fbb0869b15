"""The total loss's noise scale in the optimizer's and the Hessian's metric (docs/noise-scale.md).

B_simple = tr(Sigma)/|G|^2 measures the noise in the plain Euclidean metric. What sets
a batch's value for an optimizer step is the metric the step moves in:

* **B_P** = tr(P Sigma) / G^T P G, with P the diagonal preconditioner the optimizer
  divides by (RMSprop's and Adam's 1/(sqrt(v) + eps), read from its state): the
  same eq. A.2 on P-weighted squared norms of the env groups' gradients.
* **B_noise** = tr(H Sigma) / G^T H G (eq. 2.8), H the Hessian of the loss. Each
  group's gradient g_i is multiplied by the Hessian of the *next* group's loss
  (a Hessian-vector product by double backward), so the matrix never shares rows
  with the vector it multiplies: E[g_i^T H_k g_i] = G^T H G + tr(H Sigma)/b_i,
  E[g_j^T H_k g_i] = G^T H G for three different groups (``noise.metric_estimate``).
  The same G^T H G gives eps_max = |G|^2 / G^T H G (eq. 2.6).

Cost per measured update (every ``curvature_every`` batches), counted by
``tests/test_metrics.py``: per env group one forward pass and one backward pass
that keeps its graph, then one double backward (the Hessian-vector product):
k forward and 2k backward passes over groups of B/k rows. On Pong's Nature CNN
on a 2-core CPU that took 4.4x (640 observations) to 8.5x (80) the time of an
unmeasured update (``benchmarks/bench_noise.py --only "total + metrics"``):
double backward through convolutions is slow there, hence the sparse default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from rlscale.agents.gradients import RowsLoss
from rlscale.agents.optim import RMSpropTF
from rlscale.control.noise import NoiseSample, estimate, metric_estimate


@dataclass
class MetricSamples:
    """One measured update's unbiased estimates in each metric (None where the metric is not available);
    one field per ``tags.METRICS`` entry, named as it."""

    precond: NoiseSample | None
    hessian: NoiseSample | None
    precond_hessian: NoiseSample | None


def preconditioner(optimizer: torch.optim.Optimizer, params: Sequence[torch.nn.Parameter]) -> list[torch.Tensor] | None:
    """The diagonal P of the optimizer's next step (step = -lr * P * g), from its state.

    None for an optimizer without one (plain SGD) and before the first step, when
    the state does not exist yet.
    """
    group_of = {id(q): g for g in optimizer.param_groups for q in g["params"]}
    out = []
    for p in params:
        state = optimizer.state.get(p)
        if not state:
            return None
        group = group_of[id(p)]
        eps = group["eps"]
        if "exp_avg_sq" in state:  # Adam: the bias-corrected second moment, eps outside the root
            v_hat = state["exp_avg_sq"] / (1.0 - group["betas"][1] ** float(state["step"]))
            out.append(1.0 / (v_hat.sqrt() + eps))
        elif isinstance(optimizer, RMSpropTF):  # eps inside the root
            out.append(1.0 / (state["square_avg"] + eps).sqrt())
        elif "square_avg" in state:  # torch's RMSprop: eps outside the root
            out.append(1.0 / (state["square_avg"].sqrt() + eps))
        else:
            return None
    return out


def _flat(tensors: Sequence[torch.Tensor | None], like: Sequence[torch.nn.Parameter]) -> torch.Tensor:
    return torch.cat([(torch.zeros_like(p) if t is None else t).reshape(-1) for t, p in zip(tensors, like, strict=True)])


def metric_samples(params: Sequence[torch.nn.Parameter], loss: RowsLoss, groups: Sequence[np.ndarray],
                   precond: list[torch.Tensor] | None) -> MetricSamples:
    """The env groups' gradients of the total loss, and from them each metric's estimates.

    ``groups``: at least three sets of whole environments' rows (the Hessian's cross
    terms need a third group). Leaves ``p.grad`` untouched.
    """
    if len(groups) < 3:
        raise ValueError("the metrics need at least three env groups")
    params = list(params)
    sizes = [int(len(rows)) for rows in groups]
    graphs, flats = [], []
    for rows in groups:
        policy, value, _ = loss(rows)
        grads = torch.autograd.grad(policy + value, params, create_graph=True, allow_unused=True)
        graphs.append(grads)
        flats.append(_flat([None if g is None else g.detach() for g in grads], params).double())
    total = float(sum(sizes))
    big = sum(f * (b / total) for f, b in zip(flats, sizes, strict=True))

    precond_sample, weight = None, None
    if precond is not None:
        weight = _flat(precond, params).double()
        precond_sample = estimate([float((f * f * weight).sum()) for f in flats], sizes,
                                  float((big * big * weight).sum()))
    hessian, precond_hessian = _hessian_samples(params, graphs, flats, sizes, weight)
    return MetricSamples(precond_sample, hessian, precond_hessian)


def _hessian_samples(params: Sequence[torch.nn.Parameter], graphs: list, flats: list[torch.Tensor],
                     sizes: list[int], weight: torch.Tensor | None) -> tuple[NoiseSample | None, NoiseSample | None]:
    """G^T H G, tr(H Sigma) and, with a preconditioner P, G^T PHP G, tr(PHP Sigma).

    The Hessian of group h's loss multiplies the previous group's gradient g_i (and,
    for PHP, P g_i), and the products are dotted with every group but h: h's own
    gradient would share rows with its Hessian.
    """
    k = len(graphs)
    vectors = {"hessian": list(flats)}
    if weight is not None:
        vectors["precond_hessian"] = [weight * f for f in flats]
    terms = {metric: ([0.0] * k, []) for metric in vectors}
    offsets = np.cumsum([0] + [p.numel() for p in params])
    for h in range(k):
        i = (h - 1) % k
        for n, (metric, vs) in enumerate(vectors.items()):
            vector = [vs[i][a:b].view_as(p).to(p.dtype) for a, b, p in zip(offsets[:-1], offsets[1:], params, strict=True)]
            dot = sum((g * v).sum() for g, v in zip(graphs[h], vector, strict=True)
                      if g is not None and g.requires_grad)
            if not isinstance(dot, torch.Tensor):  # no parameter has a second derivative
                return None, None
            last = n == len(vectors) - 1
            hv = _flat(torch.autograd.grad(dot, params, allow_unused=True, retain_graph=not last), params).double()
            diagonal, cross = terms[metric]
            diagonal[i] = float(vs[i] @ hv)
            cross.extend(float(vs[j] @ hv) for j in range(k) if j not in (i, h))
    samples = {metric: metric_estimate(sizes, *terms[metric]) for metric in terms}
    return samples["hessian"], samples.get("precond_hessian")
