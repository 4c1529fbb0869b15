"""Issue 61's controller on CartPole: `--batch measured --progress reach` from 1/4x, 1x and 4x the best
fixed batch (200 at lr 3e-3, chosen on seeds 30-34 on 2026-11-26) against that batch, on the held-out
seeds 35-39, to a mean return of 475 (research/notebook/results.md).

    python research/experiments/measured_study_cartpole.py --out DIR [--seeds 35 36 37 38 39] [--arms ...]

Resumable (a finished run is skipped). One run at a time, the arms interleaved seed by seed so they share
whatever else the machine runs; serial runs, one learner thread, fp32. Then ``rlscale study`` over them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

COMMON = ["--serial", "--learner-threads", "1", "--learner-precision", "fp32", "--actor-precision", "fp32",
          "--log-interval", "600", "--lr", "3e-3", "--goals", "100", "200", "400", "475", "--stop-return", "475",
          "--total-frames", "3000000"]
ARMS = {
    "fixed-200": ["--n-envs", "40"],
    "measured-from-50": ["--n-envs", "10", "--batch", "measured", "--progress", "reach", "--min-envs", "4",
                         "--max-envs", "256"],
    "measured-from-200": ["--n-envs", "40", "--batch", "measured", "--progress", "reach", "--min-envs", "4",
                          "--max-envs", "256"],
    "measured-from-800": ["--n-envs", "160", "--batch", "measured", "--progress", "reach", "--min-envs", "4",
                          "--max-envs", "256"],
}
# The same measurements with two races at once, each a Ray task of its own (--branches-at-once 2; added
# 2026-11-29 after 22e84df): the same races and readings, the measurement's wall time shared by two cores.
ARMS |= {f"{arm}-2-at-once": [*flags, "--branches-at-once", "2"] for arm, flags in ARMS.items() if "measured" in arm}
DEFAULT_ARMS = ["fixed-200", "measured-from-50", "measured-from-200", "measured-from-800"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seeds", type=int, nargs="*", default=[35, 36, 37, 38, 39])
    p.add_argument("--arms", nargs="*", default=DEFAULT_ARMS, choices=list(ARMS))
    args = p.parse_args()
    for seed in args.seeds:
        for arm in args.arms:
            flags = ARMS[arm]
            run_dir = args.out / arm / f"s{seed}"
            summary = run_dir / "summary.json"
            if summary.is_file() and json.loads(summary.read_text()).get("finished"):
                continue
            cmd = [sys.executable, "-m", "rlscale.train", "cartpole", *COMMON, *flags, "--seed", str(seed),
                   "--run-dir", str(run_dir)]
            if (run_dir / "checkpoints").is_dir():
                cmd = [sys.executable, "-m", "rlscale.train", "--resume", str(run_dir)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            kept = [line for line in done.stdout.splitlines()
                    if line.startswith(("measured at", "measurement", "goal 475", "done:"))]
            print(f"{arm} seed {seed}: rc {done.returncode}", *("  " + line for line in kept), sep="\n", flush=True)
            if done.returncode:
                print(done.stderr[-1500:], flush=True)
    study = subprocess.run([sys.executable, "-m", "rlscale.study", *[str(args.out / arm / f"s{s}")
                            for arm in args.arms for s in args.seeds if (args.out / arm / f"s{s}" / "summary.json").is_file()],
                            "--goals", "100", "200", "400", "475", "--out", str(args.out / "study.png")],
                           capture_output=True, text=True)
    print(study.stdout[-6000:], study.stderr[-1500:], flush=True)


if __name__ == "__main__":
    main()
