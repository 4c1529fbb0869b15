"""Each measured batch's own noise-scale sample, recovered from a run's logged averages.

The run logs the bias-corrected averages of |G|^2 and tr(Sigma) (or, for a metric, e.g. <G,HG> and
tr(H Sigma)) after every measured batch; ``rlscale.control.noise.recovered_samples`` undoes the average.

It prints, per run, the first samples and those around each resize as multiples of the run's median
absolute sample: where a start or new environments read far off (docs/notebook/results.md,
"New environments' first batches kept out of the noise averages").

    python benchmarks/noise_samples.py runs/sweep/*/ --signal hessian --first 14
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from rlscale import tags
from rlscale.control.noise import recovered_samples
from rlscale.reports.runs import RunRecord, component_tags, find_runs, load_run


def sampling_every(run: RunRecord, signal: str) -> int:
    """Every how many batches the run took a sample of ``signal`` (0: never)."""
    if signal in tags.METRICS:
        return run.cfg.noise.curvature_every
    return run.cfg.noise.noise_parts_every if signal in ("policy", "value") else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="run directories, or sweeps holding them")
    parser.add_argument("--signal", default="hessian", choices=tags.SIGNALS)
    parser.add_argument("--first", type=int, default=10, help="how many of the first samples to print")
    args = parser.parse_args()
    np.set_printoptions(suppress=True, linewidth=160)
    for path in find_runs(args.paths):
        run = load_run(path)
        grad_tag, trace_tag = component_tags(args.signal)
        if grad_tag not in run.scalars:
            print(f"{path}: no {grad_tag} logged")
            continue
        every = sampling_every(run, args.signal)
        if every != 1:
            # Between samples those batches age the average, which the log does not tell from settling.
            print(f"{path}: {args.signal} sampled every {every} batches; its samples are recovered only "
                  "where it is sampled every batch")
            continue
        steps, grad = run.scalars[grad_tag]
        _, trace = run.scalars[trace_tag]
        horizon = run.cfg.noise.noise_horizon
        g, t = np.array(recovered_samples(steps, grad, horizon)), np.array(recovered_samples(steps, trace, horizon))
        g_scale, t_scale = np.nanmedian(np.abs(g)), np.nanmedian(np.abs(t))  # NaN: a settling batch
        print(f"{path}  ({np.isfinite(g).sum()} samples; median |{grad_tag}| {g_scale:.3g}, |{trace_tag}| {t_scale:.3g})")
        print(f"  first {args.signal} samples / median: {grad_tag} {np.round(g[:args.first] / g_scale, 1)}")
        print(f"  {'':>{len(args.signal) + 30}}{trace_tag} {np.round(t[:args.first] / t_scale, 1)}")
        if tags.N_ENVS not in run.scalars:
            continue
        envs = np.interp(steps, *run.scalars[tags.N_ENVS])
        for i in np.flatnonzero(np.diff(envs) != 0) + 1:
            print(f"  {envs[i - 1]:.0f} -> {envs[i]:.0f} envs at {steps[i]:,.0f}: {grad_tag} "
                  f"{np.round(g[i:i + 5] / g_scale, 1)}, {trace_tag} {np.round(t[i:i + 5] / t_scale, 1)} "
                  f"(before: {np.round(g[max(0, i - 3):i] / g_scale, 1)}, {np.round(t[max(0, i - 3):i] / t_scale, 1)})")


if __name__ == "__main__":
    main()
