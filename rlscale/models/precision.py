"""Precision (and the actors' memory layout) chosen by measurement at start-up.

``--learner-precision auto`` and ``--actor-precision auto``.

bf16 autocast is 1.2-1.5x faster than fp32 for the Nature CNN on a CPU with
bf16 units and 10x slower on one without (docs/performance.md); which one a
machine has is not worth guessing. Like cuDNN's benchmark mode, the learner
times a few forward and backward passes of its own network in each precision
on a pass of the size it will train on, checks that bf16's gradient matches
fp32's within ``TOLERANCE`` (relative L2 error), and takes the fastest.
Networks without convolutions stay fp32 unmeasured: small matmuls gain
nothing from bf16 on a CPU and their passes are too short to time reliably.

The rollout actors only run forward passes, one thread each, on a few rows:
each actor times fp32 and bf16 autocast in both memory layouts (NCHW and
channels-last) on its own node and takes the fastest whose logits and values
match fp32's within ``TOLERANCE`` (``choose_inference``). A bf16 actor keeps
its weights in bf16 (``inference_model``): autocast over fp32 weights rounds
every weight again on every forward pass.
"""

from __future__ import annotations

import copy
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import torch

K = TypeVar("K")

# bf16 keeps 8 bits of mantissa (~0.4% per rounding); the Nature CNN's gradient
# on the probe's random loss differs from fp32's by 2-7% (5 seeds x 16-1024 rows,
# 2026-11-25). At 5% this limit split that spread and flipped the choice by
# seed; at twice the worst it catches only what is wrong, not bf16's rounding.
TOLERANCE = 0.15
# bf16 must beat fp32 by this factor to be taken: within timing noise, fp32 is exact.
MIN_SPEEDUP = 1.1
# Timings of the learner's passes when they disagree with the CPU's flags.
ROUNDS = 3
# oneDNN's ISA caps (ONEDNN_MAX_CPU_ISA) below the first with bf16 dot products.
ISAS_WITHOUT_BF16 = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE",
                               "AVX512_CORE_VNNI"})


def bf16_units() -> bool | None:
    """Whether this CPU computes bf16 dot products natively (AVX-512 BF16 or AMX); None off x86.

    What torch reads from CPUID, less what ``ONEDNN_MAX_CPU_ISA`` caps: the
    cap is how a CPU without bf16 units is emulated on one with them.
    """
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in ISAS_WITHOUT_BF16:
        return False
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


@dataclass(frozen=True)
class PrecisionChoice:
    precision: str  # "fp32" or "bf16"
    fp32_seconds: float | None  # fastest time of one forward+backward pass (None: not measured)
    bf16_seconds: float | None
    bf16_error: float | None  # |g_bf16 - g_fp32| / |g_fp32|
    bf16_units: bool | None = None  # what the CPU's flags say (None: unknown)
    rounds: int = 1  # timings taken (more than one: the first disagreed with the flags)

    def describe(self) -> str:
        if self.fp32_seconds is None or self.bf16_seconds is None:
            return f"{self.precision} (not measured: no convolutions)"
        ratio = self.fp32_seconds / self.bf16_seconds
        flags = {None: "", True: ", the CPU has bf16 units", False: ", the CPU has no bf16 units"}[self.bf16_units]
        if self.rounds > 1:
            agree = (self.precision == "bf16") == self.bf16_units
            flags += f"; timed {self.rounds}x, {'then agreeing' if agree else 'still disagreeing'}"
        return (f"{self.precision} (measured: bf16 {ratio:.2f}x the speed of fp32, "
                f"gradient error {self.bf16_error:.1e}{flags})")


def has_convolutions(model: torch.nn.Module) -> bool:
    return any(isinstance(m, torch.nn.Conv2d) for m in model.modules())


def inference_model(model: torch.nn.Module, precision: str, channels_last: bool) -> torch.nn.Module:
    """``model`` as an actor runs it: convolutions channels-last if asked, weights in bf16 for bf16.

    bf16 weights give autocast's results bit for bit (it rounds fp32 weights to
    bf16 the same way) without rounding all of them again on every pass: on the
    Nature CNN with 4 rows, 0.50 ms a pass against 0.69 (2026-11-27,
    docs/performance.md). New fp32 weights copied in are rounded then.
    """
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model.to(torch.bfloat16) if precision == "bf16" else model


def network_forward(model: torch.nn.Module, obs: torch.Tensor, bf16: bool,
                    channels_last: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and values in fp32, the network run in bf16 autocast or fp32 (the parameters as the model
    keeps them: fp32 in the learner, bf16 in a bf16 actor, ``inference_model``).

    With ``channels_last`` image batches are laid out channels-last first, to
    match a model whose convolution weights were converted to that format.
    """
    if channels_last and obs.dim() == 4:
        obs = obs.contiguous(memory_format=torch.channels_last)
    with torch.autocast(obs.device.type, dtype=torch.bfloat16, enabled=bf16):
        logits, value = model(obs)
    return logits.float(), value.float()


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


# After two timings each, a pass over this many times the fastest pass's best is timed no more: no choice
# takes a pass slower than the fastest, and none of the later timings would bring it within 2x (the first
# timing carries the warm-up). bf16 without bf16 units ran ~10x fp32's time: Pong's learner probe took
# 14.2 s instead of ~4 s on a CPU without them (emulated, 2026-11-29).
OUT_OF_REACH = 2.0


def _fastest(passes: dict[K, Callable[[], object]], repeats: int, device: torch.device) -> dict[K, float]:
    """The fastest of ``repeats`` timings of each pass, the passes alternating; a pass out of reach
    (``OUT_OF_REACH``) after two timings keeps its fastest of those.

    Alternating, so a slow moment of the machine hits all of them; the fastest of
    each, because a pass is slowed only by what else runs on the machine, so the
    minimum is the least-disturbed reading (a median still tipped under load).
    """
    times: dict[K, list[float]] = {key: [] for key in passes}
    for repeat in range(repeats):
        if repeat >= 2:
            best = min(min(t) for t in times.values())
            passes = {key: run for key, run in passes.items() if min(times[key]) <= OUT_OF_REACH * best}
        for key, run in passes.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            run()
            if device.type == "cuda":
                torch.cuda.synchronize()
            times[key].append(time.perf_counter() - start)
    return {key: min(t) for key, t in times.items()}


def choose_precision(model: torch.nn.Module, obs: torch.Tensor, channels_last: bool = True,
                     repeats: int = 7, units: bool | None | str = "flags") -> PrecisionChoice:
    """fp32 or bf16 for ``model`` on passes like ``obs`` (rows of observations on the model's device).

    Runs on a copy (in channels-last layout if the learner will use it), in
    one torch thread: the model's parameters and gradients and this process's
    thread count are left untouched. ``units`` is the prior (default: the
    CPU's flags, ``bf16_units``, for a model on the CPU; on a GPU the CPU's
    flags say nothing, so no prior; None: no prior, one timing).
    """
    if units == "flags":
        prior = bf16_units() if obs.device.type == "cpu" else None
    else:
        prior = units
    if not has_convolutions(model):
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
    passes = {bf16: partial(_pass, model, obs, weights, bf16) for bf16 in (False, True)}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        seconds, rounds = _fastest(passes, repeats, obs.device), 1
        # Timed again only where the CPU's flags disagree; bf16 beyond TOLERANCE is fp32 anyway.
        while (prior is not None and rounds < ROUNDS and error <= TOLERANCE
               and (pick(seconds[False], seconds[True], error) == "bf16") != prior):
            again = _fastest(passes, repeats, obs.device)
            seconds, rounds = {k: min(seconds[k], again[k]) for k in seconds}, rounds + 1
    finally:
        torch.set_num_threads(threads)
    fp32, bf16 = seconds[False], seconds[True]
    return PrecisionChoice(pick(fp32, bf16, error), fp32, bf16, error, prior, rounds)


def pick(fp32_seconds: float, bf16_seconds: float, bf16_error: float) -> str:
    """bf16 where it is at least MIN_SPEEDUP faster and its gradient within TOLERANCE of fp32's."""
    faster = fp32_seconds >= MIN_SPEEDUP * bf16_seconds
    return "bf16" if faster and bf16_error <= TOLERANCE else "fp32"


# The actors' candidates, (precision, channels-last); the first is the reference.
INFERENCE_CANDIDATES: tuple[tuple[str, bool], ...] = (("fp32", False), ("fp32", True), ("bf16", False), ("bf16", True))


def inference_label(precision: str, channels_last: bool) -> str:
    return precision + (" channels-last" if channels_last else "")


@dataclass(frozen=True)
class InferenceChoice:
    """How a rollout actor runs its policy's forward passes, and what the timing read."""

    precision: str  # "fp32" or "bf16"
    channels_last: bool
    seconds: dict[str, float]  # candidate label -> fastest forward pass (empty: not measured)
    errors: dict[str, float]  # candidate label -> its outputs' relative L2 error against fp32
    note: str = ""  # why it was not measured

    @property
    def label(self) -> str:
        return inference_label(self.precision, self.channels_last)

    def speed(self, label: str) -> float:
        """A candidate's speed over plain fp32's, as measured."""
        return self.seconds["fp32"] / self.seconds[label]

    @property
    def runner_up(self) -> str:
        """The fastest candidate other than plain fp32 (measured choices only)."""
        return max((label for label in self.seconds if label != "fp32"), key=self.speed)

    def describe(self) -> str:
        return describe_inference([self])


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}x" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}x"


def describe_inference(choices: list[InferenceChoice]) -> str:
    """What a set of actors took, one phrase per distinct choice (with a count where they differ)."""
    groups: dict[str, list[InferenceChoice]] = {}
    for choice in choices:
        groups.setdefault(choice.label, []).append(choice)
    phrases = []
    for label, group in groups.items():
        measured = [c for c in group if c.seconds]
        if not measured:
            note = group[0].note
            phrase = f"{label} ({note})" if note else label
        elif label != "fp32":
            phrase = f"{label} (measured: {_span([c.speed(label) for c in measured])} the speed of fp32)"
        else:
            best = [c.speed(c.runner_up) for c in measured]
            phrase = f"fp32 (measured: no other 1.1x faster; the best {_span(best)})"
        count = f"{len(group)} of {len(choices)}: " if len(groups) > 1 else ""
        phrases.append(count + phrase)
    return "; ".join(phrases)


def _relative_error(outputs: tuple[torch.Tensor, ...], reference: tuple[torch.Tensor, ...]) -> float:
    """The worst of the outputs' relative L2 errors (logits and values apart: their scales differ 100x)."""
    return max(float((o - r).norm() / r.norm().clamp_min(1e-30)) for o, r in zip(outputs, reference, strict=True))


@torch.no_grad()
def choose_inference(model: torch.nn.Module, obs: torch.Tensor, repeats: int = 9) -> InferenceChoice:
    """fp32 or bf16, NCHW or channels-last, for forward passes of ``model`` on batches like ``obs``.

    Runs on copies (the model is left as it is) in this process's torch
    threads; each candidate is timed ``repeats`` times (``_fastest``).
    """
    if not has_convolutions(model):
        return InferenceChoice("fp32", False, {}, {}, "not measured: no convolutions")
    copies = {c: inference_model(copy.deepcopy(model), *c) for c in INFERENCE_CANDIDATES}

    def run(c: tuple[str, bool]) -> tuple[torch.Tensor, torch.Tensor]:
        return network_forward(copies[c], obs, c[0] == "bf16", c[1])

    reference = run(INFERENCE_CANDIDATES[0])
    errors = {inference_label(*c): _relative_error(run(c), reference) for c in INFERENCE_CANDIDATES}
    seconds = _fastest({inference_label(*c): partial(run, c) for c in INFERENCE_CANDIDATES}, repeats, obs.device)
    precision, channels_last = pick_inference(seconds, errors)
    return InferenceChoice(precision, channels_last, seconds, errors)


def pick_inference(seconds: dict[str, float], errors: dict[str, float]) -> tuple[str, bool]:
    """The fastest candidate within TOLERANCE of fp32 and at least MIN_SPEEDUP faster than it; else fp32."""
    reference = seconds[inference_label(*INFERENCE_CANDIDATES[0])]
    eligible = [c for c in INFERENCE_CANDIDATES
                if errors[inference_label(*c)] <= TOLERANCE
                and reference >= MIN_SPEEDUP * seconds[inference_label(*c)]]
    return min(eligible, key=lambda c: seconds[inference_label(*c)]) if eligible else INFERENCE_CANDIDATES[0]
