"""The learner's precision chosen by measurement at start-up (``--learner-precision auto``).

bf16 autocast is 1.2-1.5x faster than fp32 for the Nature CNN on a CPU with
bf16 units and 10x slower on one without (docs/performance.md); which one a
machine has is not worth guessing. Like cuDNN's benchmark mode, the learner
times a few forward and backward passes of its own network in each precision
on a pass of the size it will train on, checks that bf16's gradient matches
fp32's within ``TOLERANCE`` (relative L2 error), and takes the fastest.
Networks without convolutions stay fp32 unmeasured: small matmuls gain
nothing from bf16 on a CPU and their passes are too short to time reliably.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch

# bf16 keeps 8 bits of mantissa (~0.4% per rounding); a network's gradient
# accumulates a few percent at most. Beyond this something is wrong: keep fp32.
TOLERANCE = 0.05
# bf16 must beat fp32 by this factor to be taken: within timing noise, fp32 is exact.
MIN_SPEEDUP = 1.1


@dataclass(frozen=True)
class PrecisionChoice:
    precision: str  # "fp32" or "bf16"
    fp32_seconds: float | None  # fastest time of one forward+backward pass (None: not measured)
    bf16_seconds: float | None
    bf16_error: float | None  # |g_bf16 - g_fp32| / |g_fp32|

    def describe(self) -> str:
        if self.fp32_seconds is None or self.bf16_seconds is None:
            return f"{self.precision} (not measured: no convolutions)"
        ratio = self.fp32_seconds / self.bf16_seconds
        return (f"{self.precision} (measured: bf16 {ratio:.2f}x the speed of fp32, "
                f"gradient error {self.bf16_error:.1e})")


def _pass(model: torch.nn.Module, obs: torch.Tensor, weights: tuple[torch.Tensor, torch.Tensor],
          bf16: bool) -> None:
    """One forward and backward pass of a fixed random loss; the gradients are left in ``p.grad``."""
    model.zero_grad(set_to_none=True)
    with torch.autocast(obs.device.type, dtype=torch.bfloat16, enabled=bf16):
        logits, value = model(obs)
    loss = (logits.float() * weights[0]).sum() + (value.float() * weights[1]).sum()
    loss.backward()


def _gradient(model: torch.nn.Module, obs: torch.Tensor, weights: tuple[torch.Tensor, torch.Tensor],
              bf16: bool) -> torch.Tensor:
    """The parameters' gradient after one pass, as one vector (outside the timed passes)."""
    _pass(model, obs, weights, bf16)
    return torch.cat([p.grad.detach().flatten() for p in model.parameters() if p.grad is not None])


def _seconds(model: torch.nn.Module, obs: torch.Tensor, weights: tuple[torch.Tensor, torch.Tensor],
             bf16: bool) -> float:
    if obs.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    _pass(model, obs, weights, bf16)
    if obs.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def choose_precision(model: torch.nn.Module, obs: torch.Tensor, channels_last: bool = True,
                     repeats: int = 7) -> PrecisionChoice:
    """fp32 or bf16 for ``model`` on passes like ``obs`` (rows of observations on the model's device).

    Runs on a copy (in channels-last layout if the learner will use it): the
    model's parameters and gradients are left untouched.
    """
    if not any(isinstance(m, torch.nn.Conv2d) for m in model.modules()):
        return PrecisionChoice("fp32", None, None, None)
    model = copy.deepcopy(model)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        if obs.dim() == 4:
            obs = obs.contiguous(memory_format=torch.channels_last)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        logits, value = model(obs)
    weights = (torch.randn(logits.shape, generator=generator).to(obs.device),
               torch.randn(value.shape, generator=generator).to(obs.device))
    reference = _gradient(model, obs, weights, bf16=False)
    error = float((_gradient(model, obs, weights, bf16=True) - reference).norm()
                  / reference.norm().clamp_min(1e-30))
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats):  # alternating, so a slow moment of the machine hits both
        for bf16 in (False, True):
            times[bf16].append(_seconds(model, obs, weights, bf16))
    # The fastest of each: a pass is slowed only by what else runs on the machine, so the
    # minimum is the least-disturbed reading (a median still tipped under load).
    fp32, bf16 = min(times[False]), min(times[True])
    return PrecisionChoice(pick(fp32, bf16, error), fp32, bf16, error)


def pick(fp32_seconds: float, bf16_seconds: float, bf16_error: float) -> str:
    """bf16 where it is at least MIN_SPEEDUP faster and its gradient within TOLERANCE of fp32's."""
    faster = fp32_seconds >= MIN_SPEEDUP * bf16_seconds
    return "bf16" if faster and bf16_error <= TOLERANCE else "fp32"
