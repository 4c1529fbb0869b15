"""``python -m rlscale.train <env>``: the training loop and its command.

One update: weights -> rollout pool -> batch -> learner (grouped gradients,
noise scale, optimizer step) -> controller -> pool size and learning rate.
``build()`` wires the parts; reading it tells the whole data flow.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlscale import checkpoint
from rlscale.a2c import A2CLearner
from rlscale.cli import Parser, writable_dir
from rlscale.config import (
    FIELDS,
    Config,
    add_config_flags,
    build_config,
    cli_flag,
    dumps_toml,
    load_saved,
    overrides_from_args,
)
from rlscale.control import BatchController
from rlscale.env import check_env_id, probe_spec
from rlscale.errors import UserError, exits_cleanly
from rlscale.learner import Learner, resolve_device
from rlscale.logger import RunLogger, StepRate
from rlscale.nets import build_network
from rlscale.ppo import PPOLearner
from rlscale.rollout import ActorFailures, flat_weights, make_pool

# Consecutive non-finite updates after which the run stops (with a checkpoint).
MAX_SKIPPED_IN_A_ROW = 20
CONFIG_FILE = "config.toml"
SUMMARY_FILE = "summary.json"
LEARNERS = {"a2c": A2CLearner, "ppo": PPOLearner}


@dataclass
class Counters:
    agent_steps: int = 0  # env steps of single environments used for training
    examples: int = 0  # observations the optimizer consumed (= agent steps for A2C)
    episodes: int = 0
    wall_seconds: float = 0.0  # training time, summed over resumed sessions
    warmup_steps: int = 0  # random start-up steps of new environments (not trained on)
    n_envs: int = 0
    goals: dict[str, dict[str, float]] = field(default_factory=dict)  # first time each goal was met


@dataclass
class Run:
    """Everything one training run is made of, wired by build()."""

    cfg: Config
    run_dir: Path
    learner: Learner
    controller: BatchController
    pool: Any
    logger: RunLogger
    counters: Counters
    # Called with a few headline numbers at every progress line (the sweep reports them to Ray Tune).
    on_progress: Callable[[dict[str, float]], None] | None = None
    finished: bool = False  # the budget or --stop-return was reached


def default_run_dir(cfg: Config) -> Path:
    name = cfg.env.env_id.replace("ALE/", "").replace("/", "-").split("-v")[0].lower()
    return Path("runs") / f"{name}-{cfg.agent.algo}-{datetime.now():%Y%m%d-%H%M%S}"


def build(cfg: Config, run_dir: Path, state: dict[str, Any] | None = None) -> Run:
    """Wire pool, learner, noise estimator, controller and logger for one run."""
    torch.set_num_threads(cfg.run.learner_threads or os.cpu_count() or 1)
    torch.manual_seed(cfg.run.seed)
    np.random.seed(cfg.run.seed)
    spec = probe_spec(cfg.env)
    model = build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden).to(resolve_device(cfg.run.learner_device))
    learner = LEARNERS[cfg.agent.algo](model, cfg)
    controller = BatchController(cfg.control, cfg.observations_per_env, cfg.env.vector_size)
    counters = Counters(n_envs=cfg.env.n_envs)
    if state is not None:
        learner.load_state_dict(state["learner"])
        controller.load_state_dict(state["controller"])
        counters = Counters(**state["counters"])
        torch.set_rng_state(state["torch_rng"])
    # A resumed run starts with the env count it had, not the preset's.
    pool = make_pool(replace(cfg, env=replace(cfg.env, n_envs=counters.n_envs)), spec)
    counters.warmup_steps += pool.warmup_steps
    # Events past the checkpoint were written by the killed session: TensorBoard drops them.
    logger = RunLogger(str(run_dir), purge_step=counters.agent_steps + 1 if state else None)
    if state is not None:
        # The goal window carries over, so a resumed run meets its goals at the same step
        # an uninterrupted one would (older checkpoints lack it and start an empty window).
        logger.returns.extend(state.get("recent_returns", []))
    return Run(cfg, run_dir, learner, controller, pool, logger, counters)


def save_checkpoint(run: Run) -> Path:
    run.logger.flush()  # every event up to the checkpoint is on disk before it is
    state = {
        "learner": run.learner.state_dict(),
        "controller": run.controller.state_dict(),
        "counters": asdict(run.counters),
        "recent_returns": list(run.logger.returns),
        "torch_rng": torch.get_rng_state(),
        "config": dumps_toml(run.cfg),
    }
    path = checkpoint.save(run.run_dir, state, run.counters.agent_steps, run.cfg.run.keep_checkpoints)
    write_summary(run)
    return path


def write_summary(run: Run) -> None:
    summary = {**asdict(run.counters), "updates": run.learner.updates,
               "mean_return": run.logger.mean_return, "env_id": run.cfg.env.env_id,
               "finished": run.finished}
    checkpoint.write_json(run.run_dir / SUMMARY_FILE, summary)


def record_goals(cfg: Config, logger: RunLogger, goals: dict[str, dict[str, float]],
                 position: dict[str, float]) -> bool:
    """Record goals met for the first time at ``position``; True when the run should stop.

    Shared by both backends so their goal rule and messages are the same.
    """
    mean = logger.mean_return
    if mean is None or len(logger.returns) < logger.returns.maxlen:
        return False
    for goal in cfg.env.goals:
        key = f"{goal:g}"
        if key not in goals and mean >= goal:
            goals[key] = dict(position)
            print(f"goal {key} reached: mean return {mean:.1f} over {len(logger.returns)} episodes "
                  f"at {position['agent_steps']:,} agent steps, {position['wall_seconds'] / 60:.1f} min",
                  flush=True)
    if mean >= cfg.run.stop_return:
        print(f"stop: mean return {mean:.1f} reached --stop-return {cfg.run.stop_return:g}", flush=True)
        return True
    return False


def _check_goals(run: Run) -> bool:
    c = run.counters
    return record_goals(run.cfg, run.logger, c.goals, {
        "agent_steps": c.agent_steps, "updates": run.learner.updates, "examples": c.examples,
        "wall_seconds": round(c.wall_seconds, 1)})


def train_loop(run: Run) -> None:
    cfg, c, learner = run.cfg, run.counters, run.learner
    total = cfg.total_agent_steps
    signal_name = cfg.control.signal if cfg.noise.measure_noise else "off"
    rate = StepRate(c.agent_steps)
    while c.agent_steps < total:
        start = time.perf_counter()
        batch = run.pool.collect(flat_weights(learner.model))
        rollout_done = time.perf_counter()
        updates_before = learner.updates
        metrics = learner.update(batch, c.agent_steps / total)
        learned = time.perf_counter()
        if learner.skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW:
            path = save_checkpoint(run)
            raise UserError(
                f"{MAX_SKIPPED_IN_A_ROW} updates in a row had a non-finite loss or gradient; "
                f"stopped with checkpoint {path}; lower --lr or check the environment's rewards"
            )
        c.agent_steps += batch.size
        c.warmup_steps += batch.warmup_steps
        c.examples += learner.examples(batch.size)
        stop = False
        for ep in batch.episodes:
            c.episodes += 1
            run.logger.episode(ep.episode_return, ep.length, c.agent_steps)
            # After every episode, not every update: the mean of the last 20 may cross
            # a goal mid-batch and fall back by the batch's last episode.
            stop = _check_goals(run) or stop

        decision = run.controller.step(c.n_envs, learner.b_simple(cfg.control.signal),
                                       batch.size, learner.lr)
        resize_seconds = None
        if decision.n_envs != c.n_envs:
            report = run.pool.resize(decision.n_envs, background=True)
            resize_seconds = report.seconds
            c.warmup_steps += report.warmup_steps
            print(f"resize {c.n_envs} -> {decision.n_envs} envs ({decision.reason}); "
                  f"lr {learner.lr:.2e} -> {decision.lr:.2e}; {report.seconds:.2f} s", flush=True)
            c.n_envs = decision.n_envs
            learner.lr = decision.lr
        c.wall_seconds += time.perf_counter() - start

        steps_per_s = rate.update(c.agent_steps)
        metrics.update({
            # n_envs counts environments still starting up; size is what this update trained on.
            "batch/n_envs": c.n_envs, "batch/starting_envs": batch.starting_envs,
            "batch/size": batch.size,
            "batch/optimizer_batch": batch.n_envs * cfg.observations_per_env,
            "perf/steps_per_s": steps_per_s, "perf/rollout_seconds": rollout_done - start,
            "perf/learner_seconds": learned - rollout_done,
            "train/updates": learner.updates, "train/examples": c.examples,
            "perf/wall_seconds": c.wall_seconds,
        })
        if decision.target_batch is not None:
            metrics["batch/target"] = decision.target_batch
        if resize_seconds is not None:
            metrics["batch/resize_seconds"] = resize_seconds
        run.logger.scalars(metrics, c.agent_steps)
        printed = run.logger.progress(c.agent_steps, total, steps_per_s, batch.n_envs,
                            learner.b_simple(cfg.control.signal) if cfg.noise.measure_noise else None,
                            signal_name, learner.lr_in_use, interval=cfg.run.log_interval,
                            starting_envs=batch.starting_envs)
        if printed and run.on_progress is not None:
            run.on_progress(headline(run))
        # PPO takes epochs x minibatches optimizer steps per batch, so the count jumps:
        # checkpoint whenever it passes a multiple, not only when it lands on one.
        every = cfg.run.checkpoint_every
        if learner.updates // every > updates_before // every:
            save_checkpoint(run)
        if stop:
            break
    run.finished = True


def headline(run: Run) -> dict[str, float]:
    c = run.counters
    out = {"agent_steps": c.agent_steps, "updates": run.learner.updates, "n_envs": c.n_envs,
           "episodes": c.episodes, "wall_seconds": round(c.wall_seconds, 1)}
    if run.logger.mean_return is not None:
        out["mean_return"] = run.logger.mean_return
    signal_value = run.learner.b_simple(run.cfg.control.signal)
    if signal_value is not None:
        out["b_simple"] = signal_value
    return out


def _raise_interrupt(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler API
    raise KeyboardInterrupt


@contextmanager
def interrupts_raise() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt, so a run checkpoints before it exits.

    Both handlers explicitly: a process started with SIGINT ignored (a background
    job of a non-interactive shell) would otherwise never see Ctrl-C. Only the
    main thread may set handlers (a Ray Tune trial runs in another one).
    """
    main_thread = threading.current_thread() is threading.main_thread()
    previous = ({sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
                if main_thread else {})
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def open_run_dir(cfg: Config, run_dir: Path) -> None:
    """Check the run directory, say where it is and how to watch it, save the config."""
    writable_dir(run_dir)
    print(f"run directory: {run_dir}", flush=True)
    print(f"watch it:      tensorboard --logdir {run_dir.parent}", flush=True)
    (run_dir / CONFIG_FILE).write_text(dumps_toml(cfg))


def run_training(cfg: Config, run_dir: Path, state: dict[str, Any] | None = None,
                 on_progress: Callable[[dict[str, float]], None] | None = None) -> int:
    open_run_dir(cfg, run_dir)
    run: Run | None = None
    try:
        run = build(cfg, run_dir, state)
        run.on_progress = on_progress
        c = run.counters
        mode = run.pool.describe()
        print(f"{cfg.env.env_id} | {cfg.agent.algo} | {c.n_envs} envs x {cfg.agent.n_steps} steps "
              f"| {mode} | learner on {run.learner.device} | batch control: {cfg.control.batch} "
              f"| budget {cfg.total_agent_steps:,} agent steps",
              flush=True)
        train_loop(run)
        path = save_checkpoint(run)
        run.logger.progress(c.agent_steps, cfg.total_agent_steps, c.agent_steps / max(c.wall_seconds, 1e-9),
                            c.n_envs, run.learner.b_simple(cfg.control.signal), cfg.control.signal,
                            run.learner.lr_in_use, force=True)
        if on_progress is not None:
            on_progress(headline(run))
        print(f"done: {c.agent_steps:,} agent steps, {run.learner.updates:,} updates, "
              f"{c.episodes:,} episodes in {c.wall_seconds / 60:.1f} min; checkpoint {path}", flush=True)
        return 0
    except ActorFailures as err:
        if run is None:
            raise
        raise UserError(f"{err}; stopped with checkpoint {save_checkpoint(run)}") from None
    except KeyboardInterrupt:
        if run is None:
            print("interrupted before training started", file=sys.stderr)
            return 130
        path = save_checkpoint(run)
        print(f"\ninterrupted: checkpoint {path}\nresume with: python -m rlscale.train --resume {run_dir}",
              file=sys.stderr, flush=True)
        return 130
    finally:
        if run is not None:
            run.pool.close()
            run.logger.close()


# What a resumed run may change: where it stops (budget, score) and how it reports and
# checkpoints, not how it trains. A larger budget extends a run; with annealing on, the
# learning rate then continues from the new schedule's value at the current step.
RESUME_OVERRIDABLE = {"total_frames", "stop_return", "log_interval", "checkpoint_every", "keep_checkpoints",
                      "address"}


def _flags(keys: set[str]) -> str:
    return ", ".join(cli_flag(key) for key in sorted(keys))


def resume(run_dir: Path, overrides: dict[str, Any]) -> int:
    if not (run_dir / CONFIG_FILE).is_file():
        raise UserError(f"{run_dir} is not a run directory (no {CONFIG_FILE}); check the path")
    cfg = load_saved(run_dir / CONFIG_FILE)
    fixed = set(overrides) - RESUME_OVERRIDABLE
    if fixed:
        raise UserError(f"--resume keeps the run's settings; only {_flags(RESUME_OVERRIDABLE)} "
                        f"may change (got {_flags(fixed)})")
    for key, value in overrides.items():
        section, _ = FIELDS[key]
        setattr(getattr(cfg, section), key, value)
    cfg.run.run_dir = str(run_dir)  # a copied or moved run directory resumes where it is now
    if cfg.run.backend == "rllib":
        return run_rllib(cfg.validate(), run_dir, resume=True)
    state = checkpoint.load(checkpoint.latest(run_dir))
    print(f"resuming from {state['counters']['agent_steps']:,} agent steps", flush=True)
    return run_training(cfg.validate(), run_dir, state)


def parser() -> Parser:
    p = Parser(prog="python -m rlscale.train",
               description="Train an agent; measure the gradient noise scale; resize the batch to follow it.")
    p.add_argument("env", nargs="?", help="preset (pong, breakout, cartpole) or gymnasium id (ALE/Breakout-v5)")
    p.add_argument("--agent", help="agent preset from agents/ (default: a2c)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    add_config_flags(p)
    return p


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    overrides = overrides_from_args(args)
    if args.resume:
        with interrupts_raise():
            return resume(Path(args.resume), overrides)
    if not args.env:
        raise UserError("name an environment, e.g. python -m rlscale.train pong (or --resume RUN_DIR)")
    # RLlib's backend runs PPO, so it picks the PPO preset unless told otherwise.
    agent = args.agent or ("ppo" if overrides.get("backend") == "rllib" else None)
    cfg = build_config(args.env, agent, overrides)
    check_env_id(cfg.env.env_id)
    run_dir = Path(cfg.run.run_dir) if cfg.run.run_dir else default_run_dir(cfg)
    cfg.run.run_dir = str(run_dir)
    with interrupts_raise():
        if cfg.run.backend == "rllib":
            return run_rllib(cfg, run_dir)
        return run_training(cfg, run_dir)


def run_rllib(cfg: Config, run_dir: Path, resume: bool = False) -> int:
    from rlscale.integrations.rllib import check_rllib_version, check_supported, train_rllib

    check_rllib_version()
    check_supported(cfg)
    open_run_dir(cfg, run_dir)
    return train_rllib(cfg, run_dir, resume=resume)


if __name__ == "__main__":
    sys.exit(main())
