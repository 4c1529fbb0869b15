"""How much the cost model's fitted exchange rate r = a/b swings within a run, for several fit widths.

    python research/experiments/cost_fit_replay.py "runs/rep/*/*" [--sizes-kept 4 8 16 0] [--outlier-factors 1.5 inf]
    python research/experiments/cost_fit_replay.py "runs/fit/bo-auto-*/*" --logged

--logged reads instead what the runs' own fit logged (`batch/exchange_rate` where
0 < r < 10^5, and `batch/target`): the median over runs of each one's 90th over
10th percentile.

Replays each recorded `--batch auto` run's update times (the `perf/update_seconds`
and `batch/size` scalars, in order) through ``CostModel`` keeping the last N batch
sizes seen (0: every size), the update right after each resize left out as the
trainer leaves it out, and reads the fit after every update. The run's path stays
the one its own fit chose: this measures the fit's noise on real timings, not what
`auto` would have done with it. Prints, per width, the median (and 75th percentile)
over runs of r's 10th-90th percentile spread within a run, how many runs had
>= 10 % of their fits unresolved (no overhead or no slope), the range of the
runs' median r, and (per ``--outlier-factors``; inf: none left out) the mean over runs
of a run's share of fits that left one size out as off the line through the others,
with the runs that did so in >= 10 % of their fits. ``--outlier-when`` replays rules for leaving a size out: ``largest``
(CostModel's since ddb793f: only the largest size fitted, and only above the line), ``any`` (c551f82's: any size
but the current one; the replay of 2026-12-07 06:12 called it ``always``, and ``largest`` ``top``), and on top of
``any``: ``unresolved`` (only while the line through every size has no intercept or no slope), ``four`` (only with
four or more sizes fitted).
"""

from __future__ import annotations

import argparse
import glob
import math
from pathlib import Path

import numpy as np

from rlscale.control.cost import CostModel, Fit
from rlscale.rundir.events import read_scalars


class OtherRule(CostModel):
    """CostModel with another rule for leaving a size out: "any" (c551f82's: any size but the current one, off the
    line either way), and on top of it "unresolved" or "four" (see the docstring)."""

    def __init__(self, when: str, **kw) -> None:
        super().__init__(**kw)
        self.when = when

    def _fit(self) -> Fit | None:
        pts = self.points()
        line = self._line(pts)
        if len(pts) < 3 or not math.isfinite(self.outlier_factor):
            return line
        if (self.when == "unresolved" and line is not None and not line.unresolved) or (
                self.when == "four" and len(pts) < 4):
            return line
        current = (next(reversed(self.timings)), pts[-1][0])
        worst, worst_off = None, math.log(self.outlier_factor)
        for i, (batch, seconds, _) in enumerate(pts):
            if batch in current or batch in self.retimed:
                continue
            rest = self._line(pts[:i] + pts[i + 1:])
            if rest is None or rest.unresolved:
                continue
            off = abs(math.log(seconds / rest.seconds(batch)))
            if off > worst_off:
                worst, worst_off = Fit(rest.overhead, rest.per_observation, left_out=batch), off
        return worst or line


def replay(batches: np.ndarray, seconds: np.ndarray, sizes_kept: int,
           outlier_factor: float = 1.5, when: str = "largest") -> tuple[np.ndarray, float, float]:
    """The fitted r after each update (resolved fits only), and the shares of fits left unresolved and of
    fits that left a size out."""
    kw = dict(sizes_kept=sizes_kept or 10**9, outlier_factor=outlier_factor)
    model = CostModel(**kw) if when == "largest" else OtherRule(when, **kw)
    rates, unresolved, left_out, fitted, previous = [], 0, 0, 0, None
    for batch, time in zip(batches, seconds, strict=True):
        if batch == previous:  # the first update at a new size ran on a pool just resized
            model.add(float(batch), float(time))
        previous = batch
        fit = model.fit
        if fit is None:
            continue
        fitted += 1
        left_out += fit.left_out > 0
        if fit.unresolved:
            unresolved += 1
        else:
            rates.append(fit.exchange_rate)
    return np.array(rates), unresolved / max(fitted, 1), left_out / max(fitted, 1)


def spread(values: np.ndarray) -> float:
    return float(np.percentile(values, 90) / np.percentile(values, 10))


def logged_spread(pattern: str) -> None:
    rates, targets = [], []
    for run in sorted(glob.glob(pattern)):
        if not glob.glob(f"{run}/events*"):
            continue
        scalars = read_scalars(Path(run))
        if "batch/exchange_rate" not in scalars:
            continue
        r = scalars["batch/exchange_rate"][1]
        r = r[(r > 0) & (r < 1e5)]
        t = scalars["batch/target"][1]
        if len(r) > 10:
            rates.append(spread(r))
        if len(t[t > 0]) > 10:
            targets.append(spread(t[t > 0]))
    if not rates:
        raise SystemExit(f"error: no auto runs with a logged cost model under {pattern}")
    print(f"{pattern}: {len(rates)} runs; logged r's 10th-90th spread, median {np.median(rates):.2f}x "
          f"[{min(rates):.2f}, {max(rates):.2f}]; the target's {np.median(targets):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", help="a glob of run directories (quote it)")
    parser.add_argument("--sizes-kept", type=int, nargs="+", default=[4, 8, 16, 0])
    parser.add_argument("--outlier-factors", type=float, nargs="+", default=[1.5],
                        help="CostModel.outlier_factor values to replay with (inf: every size fitted)")
    parser.add_argument("--outlier-when", choices=("largest", "any", "unresolved", "four"), default="largest",
                        help="when a size may be left out (largest: CostModel's rule since ddb793f)")
    parser.add_argument("--logged", action="store_true", help="the spread of the runs' own logged r and target")
    args = parser.parse_args()
    if args.logged:
        logged_spread(args.runs)
        return
    runs = []
    for run in sorted(glob.glob(args.runs)):
        if "fixed" in Path(run).name or not glob.glob(f"{run}/events*"):
            continue
        scalars = read_scalars(Path(run))
        if "perf/update_seconds" not in scalars or "batch/size" not in scalars:
            continue
        steps_t, seconds = scalars["perf/update_seconds"]
        steps_b, batches = scalars["batch/size"]
        common, it, ib = np.intersect1d(steps_t, steps_b, return_indices=True)
        if len(common) >= 100:
            runs.append((batches[ib], seconds[it]))
    if not runs:
        raise SystemExit(f"error: no auto runs with update times under {args.runs}")
    for kept in args.sizes_kept:
        for factor in args.outlier_factors:
            spreads, shares, left, medians = [], [], [], []
            for batches, seconds in runs:
                rates, share, left_share = replay(batches, seconds, kept, factor, args.outlier_when)
                shares.append(share)
                left.append(left_share)
                if len(rates) > 10:
                    spreads.append(np.percentile(rates, 90) / np.percentile(rates, 10))
                    medians.append(np.median(rates))
            print(f"sizes kept {kept or 'all'}, outlier factor {factor:g} ({args.outlier_when}): {len(runs)} runs; r's 10th-90th spread "
                  f"within a run, median {np.median(spreads):.2f}x (75th pct {np.percentile(spreads, 75):.2f}x); runs "
                  f"with >= 10 % of fits unresolved: {sum(s >= 0.1 for s in shares)}; runs' median r "
                  f"{min(medians):.0f}-{max(medians):.0f}; a run's share of fits with a size left out, mean over runs "
                  f"{np.mean(left):.1%} (runs with >= 10 %: {sum(s >= 0.1 for s in left)})")


if __name__ == "__main__":
    main()
