"""What an option of the default Pong PPO run costs or buys, end to end, in agent steps/s.

    python benchmarks/bench_ppo_options.py [--compare noise|overlap|passes|compile|side-by-side] [--seconds 40]
        [--rounds 2]
        [--learner-precision auto|fp32|bf16]

The default run's engine (``python -m rlscale.train pong``: 2 Ray actors, the
learner's precision and threads as it chooses them), updates back to back,
each variant of the compared option in turn, each row the same wall time,
for a few rounds, so that drift on the machine hits every variant alike.

* ``noise``: the noise scale measured on the first epoch's first minibatch
  (the default, ``--noise-minibatches 1``), on all four (``0``), and not at all.
* ``overlap``: the actors collecting the next batch while the learner trains
  (``--overlap``, a policy lag of one update), with the default 2 actors and
  with 1, against the default's collect-then-learn.
* ``passes``: the learner's forward/backward passes of about 128 rows (two per
  256-row minibatch) or 256 (one per minibatch, the default), ``--learner-chunk-rows``.
* ``compile``: the learner's unmeasured passes through ``torch.compile``
  (``--learner-compile on``; the default where the learner runs bf16) against
  eager (``off``). With the CPU capped by the variables below, the compiled
  kernels go to an inductor cache of their own (rlscale/models/compiled.py
  says why), unless ``TORCHINDUCTOR_CACHE_DIR`` names one.
* ``side-by-side``: the learner's unmeasured passes shared by a team of threads
  (``--learner-passes team``, the default) or split across them, a part each
  (``side-by-side``). A bf16 learner's team passes are compiled and its
  side-by-side ones eager: compare with ``--learner-precision fp32`` to see
  the schedule alone.

Each row prints its rate and the median seconds of an update's rollout and
learner phases.

Run it on a quiet machine; prefix ``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``
to see a CPU without bf16 units.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from bench import rlscale_default

# Per option: the row every other is divided by, and each row's settings over the default run's.
COMPARISONS: dict[str, tuple[str, dict[str, dict]]] = {
    "noise": ("noise off", {"noise on, 1 minibatch (default)": {},
                            "noise on, all 4 minibatches": {"noise_minibatches": 0},
                            "noise off": {"measure_noise": False}}),
    "overlap": ("collect, then learn (default)", {"collect, then learn (default)": {},
                                                  "--overlap, 2 actors": {"overlap": True},
                                                  "--overlap, 1 actor": {"overlap": True, "n_actors": 1}}),
    "passes": ("passes of ~128 rows", {"passes of ~128 rows": {"learner_chunk_rows": 128},
                                       "passes of ~256 rows (default)": {"learner_chunk_rows": 256}}),
    "compile": ("learner eager", {"learner eager": {"learner_compile": "off"},
                                  "learner compiled": {"learner_compile": "on"}}),
    "side-by-side": ("a team of threads per pass", {"a team of threads per pass": {"learner_passes": "team"},
                                                    "passes side by side": {"learner_passes": "side-by-side"}}),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compare", choices=sorted(COMPARISONS), default="noise",
                   help="the option whose variants are timed (default: noise)")
    p.add_argument("--seconds", type=float, default=40.0, help="wall time of each row (default: 40)")
    p.add_argument("--learner-precision", choices=["auto", "fp32", "bf16"], default="auto",
                   help="the learner's precision in every row (default: auto, as the default run)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of the rows (default: 2)")
    args = p.parse_args()
    caps = [f"{v}={os.environ[v]}" for v in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY") if os.environ.get(v)]
    if args.compare in ("compile", "side-by-side") and caps and not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        # Inductor's cache does not key on these caps: kernels built under them crashed an uncapped run.
        cache = Path(tempfile.gettempdir()) / ("torchinductor-" + "-".join(caps).replace("=", "_"))
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
        print(f"{', '.join(caps)}: compiled kernels cached apart, in {cache}", flush=True)
    reference_name, variants = COMPARISONS[args.compare]
    results: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(args.rounds):
        for name, overrides in variants.items():
            # The Ray actors in every row: the rows compare one option, not whichever pool a start-up chose.
            rate, _, split, schedule, _ = rlscale_default("ppo", args.seconds, 8, {
                "learner_precision": args.learner_precision, "pool": "actors", **overrides})
            results[name].append(rate.steps_per_s)
            print(f"round {round_ + 1}: {name:32s} {rate.steps_per_s:6.0f} agent steps/s (rollout "
                  f"{split.rollout:.3f} s, learner {split.learner:.3f} s per update)", flush=True)
            if round_ == 0:
                print(f"    schedule: {schedule}", flush=True)
    reference = sum(results[reference_name]) / args.rounds
    for name, rates in results.items():
        mean = sum(rates) / args.rounds
        print(f"{name:32s} {mean:6.0f} agent steps/s, {mean / reference:.3f}x {reference_name}")


if __name__ == "__main__":
    main()
