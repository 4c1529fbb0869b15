"""Forward + backward of the Nature CNN alone: fp32, bf16 autocast, channels-last.

    python benchmarks/bench_network.py [--repeats 10]

At 80 and 640 observations (Pong's 16 and 128 envs x 5 steps), the median
milliseconds of one forward and backward pass in four variants, run
interleaved, and the speed-up against plain fp32. Also prints whether the CPU
reports AVX-512 BF16 (/proc/cpuinfo), which bf16 autocast needs to be fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import torch
from benchtiming import interleaved_medians

from rlscale.envs.vector import EnvSpec
from rlscale.models.nets import build_network

PONG = EnvSpec((4, 84, 84), "uint8", 6, True)


def step(model: torch.nn.Module, obs: torch.Tensor, bf16: bool) -> Callable[[], None]:
    def run() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits, value = model(obs)
        (logits.float().sum() + value.float().sum()).backward()
    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args()
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    print(f"torch threads {torch.get_num_threads()}; CPU reports avx512_bf16: {'avx512_bf16' in flags}, "
          f"amx_bf16: {'amx_bf16' in flags}; median of {args.repeats}")
    print(f"{'obs':>5s} {'variant':22s} {'ms':>8s} {'speed-up':>9s}")
    for n in (80, 640):
        torch.manual_seed(0)
        obs = torch.randint(0, 256, (n, *PONG.obs_shape), dtype=torch.uint8)
        plain = build_network(PONG, "auto", 64)
        last = build_network(PONG, "auto", 64).to(memory_format=torch.channels_last)
        obs_last = obs.contiguous(memory_format=torch.channels_last)
        variants = {
            "fp32": step(plain, obs, False),
            "bf16 autocast": step(plain, obs, True),
            "fp32 channels-last": step(last, obs_last, False),
            "bf16 channels-last": step(last, obs_last, True),
        }
        medians = interleaved_medians(variants, args.repeats)
        for name, med in medians.items():
            print(f"{n:5d} {name:22s} {1000 * med:8.1f} {medians['fp32'] / med:9.2f}")

if __name__ == "__main__":
    main()
