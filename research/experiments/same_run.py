"""Are two runs the same run? Every scalar tag but the timings (perf/), read back from TensorBoard, compared.

    python research/experiments/same_run.py RUN_A RUN_B [--skip perf/ ...]

Prints one line per tag (points, whether the agent steps match, the largest relative difference) and a last
line: every compared tag identical or not. Exit 0 when all are identical, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from rlscale.rundir.events import read_scalars


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--skip", nargs="*", default=["perf/"], help="tag prefixes left out (default: perf/)")
    args = p.parse_args()
    a, b = read_scalars(args.a), read_scalars(args.b)
    tags = sorted(t for t in set(a) | set(b) if not any(t.startswith(s) for s in args.skip))
    same_all = True
    for tag in tags:
        if tag not in a or tag not in b:
            print(f"{tag:40s} only in {'A' if tag in a else 'B'}")
            same_all = False
            continue
        (sa, va), (sb, vb) = a[tag], b[tag]
        same_steps = bool(np.array_equal(sa, sb))  # False on different lengths too
        n = min(len(va), len(vb))
        scale = np.maximum(np.abs(va[:n]), 1e-12)
        rel = float(np.nanmax(np.abs(va[:n] - vb[:n]) / scale)) if n else 0.0
        same = same_steps and bool(np.array_equal(va, vb, equal_nan=True))
        same_all &= same
        print(f"{tag:40s} points {len(va):6d} / {len(vb):6d}  same steps {same_steps}  max rel diff {rel:.3g}"
              f"  identical {same}")
    print(f"{len(tags)} tags compared (left out: {', '.join(args.skip)}); every one identical: {same_all}")
    return 0 if same_all else 1


if __name__ == "__main__":
    sys.exit(main())
