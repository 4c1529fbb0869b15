"""What A2C and PPO learners share: optimizer, noise estimators, the guarded step."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from rlscale import noise
from rlscale.config import Config
from rlscale.gradients import GroupedGradient
from rlscale.optim import make_optimizer, set_lr

PARTS = ("total", "policy", "value")
GRAM_MIN_WEIGHTS = 100_000  # the Nature CNN's 3136x512 layer; small layers are cheaper the plain way


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
        self.channels_last = cfg.run.channels_last and any(
            isinstance(m, torch.nn.Conv2d) for m in model.modules())
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

    def examples(self, batch_size: int) -> int:
        """Observations the optimizer consumes for one batch (PPO reuses each n_epochs times)."""
        return batch_size

    def update(self, batch, progress: float) -> dict[str, float]:
        """One learner update on a batch; ``progress`` is the run's fraction done (for schedules)."""
        raise NotImplementedError

    def lr_scale(self, progress: float) -> float:
        """Factor on the learning rate at this fraction of the budget (linear annealing)."""
        return 1.0 - progress if self.cfg.agent.anneal_lr else 1.0

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
