"""One finished (or running) run directory, read back for reports.

A run directory holds ``config.toml``, TensorBoard event files and, once a
checkpoint was written, ``summary.json``. ``RunRecord`` reads them and
answers the questions the report commands ask: the return curve, when a goal
was reached (in agent steps, optimizer steps, examples and wall time), and
the noise scales averaged up to a point.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlscale import tags
from rlscale.config import Config, ControlConfig, NoiseConfig, load_saved
from rlscale.control.noise import equilibrium_grad_sq
from rlscale.errors import UserError
from rlscale.goals import GOAL_WINDOW, first_crossing, smoothed_returns, value_at
from rlscale.rundir.checkpoint import CONFIG_FILE, SUMMARY_FILE
from rlscale.rundir.events import read_scalars

# Measurements per window when a run's noise scale is averaged over training (RunRecord.mean_noise_scale).
WINDOW_SAMPLES = 16


def component_tags(signal: str) -> tuple[str, str]:
    """The tags of the two averages whose ratio is ``signal``'s noise scale: |G|^2 (or G^T M G), tr(M Sigma)."""
    if signal in tags.METRICS:
        return tags.METRIC_TAGS[signal][1], tags.METRIC_TAGS[signal][2]
    return tags.noise("grad_sq", signal), tags.noise("trace_sigma", signal)


@dataclass(frozen=True)
class GoalHit:
    agent_steps: float
    updates: float  # optimizer steps S
    examples: float  # observations the optimizer consumed, E
    wall_seconds: float | None  # None for runs that did not log their wall time


@dataclass
class RunRecord:
    path: Path
    cfg: Config
    scalars: dict[str, tuple[np.ndarray, np.ndarray]]
    summary: dict | None

    @property
    def name(self) -> str:
        return self.path.name

    def returns(self) -> tuple[np.ndarray, np.ndarray]:
        return self.scalars.get(tags.EPISODE_RETURN, (np.zeros(0), np.zeros(0)))

    def first_window_step(self) -> float | None:
        """The agent step at which the run had finished its first full window of episodes: no goal can be
        seen met before it."""
        steps, _ = self.returns()
        return float(steps[GOAL_WINDOW - 1]) if steps.size >= GOAL_WINDOW else None

    def final_return(self) -> float | None:
        _, values = self.returns()
        return float(values[-GOAL_WINDOW:].mean()) if values.size else None

    def best_return(self) -> float | None:
        _, values = self.returns()
        smooth = smoothed_returns(values)
        return float(np.nanmax(smooth)) if np.isfinite(smooth).any() else None

    def agent_steps(self) -> int:
        steps = [s[-1] for s, _ in self.scalars.values() if s.size]
        return int(max(steps)) if steps else 0

    def wall_seconds(self) -> float | None:
        """Training time of the run so far; None before its first update."""
        curve = self.wall_curve()
        return float(curve[1][-1]) if curve is not None and curve[1].size else None

    def wall_curve(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(agent steps, training seconds so far), or None before the first update."""
        return self.scalars.get(tags.WALL_SECONDS)

    def goal(self, goal: float) -> GoalHit | None:
        steps, values = self.returns()
        at = first_crossing(steps, values, goal)
        if at is None:
            return None
        return GoalHit(at, self.counter_at(tags.UPDATES, at), self.counter_at(tags.EXAMPLES, at),
                       self.wall_at(at))

    def counter_at(self, tag: str, step: float) -> float:
        if tag not in self.scalars:
            raise UserError(f"{self.path}: no '{tag}' scalars; was it written by rlscale.train?")
        return value_at(*self.scalars[tag], step)

    @property
    def signal_tag(self) -> str:
        """The tag of the noise scale the run's controller followed (older runs logged it part-less too)."""
        tag = tags.signal_tag(self.cfg.control.signal)
        return tags.LEGACY_SIGNAL if tag not in self.scalars and tags.LEGACY_SIGNAL in self.scalars else tag

    def wall_at(self, step: float) -> float | None:
        curve = self.wall_curve()
        return value_at(*curve, step) if curve is not None else None

    def mean_noise_scale(self, part: str | None = None, until: float | None = None,
                         since: float | None = None) -> float | None:
        """B_simple (the controller's signal, or one part), or B_P / B_noise (``part`` precond / hessian),
        averaged over training up to a step (from a step, with ``since``).

        Appendix D, eq. D.1: E_min/S_min = (integral of B_noise ds) / (integral of ds),
        with s counted in full-batch steps. An optimizer step at batch B makes
        ds = 1/(1 + B_noise/B) full-batch steps of progress, so each stretch's reading is
        weighted by that: stretches where the noise dominates make little progress and weigh little.

        The weight caps what a reading adds at about the batch and weighs a low one more, so over
        noisy readings the average reads low, the more the noisier they are: B_noise read every 25th
        batch (one or two samples per running average) read half of what the same runs read every
        batch (docs/results.md, "Does the measuring cadence move the Hessian readings?").
        So the readings weighed are those of windows of ``WINDOW_SAMPLES`` measurements each: the ratio
        of the run's two logged averages (tr(Sigma) over |G|^2, or the metric's), each averaged over
        the window's updates. A window holds as many samples at any cadence; a window where either
        average is not positive has no noise scale and is left out. Runs that logged only the ratio
        (older ones) are read update by update.
        """
        signal = self.cfg.control.signal if part is None else part
        grad_tag, trace_tag = component_tags(signal)
        if grad_tag not in self.scalars or trace_tag not in self.scalars:
            return self.mean_logged_noise_scale(part, until, since)
        steps, grad = self.scalars[grad_tag]
        keep = (steps <= (np.inf if until is None else until)) & (steps > (-np.inf if since is None else since))
        steps, grad = steps[keep], grad[keep]
        if not steps.size:
            return None
        trace = np.interp(steps, *self.scalars[trace_tag])
        batch = np.interp(steps, *self.scalars[tags.OPTIMIZER_BATCH])
        # A new sample changes the logged average; updates between samples log it unchanged.
        sample = np.cumsum(np.r_[True, np.diff(grad) != 0]) - 1
        windows = max(1, (sample[-1] + 1) // WINDOW_SAMPLES)
        window = np.minimum(sample * windows // (sample[-1] + 1), windows - 1)
        readings, progress = [], []
        for w in range(windows):
            inside = window == w
            grad_sq, trace_sigma = grad[inside].mean(), trace[inside].mean()
            if grad_sq <= 0 or trace_sigma <= 0:  # as the logged ratio: undefined, not a number to average
                continue
            reading = trace_sigma / grad_sq
            readings.append(reading)
            progress.append(np.sum(1.0 / (1.0 + reading / batch[inside])))
        if not readings:
            return None
        return float(np.dot(readings, progress) / np.sum(progress))

    def mean_logged_noise_scale(self, part: str | None = None, until: float | None = None,
                                since: float | None = None) -> float | None:
        """eq. D.1 over the logged noise scale update by update: the reading of runs that logged no averages
        of its two quantities (and of every run before the windows; benchmarks/noise_readings.py sets the
        two side by side). Updates where it was undefined are not in the log and do not enter."""
        tag = self.signal_tag if part is None else tags.signal_tag(part)
        if tag not in self.scalars:
            return None
        steps, values = self.scalars[tag]
        keep = (steps <= (np.inf if until is None else until)) & (steps > (-np.inf if since is None else since))
        steps, values = steps[keep], values[keep]
        if not values.size:
            return None
        batch = np.interp(steps, *self.scalars[tags.OPTIMIZER_BATCH])
        weights = 1.0 / (1.0 + values / batch)
        return float(np.sum(weights * values) / np.sum(weights))

    def equilibrium_share(self, until: float | None = None) -> float | None:
        """G^T P G that appendix C's equilibrium would hold by noise alone (lr tr(PHP Sigma) / 2B,
        ``noise.equilibrium_grad_sq``) over the G^T P G measured, both averaged over the logged updates up
        to a step. The rate is the one each step took: clipped to ``max_grad_norm``, a gradient of norm |g|
        moves lr * max_grad_norm / |g|. About 1 in that equilibrium, below 1 where the gradient has a slope
        beyond the noise's, above 1 where it is smaller than the noise alone would hold (the run is not near
        that equilibrium). None without the preconditioned metrics or where either average is not positive."""
        gpg_tag, php_tag = tags.METRIC_TAGS["precond"][1], tags.METRIC_TAGS["precond_hessian"][2]
        if gpg_tag not in self.scalars or php_tag not in self.scalars:
            return None
        steps, gpg = self.scalars[gpg_tag]
        keep = steps <= (np.inf if until is None else until)
        steps, gpg = steps[keep], gpg[keep]
        if not steps.size or gpg.mean() <= 0:
            return None
        lr = np.interp(steps, *self.scalars[tags.LR])
        clip = self.cfg.agent.max_grad_norm
        if clip > 0 and tags.GRAD_NORM in self.scalars:
            norm = np.interp(steps, *self.scalars[tags.GRAD_NORM])
            lr = lr * np.minimum(1.0, clip / np.where(np.isfinite(norm) & (norm > 0), norm, np.inf))
        held = np.mean([equilibrium_grad_sq(rate, batch, trace) for rate, batch, trace in zip(
            lr, np.interp(steps, *self.scalars[tags.OPTIMIZER_BATCH]), np.interp(steps, *self.scalars[php_tag]),
            strict=True)])
        # Negative curvature can make the trace's average negative: then there is no such equilibrium.
        return float(held / gpg.mean()) if held > 0 else None


def load_run(path: Path) -> RunRecord:
    if not path.exists():
        raise UserError(f"{path} does not exist; give a run directory made by rlscale.train")
    if not (path / CONFIG_FILE).is_file():
        raise UserError(f"{path} is not a run directory (no {CONFIG_FILE}); give directories made by rlscale.train")
    summary_path = path / SUMMARY_FILE
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else None
    scalars = read_scalars(path)
    if scalars and tags.OPTIMIZER_BATCH not in scalars:
        raise UserError(f"{path} was written by an older rlscale (no {tags.OPTIMIZER_BATCH} scalars); "
                        "report it with the version that wrote it")
    return RunRecord(path, load_saved(path / CONFIG_FILE), scalars, summary)


def find_runs(paths: list[Path]) -> list[Path]:
    """Run directories among ``paths`` or directly below them (a sweep directory)."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UserError(f"{path} does not exist")
        if (path / CONFIG_FILE).is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(p.parent for p in path.glob(f"**/{CONFIG_FILE}")))
    if not found:
        raise UserError(f"no run directories (with config.toml) in {', '.join(map(str, paths))}")
    return found


def load_runs(paths: list[Path]) -> list[RunRecord]:
    """Every run directory among ``paths`` or below them, read back."""
    return [load_run(path) for path in find_runs(paths)]


def goals_of(runs: list[RunRecord], given: list[float] | None) -> list[float]:
    """The goals to report: those given, else every goal of the runs' presets; a UserError if none."""
    goals = sorted(given) if given else sorted({g for r in runs for g in r.cfg.env.goals})
    if not goals:
        raise UserError("no goals: give --goals (the runs' presets name none)")
    return goals


BOOTSTRAP_RESAMPLES = 10_000


def optimizer_batch(run: RunRecord) -> float:
    """Observations per optimizer step at the run's start (its only one for a fixed batch)."""
    return run.cfg.env.n_envs * run.cfg.observations_per_env


@dataclass
class BatchPath:
    """Where one adaptive run's batch went up to a goal (optimizer batches, observations)."""

    start: float
    low: float
    high: float
    at_goal: float
    target_low: float  # 10th and 90th percentiles of the target the controller aimed at
    target_high: float
    median: float  # over its logged updates up to the goal: the batch it trained at
    # Optimizer steps taken before its batch first reached that median from where it started: the
    # controller's way there (its cool-down between resizes), which a short stretch can be mostly made of.
    ramp_updates: float


def batch_path(run: RunRecord, goal: float) -> BatchPath | None:
    """Up to where the run reached ``goal`` (its end if it never did); None without a logged batch."""
    if tags.OPTIMIZER_BATCH not in run.scalars:
        return None
    hit = run.goal(goal)
    steps, batches = run.scalars[tags.OPTIMIZER_BATCH]
    until = hit.agent_steps if hit else steps[-1]
    within = steps <= until
    within[0] = True  # a goal met before the first logged update: that update's batch
    upto, upto_steps = batches[within], steps[within]
    target_steps, targets = run.scalars.get(tags.TARGET, (np.array([]), np.array([])))
    aimed = targets[(target_steps <= until) & np.isfinite(targets)]
    low, high = np.percentile(aimed, [10, 90]) if aimed.size else (math.nan, math.nan)
    start = optimizer_batch(run)
    median = float(np.median(upto))
    arrived = upto >= median if median >= start else upto <= median
    reached_at = float(upto_steps[np.argmax(arrived)])
    ramp = run.counter_at(tags.UPDATES, reached_at) if median != start else 0.0
    return BatchPath(start, float(upto.min()), float(upto.max()), float(upto[-1]), float(low), float(high),
                     median, ramp)


def variant_of(run: RunRecord) -> str:
    """'fixed 80 lr 0.0007' for a fixed optimizer batch, else the batch control with its first batch,
    learning-rate rule, noise average and cool-down ('auto from 40 lr 0.0007 noise a1 avg 20000 cooldown 5000'; 'cooldown
    5000 measured' with cooldown_measured)."""
    c, pool = run.cfg.control, run.cfg.pool
    lr = f"lr {run.cfg.agent.lr:g}"
    # Engine settings that can change learning: the policy lag, and bf16 forced on (learner, actors).
    engine = (" overlap" if pool.overlap else "") + (" bf16" if run.cfg.learner.learner_precision == "bf16" else "")
    engine += " actors bf16" if pool.actor_precision == "bf16" else ""
    if c.batch == "fixed":
        return f"fixed {optimizer_batch(run):g} {lr}{engine}"
    if c.batch == "replay":  # its rates are the recorded run's: no rule of its own
        return f"replay from {optimizer_batch(run):g} {lr} of {Path(c.replay_from).parent.name}{engine}"
    rule = f" {c.lr_rule_in_force} a{c.lr_alpha:g}" if c.scales_lr else ""
    ratio = f" crit/{c.crit_ratio:g}" if c.crit_ratio != 1.0 else ""
    probe = " probe-cooldown" if c.batch == "auto" and c.probe_cooldown else ""
    gain = f" min-gain {c.min_gain:g}" if c.batch == "auto" and c.min_gain else ""
    # What the controller follows and how often it may move: runs that differ only here differ in control.
    pace = f" follows {tags.signal_label(c.signal)}" if c.signal != "total" else ""  # the default unnamed
    pace += f" avg {run.cfg.noise.noise_horizon:g} cooldown {c.cooldown:g}"
    pace += " measured" if c.cooldown_measured else ""  # the cool-down counts only what the noise average took
    if c.signal in tags.METRICS:  # read every k-th batch: k sets how many samples its average holds
        pace += f" every {run.cfg.noise.curvature_every}"
    pace += f" band {c.hysteresis:g}" if c.hysteresis != ControlConfig().hysteresis else ""
    # Runs from before max_shrink_factor read as shrink 2: they also grew before learning on one machine.
    pace += f" shrink {c.max_shrink_factor:g}" if c.max_shrink_factor != ControlConfig().max_shrink_factor else ""
    pace += f" clip {run.cfg.noise.noise_clip:g}" if run.cfg.noise.noise_clip else ""
    # Runs from before noise_settle read as settle 0: their averages took new environments' first batches.
    pace += f" settle {run.cfg.noise.noise_settle}" if run.cfg.noise.noise_settle != NoiseConfig().noise_settle else ""
    # auto chooses for the cluster it was told of: another controller than one machine's.
    pace += f" for {c.cluster_nodes} nodes" if c.batch == "auto" and c.cluster_nodes else ""
    pace += f" price {c.cluster_price:g}" if c.batch == "auto" and c.cluster_nodes and c.cluster_price else ""
    pace += (f" reading band {c.cluster_hysteresis:g}"
             if c.batch == "auto" and c.cluster_nodes and c.cluster_hysteresis != 1.0 else "")
    # Since the commit after 1104452 auto on a cluster chooses with cluster_fit where it is given: another controller.
    pace += " given T(B)" if c.batch == "auto" and c.cluster_nodes and c.cluster_fit else ""
    pace += " one node first" if c.batch == "auto" and c.cluster_nodes and c.cluster_one_node_first else ""
    return (f"{c.batch} from {optimizer_batch(run):g} "
            f"{lr}{rule}{ratio}{probe}{gain}{pace}{engine}")


def median_interval(values: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """The median and its 95 % percentile-bootstrap interval (inf where most resamples did not finish)."""
    rng = np.random.default_rng(seed)
    resamples = rng.choice(values, size=(BOOTSTRAP_RESAMPLES, values.size), replace=True)
    medians = np.sort(np.median(resamples, axis=1))
    # Order statistics, not interpolation: an interval end may be inf (most seeds did not finish).
    low, high = medians[int(0.025 * BOOTSTRAP_RESAMPLES)], medians[int(0.975 * BOOTSTRAP_RESAMPLES) - 1]
    return float(np.median(values)), float(low), float(high)


def format_interval(values: tuple[float, float, float], scale: float = 1.0, spec: str = ",.0f") -> str:
    """A ``median_interval`` as text, '1.05 [0.89, 1.90]'; 'not reached' for an infinite median or top."""
    median, low, high = (v / scale for v in values)
    if not math.isfinite(median):
        return "not reached"
    upper = format_number(high, spec) if math.isfinite(high) else "not reached"
    return f"{format_number(median, spec)} [{format_number(low, spec)}, {upper}]"


def add_run_arguments(parser: argparse.ArgumentParser, paths_help: str) -> None:
    """The report commands' inputs: run or sweep directories, and the goals to report."""
    parser.add_argument("paths", type=Path, nargs="+", help=paths_help)
    parser.add_argument("--goals", type=float, nargs="+", help="score goals (default: the runs' presets)")


def format_number(value: float | None, spec: str = ",.0f") -> str:
    """A number for a report table; '-' where there is none (or it is not finite)."""
    return "-" if value is None or not math.isfinite(value) else format(value, spec)
