"""Each run's noise scale averaged up to a goal, read three ways, per run and as the median over runs.

    python benchmarks/noise_readings.py RUN_OR_SWEEP... --goal 40 [--signal hessian]

``windows``: what ``pareto`` and ``study`` read (``RunRecord.mean_noise_scale``: eq. D.1's progress weights
over windows of ``WINDOW_SAMPLES`` measurements, each the ratio of its two averages' means). ``by update``:
the same weights on each logged value (``mean_logged_noise_scale``, the reading before the windows), which
reads low where the values are noisy. ``run means``: the ratio of the two averages' means over the whole
stretch, no weights. Also the samples behind the stretch (changes of the logged |G|^2 average). Where the
measuring cadence is the question: docs/notebook/results.md, "Does the measuring cadence move the Hessian
readings?".
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from rlscale import tags
from rlscale.reports.runs import component_tags, find_runs, load_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="run directories, or sweeps holding them")
    parser.add_argument("--goal", type=float, required=True, help="read up to where each run first reached it")
    parser.add_argument("--signal", default="hessian", choices=tags.SIGNALS)
    args = parser.parse_args()
    grad_tag, trace_tag = component_tags(args.signal)
    rows = []
    print(f"{'run':48s} {'samples':>7s} {'windows':>8s} {'by update':>9s} {'run means':>9s}")
    for path in find_runs(args.paths):
        run = load_run(path)
        hit = run.goal(args.goal)
        if hit is None or grad_tag not in run.scalars:
            print(f"{str(path):48s} {'did not reach the goal' if hit is None else 'no ' + grad_tag}")
            continue
        steps, grad = run.scalars[grad_tag]
        keep = steps <= hit.agent_steps
        trace = np.interp(steps[keep], *run.scalars[trace_tag])
        samples = int(np.sum(np.r_[True, np.diff(grad[keep]) != 0])) if keep.any() else 0
        means = float(trace.mean() / grad[keep].mean()) if keep.any() and grad[keep].mean() > 0 else None
        row = (run.mean_noise_scale(args.signal, until=hit.agent_steps),
               run.mean_logged_noise_scale(args.signal, until=hit.agent_steps), means)
        rows.append(row)
        print(f"{str(path):48s} {samples:7d} " + " ".join(f"{_number(v):>9s}" for v in row))
    if rows:
        medians = [np.median([v for v in column if v is not None]) if any(v is not None for v in column) else None
                   for column in zip(*rows, strict=True)]
        print(f"{'median over runs':48s} {'':7s} " + " ".join(f"{_number(v):>9s}" for v in medians))


def _number(value: float | None) -> str:
    return "-" if value is None or value <= 0 else f"{value:,.0f}"


if __name__ == "__main__":
    main()
