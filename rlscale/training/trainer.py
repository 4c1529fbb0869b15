"""The training loop, one for every engine.

One update: the engine collects a batch and learns from it (weights -> actors
-> batch -> learner: gradients, noise estimate, optimizer step); the loop then
counts, checks goals, steps the controller (the one place it is stepped, in
the same units for every engine), resizes the engine, logs and checkpoints.
``run`` opens the run directory, builds the engine, runs the loop and turns
interrupts and actor failures into a checkpoint and a clear message.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rlscale import tags
from rlscale.cli import writable_dir
from rlscale.config import Config, dumps_toml, runs_root
from rlscale.control.cluster_clock import ClusterClock
from rlscale.control.controller import BatchController, Decision
from rlscale.control.cost import Fit, predicted_speedup
from rlscale.control.schedule import Schedule
from rlscale.engine.native import Engine, NativeEngine, UpdateResult
from rlscale.errors import ActorFailures, UserError
from rlscale.goals import (
    GOAL_WINDOW,
    LEARNING_Z,
    GoalForecast,
    GoalOutlook,
    GoalWindow,
    learning_began,
    window_stats,
)
from rlscale.rundir import checkpoint
from rlscale.rundir.branch import BranchPoint, load_branch_point
from rlscale.rundir.checkpoint import CONFIG_FILE, SUMMARY_FILE
from rlscale.rundir.replay import describe, load_schedule
from rlscale.training.logger import RunLogger, StepRate

# Consecutive non-finite updates after which the run stops (with a checkpoint).
MAX_SKIPPED_IN_A_ROW = 20


@dataclass
class TrainState:
    """The loop's own state; with the engine's and the controller's it is a checkpoint."""

    agent_steps: int = 0  # env steps of single environments used for training
    examples: int = 0  # observations the optimizer consumed (E; PPO reuses each n_epochs times)
    episodes: int = 0
    wall_seconds: float = 0.0  # training time, summed over the resumes of one run
    warmup_steps: int = 0  # start-up steps not trained on: new environments' random ones, --pool auto's probe
    n_envs: int = 0
    base_lr: float = 0.0  # the controller's learning rate at the current batch, before annealing
    goals: dict[str, dict[str, float]] = field(default_factory=dict)  # first time each goal was met
    first_window: list[float] | None = None  # the first full goal window's mean and standard deviation
    most_envs: int = 0  # the most environments seen before the first window: it waits for two episodes of each
    learned: bool = False  # the return has risen above the first window's (goals.learning_began: auto's guard)
    learned_at: int | None = None  # the agent step at which it was first seen to have learned (every mode)
    # Agent steps after which the controller did each kind of thing (rlscale.control.controller: resize, cooling
    # down, nothing learned, ...): what held a run's batch where it stayed.
    batch_decisions: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_saved(cls, saved: dict[str, Any]) -> TrainState:
        """A checkpoint's state; counters of settings since retired (the in-run measurement's) are dropped."""
        known = {f.name for f in fields(cls)}
        state = cls(**{k: v for k, v in saved.items() if k in known})
        if "batch_decisions" not in saved:  # saved before they were counted: the sum still adds up to agent_steps
            state.batch_decisions = {"unrecorded": state.agent_steps}
        return state


@dataclass
class Run:
    """Everything one training run is made of."""

    cfg: Config
    run_dir: Path
    engine: Engine
    controller: BatchController
    logger: RunLogger
    state: TrainState
    window: GoalWindow
    forecast: GoalForecast  # the return's trend, for the progress line
    # Called with a few headline numbers at every progress line (the sweep reports them to Ray Tune).
    on_progress: Callable[[dict[str, float]], None] | None = None
    finished: bool = False  # the budget or --stop-return was reached
    last_lr: float | None = None  # the learning rate of the last update (annealing moves it)
    settled: bool = False  # the pool ran unchanged through the last update (its timing is clean)
    clock: ClusterClock | None = None  # --cluster-nodes: the elastic cluster's time and node-hours
    batch_note: str = ""  # the progress line's word on why the controller holds the batch (none for a fixed one)

    def cluster_fit(self) -> Fit | None:
        """The T(B) the cluster clock prices updates with: cluster_fit when given (the controller's, which chooses
        with it too), else the run's own latest resolved fit (a refit on noisy timings may lose its overhead)."""
        if self.controller.cluster_priced is not None:
            return self.controller.cluster_priced
        return self.controller.cost.resolved_fit

    def next_goal(self) -> GoalOutlook | None:
        """The lowest goal not yet met (--stop-return counts): where the return's trend and the
        preset's reference run put it."""
        goals = [g for g in self.cfg.score_goals if f"{g:g}" not in self.state.goals]
        if not goals:
            return None
        goal = min(goals)
        forecast = self.forecast.expected_step(goal, self.state.agent_steps)
        if forecast is not None and forecast.at > 2 * self.cfg.total_agent_steps:
            forecast = None
        return GoalOutlook(goal, forecast, reference_step(self.cfg, goal, self.state.agent_steps))

    @property
    def signal(self) -> float | None:
        """The noise scale the controller follows; None when not measured or undefined."""
        if not self.cfg.noise.measure_noise:
            return None
        return self.engine.noise.b_simple(self.cfg.control.signal)

    @property
    def signal_missing(self) -> str:
        """Why ``signal`` is None, for the controller's decision line; "" when it is defined."""
        if not self.cfg.noise.measure_noise:
            return "measure_noise is off"
        return self.engine.noise.missing(self.cfg.control.signal)

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps S so far."""
        return self.engine.optimizer_steps

    def lr_now(self) -> float:
        """The controller's learning rate, annealed linearly over the budget when configured."""
        if not self.cfg.agent.anneal_lr:
            return self.state.base_lr
        return self.state.base_lr * (1.0 - self.state.agent_steps / self.cfg.total_agent_steps)


def control_note(cfg: Config) -> str:
    """Where the header's batch control says why: the guide that holds the measurements."""
    return " (why: docs/batch-control.md)" if cfg.control.batch in ("fixed", "auto") else ""


def header(run: Run) -> str:
    """The run's first lines: the task and budget, then one line per start-up choice (why: the docs named)."""
    cfg = run.cfg
    choices = [*run.engine.describe().split(" | "), f"batch control: {cfg.control.batch}{control_note(cfg)}"]
    if run.clock is not None:
        c = run.clock.cluster
        priced = "cluster_fit" if cfg.control.cluster_fit else "the run's own fit of T(B), once two batch sizes are timed"
        choices.append(f"cluster clock: up to {c.max_nodes} nodes of {cfg.control.cluster_node_envs} envs "
                       f"({c.node_batch:g} observations), {1e3 * c.round_trip:.0f} ms round trip past one node, "
                       f"priced with {priced}{'; auto chooses for it' if cfg.control.batch == 'auto' else ''} "
                       "(docs/scaling.md)")
    return "\n".join([f"{cfg.env.env_id} | {cfg.agent.algo} | {run.state.n_envs} envs x {cfg.agent.n_steps} steps | "
                      f"budget {cfg.total_agent_steps:,} agent steps{stop_clause(cfg)}",
                      *(f"  {choice}" for choice in choices)])


def reference_step(cfg: Config, goal: float, now: float) -> float | None:
    """The agent step the preset's reference run reached ``goal`` at, if it has one still ahead."""
    steps = cfg.agent.reference_steps
    if len(steps) != len(cfg.env.goals) or goal not in cfg.env.goals:
        return None
    at = steps[cfg.env.goals.index(goal)]
    return at if at > now else None


def make_engine(cfg: Config, run_dir: Path, n_envs: int, state: dict[str, Any] | None,
                branch: BranchPoint | None = None) -> Engine:
    if cfg.run.backend == "rllib":
        from rlscale.integrations.rllib import RLlibEngine

        return RLlibEngine(cfg, run_dir, n_envs, state)
    return NativeEngine(cfg, n_envs, state, start_from=branch.learner if branch else None)


def learning_hold(cfg: Config) -> tuple[bool, bool]:
    """(hold_until_learning, grow_to_exchange_rate) for the run's controller.

    Before the return rises the noise scale reads high while the gradient is mostly noise: growing then buys
    machines (on a cluster, modelled or elastic actors) or, for auto, examples that teach nothing. On one
    machine auto may still grow to the cost model's a/b, below which a larger batch costs little more time
    per update (docs/batch-control.md)."""
    grows_machines = cfg.control.cluster_nodes > 0 or cfg.pool.envs_per_actor > 0
    return cfg.control.batch == "auto" or grows_machines, cfg.control.batch == "auto" and not grows_machines


def build(cfg: Config, run_dir: Path, saved: dict[str, Any] | None = None,
          schedule: Schedule | None = None, branch: BranchPoint | None = None) -> Run:
    """Wire the engine, controller, goal window and logger of a run (from a checkpoint's state, or a
    branch's start from another run's); a replay reads its schedule here unless given it."""
    state = TrainState(n_envs=cfg.env.n_envs, base_lr=cfg.agent.lr)
    controller = BatchController(cfg.control, cfg.observations_per_env, cfg.pool_unit)
    controller.hold_until_learning, controller.grow_to_exchange_rate = learning_hold(cfg)
    clock = ClusterClock(controller.cluster) if controller.cluster is not None else None
    if cfg.control.batch == "replay":
        controller.schedule = schedule or load_schedule(cfg)
    window = GoalWindow()
    if saved is not None:
        state = TrainState.from_saved(saved["trainer"])
        controller.load_state_dict(saved["controller"])
        window = GoalWindow(saved["goal_window"])
        if clock is not None and "cluster_clock" in saved:
            clock.load_state_dict(saved["cluster_clock"])
    # A resumed run starts with the env count it had, not the preset's.
    engine = make_engine(cfg, run_dir, state.n_envs, saved["engine"] if saved else None, branch)
    state.warmup_steps += engine.start_warmup_steps  # a resumed run starts new environments too
    # Events past the checkpoint were written by the killed process: TensorBoard drops them.
    logger = RunLogger(str(run_dir), purge_step=state.agent_steps + 1 if saved else None)
    logger.layout(cfg.control.signal)
    # Trend points every 0.5 % of the budget: the last 10 span 5 % of it.
    return Run(cfg, run_dir, engine, controller, logger, state, window,
               GoalForecast(spacing=cfg.total_agent_steps / 200), clock=clock)


def save_checkpoint(run: Run) -> Path:
    run.logger.flush()  # every event up to the checkpoint is on disk before it is
    step = run.state.agent_steps
    saved = {
        "backend": run.cfg.run.backend,
        "trainer": asdict(run.state),
        "controller": run.controller.state_dict(),
        "goal_window": list(run.window.returns),
        **({"cluster_clock": run.clock.state_dict()} if run.clock is not None else {}),
        "engine": run.engine.save(checkpoint.prefix(run.run_dir, step)),
        "config": dumps_toml(run.cfg),
    }
    path = checkpoint.save(run.run_dir, saved, step, run.cfg.run.keep_checkpoints)
    write_summary(run)
    return path


def write_summary(run: Run) -> None:
    summary = {**asdict(run.state), "updates": run.optimizer_steps, "mean_return": run.window.mean,
               "env_id": run.cfg.env.env_id, "backend": run.cfg.run.backend, "finished": run.finished}
    fit = run.cluster_fit()
    cluster = cluster_metrics(run, fit)
    if cluster:
        summary["cluster"] = {"nodes": run.cfg.control.cluster_nodes,
                              "wall_seconds": round(cluster[tags.CLUSTER_WALL_SECONDS], 2),
                              "node_hours": cluster[tags.CLUSTER_NODE_HOURS],
                              # The T(B) that priced them, per optimizer batch: T = a + b B (one node).
                              "fit": {"overhead_seconds": fit.overhead,
                                      "seconds_per_optimizer_observation": fit.per_observation}}
    checkpoint.write_json(run.run_dir / SUMMARY_FILE, summary)


def record_episodes(run: Run, episodes: list[tuple[float, int]]) -> bool:
    """Record a batch's episodes (return, length); True, said once, when one of them met --stop-return."""
    stop_mean: float | None = None  # the window's mean when the first episode met it
    for episode_return, length in episodes:
        if record_episode(run, episode_return, length) and stop_mean is None:
            stop_mean = run.window.full_mean
    if stop_mean is not None:  # once, though later episodes of the batch may meet it too
        print(f"stop: mean return {stop_mean:.1f} reached --stop-return {run.cfg.run.stop_return:g}", flush=True)
    return stop_mean is not None


def record_episode(run: Run, episode_return: float, length: int) -> bool:
    """Log an episode and record goals it completes; True when the run should stop.

    After every episode, not every update: the mean of the window may cross a goal
    mid-batch and fall back by the batch's last episode.
    """
    s = run.state
    s.episodes += 1
    run.logger.episode(episode_return, length, s.agent_steps)
    run.window.add(episode_return)
    mean = run.window.full_mean
    if mean is None:
        return False
    for goal in run.cfg.env.goals:
        key = f"{goal:g}"
        if key not in s.goals and run.window.reached(goal):
            s.goals[key] = {"agent_steps": s.agent_steps, "updates": run.optimizer_steps,
                            "examples": s.examples, "wall_seconds": round(s.wall_seconds, 1)}
            print(f"goal {key} reached: mean return {mean:.1f} over {len(run.window.returns)} episodes "
                  f"at {s.agent_steps:,} agent steps, {s.wall_seconds / 60:.1f} min", flush=True)
    return run.window.reached(run.cfg.run.stop_return)


def stop_clause(cfg: Config) -> str:
    """The header's note of the early stop, when the run has one (and where the preset's reference got there)."""
    if math.isinf(cfg.run.stop_return):
        return ""
    reference = reference_step(cfg, cfg.run.stop_return, 0)
    seen = f" (the preset's reference run: at {reference:,.0f} agent steps)" if reference else ""
    return f", stops at a mean return of {cfg.run.stop_return:g} over {GOAL_WINDOW} episodes{seen}"


def train_loop(run: Run) -> None:
    cfg, s, engine = run.cfg, run.state, run.engine
    total = cfg.total_agent_steps
    rate = StepRate(s.agent_steps)
    # cooldown_measured: the controller's cool-down counts the observations the noise average took each update.
    measures_cooldown = cfg.control.cooldown_measured and cfg.noise.measure_noise
    while s.agent_steps < total:
        start = time.perf_counter()
        lr = run.last_lr = run.lr_now()
        steps_before = engine.optimizer_steps
        taken_before = engine.noise.taken(cfg.control.signal) if measures_cooldown else 0.0
        result = engine.update(lr)
        if result.skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW:
            path = save_checkpoint(run)
            raise UserError(
                f"{MAX_SKIPPED_IN_A_ROW} updates in a row had a non-finite loss or gradient; "
                f"stopped with checkpoint {path}; lower --lr or check the environment's rewards"
            )
        update_seconds = time.perf_counter() - start
        # The cost model learns from updates on a settled pool: environments starting in
        # the background, or the update right after a resize, take time a steady run does not.
        # Keyed by the nominal batch (the env count's), which the controller compares: RLlib's
        # batches vary by a few observations with episode boundaries (256.75, 257.0, ...), and
        # timings spread over such keys never identified the model.
        if run.settled and result.starting_envs == 0:
            run.controller.cost.add(s.n_envs * cfg.observations_per_env, update_seconds)
        s.agent_steps += result.agent_steps
        s.warmup_steps += result.warmup_steps
        s.examples += result.agent_steps * cfg.epochs_per_batch
        stop = record_episodes(run, result.episodes)
        note_learning(run)
        if run.clock is not None:
            run.clock.tick(result.optimizer_batch)  # what it trained on: new environments may still be starting

        signal = run.signal
        measured = engine.noise.taken(cfg.control.signal) - taken_before if measures_cooldown else None
        decision = run.controller.step(s.n_envs, signal, result.agent_steps, s.base_lr, learned=s.learned,
                                       missing="" if signal is not None else run.signal_missing, measured=measured)
        s.batch_decisions[decision.kind] = s.batch_decisions.get(decision.kind, 0) + result.agent_steps
        run.batch_note = "" if cfg.control.batch == "fixed" else f"{cfg.control.batch}: {decision.note()}"
        metrics = dict(result.metrics) | cost_metrics(run, result) | cluster_metrics(run, run.cluster_fit())
        metrics[tags.UPDATE_SECONDS] = update_seconds
        apply_decision(run, decision, metrics)
        s.wall_seconds += time.perf_counter() - start

        steps_per_s = rate.update(s.agent_steps)
        metrics |= engine.noise.metrics() if cfg.noise.measure_noise else {}
        metrics |= {
            # n_envs counts environments still starting up; size is what this update trained on.
            tags.N_ENVS: s.n_envs, tags.SIZE: result.agent_steps, tags.OPTIMIZER_BATCH: result.optimizer_batch,
            tags.STEPS_PER_S: steps_per_s, tags.WALL_SECONDS: s.wall_seconds,
            tags.LR: lr, tags.UPDATES: run.optimizer_steps, tags.EXAMPLES: s.examples,
        }
        if decision.target_batch is not None:
            metrics[tags.TARGET] = decision.target_batch
        # Only where the batch moves (environments start in the background after a resize):
        # with a fixed batch it is a line at 0 through the whole run.
        if cfg.control.batch != "fixed":
            metrics[tags.STARTING_ENVS] = result.starting_envs
        run.logger.scalars(metrics, s.agent_steps)
        run.forecast.add(s.agent_steps, run.window.full_mean)
        printed = run.logger.progress(s.agent_steps, total, steps_per_s, run.window, s.n_envs, run.signal,
                                      _signal_name(cfg), lr, interval=cfg.run.log_interval,
                                      starting_envs=result.starting_envs, next_goal=run.next_goal,
                                      eta_rate=rate.smoothed, settling=not rate.settled,
                                      batch_note=run.batch_note)
        if printed and run.on_progress is not None:
            run.on_progress(headline(run))
        # PPO takes epochs x minibatches optimizer steps per batch, so the count jumps:
        # checkpoint whenever it passes a multiple, not only when it lands on one.
        every = cfg.run.checkpoint_every
        if engine.optimizer_steps // every > steps_before // every:
            save_checkpoint(run)
        if stop:
            break
    run.finished = True


def apply_decision(run: Run, decision: Decision, metrics: dict[str, float]) -> None:
    """Take the controller's batch and rate: the one place the training loop resizes its engine."""
    s, engine = run.state, run.engine
    run.settled = decision.n_envs == s.n_envs
    if decision.n_envs != s.n_envs:
        report = engine.resize(decision.n_envs)
        s.warmup_steps += report.warmup_steps
        metrics[tags.RESIZE_SECONDS] = report.seconds
        print(f"resize {s.n_envs} -> {decision.n_envs} envs ({decision.reason}); "
              f"lr {s.base_lr:.2e} -> {decision.lr:.2e}; {report.seconds:.2f} s", flush=True)
        s.n_envs = decision.n_envs
    s.base_lr = decision.lr  # holding returns the rate it was given; a replay may set one without a resize


def note_learning(run: Run) -> None:
    """Keep the first full window's statistics, once every environment has had two episodes, and note once
    the return has risen above them.

    All environments start together, so the first episodes to end are the shortest: on MinAtar Breakout
    the first 30 were 6-step episodes that scored 0, against a mean of 0.3-0.5 over later ones, and any
    later window then read as learning."""
    s = run.state
    if s.first_window is None:
        # The most, not the current: a run from 512 environments that shrinks to 128 before its 1,024th
        # episode has not yet seen two episodes of each of the 512 it started with.
        s.most_envs = max(s.most_envs, s.n_envs)
        stats = window_stats(run.window) if s.episodes >= 2 * s.most_envs else None
        s.first_window = list(stats) if stats is not None else None
    elif not s.learned and learning_began(tuple(s.first_window), window_stats(run.window)):
        s.learned, s.learned_at = True, s.agent_steps
        if run.cfg.control.batch == "auto":  # auto always holds until now (build)
            print(f"learning: mean return {run.window.full_mean:.2f} stands {LEARNING_Z:g} standard errors above the first "
                  f"window's {s.first_window[0]:.2f} at {s.agent_steps:,} agent steps; auto may now grow the batch", flush=True)


def cluster_metrics(run: Run, fit: Fit | None) -> dict[str, float]:
    """The cluster clock's wall time, node-hours and this batch's nodes, once a fit of T(B) (run.cluster_fit)
    prices them."""
    if run.clock is None or fit is None:
        return {}
    return {tags.CLUSTER_WALL_SECONDS: run.clock.wall_seconds(fit),
            tags.CLUSTER_NODE_HOURS: run.clock.node_seconds(fit) / 3600,
            tags.CLUSTER_NODES: run.clock.cluster.nodes_for(run.state.n_envs * run.cfg.observations_per_env)}


def cost_metrics(run: Run, result: UpdateResult) -> dict[str, float]:
    """The cost model's a, b and exchange rate, and the speed-up it predicts for B* (when it can)."""
    fit = run.controller.cost.fit
    # Only --batch auto aims at B* with the model; in other modes its fit rests on the few
    # sizes the batch passed through (r read 1e6 in a critical run) and means nothing.
    if fit is None or run.cfg.control.batch != "auto":
        return {}
    # The model is fitted in optimizer-batch units; b per observation divides by the
    # observations each optimizer-batch observation stands for (PPO: the minibatch count).
    per_update = result.agent_steps / result.optimizer_batch
    out = {tags.OVERHEAD_SECONDS: fit.overhead, tags.SECONDS_PER_OBSERVATION: fit.per_observation / per_update,
           tags.EXCHANGE_RATE: fit.exchange_rate}
    if run.signal is not None:  # against the B* the controller aims at: B_crit read as B_simple / crit_ratio
        out[tags.PREDICTED_SPEEDUP] = predicted_speedup(fit, result.optimizer_batch,
                                                        run.controller.critical_batch(run.signal))
    return out


def _signal_name(cfg: Config) -> str:
    return cfg.control.signal if cfg.noise.measure_noise else "off"


def headline(run: Run) -> dict[str, float]:
    s = run.state
    out = {"agent_steps": s.agent_steps, "updates": run.optimizer_steps, "n_envs": s.n_envs,
           "episodes": s.episodes, "wall_seconds": round(s.wall_seconds, 1)}
    if run.window.mean is not None:
        out["mean_return"] = run.window.mean
    if run.signal is not None:
        out["b_simple"] = run.signal
    return out


def check_engine(cfg: Config) -> None:
    """Refuse settings the engine cannot run, before anything is written."""
    if cfg.run.backend == "rllib":
        from rlscale.integrations.rllib import check_rllib_version, check_supported

        check_rllib_version()
        check_supported(cfg)


def open_run_dir(cfg: Config, run_dir: Path) -> None:
    """Check the run directory, say where it is and how to watch it, save the config."""
    writable_dir(run_dir)
    print(f"run directory: {run_dir}", flush=True)
    # A run named by default sits in the runs root beside the others, so TensorBoard shows them
    # all; a directory the user named is watched alone (its parent may be /tmp or a home folder).
    print(f"watch it:      tensorboard --logdir {run_dir.parent if run_dir.parent == runs_root() else run_dir}",
          flush=True)
    (run_dir / CONFIG_FILE).write_text(dumps_toml(cfg))


def load_latest(run_dir: Path, cfg: Config) -> dict[str, Any]:
    """The run's latest checkpoint, checked to belong to this engine."""
    saved = checkpoint.load(checkpoint.latest(run_dir))
    if saved["backend"] != cfg.run.backend:
        raise UserError(f"{run_dir}: the checkpoint is of a --backend {saved['backend']} run, "
                        f"the config says {cfg.run.backend}")
    return saved


def run(cfg: Config, run_dir: Path, resume: bool = False,
        on_progress: Callable[[dict[str, float]], None] | None = None) -> int:
    """Train (or continue, with ``resume``) the run in ``run_dir``; the command's exit code."""
    check_engine(cfg)
    saved = load_latest(run_dir, cfg) if resume else None
    # Bad input before the run dir. A resumed branch continues from its own checkpoint.
    schedule = load_schedule(cfg) if cfg.control.batch == "replay" else None
    branch = load_branch_point(cfg) if cfg.run.init_from and saved is None else None
    open_run_dir(cfg, run_dir)
    if schedule is not None:
        print(describe(schedule, cfg.control.replay_from), flush=True)
    if branch is not None:
        print(branch.describe(), flush=True)
    if saved is not None:
        print(f"resuming from {saved['trainer']['agent_steps']:,} agent steps", flush=True)
    training: Run | None = None
    try:
        training = build(cfg, run_dir, saved, schedule, branch)
        training.on_progress = on_progress
        s = training.state
        print(header(training), flush=True)
        train_loop(training)
        path = save_checkpoint(training)
        training.logger.progress(s.agent_steps, cfg.total_agent_steps, s.agent_steps / max(s.wall_seconds, 1e-9),
                                 training.window, s.n_envs, training.signal, _signal_name(cfg),
                                 training.last_lr or training.lr_now(), force=True, batch_note=training.batch_note)
        if on_progress is not None:
            on_progress(headline(training))
        print(f"done: {s.agent_steps:,} agent steps, {training.optimizer_steps:,} updates, "
              f"{s.episodes:,} episodes in {s.wall_seconds / 60:.1f} min; checkpoint {path}", flush=True)
        return 0
    except ActorFailures as err:
        if training is None:
            raise
        raise UserError(f"{err}; stopped with checkpoint {save_checkpoint(training)}") from None
    except KeyboardInterrupt:
        if training is None:
            print("interrupted before training started", file=sys.stderr)
            return 130
        path = save_checkpoint(training)
        print(f"\ninterrupted: checkpoint {path}\nresume with: python -m rlscale.train --resume {run_dir}",
              file=sys.stderr, flush=True)
        return 130
    finally:
        if training is not None:
            try:
                training.engine.close()
            finally:
                training.logger.close()

