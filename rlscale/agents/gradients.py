"""Gradients by env groups: the update and the noise-scale norms together, behind ``backward``.

The batch is split into k groups of whole environments (groups are
independent even though steps within one trajectory are not). The gradient of
each group's mean loss, g_j, is what the noise estimator needs (docs/noise-scale.md):
the squared norms |g_j|^2 and that of their size-weighted mean, which is
exactly the gradient of the batch's mean loss and so is also the update.

Two routes give them; ``backward`` picks one by measured cost. The
shared-pass route runs the network once forward and once backward over a pass
of several groups and forms each layer's per-group weight gradients from the
layer's inputs and output gradients (the losses are sums over rows, so a
group's gradient is a sum over its rows). The per-group route differentiates
each group's loss on its own, in passes of about ``chunk_rows`` rows (measuring
the total at 1,280 observations took 1.21x the unmeasured update with a pass per
320-row group, 1.01x in passes of ~128 rows), which for small
groups costs more than one pass over B (each small pass reads every weight
again) but otherwise ran as fast or faster, does the policy/value split, and
works for any layer type. ``benchmarks/bench_noise.py`` times both.

Large fully connected layers (the Nature CNN's 3136x512 layer holds 95% of its
parameters) get no per-group weight gradient from autograd. Their weight
gradient over a group is delta^T X (the gradients reaching the layer's output
times its inputs), so its squared norm is sum((delta delta^T) * (X X^T)): two
n x n Gram matrices for a group of n rows (n^2 (in + out) multiply-adds),
instead of materialising, norming and summing a 1.6M-entry matrix per group
(n in out). Above in*out/(in+out) rows (~440 for that layer) the product
itself is cheaper and is formed instead (``gram_is_cheaper``). The weight
gradient of the whole batch is one matmul, and the batch's norm is read from it.

Each loss is given as two parts, policy and value. On the updates where the
parts are measured, each part gets its own backward pass through the shared
trunk (always by the per-group route, which measured faster for this); the
total's gradient is then their sum, so the parts cost one extra backward pass.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from rlscale import tags
from rlscale.agents.side_by_side import SideBySide

# The loss over a set of batch rows: (mean policy part, mean value part, statistics to average).
LossParts = tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]
RowsLoss = Callable[[np.ndarray], LossParts]

# Route policy, measured with benchmarks/bench_noise.py (docs/noise-scale.md):
# the Nature CNN's 3136x512 layer and larger get Gram-matrix norms; smaller layers are
# cheaper the plain way.
GRAM_MIN_WEIGHTS = 100_000
# On CPU, forward/backward passes of ~80-160 rows ran fastest per row (cache-sized),
# so larger batches of a convolutional network are split into passes this big.
CPU_CHUNK_ROWS = 128
# PPO's minibatches (256 rows at the defaults) in one pass each instead of two of 128:
# its update took 0.88-0.94x the time (Pong, fp32, AVX2-only fp32 and bf16; MinAtar
# 0.79-0.87x; benchmarks/profile_ppo.py). End to end 0.93x with a bf16 learner and 0.98x
# AVX2-only when switched update by update; AVX2 rows of 30-40 s read 0.89-1.02x the speed
# on a host that drifted +-10 % (bench_ppo_options.py --compare passes;
# docs/performance.md). A2C's batches keep ~128.
PPO_CPU_CHUNK_ROWS = 256
# Groups measured in a shared pass beat a pass per group only for small groups, where
# each small pass re-reads every weight; larger groups ran faster one pass per group.
SHARED_PASS_MAX_GROUP_ROWS = 32
MEASURED_LAYERS = (torch.nn.Linear, torch.nn.Conv2d)


def env_groups(n_envs: int, k: int) -> list[np.ndarray]:
    """Column indices of the estimator's k env groups, whole environments each (sizes differ by at most one)."""
    return [cols for cols in np.array_split(np.arange(n_envs), min(k, n_envs)) if cols.size]


def pass_count(rows: int, chunk_rows: int) -> int:
    """Forward/backward passes for ``rows`` rows in passes of about ``chunk_rows`` (0: one pass)."""
    return max(1, round(rows / chunk_rows)) if chunk_rows > 0 else 1


def row_chunks(sizes: list[int], chunk_rows: int) -> list[list[int]]:
    """Consecutive items (groups of rows, or single rows) packed into passes of about ``chunk_rows`` rows.

    Returns the item indices of each pass; an item larger than ``chunk_rows`` gets a pass of its own.
    """
    total = sum(sizes)
    n_chunks = pass_count(total, chunk_rows)
    target = total / n_chunks
    chunks: list[list[int]] = [[] for _ in range(n_chunks)]
    start = 0
    for i, size in enumerate(sizes):
        # Each item goes to the pass its middle row falls in, so passes stay near the target.
        chunks[min(n_chunks - 1, int((start + size / 2) // target))].append(i)
        start += size
    return [c for c in chunks if c]


def shared_pass_supported(model: torch.nn.Module) -> bool:
    """Whether every parameter is the weight or bias of a Linear or Conv2d layer."""
    covered = {id(p) for m in model.modules() if isinstance(m, MEASURED_LAYERS)
               for p in m.parameters(recurse=False)}
    return all(id(p) in covered for p in model.parameters())


@dataclass
class GradientRoute:
    """How ``backward`` works for one model on one device (chosen once, by measured cost)."""

    chunk_rows: int  # rows per forward/backward pass (0: the whole set in one pass)
    gram_layers: list[torch.nn.Linear]  # large Linear layers whose group norms come from Gram matrices
    shared_pass: bool  # groups of a pass may be measured together (every layer allows it)
    # Worker threads for the passes that measure nothing, each a part of the rows on one torch
    # thread (side_by_side.py); None: every pass runs on the torch threads of the calling thread.
    side_by_side: SideBySide | None = None

    @classmethod
    def for_model(cls, model: torch.nn.Module, device: torch.device, chunk_rows: int = 0,
                  cpu_chunk_rows: int = CPU_CHUNK_ROWS) -> GradientRoute:
        """``chunk_rows`` 0 = automatic: ``cpu_chunk_rows`` for convolutional networks on CPU, else one pass."""
        convolutional = any(isinstance(m, torch.nn.Conv2d) for m in model.modules())
        if chunk_rows <= 0:
            chunk_rows = cpu_chunk_rows if convolutional and device.type == "cpu" else 0
        gram = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.weight.numel() >= GRAM_MIN_WEIGHTS]
        return cls(chunk_rows, gram, shared_pass_supported(model))


@dataclass
class GradientReport:
    """What ``backward`` measured; the gradient itself is left in ``p.grad``."""

    sizes: list[int]  # rows of each env group
    sq_norms: dict[str, list[float]] = field(default_factory=dict)  # per part: |g_j|^2
    big_sq_norms: dict[str, float] = field(default_factory=dict)  # per part: |G_big|^2
    stats: dict[str, float] = field(default_factory=dict)  # size-weighted means of the loss statistics
    finite: bool = True


def backward(model: torch.nn.Module, route: GradientRoute, loss: RowsLoss, groups: Sequence[np.ndarray],
             measure: bool, parts: bool) -> GradientReport:
    """Leave the gradient of the mean loss over all rows of ``groups`` in ``p.grad``; report its norms.

    ``groups`` partition the rows into env groups (whole environments each; empty
    ones are dropped, and fewer than two cannot be measured). With ``measure``
    the report holds each group's squared gradient norm and the batch's (the
    noise estimator's input), with ``parts`` also for the policy and value parts.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [g for g in groups if g.size]
    if not measure or len(groups) < 2:
        rows = np.concatenate(groups)
        parts = torch.get_num_threads()  # the thread governor's count: one part per thread it allows
        if route.side_by_side is not None and parts > 1 and rows.size >= parts:
            return _side_by_side_backward(params, loss, rows, route.chunk_rows, route.side_by_side, parts)
        passes = np.array_split(rows, pass_count(rows.size, route.chunk_rows))
        return _per_group_backward(params, loss, passes, measure=False, parts=False)
    passes = [[groups[i] for i in chunk] for chunk in row_chunks([g.size for g in groups], route.chunk_rows)]
    small_groups = np.mean([g.size for g in groups]) <= SHARED_PASS_MAX_GROUP_ROWS
    if route.shared_pass and not parts and small_groups and any(len(p) > 1 for p in passes):
        return _shared_pass_backward(model, params, loss, passes, route.gram_layers)
    return _per_group_backward(params, loss, groups, measure=True, parts=parts, gram_layers=route.gram_layers,
                               chunk_rows=route.chunk_rows)


def _side_by_side_backward(params: list[torch.nn.Parameter], loss: RowsLoss, rows: np.ndarray, chunk_rows: int,
                           workers: SideBySide, parts: int) -> GradientReport:
    """The mean loss's gradient over ``rows`` from ``parts`` parts of them at once, one per worker thread,
    each in passes of about ``chunk_rows`` rows; nothing measured (as ``_per_group_backward`` unmeasured)."""

    def part_gradient(part: np.ndarray) -> tuple[list[torch.Tensor], dict[str, float]]:
        grads = [torch.zeros_like(p) for p in params]
        stats: dict[str, float] = {}
        for chunk in np.array_split(part, pass_count(part.size, chunk_rows)):
            w = chunk.size / part.size
            policy_loss, value_loss, chunk_stats = loss(chunk)
            g = torch.autograd.grad(policy_loss + value_loss, params, materialize_grads=True)
            torch._foreach_add_(grads, g, alpha=w)
            for key, value in chunk_stats.items():
                stats[key] = stats.get(key, 0.0) + w * float(value.detach())
        return grads, stats

    total, stats = workers.gradients(part_gradient, rows, parts)
    out = GradientReport(sizes=[int(rows.size)], stats=stats)
    out.big_sq_norms["total"] = _sq_norm(total)
    out.finite = math.isfinite(out.big_sq_norms["total"]) and all(math.isfinite(v) for v in stats.values())
    for p, g in zip(params, total, strict=True):
        p.grad = g
    return out


def _sq_norm(grads: Sequence[torch.Tensor]) -> float:
    if not grads:
        return 0.0
    return float(torch.stack(torch._foreach_norm(grads)).square().sum())


def _gram_sq_norm(delta: torch.Tensor, x: torch.Tensor) -> float:
    """|delta^T x|_F^2 without forming delta^T x (in fp32 even when the layer ran in bf16)."""
    delta, x = delta.float(), x.float()
    return float(((delta @ delta.T) * (x @ x.T)).sum())


class _Tap:
    """A forward hook on one layer; ``handle.remove()`` takes it off."""

    def __init__(self, layer: torch.nn.Module) -> None:
        self.layer = layer
        self.handle = layer.register_forward_hook(self._forward)

    def _forward(self, module, args, output) -> None:
        raise NotImplementedError


class _LinearTap(_Tap):
    """Records a Linear layer's input and output in the forward pass.

    The gradient reaching the output is asked of autograd directly (an input
    of ``torch.autograd.grad``), not caught by a tensor hook: a hook fires
    only where autograd needs that gradient for some other input, so a layer
    without a bias and with nothing trainable upstream would silently have
    read as zero.
    """

    inputs: torch.Tensor | None = None
    output: torch.Tensor | None = None

    def _forward(self, module, args, output) -> None:  # noqa: ARG002 - hook API
        if args[0].dim() != 2:
            raise ValueError("Gram-measured Linear layers need 2-d inputs (rows x features)")
        self.inputs = args[0].detach()
        self.output = output


def gram_is_cheaper(rows: int, in_features: int, out_features: int) -> bool:
    """Whether |delta^T x|^2 costs less from two Gram matrices (rows^2 (in + out)) than from the product.

    Forming delta^T x costs rows x in x out; so Gram matrices win below
    in*out/(in+out) rows: about 440 for the Nature CNN's 3136x512 layer.
    """
    return rows * (in_features + out_features) <= in_features * out_features


def _product_sq_norm(delta: torch.Tensor, x: torch.Tensor) -> float:
    """|delta^T x|_F^2 by the cheaper route for its size (fp32 even when the layer ran in bf16)."""
    if gram_is_cheaper(delta.shape[0], x.shape[1], delta.shape[1]):
        return _gram_sq_norm(delta, x)
    return float((delta.float().T @ x.float()).square().sum())


class _GroupPasses:
    """The per-group route's passes: the gradients of one group's mean loss, per loss part, over the
    autograd parameters and at the Gram layers' outputs (with those layers' inputs), in passes of about
    ``chunk_rows`` rows."""

    def __init__(self, autograd_params: list[torch.nn.Parameter], taps: list[_LinearTap], loss: RowsLoss,
                 names: list[str], chunk_rows: int) -> None:
        self.params, self.taps, self.loss, self.names, self.chunk_rows = autograd_params, taps, loss, names, chunk_rows

    def grad(self, part_loss: torch.Tensor, retain: bool) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Gradients of the autograd parameters, and those reaching the Gram layers' outputs."""
        g = torch.autograd.grad(part_loss, self.params + [tap.output for tap in self.taps],
                                retain_graph=retain, materialize_grads=True)
        n_auto = len(self.params)
        return list(g[:n_auto]), list(g[n_auto:])

    def one_pass(self, rows: np.ndarray) -> tuple[dict, dict, list[torch.Tensor], dict[str, torch.Tensor]]:
        """Per part: the mean loss's gradients over ``rows`` and at the Gram layers' outputs; their inputs."""
        policy_loss, value_loss, pass_stats = self.loss(rows)
        if len(self.names) > 1:  # the parts
            g_policy, d_policy = self.grad(policy_loss, retain=True)
            g_value, d_value = self.grad(value_loss, retain=False)
            grads = {"total": torch._foreach_add(g_policy, g_value), "policy": g_policy, "value": g_value}
            deltas = {"total": [a + b for a, b in zip(d_policy, d_value, strict=True)],
                      "policy": d_policy, "value": d_value}
        else:
            g_total, d_total = self.grad(policy_loss + value_loss, retain=False)
            grads, deltas = {"total": g_total}, {"total": d_total}
        inputs = [tap.inputs for tap in self.taps]
        for tap in self.taps:
            tap.output = None  # the graph of this pass can go
        return grads, deltas, inputs, pass_stats

    def group_gradient(self, rows: np.ndarray) -> tuple[dict, dict, list[torch.Tensor], dict[str, float]]:
        """``one_pass`` over a whole group, in passes of about ``chunk_rows`` (cache-sized) rows.

        The group's mean-loss gradient is the row-weighted mean of its passes'; the
        gradient reaching a Gram layer's output rows of pass c is n_c/n times the pass's.
        """
        names, taps = self.names, self.taps
        grads = {name: [torch.zeros_like(p) for p in self.params] for name in names}
        deltas: dict[str, list[list[torch.Tensor]]] = {name: [[] for _ in taps] for name in names}
        inputs: list[list[torch.Tensor]] = [[] for _ in taps]
        pass_stats: dict[str, float] = {}
        for chunk in np.array_split(rows, pass_count(rows.size, self.chunk_rows)):
            w = chunk.size / rows.size
            g_c, d_c, x_c, s_c = self.one_pass(chunk)
            for name in names:
                torch._foreach_add_(grads[name], g_c[name], alpha=w)
                for i, d in enumerate(d_c[name]):
                    deltas[name][i].append(w * d)
            for i, x in enumerate(x_c):
                inputs[i].append(x)
            for key, value in s_c.items():
                pass_stats[key] = pass_stats.get(key, 0.0) + w * float(value.detach())
        return (grads, {name: [torch.cat(ds) for ds in per_tap] for name, per_tap in deltas.items()},
                [torch.cat(xs) for xs in inputs], pass_stats)


def _per_group_backward(params: list[torch.nn.Parameter], loss: RowsLoss, groups: Sequence[np.ndarray],
                        measure: bool, parts: bool, gram_layers: Sequence[torch.nn.Linear] = (),
                        chunk_rows: int = 0) -> GradientReport:
    """The per-group route: each group's gradient on its own, in passes of about ``chunk_rows`` rows.

    ``measure`` records |g_j|^2 of the total loss per group; ``parts`` also
    records them for the policy and value parts separately. The weights of
    ``gram_layers`` (large Linear layers with 2-d inputs, all in ``params``)
    are handled by the Gram route described above while measuring. Without
    ``measure`` the groups are just passes whose gradients are summed.
    """
    sizes = [int(g.size) for g in groups]
    total_size = float(sum(sizes))
    names = list(tags.PARTS) if parts else ["total"]
    gram_layers = list(gram_layers) if measure else []
    gram_ids = {id(layer.weight) for layer in gram_layers}
    autograd_params = [p for p in params if id(p) not in gram_ids]
    taps = [_LinearTap(layer) for layer in gram_layers]
    passes = _GroupPasses(autograd_params, taps, loss, names, chunk_rows)
    sums = {name: [torch.zeros_like(p) for p in autograd_params] for name in names}
    # Per gram layer: the inputs of every group, and per part the weighted output gradients.
    tap_inputs: list[list[torch.Tensor]] = [[] for _ in taps]
    tap_deltas = {name: [[] for _ in taps] for name in names}
    out = GradientReport(sizes=sizes)
    for name in names:
        out.sq_norms[name] = []
    stats: dict[str, float] = {}
    try:
        for rows, size in zip(groups, sizes, strict=True):
            weight = size / total_size
            grads, deltas, group_inputs, group_stats = passes.group_gradient(rows)
            for i, x in enumerate(group_inputs):
                tap_inputs[i].append(x)
            for name, g in grads.items():
                if measure:
                    gram = sum(_product_sq_norm(d, x) for d, x in zip(deltas[name], group_inputs, strict=True))
                    out.sq_norms[name].append(_sq_norm(g) + gram)
                torch._foreach_add_(sums[name], g, alpha=weight)
                for i, d in enumerate(deltas[name]):
                    tap_deltas[name][i].append(weight * d)
            for key, value in group_stats.items():
                stats[key] = stats.get(key, 0.0) + weight * value
    finally:
        for tap in taps:
            tap.handle.remove()
    inputs = [torch.cat(xs) for xs in tap_inputs]
    # The batch's weight gradient of each Gram layer: sum over groups of w_j delta_j^T x_j,
    # formed for the update anyway, so the total's |G_big|^2 reads it at no extra cost.
    gram_grads = [(torch.cat(ds).float().T @ x.float())
                  for ds, x in zip(tap_deltas["total"], inputs, strict=True)]
    for name in names:
        if name == "total":
            gram_big = _sq_norm(gram_grads)
        else:
            gram_big = sum(_product_sq_norm(torch.cat(ds), x) for ds, x in zip(tap_deltas[name], inputs, strict=True))
        out.big_sq_norms[name] = _sq_norm(sums[name]) + gram_big
    out.finite = all(torch.isfinite(torch.tensor(v)) for v in out.big_sq_norms.values()) and all(
        torch.isfinite(torch.tensor(v)) for v in stats.values()
    )
    for p, g in zip(autograd_params, sums["total"], strict=True):
        p.grad = g
    for layer, g in zip(gram_layers, gram_grads, strict=True):
        layer.weight.grad = g.to(layer.weight.dtype)
    out.stats = stats
    return out


# ---------------------------------------------------------------------------
# The shared-pass route: the groups of a pass measured together, one forward and
# one backward pass per pass.


class _LayerTap(_Tap):
    """Keeps a Linear or Conv2d layer's input and output from one forward pass."""

    x: torch.Tensor | None = None
    y: torch.Tensor | None = None

    def _forward(self, module, args, output) -> None:  # noqa: ARG002 - hook API
        if self.y is not None:
            raise ValueError(f"{type(module).__name__} ran twice in one forward pass; "
                             "the shared-pass noise measurement needs each layer once")
        self.x = args[0].detach()
        self.y = output


def _shared_pass_backward(model: torch.nn.Module, params: list[torch.nn.Parameter], loss: RowsLoss,
                          passes: Sequence[Sequence[np.ndarray]],
                          gram_layers: Sequence[torch.nn.Linear] = ()) -> GradientReport:
    """The shared-pass route: the total loss's group norms from one forward/backward per pass.

    Each pass holds whole groups; ``loss`` runs the model once over a pass's
    rows, each group's rows contiguous, and returns the pass's mean policy and
    value losses. Each row's loss depends on its own row only, so a
    layer's input x and the gradient delta reaching its output give any
    group's weight gradient as the sum of delta^T x over the group's rows.
    Autograd is asked for the layers' output gradients only, which skips its
    weight gradients; those are formed here, group by group: convolutions by
    aten's own backward on each group's rows, ``gram_layers`` (large Linear
    layers) by Gram matrices (module docstring), other Linear layers by a
    matmul. The batch's gradient is the sum over groups.
    (The policy/value split is left to the per-group route: measured faster.)
    """
    if not shared_pass_supported(model):
        raise ValueError("the shared-pass noise measurement supports networks of Linear and Conv2d layers only")
    sizes = [int(g.size) for groups in passes for g in groups]
    total_rows = float(sum(sizes))
    row_sums: dict[torch.nn.Parameter, torch.Tensor] = {}  # sum over the batch's rows of each row's gradient
    group_sq: list[float] = []  # per group: |sum over its rows|^2
    stats: dict[str, float] = {}
    for groups in passes:
        chunk_sizes = [int(g.size) for g in groups]
        chunk_rows = float(sum(chunk_sizes))
        taps, deltas, chunk_stats = _pass_backward(model, loss, np.concatenate(groups))
        for key, value in chunk_stats.items():
            stats[key] = stats.get(key, 0.0) + chunk_rows / total_rows * value
        with torch.no_grad():
            # The chunk's loss is a mean over its rows: scale its gradients back to sums.
            deltas = [chunk_rows * d for d in deltas]
            group_sq.extend(_group_sums_into(row_sums, taps, deltas, chunk_sizes, gram_layers))
    out = GradientReport(sizes=sizes, stats=stats)
    with torch.no_grad():
        # |g_j|^2 for group j's mean-loss gradient; |G|^2 for the batch's.
        out.sq_norms["total"] = [sq / n ** 2 for sq, n in zip(group_sq, sizes, strict=True)]
        out.big_sq_norms["total"] = _sq_norm(list(row_sums.values())) / total_rows ** 2
        for p in params:
            total = row_sums.get(p)
            p.grad = torch.zeros_like(p) if total is None else (total / total_rows).to(p.dtype)
    out.finite = math.isfinite(out.big_sq_norms["total"]) and all(math.isfinite(v) for v in stats.values())
    return out


def _pass_backward(model: torch.nn.Module, loss: RowsLoss, rows: np.ndarray
                   ) -> tuple[list[_LayerTap], list[torch.Tensor], dict[str, float]]:
    """One forward pass with the layers tapped; the gradients of the loss reaching their outputs."""
    taps = [_LayerTap(m) for m in model.modules() if isinstance(m, MEASURED_LAYERS)]
    try:
        policy_loss, value_loss, stats = loss(rows)
    finally:
        for tap in taps:
            tap.handle.remove()
    taps = [t for t in taps if t.y is not None and t.y.requires_grad]
    deltas = torch.autograd.grad(policy_loss + value_loss, [t.y for t in taps], materialize_grads=True)
    return taps, list(deltas), {k: float(v.detach()) for k, v in stats.items()}


def _group_sums_into(row_sums: dict[torch.nn.Parameter, torch.Tensor], taps: list[_LayerTap],
                     deltas: list[torch.Tensor], sizes: Sequence[int],
                     gram_layers: Sequence[torch.nn.Linear]) -> list[float]:
    """Add one chunk's gradient sums to ``row_sums``; return |sum over group j|^2 per group."""
    bounds = list(itertools.pairwise([0, *itertools.accumulate(sizes)]))
    group_sq = [0.0] * len(bounds)

    def add(param: torch.nn.Parameter, value: torch.Tensor) -> None:
        row_sums[param] = value if param not in row_sums else row_sums[param] + value

    for tap, delta in zip(taps, deltas, strict=True):
        layer = tap.layer
        gram = any(layer is g for g in gram_layers)
        if gram:
            for j, (a, b) in enumerate(bounds):
                group_sq[j] += _product_sq_norm(delta[a:b], tap.x[a:b])
            add(layer.weight, delta.float().T @ tap.x.float())
        # Group sums of the other weights and of every bias.
        for param, group_sums in _group_sums(layer, tap.x, delta, bounds, gram).items():
            for j, g in enumerate(group_sums):
                group_sq[j] += float(g.square().sum())
            add(param, torch.stack(group_sums).sum(0))
    return group_sq


def _group_sums(layer: torch.nn.Module, x: torch.Tensor, delta: torch.Tensor, bounds: list[tuple[int, int]],
                skip_weight: bool) -> dict[torch.nn.Parameter, list[torch.Tensor]]:
    """Per parameter of ``layer``: each group's sum of its gradient over the group's rows (fp32)."""
    out: dict[torch.nn.Parameter, list[torch.Tensor]] = {}
    has_bias = layer.bias is not None
    delta = delta.to(x.dtype)
    for a, b in bounds:
        d, xg = delta[a:b], x[a:b]
        if isinstance(layer, torch.nn.Conv2d):
            _, weight, bias = torch.ops.aten.convolution_backward(
                d, xg, layer.weight, [layer.out_channels] if has_bias else None, layer.stride,
                layer.padding, layer.dilation, False, [0, 0], layer.groups, [False, True, has_bias])
        else:
            weight = None if skip_weight else d.float().T @ xg.float()
            bias = d.sum(0) if has_bias else None
        if weight is not None:
            out.setdefault(layer.weight, []).append(weight.float())
        if bias is not None:
            out.setdefault(layer.bias, []).append(bias.float())
    return out
