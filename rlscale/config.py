"""Typed run configuration: defaults -> agent preset -> env preset -> flags.

Every field carries a one-line help text with its unit; the command-line flags
are generated from these fields, so the help and the presets cannot drift
apart. Field names are unique across sections, so each flag is simply
``--field-name``. Unknown keys anywhere are errors.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlscale import presets, tags
from rlscale.errors import UserError
from rlscale.goals import GOAL_WINDOW

# Optimizers whose step divides by a per-coordinate scale (the preconditioner B_P is measured in).
PRECONDITIONED_OPTIMIZERS = ("rmsprop_tf", "rmsprop", "adam")


def opt(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    """A config field with its help text (and unit) attached."""
    meta = {"help": help, "choices": choices}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


RUNS_ROOT_VARIABLE = "RLSCALE_RUNS"
# Ray sets this in the environment of a Ray job's entrypoint (ray job submit).
RAY_JOB_VARIABLE = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def runs_root() -> Path:
    """Where runs and sweeps named by default go.

    $RLSCALE_RUNS if set; else ~/rlscale-runs inside a Ray job, whose working directory
    (``--working-dir``) is a temporary package folder Ray deletes, on the head node where
    the job's entrypoint runs; else ./runs, where TensorBoard's ``--logdir runs`` finds them.
    """
    if os.environ.get(RUNS_ROOT_VARIABLE):
        return Path(os.environ[RUNS_ROOT_VARIABLE]).expanduser()
    if RAY_JOB_VARIABLE in os.environ:
        return Path.home() / "rlscale-runs"
    return Path("runs")


@dataclass
class EnvConfig:
    env_id: str = opt("CartPole-v1", "gymnasium id or ALE id (ALE/Pong-v5)")
    n_envs: int = opt(16, "parallel environments at the start of the run")
    vector_size: int = opt(4, "environments per vector env, the unit the pool grows and shrinks by")
    total_frames: int = opt(10_000_000, "training budget in frames (agent steps x frame skip)")
    frame_skip: int = opt(4, "emulator frames per agent step (Atari only; 1 elsewhere)")
    noop_max: int = opt(30, "most no-op actions at each Atari reset")
    sticky_actions: float = opt(0.0, "probability of repeating the last action (Atari; 0 as in Baselines)")
    max_episode_frames: int = opt(108_000, "Atari episode cap in frames (30 minutes of play)")
    reward_clip: bool = opt(True, "clip rewards to their sign for the learner (Atari only; returns stay raw)")
    warmup_max_steps: int = opt(500, "each new environment first takes 0..this many random agent steps")
    goals: list[float] = opt([], "score goals (mean return) that reports measure time to")


@dataclass
class AgentConfig:
    algo: str = opt("a2c", "learning algorithm", ("a2c", "ppo"))
    n_steps: int = opt(5, "agent steps per environment per update")
    lr: float = opt(7e-4, "learning rate at the initial batch size")
    gamma: float = opt(0.99, "discount factor")
    ent_coef: float = opt(0.01, "entropy bonus coefficient")
    vf_coef: float = opt(0.5, "value loss coefficient")
    max_grad_norm: float = opt(0.5, "global gradient norm clip (0 = off)")
    optimizer: str = opt("rmsprop_tf", "optimizer", ("rmsprop_tf", "rmsprop", "adam", "sgd"))
    rms_alpha: float = opt(0.99, "RMSprop decay of the mean square")
    optim_eps: float = opt(1e-5, "optimizer epsilon")
    network: str = opt("auto", "policy network (auto: MinAtar's network for 10x10xC grids, the Nature CNN "
                       "for other images, an MLP otherwise)", ("auto", "nature_cnn", "minatar_cnn", "mlp"))
    mlp_hidden: int = opt(64, "units per hidden layer of the MLP")
    anneal_lr: bool = opt(False, "anneal the learning rate linearly to 0 over the budget")
    gae_lambda: float = opt(0.95, "PPO: lambda of generalised advantage estimation")
    n_epochs: int = opt(4, "PPO: passes over each batch")
    n_minibatches: int = opt(4, "PPO: minibatches per pass (the minibatch is the optimizer batch)")
    clip_coef: float = opt(0.1, "PPO: surrogate clipping range")
    clip_value_loss: bool = opt(True, "PPO: clip the value update to the same range")
    norm_adv: bool = opt(True, "PPO: normalise advantages per minibatch")
    reference_steps: list[float] = opt([], "agent steps at which the preset's reference run reached each "
                                           "goal, in order (the progress line's estimate until the run's own "
                                           "trend is clear; used only with as many goals, and dropped when the "
                                           "command line changes the batch, rate or mode)")


@dataclass
class NoiseConfig:
    measure_noise: bool = opt(True, "measure the gradient noise scale every update")
    noise_groups: int = opt(4, "k: groups of whole environments the batch gradient is split into")
    noise_horizon: float = opt(100_000, "EMA horizon of the noise estimates, in observations")
    # Off by default and in every preset: 10 leaves Gaussian noise's averages within 5 % of the truth
    # (tests/test_noise.py); auto on MinAtar was faster with it on one seed set, not on the next (docs/results.md).
    noise_clip: float = opt(0.0, "bound each update's |G|^2 and tr(Sigma) estimates at this multiple of the "
                            "running average of their absolute values before they enter the noise average, "
                            "so a single outlying update cannot swing it (0 = off)")
    # The first batches after new environments join read far off: after a
    # fork on MinAtar Breakout the first 5 batches (25 steps) read <G,HG> up to 48-112x its median, and a
    # resize's new environments lifted tr(H Sigma) 7-47x for a batch (docs/results.md, 2026-11-27).
    # One such batch can hold a 100,000-observation average's denominator for its whole horizon. 50 steps:
    # twice the longest transient seen.
    noise_settle: int = opt(50, "steps new environments (at the start, a resume, or a resize that adds some) "
                            "take before the batches that hold them enter the noise averages (0 = at once)")
    noise_parts_every: int = opt(4, "measure the policy and value noise scales every this many updates (0 = never)")
    # One is enough: the unmeasured minibatches' fresh rows count towards the next measurement, so the
    # average's horizon stays in observations, and what measuring costs Pong's default run falls from ~4 % to
    # ~1 % (benchmarks/bench_ppo_options.py; research/performance-history.md, 2026-11-26).
    noise_minibatches: int = opt(1, "PPO: how many of the first epoch's minibatches the noise scale is measured "
                                 "on, from the first (0 = all of them; the RLlib backend measures all)")
    measure_curvature: bool = opt(True, "measure the total loss's noise scale in the optimizer's metric (B_P) and "
                                  "the Hessian's (B_noise, eq. 2.8), and eps_max, every curvature_every batches")
    # One measurement took 4.4x (640 observations) to 8.5x (80) the time of an unmeasured Pong A2C
    # update (benchmarks/bench_noise.py): every 100th batch keeps it to a few percent.
    curvature_every: int = opt(100, "batches between measurements of B_P and B_noise (each takes k forward "
                               "and 2k backward passes over the k env groups: docs/noise-scale.md)")


@dataclass
class ControlConfig:
    batch: str = opt("fixed", "batch-size controller (auto: the wall-time optimum of the measured cost model; "
                     "replay: another run's batch and learning-rate path, open-loop; to measure the critical "
                     "batch at a checkpoint: rlscale measure RUN)",
                     ("fixed", "critical", "sqrt", "auto", "replay"))
    # total: measured every update at near-zero cost, and within 1.4x of the fitted
    # B_crit on the CartPole study's well-determined goals (docs/results.md).
    signal: str = opt("total", "noise scale the controller follows: B_simple of the total loss or of one part, "
                      "or the total's in the optimizer's metric (precond: B_P), the Hessian's (hessian: B_noise) "
                      "or the Hessian's seen through the optimizer (precond_hessian: B_PH)",
                      tags.SIGNALS)
    r: float = opt(1000.0, "sqrt mode: exchange rate r in examples per step (B = sqrt(r * B_simple))")
    # B_simple is the critical batch only where the Hessian is well conditioned; on the
    # study tasks it read 1.2-18x above the fitted B_crit (docs/results.md).
    crit_ratio: float = opt(1.0, "B_simple / B_crit on this task (rlscale pareto measures it): the "
                            "adaptive modes target the signal divided by this")
    min_envs: int = opt(4, "fewest environments the controller may use")
    max_envs: int = opt(256, "most environments the controller may use")
    hysteresis: float = opt(1.5, "resize only when target/current batch leaves [1/h, h]")
    # Near B* the time per unit of progress is flat (a batch 1.5x off costs at most 4 %),
    # while every resize costs: the estimate's lag, a new learning rate, fresh episodes.
    min_gain: float = opt(0.05, "auto: resize only when the cost model predicts B* at least this fraction "
                          "faster than the current batch (0: whenever B* leaves the hysteresis band)")
    max_resize_factor: float = opt(2.0, "largest factor one resize may grow the batch by")
    # A smaller batch costs no examples, and the estimate that asks for it was measured at the larger one:
    # from 8x the best batch, Breakout's halvings took 150-200k agent steps that taught nothing (docs/batch-control.md).
    max_shrink_factor: float = opt(4.0, "largest factor one resize may shrink the batch by")
    cooldown: float = opt(50_000, "observations after a resize before the next one (with cooldown_measured, those "
                          "the noise average took)")
    # While new environments settle the average takes nothing: at 512 envs that was all of a 10,000-observation
    # cool-down. Off: it failed the rule set before its runs, on Breakout and CartPole (docs/batch-control.md).
    cooldown_measured: bool = opt(False, "count the cool-down in observations the noise average took, not in "
                                  "every observation trained (the settling batches after a resize left out)")
    # On MinAtar Breakout the auto runs that shrank far below their batch after learning were among the slowest
    # to the top goal (docs/batch-control.md#auto-with-a-learning-floor).
    learning_floor: bool = opt(False, "auto on one machine: after the run's learning line, never shrink below the "
                               "batch it had at that line (the cost model's probes excepted)")
    # 1.5 by the rule written before its ten seeds of MinAtar Breakout (docs/batch-control.md#how-auto-decides): under
    # load at the start 0.47x the time of fitting every size, which fell to 4 envs on 8 of 10 seeds; quiet 0.86x from
    # 2,560 and 1.09x from 80 (the rule allowed 1.15x).
    cost_outlier_factor: float = opt(1.5, "auto: leave out of the cost model's fit the largest batch size where "
                                     "its median update time lies this factor above the line through the others "
                                     "(inf: fit all)")
    # Off: the probe's batch was picked to time the cost model, not by the estimate;
    # moving on at once measured as fast or faster on all three study tasks (docs/results.md).
    probe_cooldown: bool = opt(False, "auto: wait the cool-down before and after the probe resize too (default: "
                               "probe once the start is timed, move toward B* once the probe's batch is)")
    lr_rule: str = opt("auto", "learning rate on resize, set from the run's first batch B0 and rate lr0: none; "
                       "noise, lr0 ((1+Bn/B0)/(1+Bn/B))^alpha (eq. 2.6); power, lr0 (B/B0)^alpha (the square-root "
                       "rule of adaptive optimizers at alpha 0.5); auto: power with --batch auto, none otherwise "
                       "(docs/batch-control.md)", ("auto", "none", "noise", "power"))
    lr_alpha: float = opt(0.5, "alpha of the learning-rate rule (noise: 1 SGD, 0.5-1 Adam/RMSprop; power: 0.5)")
    cluster_nodes: int = opt(0, "the cluster clock: also report the wall time and node-hours the run would take "
                             "on an elastic cluster of up to N nodes, and with --batch auto choose the batch for "
                             "that cluster (docs/scaling.md; 0: off)")
    cluster_node_envs: int = opt(16, "cluster clock: environments one node steps (it carries their optimizer batch)")
    # benchmarks/bench_cluster.py's simulated 3-node cluster: ~30 ms a remote round (docs/scaling.md).
    cluster_round_trip: float = opt(0.03, "cluster clock: seconds an update spread over more than one node adds")
    cluster_slack: float = opt(0.05, "cluster clock, --batch auto: the wall time per unit of progress it may give "
                               "up against the cluster's fastest batch to use fewer node-hours")
    # A price in place of the slack (2026-12-07, a study: docs/batch-control.md#auto-on-a-cluster).
    cluster_price: float = opt(0.0, "cluster clock, --batch auto: the wall seconds one node-second is worth; > 0 "
                               "aims at the least wall time plus price x node-seconds per unit of progress instead "
                               "of cluster_slack's rule (0: the slack)")
    # Off: it failed the rule set before its runs, on three games (docs/batch-control.md#auto-on-a-cluster).
    cluster_hysteresis: float = opt(1.0, "cluster clock, --batch auto, once learning shows: hold a move while a reading "
                                    "up to this factor the other way puts the cluster batch within the hysteresis "
                                    "band of the current one (1: off)")
    # Before its learning line MinAtar Asterix passes its plateau in fewer updates at a larger batch while its return
    # stays flat, and on one node an update pays no round trip (docs/batch-control.md#auto-on-a-cluster). On by
    # default since 2026-12-07, by a rule written before its ten-seed runs.
    cluster_one_node_first: bool = opt(True, "cluster clock, --batch auto: until the run's learning line, train on its "
                                       "start or, where that spans more than one node, on one node's batch (no probe "
                                       "below it, no move on the reading)")
    cluster_fit: str = opt("", "cluster clock: T(B) = a + b*B as 'a,b' (seconds, seconds per optimizer-batch "
                           "observation): the clock prices with it and --batch auto makes its cluster choice with it; "
                           "a fixed batch, which cannot time two sizes itself, needs it (default: the run's own fit)")
    # docs/studies.md rule 4: if the replay (on other seeds) trains as fast, the gain was the schedule.
    replay_from: str = opt("", "replay: the run directory whose environments and learning rate, step by step, "
                           "this run follows without measuring or reacting")

    @property
    def scales_lr(self) -> bool:
        """Whether a resize scales the learning rate (a rule named, or noise by auto)."""
        return self.lr_rule in ("noise", "power") or (self.lr_rule == "auto" and self.batch == "auto")

    @property
    def lr_rule_in_force(self) -> str:
        """The rule --lr-rule auto stands for: power with auto, none otherwise."""
        if self.lr_rule != "auto":
            return self.lr_rule
        # On Breakout every start learned under power; the noise rule, fed early training's small
        # noise scale, kept the rate near the start's and 4 of 5 seeds shrunk from 1,280 never learned.
        return "power" if self.batch == "auto" else "none"

    def cluster_cost(self) -> tuple[float, float] | None:
        """cluster_fit's (a, b), or None when not given; a UserError when it is not two positive numbers."""
        if not self.cluster_fit:
            return None
        try:
            a, b = (float(part) for part in self.cluster_fit.split(","))
        except ValueError:
            a = b = math.nan
        if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
            raise UserError(f"cluster_fit {self.cluster_fit!r}: give T(B) = a + b*B as two positive numbers "
                            "'a,b' (seconds, seconds per observation), e.g. 0.007,0.00002")
        return a, b


@dataclass
class RunConfig:
    """Where the run lives and when it stops: its seed, directory, engine, cluster and checkpoints."""

    seed: int = opt(0, "random seed")
    run_dir: str = opt("", "run directory (default: <runs root>/<env>-<algo>-<time>; the root is ./runs, "
                         f"~/rlscale-runs inside a Ray job, or ${RUNS_ROOT_VARIABLE})")
    backend: str = opt("native", "training engine: native (rlscale's Ray actor pool) or rllib "
                       "(RLlib PPO; needs pip install 'rlscale[rllib]')", ("native", "rllib"))
    address: str = opt("", "Ray cluster to join: auto or HOST:PORT (default: $RAY_ADDRESS, which Ray "
                            "sets in a Ray job; else a Ray of the run's own)")
    log_interval: float = opt(10.0, "seconds between console progress lines")
    checkpoint_every: int = opt(500, "optimizer steps between checkpoints (PPO takes epochs x minibatches per batch)")
    keep_checkpoints: int = opt(3, "checkpoints kept on disk")
    stop_return: float = opt(math.inf, f"stop once the mean return of the last {GOAL_WINDOW} episodes reaches this")
    init_from: str = opt("", "start from another run's checkpoint (its run directory: the latest; or a ckpt-*.pt "
                         "file): its network and optimizer state, with this run's batch, learning rate and seed, "
                         "counters from zero (branching a run into batch sizes: docs/batch-control.md)")


@dataclass
class PoolConfig:
    """Where the environments step: the rollout pool, its actors and their precision."""

    pool: str = opt("auto", "where the environments step: actors (Ray actors, --n-actors of them), serial (this "
                    "process, no Ray), or auto: on one machine the faster of the two, timed at start-up on the "
                    "run's own updates (~2-20 s, then the kept pool's environments are built afresh; again on "
                    "--resume; rlscale/rollout/choice.py); Ray actors on "
                    "a cluster, in a Ray this process already runs, and with --envs-per-actor, --learners or "
                    "--overlap. Only the actors survive a crashing environment (a new actor replaces it)",
                    ("auto", "actors", "serial"))
    n_actors: int = opt(2, "Ray rollout actors (a fixed set; see --envs-per-actor)")
    envs_per_actor: int = opt(0, "elastic rollout actors: at most this many environments each, so the pool "
                              "adds and retires actors (1 CPU each) as the batch changes and asks the Ray "
                              "autoscaler for their CPUs (0: the fixed --n-actors)")
    overlap: bool = opt(False, "actors collect the next batch while the learner trains on this one "
                        "(a policy lag of one update; with --pool serial the same lag without the concurrency)")
    actor_precision: str = opt("auto", "rollout actors' forward passes: fp32, bf16 autocast, or auto: each actor "
                               "times fp32 and bf16 in both memory layouts at start-up on its own node and takes "
                               "the fastest whose outputs match fp32's (rlscale/models/precision.py)",
                               ("auto", "fp32", "bf16"))
    actor_channels_last: bool = opt(False, "actors' convolutions in channels-last memory format "
                                    "(with --actor-precision auto the layout is timed too, and this is ignored)")
    max_actor_failures: int = opt(10, "rollout actor deaths tolerated before the run stops")

    @property
    def in_this_process(self) -> bool:
        """The environments step in this process (--pool serial)."""
        return self.pool == "serial"


@dataclass
class LearnerConfig:
    """How the learner computes an update: its processes, threads, device, precision and passes."""

    learners: int = opt(1, "data-parallel learner processes (Ray actors, one torch.distributed group; each takes "
                        "whole environments of the batch and the noise scale comes from their local gradients)")
    learner_threads: int = opt(0, "torch threads of the learner (0: a convolutional network all cores, one fewer "
                               "while another process holds a core, an MLP one; with --learners N, each node's "
                               "cores / the learners on it)")
    learner_device: str = opt("auto", "device of the learner (auto: cuda when this machine has one)",
                              ("auto", "cpu", "cuda"))
    channels_last: bool = opt(True, "learner convolutions in channels-last memory format "
                              "(same numbers up to summation order; see docs/performance.md)")
    learner_precision: str = opt("auto", "learner forward/backward: fp32, bf16 autocast (fast on GPUs and CPUs "
                                 "with bf16 units; norms, losses and weights stay fp32), or auto: the faster of "
                                 "the two, timed at start-up (rlscale/models/precision.py)", ("auto", "fp32", "bf16"))
    learner_compile: str = opt("auto", "run the learner's passes that measure nothing through torch.compile "
                               "(inductor; the same update up to float rounding): on, off, or auto: on for PPO's "
                               "bf16 learner of a convolutional network on a CPU, where it was measured to pay "
                               "(rlscale/models/compiled.py); a single learner only; where compiling fails the "
                               "learner stays eager and says why", ("auto", "on", "off"))
    learner_passes: str = opt("team", "how a convolutional learner's threads share its eager passes that measure "
                              "nothing: team (each pass shared by all threads), side-by-side (each thread a part "
                              "of the rows on its own, gradients summed: the same update up to float rounding), "
                              "or auto: side-by-side where timed at start-up at least 1.1x faster "
                              "(rlscale/agents/side_by_side.py; a start beside a busy process favours it); the "
                              "native engine's one CPU learner of 2 or more threads only, others keep the team",
                              ("team", "auto", "side-by-side"))
    learner_chunk_rows: int = opt(0, "rows per learner forward/backward pass, gradients summed over the "
                                  "passes (0 = auto: about 128 rows (PPO: 256) for convolutional networks on CPU, "
                                  "otherwise the whole batch)")


SECTIONS: dict[str, type] = {
    "env": EnvConfig,
    "agent": AgentConfig,
    "noise": NoiseConfig,
    "control": ControlConfig,
    "pool": PoolConfig,
    "learner": LearnerConfig,
    "run": RunConfig,
}


@dataclass
class Config:
    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    control: ControlConfig = field(default_factory=ControlConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    run: RunConfig = field(default_factory=RunConfig)

    @property
    def is_atari(self) -> bool:
        return self.env.env_id.startswith("ALE/")

    @property
    def frames_per_step(self) -> int:
        """Frames per agent step: the frame skip on Atari, 1 elsewhere."""
        return self.env.frame_skip if self.is_atari else 1

    @property
    def observations_per_env(self) -> float:
        """Observations one environment adds to one optimizer step (the controller's unit)."""
        if self.agent.algo == "ppo":
            return self.agent.n_steps / self.agent.n_minibatches
        return float(self.agent.n_steps)

    @property
    def epochs_per_batch(self) -> int:
        """Times the optimizer consumes each observation (PPO's epochs; 1 for A2C)."""
        return self.agent.n_epochs if self.agent.algo == "ppo" else 1

    @property
    def pool_unit(self) -> int:
        """Environments come and go in multiples of this: a vector env, or one per RLlib env runner."""
        return self.pool.n_actors if self.run.backend == "rllib" else self.env.vector_size

    @property
    def score_goals(self) -> list[float]:
        """The run's goals, --stop-return among them, ascending (the finite ones)."""
        return sorted(g for g in (*self.env.goals, self.run.stop_return) if math.isfinite(g))

    @property
    def total_agent_steps(self) -> int:
        return self.env.total_frames // self.frames_per_step

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}

    def validate(self) -> Config:
        """This config, checked: a UserError (one line naming the fix) for the first setting that is wrong."""
        self._check_ranges()
        self._check_batch_control()
        self._check_engine()
        if self.control.signal in tags.METRICS:
            self._check_metric_signal()
        return self

    def _check_ranges(self) -> None:
        """Each setting on its own: positive, non-negative or within its interval."""
        e, a, n, c, r = self.env, self.agent, self.noise, self.control, self.run
        p, lrn = self.pool, self.learner
        positive = {
            "n_envs": e.n_envs, "vector_size": e.vector_size, "total_frames": e.total_frames,
            "frame_skip": e.frame_skip, "max_episode_frames": e.max_episode_frames,
            "n_steps": a.n_steps, "lr": a.lr, "n_epochs": a.n_epochs, "n_minibatches": a.n_minibatches,
            "clip_coef": a.clip_coef, "optim_eps": a.optim_eps, "mlp_hidden": a.mlp_hidden,
            "noise_groups": n.noise_groups, "noise_horizon": n.noise_horizon, "curvature_every": n.curvature_every,
            "r": c.r, "crit_ratio": c.crit_ratio, "min_envs": c.min_envs, "max_envs": c.max_envs,
            "cluster_node_envs": c.cluster_node_envs, "n_actors": p.n_actors,
            "learners": lrn.learners,
            "log_interval": r.log_interval, "checkpoint_every": r.checkpoint_every,
            "keep_checkpoints": r.keep_checkpoints,
        }
        if math.isnan(r.stop_return):
            raise UserError("--stop-return must be a number")
        for name, value in positive.items():
            if not (value > 0 and math.isfinite(value)):
                raise UserError(f"{spelled(name)} must be positive, got {value}")
        non_negative = {
            "noop_max": e.noop_max, "warmup_max_steps": e.warmup_max_steps,
            "ent_coef": a.ent_coef, "vf_coef": a.vf_coef, "max_grad_norm": a.max_grad_norm,
            "noise_parts_every": n.noise_parts_every, "noise_minibatches": n.noise_minibatches, "cooldown": c.cooldown,
            "noise_settle": n.noise_settle, "cluster_nodes": c.cluster_nodes,
            "cluster_round_trip": c.cluster_round_trip, "cluster_slack": c.cluster_slack, "cluster_price": c.cluster_price,
            "learner_threads": lrn.learner_threads, "lr_alpha": c.lr_alpha, "min_gain": c.min_gain,
            "envs_per_actor": p.envs_per_actor,
            "learner_chunk_rows": lrn.learner_chunk_rows,
            "max_actor_failures": p.max_actor_failures,
        }
        for name, value in non_negative.items():
            if not (value >= 0 and math.isfinite(value)):
                raise UserError(f"{spelled(name)} must be zero or positive, got {value}")
        for name, value in {"gamma": a.gamma, "rms_alpha": a.rms_alpha, "gae_lambda": a.gae_lambda}.items():
            if not 0.0 <= value <= 1.0:
                raise UserError(f"{spelled(name)} must lie in [0, 1], got {value}")
        if not 0.0 <= e.sticky_actions < 1.0:
            raise UserError(f"sticky_actions must lie in [0, 1), got {e.sticky_actions}")
        if any(v <= 0 for v in a.reference_steps) or any(
                later < earlier for earlier, later in zip(a.reference_steps, a.reference_steps[1:], strict=False)):
            raise UserError("reference_steps must be positive and rising, one per goal")
        if not (n.noise_clip == 0 or (n.noise_clip > 1 and math.isfinite(n.noise_clip))):
            # Below 1x the average absolute estimate the bound would cut typical updates, not outliers.
            raise UserError(f"noise_clip must be 0 (off) or above 1, got {n.noise_clip}")

    def _check_batch_control(self) -> None:
        """The batch control's settings against one another and against the environments."""
        e, c = self.env, self.control
        if not all(math.isfinite(v) for v in (c.hysteresis, c.max_resize_factor, c.max_shrink_factor)) or (
                c.hysteresis < 1.0 or c.max_resize_factor <= 1.0 or c.max_shrink_factor <= 1.0):
            raise UserError("hysteresis must be >= 1, and max_resize_factor and max_shrink_factor > 1")
        if not c.cost_outlier_factor > 1.0:
            raise UserError(f"cost_outlier_factor must be > 1 (inf: fit every batch size), not {c.cost_outlier_factor:g}")
        if not (c.cluster_hysteresis >= 1.0 and math.isfinite(c.cluster_hysteresis)):
            raise UserError(f"cluster_hysteresis must be >= 1 (1: off), not {c.cluster_hysteresis:g}")
        if c.batch == "auto" and c.hysteresis >= c.max_resize_factor:
            # auto's probes move the batch by one max_resize_factor to time a second size; a move
            # that stays inside the hysteresis band is never made, so the cost model would never fit.
            raise UserError(f"--batch auto needs hysteresis ({c.hysteresis:g}) below max_resize_factor "
                            f"({c.max_resize_factor:g}): its probes move the batch by that factor")
        if c.min_envs > c.max_envs:
            raise UserError(
                f"--min-envs ({c.min_envs}) is larger than --max-envs ({c.max_envs}); swap them"
            )
        for name, value in {"n_envs": e.n_envs, "min_envs": c.min_envs, "max_envs": c.max_envs}.items():
            if value % e.vector_size:
                raise UserError(
                    f"{spelled(name)} ({value}) must be a multiple of vector_size ({e.vector_size})"
                )
        if c.cluster_cost() is None and c.cluster_nodes > 0 and c.batch == "fixed":
            raise UserError("--cluster-nodes with a fixed batch: one batch size cannot tell T(B) = a + b*B's a from "
                            "its b; give them with --set cluster_fit=A,B (rlscale study prints a sweep's fit)")
        if (c.batch == "replay") != bool(c.replay_from):
            raise UserError("batch replay and replay_from RUN_DIR go together: give both or neither "
                            "(--set batch=replay --set replay_from=RUN_DIR)")
        if c.batch != "fixed" and not c.min_envs <= e.n_envs <= c.max_envs:
            raise UserError(
                f"--n-envs ({e.n_envs}) lies outside [--min-envs {c.min_envs}, --max-envs {c.max_envs}]"
            )

    def _check_engine(self) -> None:
        """Where the run trains: the engine, its pool and learners, and what the noise scale needs of them."""
        e, a, n, c, r = self.env, self.agent, self.noise, self.control, self.run
        p, lrn = self.pool, self.learner
        if p.overlap and r.backend != "native":
            raise UserError("--overlap is an option of the native engine (drop --backend rllib)")
        if p.envs_per_actor and (p.in_this_process or r.backend != "native"):
            raise UserError("--envs-per-actor sizes the native engine's Ray actor pool (drop --pool serial "
                            "and --backend)")
        if p.envs_per_actor % e.vector_size:
            raise UserError(f"--envs-per-actor ({p.envs_per_actor}) must be a multiple of "
                            f"vector_size ({e.vector_size})")
        if r.init_from and (r.backend != "native" or lrn.learners > 1):
            raise UserError("--init-from starts the native engine's one learner from a checkpoint "
                            "(drop --backend rllib and --learners)")
        if lrn.learners > 1 and r.backend != "native":
            raise UserError("--learners is an option of the native engine (drop --backend rllib)")
        if lrn.learners > 1 and p.in_this_process:
            raise UserError("--learners runs its learners as Ray actors; drop --pool serial")
        if lrn.learner_passes != "team" and (r.backend != "native" or lrn.learners > 1):
            raise UserError("learner_passes shares the native engine's one learner's threads "
                            "(drop --backend rllib and --learners)")
        if lrn.learner_compile == "on" and lrn.learner_passes == "side-by-side":
            raise UserError("learner_passes side-by-side runs the passes eager (torch.compile is not "
                            "thread-safe): drop learner_compile on")
        if lrn.learner_compile == "on" and (r.backend != "native" or lrn.learners > 1):
            raise UserError("learner_compile on compiles the native engine's one learner "
                            "(drop --backend rllib and --learners, or use auto)")
        fewest = e.n_envs if c.batch == "fixed" else min(e.n_envs, c.min_envs)  # the run may ever have
        if lrn.learners > fewest:
            raise UserError(f"--learners ({lrn.learners}) exceeds the {fewest} environments the run may have "
                            "(each learner takes whole environments); raise --n-envs/--min-envs")
        if a.algo == "ppo" and a.n_minibatches > fewest * a.n_steps:
            raise UserError(f"--n-minibatches ({a.n_minibatches}) exceeds the batch ({fewest * a.n_steps}"
                            f"{'' if fewest == e.n_envs else ' at --min-envs, the fewest an adaptive batch may shrink to'})")
        if n.measure_noise and n.noise_groups < 2:
            raise UserError("noise_groups must be at least 2 to measure the noise scale")
        if n.measure_noise and n.noise_groups > fewest:
            raise UserError(
                f"noise_groups ({n.noise_groups}) exceeds the {fewest} environments the run may have; "
                "lower noise_groups or raise --n-envs/--min-envs"
            )

    def _check_metric_signal(self) -> None:
        """--signal precond/hessian/precond_hessian needs what measures them: rlscale's own single learner."""
        a, n, c, r = self.agent, self.noise, self.control, self.run
        lrn = self.learner
        why = None
        if c.signal in ("precond", "precond_hessian") and a.optimizer not in PRECONDITIONED_OPTIMIZERS:
            why = f"--optimizer {a.optimizer} has no preconditioner; use one of {', '.join(PRECONDITIONED_OPTIMIZERS)}"
        elif not (n.measure_noise and n.measure_curvature):
            why = "it is measured with --measure-noise and measure_curvature on"
        elif r.backend != "native":
            why = "the RLlib backend measures B_simple only; drop --backend rllib"
        elif lrn.learners > 1:
            why = "data-parallel learners measure B_simple only; drop --learners"
        elif n.noise_groups < 3:
            why = "the Hessian's cross terms need noise_groups of at least 3"
        if why:
            raise UserError(f"--signal {c.signal} cannot be followed here: {why}")

    def check_signal_measured(self) -> Config:
        """This config, checked that a controller following the noise scale has it measured: without, it would
        hold all run long with "no noise-scale estimate". For a new run only, not in ``validate``: a saved run
        that held so (it ran, like a fixed one) still resumes and reads back, and a sweep's base config, whose
        batch its fixed trials replace, is not refused for the preset's."""
        n, c = self.noise, self.control
        if c.batch not in ("auto", "critical", "sqrt"):
            return self
        why = None
        if not n.measure_noise:
            why = "measure_noise is off; turn it on"
        elif c.signal in ("policy", "value"):  # the loss parts are measured every noise_parts_every updates
            if self.run.backend != "native":
                why = "the RLlib backend measures the total loss's B_simple only; use --signal total"
            elif self.learner.learners > 1:
                why = "data-parallel learners measure the total loss's B_simple only; use --signal total"
            elif n.noise_parts_every < 1:
                why = "noise_parts_every 0 never measures the loss parts; set it to 1 or more"
        if why:
            raise UserError(f"--batch {c.batch} follows --signal {c.signal}, which is not measured here: {why}")
        return self


# The settings with a command-line flag, by concern (a section each): what most runs choose. Every other
# setting is a key of the presets' TOML, set on the command line with --set NAME=VALUE (docs/usage.md).
FLAGS = (
    "n_envs", "total_frames", "goals",  # the task
    "lr", "n_steps", "n_epochs", "n_minibatches", "gamma", "ent_coef", "optimizer",  # the agent
    "measure_noise", "noise_horizon",  # the noise scale
    "batch", "signal", "min_envs", "max_envs", "lr_rule", "cluster_nodes",  # the batch control
    "seed", "run_dir", "stop_return", "init_from", "log_interval", "checkpoint_every", "keep_checkpoints",  # the run
    "backend", "pool", "address", "n_actors", "envs_per_actor", "overlap", "learners",  # where it runs
    "learner_threads", "learner_device", "learner_precision", "actor_precision",
)
SET_FLAG = "--set"
# The batch controls a user chooses from (--batch); `sqrt` and `replay` are the studies' (--set batch=...).
USER_BATCH_MODES = ("fixed", "auto", "critical")


def spelled(name: str) -> str:
    """A setting as a user gives it: its flag, or its name where it has none (a preset's key, --set)."""
    return cli_flag(name) if name in FLAGS else name


def cli_flag(name: str) -> str:
    """The command-line flag of a config field: total_frames -> --total-frames."""
    return "--" + name.replace("_", "-")


def _field_owner() -> dict[str, tuple[str, dataclasses.Field]]:
    owner: dict[str, tuple[str, dataclasses.Field]] = {}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            assert f.name not in owner, f"duplicate config field {f.name}"
            owner[f.name] = (section, f)
    return owner


FIELDS = _field_owner()


def _coerce(value: Any, f: dataclasses.Field, where: str) -> Any:
    """Check a preset value against the field's type; ints are accepted for floats."""
    kind = f.type if isinstance(f.type, str) else f.type.__name__
    ok = {
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "list[float]": isinstance(value, list)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value),
    }[kind]
    if not ok:
        raise UserError(f"{where}: {f.name} must be {kind}, got {value!r}")
    if kind == "float":
        value = float(value)
    if kind == "list[float]":
        value = [float(v) for v in value]
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        raise UserError(f"{where}: {f.name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def apply_mapping(cfg: Config, data: dict[str, Any], where: str) -> None:
    """Apply a {section: {key: value}} mapping (a preset or a saved config)."""
    for section, values in data.items():
        if section not in SECTIONS:
            raise UserError(
                f"{where}: unknown section [{section}]; known: {', '.join(SECTIONS)}"
            )
        if not isinstance(values, dict):
            raise UserError(f"{where}: [{section}] must be a table")
        target = getattr(cfg, section)
        for key, value in values.items():
            owner = FIELDS.get(key)
            if owner is None or owner[0] != section:
                hint = f" (it belongs in [{owner[0]}])" if owner else ""
                raise UserError(f"{where}: unknown key '{key}' in [{section}]{hint}")
            setattr(target, key, _coerce(value, owner[1], where))


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{path}: malformed TOML ({err}); fix the file") from None
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}") from None


def looks_like_env_id(name: str) -> bool:
    """Gymnasium ids carry a version suffix (CartPole-v1, ALE/Pong-v5)."""
    return "-v" in name


def build_config(env: str, agent: str | None, overrides: dict[str, Any]) -> Config:
    """defaults -> agents/<algo>.toml -> envs/<env>.toml (or a TOML file) -> overrides.

    Presets are looked up in the working directory's envs/ and agents/ first, then in the ones
    rlscale ships (rlscale.presets).
    """
    cfg = Config()
    env_preset: dict[str, Any] = {}
    env_path = Path(env) if env.endswith(".toml") else presets.find("envs", env)
    if env_path is not None:
        env_preset = read_toml(env_path)
    elif looks_like_env_id(env):
        env_preset = {"env": {"env_id": env}}
    else:
        raise UserError(
            f"unknown environment '{env}': use a preset ({', '.join(presets.available('envs'))}), "
            "a preset file (my_env.toml, or envs/my_env.toml here) or a gymnasium id such as "
            "CartPole-v1 or ALE/Breakout-v5"
        )
    algo = agent or env_preset.get("agent", {}).get("algo") or cfg.agent.algo
    agent_path = presets.find("agents", algo)
    if agent_path is None:
        raise UserError(
            f"unknown agent '{algo}': choose one of {', '.join(presets.available('agents'))}"
        )
    apply_mapping(cfg, read_toml(agent_path), str(agent_path))
    apply_mapping(cfg, _for_algo(env_preset, algo), str(env_path) if env_path else "env id")
    cfg.agent.algo = algo
    preset_run = _reference_shape(cfg)
    apply_mapping(cfg, _sectioned(overrides), "command line")
    if _reference_shape(cfg) != preset_run and "reference_steps" not in overrides:
        # The preset's reference run trained at the preset's batch and rate; at another one its steps
        # to a goal are no estimate (at 8x the envs Pong needs far more of them).
        cfg.agent.reference_steps = []
    return cfg.validate()


def _reference_shape(cfg: Config) -> tuple[Any, ...]:
    """The settings that make a run the preset's reference run, as far as its steps to a goal go."""
    a = cfg.agent
    return (cfg.env.n_envs, a.n_steps, a.lr, a.n_epochs, a.n_minibatches, cfg.control.batch)


def _for_algo(preset: dict[str, Any], algo: str) -> dict[str, Any]:
    """An env preset's [<section>.<algo>] tables ([agent.a2c], [control.a2c]) apply to that algorithm only:
    a game's batch control, like its rate, is measured for one algorithm at a time."""
    algos = AgentConfig.__dataclass_fields__["algo"].metadata["choices"]
    out: dict[str, Any] = {}
    for section, values in preset.items():
        if isinstance(values, dict):
            values = dict(values)
            specific = {name: values.pop(name) for name in list(values) if name in algos}
            values.update(specific.get(algo, {}))
        out[section] = values
    return out


def _sectioned(flat: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        out.setdefault(FIELDS[key][0], {})[key] = value
    return out


# What a resumed run may change: where it stops (budget, score) and how it reports and
# checkpoints, not how it trains. A larger budget extends a run; with annealing on, the
# learning rate then continues from the new schedule's value at the current step.
RESUME_OVERRIDABLE = {"total_frames", "stop_return", "log_interval", "checkpoint_every", "keep_checkpoints",
                      "address"}


# A config saved before one of these fields existed ran with the behaviour named by
# the value here, which is not the field's default today.
BEHAVIOUR_BEFORE_FIELD = {("control", "probe_cooldown"): True, ("control", "min_gain"): 0.0,
                          ("control", "max_shrink_factor"): 2.0, ("control", "cost_outlier_factor"): math.inf,
                          ("pool", "actor_precision"): "fp32", ("noise", "measure_curvature"): False,
                          ("noise", "noise_settle"): 0, ("control", "cluster_one_node_first"): False}


# Settings of the in-run measurement (--batch measured), retired when it became `rlscale measure`, and
# cluster_hold_start (a cluster study's setting of 838cb39, taken out by the rule set before its runs):
# a saved config that names them still loads, without them (a held run reads as plain auto).
RETIRED = {("run", "serial")} | {("control", key) for key in ("branches", "branch_window", "progress", "progress_episodes", "branch_runs",
                                        "branches_at_once", "heldout_rollouts", "remeasure", "remeasure_noise",
                                        "cluster_hold_start")}


def _moved_to_their_sections(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A saved config with the pool's and the learner's settings in their sections: configs saved before
    2026-12-05 hold them under [run]. Only those keys move; anything else misplaced is refused as before."""
    run = data.get("run")
    if not isinstance(run, dict):
        return data
    out = {section: dict(values) if isinstance(values, dict) else values for section, values in data.items()}
    for key in [k for k in run if k in FIELDS and FIELDS[k][0] in ("pool", "learner")]:
        owner = FIELDS[key][0]
        target = out.setdefault(owner, {})
        if not isinstance(target, dict) or key in target:
            raise UserError(f"{where}: {key} is given under both [run] and [{owner}]; keep the one in [{owner}]")
        target[key] = out["run"].pop(key)
    return out


def _apply_saved(data: dict[str, Any], where: str) -> Config:
    if data.get("run", {}).get("serial"):  # --serial, the other spelling of --pool serial, retired 2026-12-04
        data.setdefault("run", {})["pool"] = "serial"
    if data.get("control", {}).get("batch") == "measured":
        raise UserError(f"{where}: a run of --batch measured, which became the command rlscale measure; read it "
                        "with a checkout of rlscale before it (git log -- rlscale/training/measure.py)")
    data = {section: {k: v for k, v in values.items() if (section, k) not in RETIRED} if isinstance(values, dict)
                      else values for section, values in data.items()}
    data = _moved_to_their_sections(data, where)
    cfg = Config()
    for (section, key), value in BEHAVIOUR_BEFORE_FIELD.items():
        if key not in data.get(section, {}):
            setattr(getattr(cfg, section), key, value)
    apply_mapping(cfg, data, where)
    return cfg.validate()


def load_saved(path: Path) -> Config:
    """Read a resolved config written by dumps_toml()."""
    return _apply_saved(read_toml(path), str(path))


def resumed(saved: Config, changes: dict[str, Any], run_dir: str) -> Config:
    """A saved run's config as it resumes: ``changes`` set (keys of RESUME_OVERRIDABLE, checked by the caller),
    and the run directory where the run lies now (a copied or moved one resumes where it is)."""
    for key, value in changes.items():
        setattr(getattr(saved, FIELDS[key][0]), key, value)
    saved.run.run_dir = run_dir
    return saved.validate()


def loads_saved(text: str, where: str) -> Config:
    """A resolved config from dumps_toml() text (checkpoints carry one)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{where}: malformed config ({err})") from None
    return _apply_saved(data, where)


def dumps_toml(cfg: Config) -> str:
    """The resolved config as TOML (flat sections of plain values)."""
    lines: list[str] = []
    for section, values in cfg.to_dict().items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value)


# The settings most runs touch: what `rlscale train --help` shows (--help-all shows every one).
COMMON_SETTINGS = ("total_frames", "n_envs", "lr", "batch", "min_envs", "max_envs", "seed", "stop_return",
                   "run_dir", "pool", "address", "learner_threads", "log_interval", "init_from")


def add_config_flags(parser: argparse.ArgumentParser, values: Config | None = None,
                     shown: tuple[str, ...] | None = None, values_from: str = "default") -> None:
    """One flag per config field, help text taken from the field.

    ``values``: the config whose values the help shows (a preset's, labelled ``values_from``);
    the dataclass defaults when None. ``shown``: the fields whose help is printed (every one
    when None); the others still parse.
    """
    for section, cls in SECTIONS.items():
        group = parser.add_argument_group(f"[{section}] settings")
        for f in dataclasses.fields(cls):
            if f.name not in FLAGS:
                continue
            name = cli_flag(f.name)
            value = getattr(getattr(values, section), f.name) if values is not None else (
                f.default if f.default is not dataclasses.MISSING else [])
            helptext = f.metadata["help"] + f" ({values_from} {value})"
            if shown is not None and f.name not in shown:
                helptext = argparse.SUPPRESS
            kind = f.type if isinstance(f.type, str) else f.type.__name__
            if kind == "bool":
                group.add_argument(name, dest=f.name, action=argparse.BooleanOptionalAction,
                                   default=None, help=helptext)
            elif kind == "list[float]":
                group.add_argument(name, dest=f.name, type=float, nargs="*", default=None,
                                   help=helptext)
            else:
                caster = {"int": int, "float": float, "str": str}[kind]
                choices = USER_BATCH_MODES if f.name == "batch" else f.metadata.get("choices")
                group.add_argument(name, dest=f.name, type=caster, default=None,
                                   choices=choices, metavar=kind.upper(),
                                   help=helptext)


    parser.add_argument(SET_FLAG, action="append", default=[], metavar="NAME=VALUE",
                        help="any other setting, as a preset's TOML names it (e.g. --set cooldown=20000, "
                             "--set norm_adv=false); repeat for more")


def setting_value(item: str) -> tuple[str, Any]:
    """One --set NAME=VALUE: the setting and its value, read as TOML (a bare word is a string)."""
    name, sep, text = item.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or name not in FIELDS:
        raise UserError(f"{SET_FLAG} {item}: give NAME=VALUE with NAME a setting of the presets' TOML "
                        "(rlscale train --help-all lists them)")
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    return name, _coerce(value, FIELDS[name][1], SET_FLAG)


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    out = {name: getattr(args, name) for name in FLAGS if getattr(args, name, None) is not None}
    return out | dict(setting_value(item) for item in getattr(args, "set", None) or [])


def check_no_retired_flags(argv: list[str]) -> None:
    """A setting without a flag, given as one: say how to set it (argparse would only say 'unrecognized')."""
    for i, token in enumerate(argv):
        if token == "--serial":  # the other spelling, retired 2026-12-04
            raise UserError("--serial is spelled --pool serial")
        mode = token.removeprefix("--batch=") if token.startswith("--batch=") else (
            argv[i + 1] if token == "--batch" and i + 1 < len(argv) else "")
        if mode not in ("", *USER_BATCH_MODES) and mode in FIELDS["batch"][1].metadata["choices"]:
            raise UserError(f"--batch {mode} is a study tool: give {SET_FLAG} batch={mode}")
        name = token.removeprefix("--").removeprefix("no-").split("=")[0].replace("-", "_")
        if token.startswith("--") and name in FIELDS and name not in FLAGS:
            value = "false" if token.startswith("--no-") else "VALUE"
            raise UserError(f"{token.split('=')[0]} is a setting without a flag: give {SET_FLAG} {name}={value}, "
                            "or set it in a preset's TOML")


def parse_with_config(parser: argparse.ArgumentParser, argv: list[str] | None
                      ) -> tuple[argparse.Namespace, dict[str, Any]]:
    """The parsed arguments, and the config fields the command line set."""
    check_no_retired_flags(list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    return args, overrides_from_args(args)
