"""Learner time per update with the noise-scale measurement off and on, on Pong.

    python benchmarks/bench_noise.py [--repeats 30] [--no-bf16] [--envs 16 128] [--only VARIANT ...]
    python benchmarks/bench_noise.py --pass-scan [--repeats 9]

At B = 80 and B = 640 observations (16 and 128 envs x 5 steps), one real Pong
batch each, the learner variants run interleaved round-robin so that machine
noise hits them alike: measurement off (forward/backward passes of about 128
rows, the default on CPU, or one pass over the whole batch), total only (k = 4
group gradients, every update), total + policy/value parts (one extra backward
pass), total + B_P, B_noise and B_PH on every update (their extra passes; the
runs measure them every --curvature-every batches), each measured both ways (the groups of a pass measured together, the
shared-pass route; or one pass per group), "off" and "total" with the
convolutions in contiguous layout instead of channels-last, and with the
network in bf16 autocast (slow on CPUs without bf16 units; leave it out with
--no-bf16), and total + parts with the big layer's norms from Gram matrices at
every size (the route before ``gradients.gram_is_cheaper``). Prints median
milliseconds and the ratios against "off" (fp32).

--pass-scan times the unmeasured update at B = 160, 640 and 1280 with the
batch split into forward/backward passes of 40 to 1280 rows (how the
learner's default pass size of about 128 rows on CPU was chosen).
"""

from __future__ import annotations

import argparse
import functools

import torch
from benchtiming import interleaved_medians

import rlscale.agents.gradients
from rlscale.agents.a2c import A2CLearner
from rlscale.config import build_config
from rlscale.envs.vector import probe_spec
from rlscale.models.nets import build_network
from rlscale.rollout.worker import SerialPool, flat_weights

SHARED_PASS = "shared_pass"  # a field of the learner's gradient route, not a config field
ALWAYS_GRAM = "always_gram"  # Gram-matrix norms whatever the size (not a config field either)
VARIANTS = {
    "off": {"measure_noise": False},
    # B_P and B_noise (rlscale/agents/curvature.py) on every update; elsewhere they are off here.
    "total + metrics": {"measure_noise": True, "noise_parts_every": 0, "curvature_every": 1},
    # The whole batch in one forward/backward pass instead of passes of ~128 rows.
    "off, one pass": {"measure_noise": False, "learner_chunk_rows": 1_000_000},
    # The convolutions in plain contiguous (NCHW) layout instead of channels-last.
    "off, contiguous": {"measure_noise": False, "channels_last": False},
    "total, contiguous": {"measure_noise": True, "noise_parts_every": 0, "channels_last": False},
    "total (k=4)": {"measure_noise": True, "noise_parts_every": 0},
    "total + parts": {"measure_noise": True, "noise_parts_every": 1},
    # The per-group route only: a forward and backward pass per env group.
    "total, per group": {"measure_noise": True, "noise_parts_every": 0, SHARED_PASS: False},
    "t + parts, per group": {"measure_noise": True, "noise_parts_every": 1, SHARED_PASS: False},
    # Group and batch norms of the 3136x512 layer from Gram matrices at every size (before
    # gradients.gram_is_cheaper chose the product above ~440 rows).
    "t + parts, Gram always": {"measure_noise": True, "noise_parts_every": 1, ALWAYS_GRAM: True},
    # The same update with the network in bf16 autocast (--learner-precision bf16).
    "off, bf16": {"measure_noise": False, "learner_precision": "bf16"},
    "total, bf16": {"measure_noise": True, "noise_parts_every": 0, "learner_precision": "bf16"},
}


def pong_batch(n_envs: int, algo: str = "a2c"):
    """One real Pong batch of n_envs x the agent's steps (A2C: 5, PPO: 128), and the env's spec."""
    base = build_config("pong", algo, {"n_envs": n_envs, "warmup_max_steps": 0})
    spec = probe_spec(base.env)
    torch.manual_seed(0)
    pool = SerialPool(base, spec)
    batch = pool.collect(flat_weights(build_network(spec, "auto", 64)))
    pool.close()
    return batch, spec


def pass_scan(repeats: int) -> None:
    print(f"{'batch':>6s} {'rows/pass':>9s} {'ms/update':>10s} {'vs 1 pass':>9s}")
    for n_envs in (32, 128, 256):
        batch, spec = pong_batch(n_envs)
        learners = {
            rows: A2CLearner.from_config(build_network(spec, "auto", 64),
                             build_config("pong", "a2c", {"n_envs": n_envs, "measure_noise": False,
                                                         "learner_chunk_rows": rows}))
            for rows in (40, 80, 160, 320, 640, 1280) if rows <= batch.size
        }
        updates = {rows: functools.partial(learner.update, batch) for rows, learner in learners.items()}
        medians = interleaved_medians(updates, repeats)
        for rows, med in medians.items():
            print(f"{batch.size:6d} {rows:9d} {1000 * med:10.1f} {med / medians[max(medians)]:9.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--no-bf16", action="store_true", help="leave out the bf16 variants")
    p.add_argument("--pass-scan", action="store_true", help="time pass sizes instead (measurement off)")
    p.add_argument("--envs", type=int, nargs="+", default=[16, 128], help="batches of ENVS x 5 steps")
    p.add_argument("--only", nargs="+", metavar="VARIANT", help=f"run only these of {list(VARIANTS)}")
    args = p.parse_args()
    unknown = set(args.only or ()) - set(VARIANTS)
    if unknown:
        p.error(f"unknown variants {sorted(unknown)}; choose from {list(VARIANTS)}")
    torch.set_num_threads(torch.get_num_threads())
    print(f"torch threads: {torch.get_num_threads()}; median of {args.repeats} updates each")
    if args.pass_scan:
        pass_scan(args.repeats)
        return
    print(f"{'batch':>6s} {'variant':22s} {'ms/update':>10s} {'vs off':>7s}")
    for n_envs in args.envs:
        batch, spec = pong_batch(n_envs)
        learners = {name: variant_learner(name, spec, n_envs) for name in VARIANTS
                    if not ((args.no_bf16 and "bf16" in name) or (args.only and name not in args.only and name != "off"))}
        updates = {name: functools.partial(gram_always if VARIANTS[name].get(ALWAYS_GRAM) else run_update,
                                           learner, batch) for name, learner in learners.items()}
        medians = interleaved_medians(updates, args.repeats)
        for name, med in medians.items():
            print(f"{batch.size:6d} {name:22s} {1000 * med:10.1f} {med / medians['off']:7.2f}")


def variant_learner(name: str, spec, n_envs: int) -> A2CLearner:
    """The Pong A2C learner of one variant, on the same weights as every other."""
    overrides = VARIANTS[name]
    # noise_settle 0: every timed update measures, as a run's do once its environments have settled (with
    # the default 50 steps, the first 10 batches of 5 steps measure nothing: until 2026-12-05 this
    # benchmark's few updates all fell in that wait, and "total + metrics" timed no metrics).
    config = {"measure_curvature": "metrics" in name, "noise_settle": 0,
              **{k: v for k, v in overrides.items() if k not in (SHARED_PASS, ALWAYS_GRAM)}}
    torch.manual_seed(1)  # the same weights for every variant
    learner = A2CLearner.from_config(build_network(spec, "auto", 64),
                                     build_config("pong", "a2c", {"n_envs": n_envs, **config}))
    learner.route.shared_pass = overrides.get(SHARED_PASS, learner.route.shared_pass)
    return learner


def run_update(learner: A2CLearner, batch) -> None:
    learner.update(batch)


def gram_always(learner: A2CLearner, batch) -> None:
    """The update with the size rule of the Gram route switched off for its duration."""
    real = rlscale.agents.gradients.gram_is_cheaper
    rlscale.agents.gradients.gram_is_cheaper = lambda *_: True
    try:
        learner.update(batch)
    finally:
        rlscale.agents.gradients.gram_is_cheaper = real


if __name__ == "__main__":
    main()
