"""Issue 80's study: `auto` against staying at a wrong start, on two cores and on the cluster clock.

For one game, a chunk of ``--jobs`` seeds at a time (so that the fixed and adaptive runs of those seeds
share the machine's load):
a fixed-batch sweep over ``--fixed`` batches and ``auto`` from each of ``--starts`` (two-core arm), then
``auto`` from the same starts with ``--cluster-nodes`` (the cluster arm, scored on the clock only).
Every run is a Ray Tune trial of ``rlscale sweep``, which skips finished trials: the same command
resumes. When every seed is done it writes the reports beside the runs:

    OUT/GAME/study.txt    rlscale study of the two-core arm, then of both arms on the cluster clock
    OUT/GAME/oracle.txt   rlscale oracle of the fixed runs (two-core, cluster time, node-hours)

    python research/experiments/auto_study.py cartpole --out runs/auto-study --best 80 \
        --fixed 10 20 40 80 160 320 640 --seeds 10 11 12 13 14 --set min_envs=2 --set max_envs=256 \
        --set noise_groups=2
    python research/experiments/auto_study.py minatar-breakout --out runs/auto-study --best 320 --lrs 2.24e-2 \
        --lr-alpha 0.5 --fixed 40 80 160 320 640 2560 --goals 5 8 11 14 --seeds 10 11 12 13 14 ...

``--auto-set crit_ratio=7`` adds a variant of ``auto`` from the same starts (``two-core-variant/``, reported in
study.txt beside the others); ``--arms`` runs some arms only (``--only-variant``: just the variant).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

PYTHON = sys.executable


def lr_for(batch: float, args: argparse.Namespace) -> list[float]:
    """The rates a batch runs at: --lrs, or with --lr-alpha the first of them moved by (B / best)^alpha."""
    if args.lr_alpha is None:
        return args.lrs
    return [float(f"{args.lrs[0] * (batch / args.best) ** args.lr_alpha:.3g}")]


def sweep(game: str, out: Path, seeds: list[int], args: argparse.Namespace) -> None:
    """One chunk of seeds: every fixed batch and every start, each at its rate, as Tune trials side by side."""
    common = ["--seeds", *map(str, seeds), "--max-concurrent", str(args.jobs),
              "--total-frames", str(args.total_frames), *[a for s in args.set for a in ("--set", s)]]
    if args.env_id:
        common += ["--set", f"env_id={args.env_id}"]
    if args.goals:
        common += ["--goals", *map(str, args.goals)]
    starts = [round(f * args.best) for f in args.starts]
    variant = [a for s in args.auto_set for a in ("--set", s)]
    if args.lr_alpha is None:  # one rate for all: one invocation an arm
        rates = ["--lrs", *map(str, args.lrs)]
        fixed = [["--batch-sizes", *map(str, args.fixed), *rates, "--sweep-dir", str(out / "two-core")]]
        auto = [["--auto-from", *map(str, starts), *rates, "--sweep-dir", str(out / "two-core")]]
        variants = [["--auto-from", *map(str, starts), *rates, *variant, "--sweep-dir", str(out / args.variant_dir)]]
        cluster = [["--auto-from", *map(str, starts), *rates, "--cluster-nodes", str(args.nodes),
                    "--sweep-dir", str(out / "cluster")]]
    else:  # a rate per batch: one invocation a batch, its seeds side by side
        fixed = [["--batch-sizes", str(b), "--lrs", *map(str, lr_for(b, args)), "--sweep-dir", str(out / "two-core")]
                 for b in args.fixed]
        auto = [["--auto-from", str(b), "--lrs", *map(str, lr_for(b, args)), "--sweep-dir", str(out / "two-core")]
                for b in starts]
        variants = [["--auto-from", str(b), "--lrs", *map(str, lr_for(b, args)), *variant,
                     "--sweep-dir", str(out / args.variant_dir)] for b in starts]
        cluster = [["--auto-from", str(b), "--lrs", *map(str, lr_for(b, args)), "--cluster-nodes", str(args.nodes),
                    "--sweep-dir", str(out / "cluster")] for b in starts]
    # --auto-set: a variant of auto from the same starts, in its own folder (its trials share auto's names), run
    # before the cluster arm so that the two-core arms finish first.
    arms = {"fixed": fixed, "auto": auto, "variant": variants if args.auto_set else [], "cluster": cluster}
    runs = [r for arm in args.arms for r in arms[arm]]
    for extra in runs:
        command = [PYTHON, "-m", "rlscale.sweep", game, *extra, *common]
        print(f"[{time.strftime('%H:%M:%S')}] seeds {seeds}: {' '.join(command[1:])}", flush=True)
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def report(out: Path, args: argparse.Namespace) -> None:
    goals = ["--goals", *map(str, args.goals)] if args.goals else []
    two_core = [str(out / "two-core")] + ([str(out / args.variant_dir)] if args.auto_set else [])
    for name, command in (
        ("study.txt", [["rlscale.reports.study", *two_core, *goals],
                       ["rlscale.reports.study", str(out / "two-core"), str(out / "cluster"), *goals,
                        "--cluster-nodes", str(args.nodes), "--out", str(out / "study-cluster.png")]]),
        ("oracle.txt", [["rlscale.reports.oracle", str(out / "two-core"), *goals, "--round-trip", "0.03",
                         "--nodes", str(args.nodes), "--node-batch", str(args.node_batch)]]),
    ):
        with open(out / name, "w") as f:
            for part in command:
                f.write(f"$ python -m {' '.join(part)}\n")
                f.flush()
                subprocess.run([PYTHON, "-m", *part], stdout=f, stderr=subprocess.STDOUT, check=False)
        print(f"wrote {out / name}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("game", help="preset the runs start from")
    p.add_argument("--env-id", help="another game on the preset's settings, e.g. MinAtar/Asterix-v1")
    p.add_argument("--name", help="the study's folder under --out (default: the preset's name)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--best", type=float, required=True, help="the game's best fixed optimizer batch (1x)")
    p.add_argument("--starts", type=float, nargs="+", default=[0.125, 1.0, 8.0])
    p.add_argument("--fixed", type=int, nargs="+", required=True)
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--lrs", type=float, nargs="+", required=True)
    p.add_argument("--lr-alpha", type=float, help="each batch at lrs[0] (B / best)^alpha (the power rule's rates)")
    p.add_argument("--goals", type=float, nargs="*")
    p.add_argument("--total-frames", type=int, required=True)
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--node-batch", type=float, required=True, help="observations one node carries (oracle)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--auto-set", action="append", default=[], metavar="KEY=VALUE",
                   help="also run auto from each start with these settings (e.g. crit_ratio=7), in two-core-variant/")
    p.add_argument("--variant-dir", default="two-core-variant", help="the variant arm's folder (default: %(default)s)")
    p.add_argument("--only-variant", action="store_true",
                   help="run only the --auto-set arm (the other arms are already done): --arms variant")
    p.add_argument("--arms", nargs="+", choices=["fixed", "auto", "variant", "cluster"],
                   default=["fixed", "auto", "variant", "cluster"],
                   help="which arms to run, in this order (default: all; variant only with --auto-set)")
    p.add_argument("--no-report", action="store_true",
                   help="skip the reports (a driver that runs one chunk of seeds an invocation writes them once)")
    args = p.parse_args()
    if args.only_variant:
        args.arms = ["variant"]
    out = args.out / (args.name or args.game)
    out.mkdir(parents=True, exist_ok=True)
    for chunk in range(0, len(args.seeds), args.jobs):
        sweep(args.game, out, args.seeds[chunk:chunk + args.jobs], args)
    if not args.no_report:
        report(out, args)


if __name__ == "__main__":
    main()
