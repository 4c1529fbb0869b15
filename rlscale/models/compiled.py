"""The learner's network compiled by ``torch.compile`` (inductor), or eager where that fails.

``learner_compile auto`` (the default) compiles PPO's bf16 learner of a
convolutional network on a CPU. The compiled network runs the passes that
measure nothing (with PPO's defaults 15 of every 16 minibatches: the noise
scale is measured on the first one); the measuring passes stay eager, because
they hook into layers and take gradients of gradients, which compiled graphs
do not offer. Same update up to float rounding (``tests/test_compiled.py``).
On a 2-core AMD EPYC with bf16 units a default Pong PPO update took 0.72x
eager's time and the default run went 1.22x as fast (90-s rows; 1.10x in 40-s
rows). In fp32 the run went 1.02-1.05x as fast with AVX2 only and 1.00x with
AVX-512 (interleaved rows, 2026-11-28), and compiled MinAtar PPO read
0.83-1.00x: fp32 learners stay eager unless ``on`` is asked for
(docs/performance.md). A batch resized mid-run (the batch-control
modes) changes the passes' shape: the first pass of a new
shape compiles again (seconds), after which the compiled code takes any size.

Compilation takes seconds (inductor generates and builds C++; it caches the
result on disk for the next run) and needs a C++ compiler: it is done once at
start-up, on a pass of the size the learner trains on, so that a failure
leaves the run eager with the reason in its header instead of failing it.
Inductor's disk cache does not tell code built under ``ONEDNN_MAX_CPU_ISA`` or
``ATEN_CPU_CAPABILITY`` caps from code built without them: a native run that
loaded an emulated run's kernels crashed. Emulating another CPU with those caps
and compiling, give it its own ``TORCHINDUCTOR_CACHE_DIR``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from rlscale.models.precision import network_forward


@dataclass(frozen=True)
class CompileChoice:
    module: torch.nn.Module | None  # the compiled network (its parameters are the model's); None: eager
    note: str  # for the run's header


def compile_network(model: torch.nn.Module, obs: torch.Tensor, bf16: bool, channels_last: bool) -> CompileChoice:
    """``model`` compiled, after one forward and backward pass of ``obs`` through it (compiling both).

    The pass's gradients are discarded: the model's ``.grad`` are left unset.
    """
    start = time.perf_counter()
    compiled = torch.compile(model)
    try:
        logits, value = network_forward(compiled, obs, bf16, channels_last)
        (logits.sum() + value.sum()).backward()
    except Exception as err:  # noqa: BLE001 - any failure of the optional compiler leaves the learner eager
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return CompileChoice(None, f"eager (torch.compile failed: {first[:200]})")
    finally:
        model.zero_grad(set_to_none=True)
    return CompileChoice(compiled, f"compiled (torch.compile, {time.perf_counter() - start:.0f} s)")
