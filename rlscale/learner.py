"""What A2C and PPO learners share: optimizer, noise estimators, the guarded step."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlscale import noise
from rlscale.config import Config
from rlscale.gradients import (
    GroupedGradient,
    GroupLoss,
    grouped_gradient,
    one_pass_gradient,
    one_pass_supported,
)
from rlscale.optim import make_optimizer, set_lr

PARTS = ("total", "policy", "value")
GRAM_MIN_WEIGHTS = 100_000  # the Nature CNN's 3136x512 layer; small layers are cheaper the plain way
# On CPU, forward/backward passes of ~80-160 rows ran fastest per row (cache-sized; measured
# on the Nature CNN, docs/performance.md), so larger batches are split into passes this big.
CPU_CHUNK_ROWS = 128
ONE_PASS_MAX_GROUP_ROWS = 32  # see Learner.gradient


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


def env_groups(n_envs: int, k: int) -> list[np.ndarray]:
    """Column indices of k groups of whole environments (sizes differ by at most one)."""
    return [cols for cols in np.array_split(np.arange(n_envs), min(k, n_envs)) if cols.size]


def resolve_device(name: str) -> torch.device:
    """auto -> cuda when this process sees a GPU, else cpu."""
    from rlscale.errors import UserError

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--learner-device cuda, but torch sees no GPU here "
                        f"(torch {torch.__version__}, CUDA build: {torch.version.cuda is not None}); "
                        "use --learner-device cpu or run the driver on a GPU node")
    return torch.device(name)


class Learner:
    """Holds the model, the optimizer and one noise-scale EMA per loss part."""

    def __init__(self, model: torch.nn.Module, cfg: Config) -> None:
        self.cfg = cfg
        # Convolutions run faster with channels-last tensors here (scripts/bench_network.py);
        # conversion happens before the optimizer sees the parameters.
        convolutional = any(isinstance(m, torch.nn.Conv2d) for m in model.modules())
        self.channels_last = cfg.run.channels_last and convolutional
        self.model = model.to(memory_format=torch.channels_last) if self.channels_last else model
        self.device = next(model.parameters()).device  # batches are moved here
        self.params = [p for p in model.parameters() if p.requires_grad]
        # Large fully connected layers get their per-group norms from Gram matrices (gradients.py).
        self.gram_layers = [m for m in model.modules()
                            if isinstance(m, torch.nn.Linear) and m.weight.numel() >= GRAM_MIN_WEIGHTS]
        a = cfg.agent
        self.optimizer = make_optimizer(a.optimizer, self.params, a.lr, a.rms_alpha, a.optim_eps)
        self.noise = {part: noise.NoiseScaleEMA(cfg.noise.noise_horizon) for part in PARTS}
        self.updates = 0  # optimizer steps taken
        self.skipped_updates = 0
        self.skipped_in_a_row = 0
        # Fresh observations trained on since each part's EMA last took a sample,
        # so the horizon stays in observations when only some steps are measured.
        self.pending_observations = {part: 0.0 for part in PARTS}
        self.lr = a.lr  # the controller's learning rate; a schedule may scale it (PPO)
        # Measure the groups of a pass together (one forward/backward per pass, gradients split
        # by group afterwards) where every layer allows it; otherwise one pass per group.
        self.one_pass = one_pass_supported(self.model)
        chunk = cfg.run.learner_chunk_rows
        self.chunk_rows = chunk if chunk > 0 else (
            CPU_CHUNK_ROWS if convolutional and self.device.type == "cpu" else 0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits and values in fp32, the network run in the configured precision.

        With bf16 autocast the convolutions and matmuls run in bfloat16 while the
        parameters, their gradients, the losses and the noise-scale norms stay fp32.
        """
        bf16 = self.cfg.run.learner_precision == "bf16"
        if self.channels_last and obs.dim() == 4:
            obs = obs.contiguous(memory_format=torch.channels_last)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
            logits, value = self.model(obs)
        return logits.float(), value.float()

    def rows(self, x: np.ndarray) -> torch.Tensor:
        """A [n_steps, n_envs, ...] batch array as flat rows on the learner's device (row = step * n_envs + env)."""
        return torch.from_numpy(np.ascontiguousarray(x)).to(self.device).flatten(0, 1)

    def env_group_rows(self, rows: np.ndarray, n_envs: int) -> list[np.ndarray]:
        """``rows`` (flat row indices) split into the noise estimator's groups of whole environments."""
        return [rows[np.isin(rows % n_envs, cols)] for cols in env_groups(n_envs, self.cfg.noise.noise_groups)]

    def gradient(self, rows_loss: Callable[[np.ndarray], GroupLoss], groups: list[np.ndarray],
                 measure: bool, parts: bool) -> GroupedGradient:
        """The batch's mean-loss gradient in ``p.grad``; with ``measure``, per-group norms too.

        ``rows_loss(rows)`` is the mean loss over those rows of the batch;
        ``groups`` partition the batch's rows into groups of whole environments
        (empty ones are dropped; fewer than two groups cannot be measured).
        """
        groups = [g for g in groups if g.size]
        if not measure or len(groups) < 2:
            rows = np.concatenate(groups)
            passes = np.array_split(rows, pass_count(rows.size, self.chunk_rows))
            return grouped_gradient(self.params, [rows_loss(p) for p in passes], [p.size for p in passes],
                                    measure=False, parts=False)
        passes = [[groups[i] for i in chunk] for chunk in row_chunks([g.size for g in groups], self.chunk_rows)]
        # Measured (scripts/bench_noise.py, docs/results.md): measuring the groups of a pass
        # together beats a pass per group only for the total and small groups, where each
        # small pass re-reads every weight; the policy/value split and groups of 80 rows or
        # more ran faster with autograd's own per-group backward passes.
        small_groups = np.mean([g.size for g in groups]) <= ONE_PASS_MAX_GROUP_ROWS
        if self.one_pass and not parts and small_groups and any(len(p) > 1 for p in passes):
            return one_pass_gradient(
                self.model, self.params,
                [(rows_loss(np.concatenate(p)), [g.size for g in p]) for p in passes], self.gram_layers)
        return grouped_gradient(self.params, [rows_loss(g) for g in groups], [g.size for g in groups],
                                measure=True, parts=parts, gram_layers=self.gram_layers)

    def examples(self, batch_size: int) -> int:
        """Observations the optimizer consumes for one batch (PPO reuses each n_epochs times)."""
        return batch_size

    def update(self, batch, progress: float) -> dict[str, float]:
        """One learner update on a batch; ``progress`` is the run's fraction done (for schedules)."""
        raise NotImplementedError

    def lr_scale(self, progress: float) -> float:
        """Factor on the learning rate at this fraction of the budget (linear annealing)."""
        return 1.0 - progress if self.cfg.agent.anneal_lr else 1.0

    @property
    def lr_in_use(self) -> float:
        """The learning rate of the last step (annealed, controller-scaled); the optimizer's own before one."""
        return float(self.optimizer.param_groups[0]["lr"])

    def measure_parts_now(self) -> bool:
        every = self.cfg.noise.noise_parts_every
        return self.cfg.noise.measure_noise and every > 0 and self.updates % every == 0

    def apply(self, grad: GroupedGradient, observations: float, lr_scale: float = 1.0) -> dict[str, float]:
        """Record the noise estimates, clip, and step — unless the gradient is not finite.

        ``observations``: fresh observations this step accounts for (0 when it reuses data).
        """
        metrics: dict[str, float] = {f"train/{k}": v for k, v in grad.stats.items()}
        grad_norm = math.sqrt(grad.big_sq_norms["total"]) if grad.finite else float("nan")
        metrics["train/grad_norm"] = grad_norm
        if not grad.finite:
            # Never apply a non-finite step; the caller decides when too many in a row is fatal.
            self.optimizer.zero_grad(set_to_none=True)
            self.skipped_updates += 1
            self.skipped_in_a_row += 1
            metrics["train/skipped_updates"] = float(self.skipped_updates)
            return metrics
        self.skipped_in_a_row = 0
        for part in PARTS:
            self.pending_observations[part] += observations
        for part, norms in grad.sq_norms.items():
            if not norms or self.pending_observations[part] <= 0:
                continue
            sample = noise.estimate(norms, grad.sizes, grad.big_sq_norms[part])
            self.noise[part].update(sample, self.pending_observations[part])
            self.pending_observations[part] = 0.0
            metrics[f"noise/raw_grad_sq_{part}"] = sample.grad_sq
            metrics[f"noise/raw_trace_sigma_{part}"] = sample.trace_sigma
        if self.cfg.agent.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.cfg.agent.max_grad_norm)
        set_lr(self.optimizer, self.lr * lr_scale)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.updates += 1
        metrics["train/lr"] = self.lr * lr_scale
        metrics["train/skipped_updates"] = float(self.skipped_updates)
        metrics.update(self.noise_metrics())
        return metrics

    def b_simple(self, part: str) -> float | None:
        return self.noise[part].b_simple

    def noise_metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if not self.cfg.noise.measure_noise:
            return out
        for part, ema in self.noise.items():
            for name, value in (("b_simple", ema.b_simple), ("grad_sq", ema.grad_sq),
                                ("trace_sigma", ema.trace_sigma)):
                if value is not None:
                    out[f"noise/{name}_{part}"] = value
        signal = self.cfg.control.signal
        for name in ("b_simple", "grad_sq", "trace_sigma"):
            if f"noise/{name}_{signal}" in out:
                out[f"noise/{name}"] = out[f"noise/{name}_{signal}"]
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "noise": {part: ema.state_dict() for part, ema in self.noise.items()},
            "updates": self.updates,
            "skipped_updates": self.skipped_updates,
            "pending_observations": dict(self.pending_observations),
            "lr": self.lr,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.noise = {part: noise.NoiseScaleEMA.from_state_dict(s) for part, s in state["noise"].items()}
        self.updates = int(state["updates"])
        self.skipped_updates = int(state["skipped_updates"])
        self.pending_observations = {k: float(v) for k, v in state["pending_observations"].items()}
        self.lr = float(state["lr"])
