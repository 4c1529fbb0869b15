"""Forward + backward of the Nature CNN alone: fp32, bf16 autocast, channels-last; or its FLOP rate.

    python benchmarks/bench_network.py [--repeats 10]
    python benchmarks/bench_network.py --flops [--rows 256] [--precision fp32|bf16]

At 80 and 640 observations (Pong's 16 and 128 envs x 5 steps), the median
milliseconds of one forward and backward pass in four variants, run
interleaved, and the speed-up against plain fp32. Also prints whether the CPU
reports AVX-512 BF16 (/proc/cpuinfo), which bf16 autocast needs to be fast.

``--flops`` asks how close the learner's arithmetic runs to what this CPU can
do. Each of the network's layers (channels-last, as the learner runs them) is
timed alone on PPO's minibatch (256 rows by default): forward, and forward +
backward (weight gradients, and the input's gradient for every layer but the
first, as in training). Its floating-point operations are counted in the call
by torch's FLOP counter (2 per multiply-add) and divided by the time. The
reference is the rate of a large, well-vectorised convolution (3x3, 256
channels) through the same library, in one thread and in all of them: a layer
near 1.0 of it runs as fast as the library's best kernel does on this core.
The last line turns the network's operations into the learner's CPU time per
agent step at PPO's defaults (4 epochs: each agent step is trained on 4
times) if every layer ran at the reference rate.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import torch
from bench import cpu_kind
from benchtiming import interleaved_medians
from torch.utils.flop_counter import FlopCounterMode

from rlscale.envs.vector import EnvSpec
from rlscale.models.nets import build_network

PONG = EnvSpec((4, 84, 84), "uint8", 6, True)


def step(model: torch.nn.Module, obs: torch.Tensor, bf16: bool) -> Callable[[], None]:
    def run() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits, value = model(obs)
        (logits.float().sum() + value.float().sum()).backward()
    return run


def timed_layer(layer: torch.nn.Module, x: torch.Tensor, with_input_grad: bool,
                bf16: bool) -> dict[str, Callable[[], None]]:
    x = x.detach().requires_grad_(with_input_grad)

    def forward() -> None:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            layer(x)

    def forward_backward() -> None:
        layer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = layer(x)
        out.float().sum().backward()

    return {"forward": forward, "forward+backward": forward_backward}


def counted_flops(call: Callable[[], None]) -> float:
    with FlopCounterMode(display=False) as counter:
        call()
    return float(counter.get_total_flops())


def reference_rate(threads: int, bf16: bool, repeats: int) -> float:
    """GFLOP/s of the reference kernel in ``threads`` threads: a large, well-vectorised convolution
    (3x3, 256 channels in and out, 32 x 16 x 16, channels-last, forward).

    It runs through the same library (oneDNN) and instruction set as the network's convolutions.
    A matrix product is no reference: torch's goes through MKL, which on an AMD EPYC ran fp32 at
    0.4x oneDNN's convolution rate (AVX2 code where oneDNN used AVX-512).
    """
    torch.set_num_threads(threads)
    conv = torch.nn.Conv2d(256, 256, 3, padding=1, bias=False).to(memory_format=torch.channels_last)
    x = torch.randn(32, 256, 16, 16).contiguous(memory_format=torch.channels_last)

    def forward() -> None:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            conv(x)

    return counted_flops(forward) / interleaved_medians({"conv": forward}, repeats)["conv"] / 1e9


def flop_rates(rows: int, precision: str, repeats: int) -> None:
    """Each layer's GFLOP/s at ``rows`` rows against the reference convolution's, in 1 and all threads."""
    bf16 = precision == "bf16"
    torch.manual_seed(0)
    model = build_network(PONG, "auto", 64).to(memory_format=torch.channels_last)
    obs = torch.randint(0, 256, (rows, *PONG.obs_shape), dtype=torch.uint8).contiguous(
        memory_format=torch.channels_last)
    layers = [m for m in model.trunk if isinstance(m, torch.nn.Conv2d | torch.nn.Linear)]
    inputs: dict[torch.nn.Module, torch.Tensor] = {}
    hooks = [m.register_forward_hook(lambda m, i, o: inputs.__setitem__(m, i[0].detach())) for m in layers]
    with torch.no_grad():
        model(obs)
    for hook in hooks:
        hook.remove()
    # Counted by torch's FLOP counter as each call runs (2 per multiply-add): the backward
    # pass computes the input's gradient for every layer but the first, whose input is the
    # observation, as in training.
    calls = {m: timed_layer(m, inputs[m], i > 0, bf16) for i, m in enumerate(layers)}
    forward_flops = {m: counted_flops(calls[m]["forward"]) for m in layers}
    total_flops = {m: counted_flops(calls[m]["forward+backward"]) for m in layers}
    cores = torch.get_num_threads()
    print(f"CPU: {cpu_kind()}")
    print(f"rows {rows}, {precision}, channels-last; median of {repeats}; each layer's GFLOP/s and "
          f"x ref: its fraction of the reference convolution's rate")
    reference = {}
    for threads in sorted({1, cores}):
        peak = reference[threads] = reference_rate(threads, bf16, repeats)
        torch.set_num_threads(threads)
        print(f"\n{threads} thread{'s' if threads > 1 else ''}: the reference (3x3 convolution, 256 channels) "
              f"{peak:.0f} GFLOP/s")
        print(f"{'layer':34s} {'fwd ms':>7s} {'GFLOP/s':>8s} {'x ref':>7s} {'f+b ms':>7s} {'GFLOP/s':>8s} {'x ref':>7s}")
        seconds = {"forward": 0.0, "forward+backward": 0.0}
        for m in layers:
            medians = interleaved_medians(calls[m], repeats)
            rates = [forward_flops[m] / medians["forward"] / 1e9, total_flops[m] / medians["forward+backward"] / 1e9]
            seconds = {k: seconds[k] + medians[k] for k in seconds}
            print(f"{describe(m):34s} {1e3 * medians['forward']:7.1f} {rates[0]:8.0f} {rates[0] / peak:7.2f} "
                  f"{1e3 * medians['forward+backward']:7.1f} {rates[1]:8.0f} {rates[1] / peak:7.2f}")
        fwd, both = sum(forward_flops.values()), sum(total_flops.values())
        print(f"{'the layers together':34s} {1e3 * seconds['forward']:7.1f} {fwd / seconds['forward'] / 1e9:8.0f} "
              f"{fwd / seconds['forward'] / 1e9 / peak:7.2f} {1e3 * seconds['forward+backward']:7.1f} "
              f"{both / seconds['forward+backward'] / 1e9:8.0f} {both / seconds['forward+backward'] / 1e9 / peak:7.2f}")
    per_step = 4 * both / rows  # PPO's 4 epochs: every agent step is trained on 4 times
    print(f"\nPPO's learner at its defaults does {per_step / 1e6:.0f} MFLOP of these layers per agent step: "
          f"{1e3 * per_step / (reference[1] * 1e9):.2f} ms of CPU time at the reference rate in one thread")


def describe(layer: torch.nn.Module) -> str:
    if isinstance(layer, torch.nn.Conv2d):
        k, s = layer.kernel_size[0], layer.stride[0]
        return f"conv {layer.in_channels}->{layer.out_channels} {k}x{k} stride {s}"
    return f"linear {layer.in_features}->{layer.out_features}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--flops", action="store_true", help="each layer's FLOP rate against a reference convolution's")
    p.add_argument("--rows", type=int, default=256, help="with --flops: rows of the batch (PPO's minibatch)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"), help="with --flops")
    args = p.parse_args()
    if args.rows < 1 or args.repeats < 1:
        p.exit(2, "--rows and --repeats must be at least 1\n")
    if args.flops:
        flop_rates(args.rows, args.precision, args.repeats)
        return
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
