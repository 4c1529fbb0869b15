"""TensorBoard scalars and console progress for one run directory.

The x-axis of every scalar is agent steps (one env step of one environment).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

from tensorboard.compat.proto.summary_pb2 import Summary
from torch.utils.tensorboard import SummaryWriter

from rlscale import tags
from rlscale.goals import GoalOutlook, GoalWindow


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def duration(seconds: float) -> str:
    """3h05m, 12m30s, 45s."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class StepRate:
    """Agent steps per second over windows of at least ``window`` seconds (both backends), and
    the same smoothed over ~``horizon`` seconds for the ETA.

    The progress line shows the window's rate; the ETA divides by the smoothed one, so
    a pause of a few seconds (actors being replaced after a lost node, a resize) does
    not throw it from 10 min to 50 min and back. Until ``horizon`` seconds have been
    timed the ETA is marked as settling.
    """

    def __init__(self, steps: int, window: float = 2.0, horizon: float = 60.0) -> None:
        self.window, self.horizon = window, horizon
        self.since, self.steps = time.perf_counter(), steps
        self.per_second = 0.0
        self.smoothed = 0.0
        self.timed = 0.0  # seconds of windows measured

    def update(self, steps: int, now: float | None = None) -> float:
        now = time.perf_counter() if now is None else now
        elapsed = now - self.since
        if elapsed >= self.window:
            self.per_second = (steps - self.steps) / elapsed
            # An exponential average in time: each window weighs by its length.
            weight = 1.0 if self.timed == 0 else 1.0 - math.exp(-elapsed / self.horizon)
            self.smoothed += weight * (self.per_second - self.smoothed)
            self.timed += elapsed
            self.since, self.steps = now, steps
        return self.per_second

    @property
    def settled(self) -> bool:
        return self.timed >= self.horizon


# TensorBoard's custom-scalars charts (2.21) draw every line of a run in the run's colour and tell a chart's
# tags apart only by the symbol on each line's points (up to 20 per line), five symbols in turn: a chart with
# a sixth tag repeats a symbol, and two tags with the same values are one line. So a chart holds at most
# this many tags, and never two that can coincide (tests/test_tensorboard_docs.py checks both).
CHART_TAGS = 5
NOISE_CHART = "noise scales and the optimizer batch (observations; use the log axis)"
BATCH_CHART = "batch: the optimizer batch and the controller's target (observations)"


def custom_scalars_layout(signal: str) -> dict[str, dict[str, list]]:
    """The charts a run's TensorBoard opens with (its CUSTOM SCALARS tab): the score, then the
    noise scales beside the optimizer batch, the batch beside the controller's target, the
    environments, the learning rate, throughput; a second group has each loss part and metric.

    Custom scalars match tags by regular expression: each is anchored so it picks one tag.
    The controller's target is not on the noise chart: under ``--batch critical`` it is the
    signal's noise scale (divided by ``crit_ratio``, 1 by default), the same points, and one
    line would hide the other.
    """
    def lines(*names: str) -> list:
        unique = list(dict.fromkeys(names))
        if len(unique) > CHART_TAGS:
            raise ValueError(f"a chart of {len(unique)} tags repeats a symbol: {unique}")
        return ["Multiline", [f"^{re.escape(name)}$" for name in unique]]

    # The signal's, then B_simple's of the total loss and the metrics' (B_P, B_noise, B_PH): four, with the
    # batch five. A policy or value signal takes B_PH's place (B_PH stays on the chart of the metrics).
    noise_scales = list(dict.fromkeys(tags.signal_tag(s) for s in (signal, "total", *tags.METRICS)))[:CHART_TAGS - 1]
    return {
        "rlscale": {
            "score: episode return": lines(tags.EPISODE_RETURN),
            NOISE_CHART: lines(*noise_scales, tags.OPTIMIZER_BATCH),
            BATCH_CHART: lines(tags.OPTIMIZER_BATCH, tags.TARGET),
            "environments": lines(tags.N_ENVS, tags.STARTING_ENVS),
            "learning rate": lines(tags.LR),
            "throughput: agent steps per second": lines(tags.STEPS_PER_S),
        },
        "noise scale of each loss part and metric": {
            "B_simple per part": lines(*(tags.noise("b_simple", p) for p in tags.PARTS)),
            "|G|^2 per part": lines(*(tags.noise("grad_sq", p) for p in tags.PARTS)),
            "tr(Sigma) per part": lines(*(tags.noise("trace_sigma", p) for p in tags.PARTS)),
            "the total loss's noise scale in each metric: B_simple, B_P, B_noise, B_PH":
                lines(*(tags.signal_tag(s) for s in ("total", *tags.METRICS))),
        },
    }


class RunLogger:
    def __init__(self, run_dir: str, purge_step: int | None = None) -> None:
        # purge_step drops events a killed run wrote after its last checkpoint,
        # so a resumed run has no duplicate points.
        self.writer = SummaryWriter(run_dir, purge_step=purge_step, flush_secs=10)
        self.last_print = 0.0
        self.last_step = -1  # the agent step of the last line printed

    def layout(self, signal: str) -> None:
        """Write the custom-scalars layout (``custom_scalars_layout``) into the run's events."""
        self.writer.add_custom_scalars(custom_scalars_layout(signal))

    def scalars(self, metrics: dict[str, float], step: int) -> None:
        """Every value in one event: TensorBoard reads each of an event's values as its tag's point at
        ``step``, as if written one by one. One event a tag (``add_scalar``) cost ~150 us each here, most
        of it hand-offs to the writer's thread (a queue put each): 585 updates of 48 tags took 4.1 s, a
        fifth of a 16,000-step CartPole run; as one event an update, 0.36 s."""
        if metrics:
            values = [Summary.Value(tag=key, simple_value=float(value)) for key, value in metrics.items()]
            self.writer._get_file_writer().add_summary(Summary(value=values), step)  # add_scalar's own path

    def episode(self, episode_return: float, length: int, step: int) -> None:
        self.scalars({tags.EPISODE_RETURN: episode_return, tags.EPISODE_LENGTH: length}, step)

    def progress(self, step: int, total: int, steps_per_s: float, window: GoalWindow, n_envs: int,
                 signal: float | None, signal_name: str, lr: float, force: bool = False,
                 interval: float = 10.0, starting_envs: int = 0,
                 next_goal: Callable[[], GoalOutlook | None] | None = None,
                 eta_rate: float | None = None, settling: bool = False, batch_note: str = "") -> bool:
        """Print a progress line if ``interval`` seconds passed (never twice at one step); True when it printed.

        The line ends with the time the rest of the budget takes at ``eta_rate`` (the
        smoothed rate; default ``steps_per_s``), marked while that rate is ``settling``,
        and where ``next_goal()`` puts the next goal (called only for a line that
        prints: it fits the trend). ``batch_note``, where given, says why the controller holds the batch.
        """
        now = time.monotonic()
        if not force and now - self.last_print < interval:
            return False
        if step == self.last_step:  # the run's last line, forced at its end, already printed at this step
            return False
        self.last_print, self.last_step = now, step
        per_s = eta_rate or steps_per_s
        eta = ""
        if per_s > 0 and step < total:
            # "budget": a run that stops at a goal usually ends long before its budget, and the goal's
            # own estimate follows in the clause after this one.
            left = duration((total - step) / per_s)
            eta = f"  budget ETA ~{left} (rate settling)" if settling else f"  budget ETA {left}"
        outlook = next_goal() if next_goal is not None and per_s > 0 else None
        if outlook is not None:
            eta += " " + goal_eta(outlook, step, per_s)
        print(
            f"[{min(100.0, 100 * step / total):5.1f}%] steps {step:,}  {steps_per_s:,.0f}/s  "
            f"return {_fmt(window.mean, '.1f')} (last {len(window.returns)})  "
            f"{tags.signal_label(signal_name)} {_fmt(signal)}  n_envs {n_envs}"
            + (f" (+{starting_envs} starting)" if starting_envs else "") + f"  lr {lr:.2e}"
            + (f"  [{batch_note}]" if batch_note else "") + eta,
            flush=True,
        )
        return True

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def goal_eta(outlook: GoalOutlook, step: float, steps_per_s: float) -> str:
    """Where the next goal lies: the run's own trend when it is clear, else the preset's
    reference run at this run's rate (an estimate), else that it is not known yet."""
    goal, forecast = f"goal {outlook.goal:g}", outlook.forecast
    if forecast is not None and forecast.sure:
        return f"({goal} at ~{forecast.at:,.0f} steps, {duration((forecast.at - step) / steps_per_s)})"
    if outlook.reference is not None:
        return (f"({goal}: the reference run got there at {outlook.reference:,.0f} steps, "
                f"~{duration((outlook.reference - step) / steps_per_s)} at this rate: an estimate)")
    return f"({goal}: the return's trend is not clear yet)"
