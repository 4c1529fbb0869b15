"""What the training loop drives: an engine that collects a batch and learns from it.

The loop (``rlscale.training.trainer``) owns the counters, goals, controller, logging
and checkpoints; an engine owns the environments and the learner. Two
engines implement the same small interface: ``NativeEngine`` here (rlscale's
rollout pool and A2C/PPO learners) and ``RLlibEngine`` in
``rlscale.integrations.rllib`` (RLlib's PPO with the noise scale plugged in).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from rlscale import tags
from rlscale.agents.gradients import GradientRoute
from rlscale.agents.learner import Learner, resolve_device
from rlscale.agents.registry import LEARNERS
from rlscale.config import Config
from rlscale.control.noise import NoiseMeter
from rlscale.engine.threads import (
    BUSY_ELSEWHERE_CORES,
    BusyElsewhere,
    ThreadGovernor,
    cores_busy_elsewhere,
    default_learner_threads,
)
from rlscale.envs.vector import EnvSpec, probe_spec, sample_observations
from rlscale.models.nets import build_network
from rlscale.models.precision import PrecisionChoice, choose_precision, has_convolutions
from rlscale.rollout.choice import PoolChoice, ProbeLimits, probe
from rlscale.rollout.worker import Pool, ResizeReport, SerialPool

if TYPE_CHECKING:
    from rlscale.distributed.ray_learners import LearnerGroup

@dataclass
class UpdateResult:
    """What one update (collect a batch, learn from it) did."""

    agent_steps: int  # fresh observations collected and trained on
    optimizer_steps: int  # optimizer steps taken
    optimizer_batch: float  # observations per optimizer step (PPO: the minibatch)
    episodes: list[tuple[float, int]] = field(default_factory=list)  # (unclipped return, length) finished
    metrics: dict[str, float] = field(default_factory=dict)  # the engine's own scalars (losses, raw noise)
    starting_envs: int = 0  # environments still being built, not in this batch
    warmup_steps: int = 0  # random warm-up steps of environments that joined with this batch
    skipped_in_a_row: int = 0  # consecutive optimizer steps skipped for a non-finite gradient


class Engine(Protocol):
    noise: NoiseMeter  # the noise-scale averages the controller reads

    def describe(self) -> str:
        """Where the work runs, for the run's header: one part per start-up choice, ' | ' between them."""

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps taken so far (S)."""

    @property
    def start_warmup_steps(self) -> int:
        """Random warm-up steps of the environments built when the engine started."""

    def update(self, lr: float) -> UpdateResult:
        """Collect one batch and learn from it at learning rate ``lr``."""

    def resize(self, n_envs: int) -> ResizeReport:
        """Run ``n_envs`` environments from the next update on."""

    def save(self, prefix: Path) -> dict[str, Any]:
        """The engine's checkpoint state (files it writes are named ``prefix`` + a suffix)."""

    def close(self) -> None: ...


def make_pool(cfg: Config, spec: EnvSpec) -> Pool:
    if cfg.pool.in_this_process:
        return SerialPool(cfg, spec)
    from rlscale.distributed.ray_pool import RayPool  # Ray only where actors are asked for

    return RayPool(cfg, spec)


def pool_is_timed(cfg: Config) -> bool:
    """Whether --pool auto times the serial pool against Ray actors at start-up: a native run with one
    learner, a fixed set of actors and no overlap, on this machine in a Ray of its own (not a cluster, not a
    Ray already running in this process, such as a sweep's trial: there the actors stay)."""
    p = cfg.pool
    if p.pool != "auto" or p.in_this_process:
        return False
    if cfg.run.backend != "native" or cfg.learner.learners > 1 or p.envs_per_actor or p.overlap:
        return False
    from rlscale.distributed.ray_pool import (  # Ray only where actors may be chosen
        cluster_address,
        ray_running,
    )

    return not cluster_address(cfg.run.address)[0] and not ray_running()


def passes_may_go_side_by_side(cfg: Config, model: torch.nn.Module, device: torch.device, threads: int) -> bool:
    """Whether learner_passes can split passes across threads: one CPU learner of 2 or more threads
    on a convolutional network (an MLP's or MinAtar's passes run on one thread)."""
    return cfg.learner.learners == 1 and device.type == "cpu" and threads > 1 and has_convolutions(model)


def compiles(cfg: Config, model: torch.nn.Module, device: torch.device, side_by_side: bool = False) -> bool:
    """Whether the learner compiles its network (learner_compile; a single learner in this process,
    its precision resolved); ``side_by_side``: its passes are asked to go side by side, which run eager."""
    if cfg.learner.learners > 1 or cfg.learner.learner_compile == "off":
        return False
    if side_by_side and cfg.learner.learner_compile == "auto":
        return False  # Learner.share_passes: compiled code in two threads deadlocked
    if cfg.learner.learner_compile == "on":
        return True
    # auto: where it was measured to pay (rlscale/models/compiled.py): PPO's bf16 learner on a
    # CPU. A2C measures its noise on every batch by default, so its passes would run eager anyway.
    return (cfg.agent.algo == "ppo" and cfg.learner.learner_precision == "bf16" and device.type == "cpu"
            and has_convolutions(model))


def _pass_rows(cfg: Config, n_envs: int, model: torch.nn.Module, device: torch.device) -> int:
    """Rows of one learner pass at the start: the optimizer batch, in the passes the learner will use."""
    rows = max(1, int(n_envs * cfg.observations_per_env))
    chunk = GradientRoute.for_model(model, device, cfg.learner.learner_chunk_rows).chunk_rows
    return min(rows, chunk) if chunk else rows


class NativeEngine:
    """rlscale's rollout pool (Ray actors, or serial) and an A2C or PPO learner.

    One update: weights -> pool -> batch -> learner (grouped gradients, noise
    meter, optimizer step). ``__init__`` wires the parts; a checkpoint's state
    restores the learner and the random state, and the pool starts with the
    env count the run had.
    """

    def __init__(self, cfg: Config, n_envs: int, state: dict[str, Any] | None = None,
                 start_from: dict[str, Any] | None = None, probe_limits: ProbeLimits | None = None) -> None:
        cores = os.cpu_count() or 1
        torch.manual_seed(cfg.run.seed)
        np.random.seed(cfg.run.seed)
        spec = probe_spec(cfg.env)
        model = build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden)
        device = resolve_device(cfg.learner.learner_device)
        model = model.to(device)
        self.precision: PrecisionChoice | None = None
        # Observations of one learner pass for the start-up probes (threads, precision, compiling):
        # sampled once, where a probe runs (a pass of Pong's 256 rows takes ~0.1 s to sample).
        rows = _pass_rows(cfg, n_envs, model, device)
        pass_obs = functools.cache(lambda: torch.from_numpy(sample_observations(spec, rows)).to(device))
        # --learner-threads 0 on a CPU: one thread for a small learner, else every core, fewer while
        # another process holds one (rlscale/engine/threads.py).
        self.threads_why = "set"
        threads = cfg.learner.learner_threads
        if not threads:
            threads, self.threads_why = (default_learner_threads(model, pass_obs(), cores)
                                         if device.type == "cpu" and cfg.learner.learners == 1 else (cores, "all cores"))
        adapt = (cfg.learner.learner_threads == 0 and cfg.learner.learners == 1 and threads > 1 and device.type == "cpu")
        start = threads
        if adapt:
            # A core busy elsewhere already: start the probes and the run at one thread fewer (threads.py).
            elsewhere = cores_busy_elsewhere()
            if elsewhere is not None and elsewhere >= BUSY_ELSEWHERE_CORES:
                start, cores_text = threads - 1, f"{elsewhere:.1f}"
                self.threads_why = (f"{cores_text} core{'' if cores_text == '1.0' else 's'} busy elsewhere at "
                                    f"start-up, {self.threads_why}")
        torch.set_num_threads(start)
        self.threads = ThreadGovernor(cores, start=start) if adapt else None
        # What the governor reads when updates slow: whether another program took a core (BusyElsewhere). Not
        # with --overlap: there the run's own actors step beside the learner, which no reading tells apart.
        self.busy_elsewhere = BusyElsewhere() if adapt and not cfg.pool.overlap else None
        if cfg.learner.learner_precision == "auto":
            self.precision = choose_precision(model, pass_obs(), channels_last=cfg.learner.channels_last)
            cfg = replace(cfg, learner=replace(cfg.learner, learner_precision=self.precision.precision))
        self.cfg = cfg
        self.learner: Learner | LearnerGroup
        if cfg.learner.learners > 1:
            # Ray only where learner actors are asked for.
            from rlscale.distributed.ray_learners import LearnerGroup

            self.learner = LearnerGroup(cfg, spec)
        else:
            self.learner = LEARNERS[cfg.agent.algo].from_config(model, cfg)
        if state is not None:
            self.learner.load_state_dict(state["learner"])
            torch.set_rng_state(state["torch_rng"])
        elif start_from is not None:  # a branch (--init-from): the trunk's network and optimizer state
            self.learner.start_from(start_from)
        # learner_passes: how a team of threads shares the passes that measure nothing (side_by_side.py).
        split = passes_may_go_side_by_side(cfg, model, device, threads)
        forced = split and cfg.learner.learner_passes == "side-by-side"
        self.compile_note = self.learner.compile_network(pass_obs()) if compiles(cfg, model, device, forced) else ""
        self.passes_note = ""
        if cfg.learner.learner_passes != "team":
            self.passes_note = (self.learner.share_passes(cfg.learner.learner_passes, pass_obs, threads) if split else
                                "team passes (side by side needs one CPU learner of 2 or more threads on a "
                                "convolutional network)")
        self.pool_choice: PoolChoice | None = None
        try:
            sized = replace(cfg, env=replace(cfg.env, n_envs=n_envs))
            self.pool = self._timed_pool(sized, spec, probe_limits) if pool_is_timed(cfg) else make_pool(sized, spec)
        except BaseException:
            self.learner.close()  # no learner actors or pass workers left behind
            raise
        self.noise = self.learner.noise

    def _timed_pool(self, cfg: Config, spec: EnvSpec, limits: ProbeLimits | None) -> Pool:
        """--pool auto on one machine: the serial pool and Ray actors, each timed on updates (a batch collected,
        the learner trained on it: rlscale/rollout/choice.py); the faster is kept and the other closed. Then
        everything the probe moved is put back or started afresh, so that a run's course does not hang on how
        many updates the probe happened to time: the learner's state and the random state as they were, the
        kept pool's environments restarted from the run's seed (the noise meter settles on them as on a new
        run's), and the agent steps not trained on (the probe's, the restart's and the dropped pool's warm-up) count
        with the warm-up steps."""
        from rlscale.distributed.ray_pool import RayPool

        serial = SerialPool(cfg, spec)
        pools: list[Pool] = [serial]
        kept: Pool | None = None
        try:
            pools.append(RayPool(cfg, spec))
            print(f"choosing the pool: timing updates with the serial pool and with {len(pools[1].actors)} Ray actors "
                  "(--pool actors or --pool serial skips this)", flush=True)
            before = self.snapshot()
            try:
                self.pool_choice = probe(serial, pools[1], self.learner.flat_weights,
                                         lambda batch: self.learner.update(batch, cfg.agent.lr), limits)
            finally:
                self.restore(before)
                self.learner.skipped_in_a_row = 0
            kept = serial if self.pool_choice.chosen == "serial" else pools[1]
            pools.remove(kept)
            dropped = pools[0]
            dropped.close()  # Ray with it, where it started Ray
            pools.clear()
            # Steps the machine took and the run does not train on: the probe's, and the dropped pool's warm-up.
            kept.warmup_steps += self.pool_choice.probe_steps + dropped.warmup_steps
            self.pool = kept
            self.restart_envs(cfg.env.n_envs, cfg.run.seed)
        except BaseException:
            for pool in pools if kept is None else [*pools, kept]:
                with contextlib.suppress(Exception):  # the others still closed; the first error is raised
                    pool.close()
            raise
        if self.pool_choice.chosen == "serial":
            self.cfg = replace(self.cfg, pool=replace(self.cfg.pool, pool="serial"))
        return kept

    def describe(self) -> str:
        precision = self.precision.describe() if self.precision else self.cfg.learner.learner_precision
        learner = f"learner: {self.learner.describe() if self.cfg.learner.learners > 1 else self.learner.device}"
        if self.cfg.learner.learners == 1 and self.learner.device.type == "cpu":
            threads = torch.get_num_threads()
            learner += f" ({threads} thread{'s' if threads > 1 else ''}: {self.threads_why})"
        compiled = f", {self.compile_note}" if self.compile_note else ""
        passes = f", {self.passes_note}" if self.passes_note else ""
        pool = self.pool.describe() + (f", {self.pool_choice.describe()}" if self.pool_choice else "")
        return (f"environments: {pool}, actors {self.pool.describe_inference()} | "
                f"{learner}, {precision}{compiled}{passes}")

    @property
    def optimizer_steps(self) -> int:
        return self.learner.updates

    @property
    def start_warmup_steps(self) -> int:
        """Steps not trained on of the pool's start: its environments' random warm-up (and --pool auto's probe)."""
        return self.pool.warmup_steps

    def update(self, lr: float) -> UpdateResult:
        start = time.perf_counter()
        if not self.pool.in_flight:
            self.pool.start(self.learner.flat_weights())
        batch = self.pool.collect()
        collected = time.perf_counter()
        if self.cfg.pool.overlap:
            # The actors step the next rollout with these weights while the learner
            # trains on this batch: a policy lag of one update (as IMPALA's actors have).
            self.pool.start(self.learner.flat_weights())
        steps_before = self.learner.updates
        metrics = self.learner.update(batch, lr)
        learned = time.perf_counter()
        metrics[tags.ROLLOUT_SECONDS] = collected - start
        metrics[tags.ACTING_SECONDS] = batch.acting_seconds
        metrics[tags.LEARNER_SECONDS] = learned - collected
        if self.threads is not None:
            elsewhere = self.busy_elsewhere.read() if self.busy_elsewhere is not None else None
            change = self.threads.observe(learned - collected, batch.size, learned, elsewhere)
            if change is not None:
                threads, why = change
                if threads != torch.get_num_threads():
                    torch.set_num_threads(threads)
                print(f"learner threads: {why}", flush=True)
        metrics[tags.LEARNER_THREADS] = torch.get_num_threads()
        return UpdateResult(
            agent_steps=batch.size, optimizer_steps=self.learner.updates - steps_before,
            optimizer_batch=batch.n_envs * self.cfg.observations_per_env,
            episodes=[(e.episode_return, e.length) for e in batch.episodes], metrics=metrics,
            starting_envs=batch.starting_envs, warmup_steps=batch.warmup_steps,
            skipped_in_a_row=self.learner.skipped_in_a_row)

    def resize(self, n_envs: int) -> ResizeReport:
        # New environments warm up in the background and join a few updates later.
        return self.pool.resize(n_envs, background=True)

    def save(self, prefix: Path) -> dict[str, Any]:  # noqa: ARG002 - everything fits in the state
        return {"learner": self.learner.state_dict(), "torch_rng": torch.get_rng_state()}

    # The pool probe (--pool auto) trains on updates it then takes back: the learner's state and the RNG.

    def snapshot(self) -> dict[str, Any]:
        """A copy of the learner's state (network, optimizer, noise averages, counters) and the RNG."""
        return copy.deepcopy(self.save(Path()))

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.learner.load_state_dict(copy.deepcopy(snapshot["learner"]))
        torch.set_rng_state(snapshot["torch_rng"])

    def restart_envs(self, n_envs: int, seed: int) -> int:
        """``n_envs`` new environments seeded from ``seed`` alone, action draws too (Pool.restart): a race of
        ``rlscale measure`` starts every batch on the same ones. Their random warm-up steps."""
        warmup = self.pool.restart(n_envs, seed)
        self.learner.environments_restarted()
        return warmup

    def close(self) -> None:
        try:
            self.pool.close()
        finally:
            self.learner.close()
