"""``rlscale plot <run dir>``: one PNG of a run for people who would rather look.

Four panels against agent steps: episode return (and its mean over the goal
window of 20 episodes), the noise scales (B_simple of the total, policy and value
losses, B_P and B_noise where measured; log scale) with the optimizer batch and the
controller's target, the number of environments, the learning rate. Gaps in a
noise-scale line are updates where it was undefined (its |G|^2 average was not positive).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from rlscale import tags
from rlscale.cli import Parser
from rlscale.errors import UserError, exits_cleanly
from rlscale.goals import GOAL_WINDOW, rolling_mean
from rlscale.rundir.events import break_gaps, read_scalars

# One color per noise scale (tags.SIGNALS), the same in every report's plots.
SIGNAL_COLORS = {"total": "tab:blue", "policy": "tab:red", "value": "tab:green",
                 "precond": "tab:orange", "hessian": "tab:brown", "precond_hessian": "tab:olive"}


def batch_lines(data: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, tuple]:
    """{label: (steps, values, color, line style)} of the noise-scale panel: each noise scale
    with NaN at the updates where it was undefined, the optimizer batch and the target."""
    updates = data[tags.N_ENVS][0] if tags.N_ENVS in data else np.zeros(0)  # logged at every update
    noise_lines = [(tags.signal_tag(signal), tags.METRIC_LABELS.get(signal, f"B_simple {signal}"), SIGNAL_COLORS[signal])
                   for signal in tags.SIGNALS]
    out = {label: (*break_gaps(*data[tag], updates), color, "-") for tag, label, color in noise_lines if tag in data}
    # The noise scale compares with the batch of one optimizer step (PPO: a minibatch).
    if tags.OPTIMIZER_BATCH in data:
        out["optimizer batch (observations)"] = (*data[tags.OPTIMIZER_BATCH], "black", "--")
    if tags.TARGET in data:
        out["controller's target"] = (*break_gaps(*data[tags.TARGET], updates), "gray", ":")
    return out


def plot_run(run_dir: Path, out: Path, title: str | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = read_scalars(run_dir)
    fig, axes = plt.subplots(4, 1, figsize=(9, 11), sharex=True,
                             gridspec_kw={"height_ratios": [3, 3, 1.5, 1.5]})
    ax = axes[0]
    if tags.EPISODE_RETURN in data:
        steps, values = data[tags.EPISODE_RETURN]
        ax.plot(steps, values, ".", ms=2, alpha=0.3, color="tab:gray", label="episode")
        ax.plot(steps, rolling_mean(values), color="tab:blue", label=f"mean of last {GOAL_WINDOW}")
        ax.legend(loc="lower right")
    ax.set_ylabel("episode return")
    ax = axes[1]
    for label, (steps, values, color, style) in batch_lines(data).items():
        ax.plot(steps, values, color=color, ls=style, label=label)
    ax.set_yscale("log")
    ax.set_ylabel("observations")
    ax.legend(loc="upper left", fontsize=8)
    ax = axes[2]
    if tags.N_ENVS in data:
        ax.plot(*data[tags.N_ENVS], color="black")
        ax.set_ylim(0, 1.15 * data[tags.N_ENVS][1].max())  # a constant count reads as itself
    ax.set_ylabel("environments")
    ax = axes[3]
    if tags.LR in data:
        ax.plot(*data[tags.LR], color="tab:purple")
    ax.set_ylabel("learning rate")
    axes[-1].set_xlabel("agent steps")
    fig.suptitle(title or str(run_dir))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, out)
    return out


def save_figure(fig, out: Path, flag: str = "--out") -> None:
    """Write and close a matplotlib figure; a write error is the user's one-line error."""
    import matplotlib.pyplot as plt

    try:
        fig.savefig(out, dpi=110)
    except OSError as err:
        raise UserError(f"cannot write {out} ({err.strerror}); choose another {flag}") from None
    finally:
        plt.close(fig)


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="rlscale plot", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--out", type=Path, help="PNG to write (default: <run dir>/run.png)")
    p.add_argument("--title")
    args = p.parse_args(argv)
    out = plot_run(args.run_dir, args.out or args.run_dir / "run.png", args.title)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
