"""How much of the gradient a noise scale measures reverses from one update to the next (issue 30).

    python benchmarks/gradient_drift.py train ENV [--windows 2,4,16,64] [rlscale.train's arguments...]
    python benchmarks/gradient_drift.py read RUN_OR_SWEEP... --goal 40 [--bcrit 585 --best 160@5.6e-3 ...]

``train`` runs ``rlscale.train`` with two diagnostics added to every A2C update that measures the noise
scale, logged under ``drift/``:

* ``drift/lag1_dot``: g_t . g_(t-1), the product of consecutive batch gradients (unbiased for
  G_t . G_(t-1) but for the step between them, which is the point);
* per window of W updates (non-overlapping; ``--windows``): ``drift/wW_grad_sq``, the squared norm of
  the mean of the W batch gradients less the noise W independent batches would leave
  (``noise.slow_gradient_sq``), and ``drift/wW_trace``, the mean tr(Sigma); in the optimizer's metric
  ``drift/wW_gpg`` and ``drift/wW_trace_p`` (P as the next step uses it, at the window's end; needs the
  curvature measured on every batch: ``--curvature-every 1``).

The training itself is untouched (the same seed gives the same run). ``read`` prints, per cell (batch,
rate; median over its seeds, each read up to the goal): rho = mean lag-1 product / mean |G|^2 estimate
(+1 for a steady slope, -1 for a gradient that flips sign every update), and each noise scale as the
ratio of its two quantities' means, the plain one beside the slow ones. With ``--bcrit`` and ``--best``
(each batch's best rate) it also prints where each reading equals the batch (the self-consistent batch)
over B_crit. Where the answer is: docs/notebook/results.md, "Does the gradient the noise scale measures
reverse from update to update?".
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from rlscale import tags
from rlscale.control.noise import estimate, slow_gradient_sq
from rlscale.errors import UserError

LAG_TAG = "drift/lag1_dot"


class DriftMeter:
    """Per learner: the previous batch gradient and the open windows' sums."""

    def __init__(self, windows: list[int]) -> None:
        self.windows = windows
        self.previous: torch.Tensor | None = None
        self.open: dict[int, dict] = {w: {} for w in windows}

    def reset(self) -> None:
        self.previous = None
        self.open = {w: {} for w in self.windows}

    def update(self, flat: torch.Tensor, trace: float, batch: float, precond_trace: float | None,
               precond: Callable[[], torch.Tensor | None]) -> dict[str, float]:
        """One measured update: ``flat`` its batch gradient (a fresh tensor, kept as the next one's previous),
        ``precond`` gives P as one vector when a window closes (None without a preconditioner)."""
        out: dict[str, float] = {}
        if self.previous is not None and self.previous.shape == flat.shape:
            out[LAG_TAG] = float(flat.dot(self.previous))
        self.previous = flat
        for w in self.windows:
            acc = self.open[w] or {"sum": torch.zeros_like(flat), "plain": [], "metric": []}
            self.open[w] = acc
            acc["sum"] += flat
            acc["plain"].append((trace, batch))
            if precond_trace is not None:
                acc["metric"].append((precond_trace, batch))
            if len(acc["plain"]) < w:
                continue
            mean = acc["sum"] / w
            out[f"drift/w{w}_grad_sq"] = slow_gradient_sq(float(mean.dot(mean)), [t / b for t, b in acc["plain"]])
            out[f"drift/w{w}_trace"] = float(np.mean([t for t, _ in acc["plain"]]))
            if len(acc["metric"]) == w and (p := precond()) is not None:
                out[f"drift/w{w}_gpg"] = slow_gradient_sq(float((p * mean * mean).sum()),
                                                          [t / b for t, b in acc["metric"]])
                out[f"drift/w{w}_trace_p"] = float(np.mean([t for t, _ in acc["metric"]]))
            self.open[w] = {}
        return out


def install(windows: list[int]) -> None:
    """Wrap the learner's step (p.grad still holds the batch gradient there) and its metrics pass."""
    from rlscale.agents import learner as learner_module
    from rlscale.agents.a2c import A2CLearner
    from rlscale.agents.curvature import preconditioner

    last_precond_trace: dict[int, float | None] = {}
    meters: dict[int, DriftMeter] = {}  # per learner (one in a run)
    measure = learner_module.metric_samples

    def metric_samples(*args, **kwargs):
        samples = measure(*args, **kwargs)
        last_precond_trace[0] = samples.precond.trace_sigma if samples.precond is not None else None
        return samples

    learner_module.metric_samples = metric_samples
    step = learner_module.Learner.step

    def step_with_drift(self, grad, lr):
        if not isinstance(self, A2CLearner) or self.data_parallel is not None:
            raise UserError("benchmarks/gradient_drift.py measures one A2C learner's updates (--agent a2c, "
                            "no --learners); this run's learner is not one")
        if (meter := meters.get(id(self))) is None:
            meter = meters[id(self)] = DriftMeter(windows)
        extra: dict[str, float] = {}
        if grad.finite and self.measuring and grad.sq_norms.get("total"):
            flat = torch.cat([p.grad.reshape(-1) for p in self.params]).double()
            sample = estimate(grad.sq_norms["total"], grad.sizes, grad.big_sq_norms["total"])

            @functools.cache
            def precond() -> torch.Tensor | None:  # read only when a window closes, once per update
                p = preconditioner(self.optimizer, self.params)
                return torch.cat([x.reshape(-1) for x in p]).double() if p is not None else None

            extra = meter.update(flat, sample.trace_sigma, float(sum(grad.sizes)),
                                 last_precond_trace.pop(0, None), precond)
        else:
            meter.reset()
        return step(self, grad, lr) | extra

    learner_module.Learner.step = step_with_drift


# ---------------------------------------------------------------------------- reading


def cell_readings(paths: list[Path], goal: float) -> dict[str, dict[tuple[float, float], list[float]]]:
    """Per reading name, per (batch, lr): each run's value up to where it first reached ``goal``."""
    from rlscale.reports.runs import component_tags, find_runs, load_run, optimizer_batch

    raw_grad_sq = tags.raw_noise("grad_sq", "total")
    # The four estimators' two averages, under the console's names (B_simple of the total loss as "B_simple").
    readings = {("B_simple" if s == "total" else tags.signal_label(s)): component_tags(s) for s in ("total", *tags.METRICS)}
    cells: dict[str, dict[tuple[float, float], list[float]]] = {}
    for path in find_runs(paths):
        run = load_run(path)
        hit = run.goal(goal)
        if hit is None or LAG_TAG not in run.scalars:
            continue

        def mean(tag: str, scalars: dict = run.scalars, until: float = hit.agent_steps) -> float | None:
            if tag not in scalars:
                return None
            steps, values = scalars[tag]
            keep = steps <= until
            return float(np.mean(values[keep])) if keep.any() else None

        cell = (optimizer_batch(run), run.cfg.agent.lr)
        lag, raw = mean(LAG_TAG), mean(raw_grad_sq)
        if lag is not None and raw:
            cells.setdefault("rho", {}).setdefault(cell, []).append(lag / raw)
        pairs = dict(readings)
        for tag in run.scalars:
            if tag.startswith("drift/w") and tag.endswith("_grad_sq"):
                w = tag[len("drift/w"):-len("_grad_sq")]
                pairs[f"slow w{w}"] = (tag, f"drift/w{w}_trace")
                pairs[f"slow w{w} P"] = (f"drift/w{w}_gpg", f"drift/w{w}_trace_p")
        for name, (grad_tag, trace_tag) in pairs.items():
            g, t = mean(grad_tag), mean(trace_tag)
            if g is not None and t is not None:  # a mean |G|^2 <= 0: the noise scale is undefined (inf)
                cells.setdefault(name, {}).setdefault(cell, []).append(t / g if g > 0 else math.inf)
                if name in readings:  # which of the two moves with the batch and the rate
                    cells.setdefault(f"{name} gradient term", {}).setdefault(cell, []).append(g)
                    cells.setdefault(f"{name} trace", {}).setdefault(cell, []).append(t)
    return cells


def read(args: argparse.Namespace) -> None:
    from rlscale.reports.pareto import first_crossing, power_law

    best = {float(b): float(lr) for b, lr in (x.split("@") for x in args.best)}
    cells = cell_readings(args.paths, args.goal)
    if not cells:
        print(f"error: no run in {', '.join(map(str, args.paths))} reached goal {args.goal:g} with drift/ tags "
              "(train them with this script's train)", file=sys.stderr)
        sys.exit(2)
    for name, by_cell in cells.items():
        medians = {cell: float(np.median(v)) for cell, v in sorted(by_cell.items())}
        finite = [(b, lr, v) for (b, lr), v in medians.items() if 0 < v < math.inf]
        fit = power_law(finite)
        if name.endswith(("gradient term", "trace")):  # only how it moves
            print(f"{name:26s} " + (f"c * batch^{fit[0]:+.2f} * lr^{fit[1]:+.2f} (rms {fit[2]:.2f})" if fit else "no fit"))
            continue
        spec = "+.2f" if name == "rho" else ",.3g"
        print(f"{name:12s} " + "  ".join(f"{b:.0f}@{lr:g}: {v:{spec}} (n{len(by_cell[(b, lr)])})"
                                         for (b, lr), v in medians.items()))
        if name == "rho":
            continue
        line = f"{'':12s} fit reading = c * batch^{fit[0]:+.2f} * lr^{fit[1]:+.2f} (rms {fit[2]:.2f})" if fit else \
            f"{'':12s} too few defined cells for a fit"
        if args.bcrit and best:
            point = first_crossing([(b, math.log(v / b)) for (b, lr), v in medians.items()  # in batch order
                                    if b in best and math.isclose(lr, best[b]) and 0 < v < math.inf])
            line += (f"; self-consistent batch {point:,.0f} = {point / args.bcrit:.2f}x B_crit" if point else
                     "; no self-consistent batch inside the grid")
        print(line)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "train":
        # --help goes on to rlscale.train's help; --windows is described in this module's docstring
        parser = argparse.ArgumentParser(add_help=False)
        parser.add_argument("--windows", default="2,4,16,64", help="window lengths in updates, comma-separated")
        known, rest = parser.parse_known_args(sys.argv[2:])
        install([int(w) for w in known.windows.split(",") if w])
        from rlscale.train import main as train

        sys.exit(train(rest))  # a UserError, here or in the run, is one line and exit code 2
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=(
        "to train runs to read: gradient_drift.py train ENV [--windows 2,4,16,64] [rlscale.train's arguments]"))
    parser.add_argument("command", choices=["read"], help="read runs trained with `train`")
    parser.add_argument("paths", nargs="+", type=Path, help="run directories, or sweeps holding them")
    parser.add_argument("--goal", type=float, required=True, help="read each run up to where it first reached it")
    parser.add_argument("--bcrit", type=float, default=0.0, help="the goal's critical batch, for the ratio")
    parser.add_argument("--best", nargs="*", default=[], help="each batch's best rate, as BATCH@LR")
    read(parser.parse_args())


if __name__ == "__main__":
    main()
