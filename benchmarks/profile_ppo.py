"""Where the default Pong PPO learner's time goes, against the lean PPO's minibatch updates on the same batch.

    python benchmarks/profile_ppo.py [--repeats 5] [--precision fp32] [--profile] [--device cuda]

One real Pong batch (8 envs x 128 steps, the default run's), then, interleaved
round-robin (``benchtiming.interleaved_medians``): the lean learner (CleanRL's
16 minibatch updates of 256 rows: forward, loss, backward, clip, Adam: the
ceiling's learner work), rlscale's PPO update with the noise measurement off,
on as the default run has it (B_simple on the first epoch's minibatches; the
policy/value parts and B_P/B_noise every few batches, here on every one of
their cadence's share), and on with the metrics forced on every update.
``--profile`` adds torch.profiler's table of the default update's operators.
``--device cuda`` runs every learner, the lean one too, on the GPU (each call
timed to the GPU's finish).
"""

from __future__ import annotations

import argparse
import functools

import numpy as np
import torch
from bench_noise import pong_batch
from benchtiming import interleaved_medians

from rlscale.agents.ppo import PPOLearner
from rlscale.config import build_config
from rlscale.models.nets import build_network


def lean_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, obs: torch.Tensor, bf16: bool) -> None:
    rows, device = obs.shape[0], obs.device
    actions = torch.randint(0, 6, (rows,), device=device)
    advantages, returns = torch.randn(rows, device=device), torch.randn(rows, device=device)
    generator = np.random.default_rng(0)
    for _ in range(4):
        for mb in np.array_split(generator.permutation(rows), 4):
            mb = torch.from_numpy(mb).to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                logits, value = model(obs[mb])
            dist = torch.distributions.Categorical(logits=logits.float())
            logprob = dist.log_prob(actions[mb])
            ratio = (logprob - logprob.detach()).exp()
            adv = advantages[mb]
            loss = (torch.max(-adv * ratio, -adv * ratio.clamp(0.9, 1.1)).mean()
                    + 0.5 * (value.float() - returns[mb]).pow(2).mean() - 0.01 * dist.entropy().mean())
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()


def _finished(call) -> None:
    call()
    torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    p.add_argument("--profile", action="store_true", help="also print torch.profiler's table of the default update")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: every core)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        p.exit(2, f"--device cuda: torch {torch.__version__} sees no GPU here\n")
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    batch, spec = pong_batch(8, "ppo")
    where = torch.cuda.get_device_name() if device.type == "cuda" else f"cpu, torch threads {torch.get_num_threads()}"
    print(f"{where}, precision {args.precision}, batch {batch.size} rows; "
          f"median of {args.repeats} updates each", flush=True)
    variants = {
        "rlscale, noise off": {"measure_noise": False},
        "rlscale default": {},
        "rlscale, metrics every update": {"curvature_every": 1},
        "rlscale, parts every update": {"noise_parts_every": 1},
        "rlscale, noise on 1 minibatch": {"noise_minibatches": 1},
        "rlscale, noise off, 256-row passes": {"measure_noise": False, "learner_chunk_rows": 256},
        "rlscale default, 256-row passes": {"learner_chunk_rows": 256},
        "rlscale default, side by side": {"learner_passes": "side-by-side"},
    }
    learners = {}
    for name, overrides in variants.items():
        torch.manual_seed(1)
        learners[name] = PPOLearner.from_config(build_network(spec, "auto", 64).to(device),
                                    build_config("pong", "ppo", {"learner_precision": args.precision, **overrides}))
    if device.type == "cpu" and torch.get_num_threads() > 1:  # the engine's --learner-passes, set here
        learners["rlscale default, side by side"].share_passes(
            "side-by-side", torch.from_numpy(batch.obs.reshape(-1, *spec.obs_shape)[:256]), torch.get_num_threads())
    else:
        del learners["rlscale default, side by side"]
    torch.manual_seed(1)
    lean_model = build_network(spec, "auto", 64).to(device, memory_format=torch.channels_last)
    lean_optimizer = torch.optim.Adam(lean_model.parameters(), lr=2.5e-4, eps=1e-5)
    obs = torch.from_numpy(batch.obs.reshape(-1, *spec.obs_shape)).to(device).contiguous(
        memory_format=torch.channels_last)
    calls = {"lean (16 minibatch updates)": functools.partial(lean_update, lean_model, lean_optimizer, obs,
                                                             args.precision == "bf16")}
    calls |= {name: functools.partial(learner.update, batch) for name, learner in learners.items()}
    if device.type == "cuda":  # each call timed to the GPU's finish, not to its last kernel's launch
        calls = {name: functools.partial(_finished, call) for name, call in calls.items()}
    medians = interleaved_medians(calls, args.repeats)
    lean = medians["lean (16 minibatch updates)"]
    print(f"{'variant':32s} {'s/update':>9s} {'vs lean':>8s} {'ms/agent step':>14s}")
    for name, med in medians.items():
        print(f"{name:32s} {med:9.3f} {med / lean:8.2f} {1e3 * med / batch.size:14.3f}")
    for learner in learners.values():
        learner.close()  # the side-by-side workers
    if args.profile:
        learner = learners["rlscale default"]
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            learner.update(batch)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
