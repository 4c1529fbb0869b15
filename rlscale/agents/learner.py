"""What A2C and PPO learners share: device and precision, the optimizer, the guarded step.

A learner's ``update(batch, lr)`` reads top to bottom: targets, the loss (a
plain method over a set of batch rows), ``gradients.backward`` (the gradient
in ``p.grad`` and, when measuring, the env groups' norms), the noise meter,
then ``step`` (clip, optimizer step; skipped when not finite).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlscale import tags
from rlscale.agents.curvature import metric_samples, preconditioner
from rlscale.agents.data_parallel import DataParallel
from rlscale.agents.gradients import (
    CPU_CHUNK_ROWS,
    GradientReport,
    GradientRoute,
    RowsLoss,
    backward,
    env_groups,
)
from rlscale.agents.optim import make_optimizer, set_lr
from rlscale.agents.side_by_side import PassSchedule, SideBySide, choose_pass_schedule
from rlscale.config import AgentConfig, Config, LearnerConfig, NoiseConfig
from rlscale.control.noise import NoiseMeter
from rlscale.errors import UserError
from rlscale.models.compiled import compile_network
from rlscale.models.precision import network_forward
from rlscale.rollout.worker import Batch, flat_weights


def resolve_device(name: str) -> torch.device:
    """auto -> cuda when this process sees a GPU, else cpu."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--learner-device cuda, but torch sees no GPU here "
                        f"(torch {torch.__version__}, CUDA build: {torch.version.cuda is not None}); "
                        "use --learner-device cpu or run the driver on a GPU node")
    return torch.device(name)


class Learner:
    """Holds the model, the optimizer and the noise meter; subclasses define the loss and update."""

    cpu_chunk_rows = CPU_CHUNK_ROWS  # rows per forward/backward pass of a convolutional network on CPU

    def __init__(self, model: torch.nn.Module, agent: AgentConfig, noise: NoiseConfig, settings: LearnerConfig,
                 lagged: bool = False, data_parallel: DataParallel | None = None) -> None:
        """``agent``: the loss and optimizer; ``noise``: what the noise meter measures; ``settings``: how the
        update is computed; ``lagged``: batches come from the policy one update behind (the pool's --overlap)."""
        self.agent, self.noise_settings, self.settings, self.lagged = agent, noise, settings, lagged
        # With data-parallel learners (ray_learners) each holds a share of the batch's
        # environments and ``gradient`` all-reduces; None: this learner holds the whole batch.
        self.data_parallel = data_parallel
        # Convolutions ran faster with channels-last tensors on CPU (benchmarks/bench_network.py);
        # the conversion happens before the optimizer sees the parameters.
        convolutional = any(isinstance(m, torch.nn.Conv2d) for m in model.modules())
        self.channels_last = settings.channels_last and convolutional
        self.model = model.to(memory_format=torch.channels_last) if self.channels_last else model
        self.device = next(model.parameters()).device  # batches are moved here
        # "auto" is resolved by timing before the learner is built (engine.NativeEngine,
        # rlscale/precision.py); a learner built directly with "auto" runs fp32.
        self.bf16 = settings.learner_precision == "bf16"
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.route = GradientRoute.for_model(self.model, self.device, settings.learner_chunk_rows,
                                             self.cpu_chunk_rows)
        a = agent
        self.optimizer = make_optimizer(a.optimizer, self.params, a.lr, a.rms_alpha, a.optim_eps)
        self.noise = NoiseMeter(noise.noise_horizon, clip=noise.noise_clip)
        self.updates = 0  # optimizer steps taken
        self.batches = 0  # update() calls, the cadence of the metrics' measurement
        self.skipped_updates = 0
        self.skipped_in_a_row = 0
        # noise_settle: batches left before the noise meter takes samples again, counted from the last batch
        # that held more environments than the one before (the first batch too: a start, a resume or a branch
        # begins with new environments). Not checkpointed: a resumed run's environments are new.
        self.settling = 0
        self.batch_envs = 0  # environments in the previous batch
        self.measuring = noise.measure_noise  # whether this batch's noise samples enter the averages
        # The network compiled (``compile_network``; None: eager), and whether the passes now
        # running may use it: those that measure nothing (``gradient``).
        self.compiled: torch.nn.Module | None = None
        self.compiled_passes = False

    # ------------------------------------------------------------------ the network

    @classmethod
    def from_config(cls, model: torch.nn.Module, cfg: Config, data_parallel: DataParallel | None = None) -> Learner:
        """This learner with the run's sections it reads (the engine's and the tests' way to build one)."""
        return cls(model, cfg.agent, cfg.noise, cfg.learner, cfg.pool.overlap, data_parallel)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits and values in fp32, the network run in the configured precision.

        With bf16 autocast the convolutions and matmuls run in bfloat16 while the
        parameters, their gradients, the losses and the noise-scale norms stay fp32.
        """
        model = self.compiled if self.compiled_passes and self.compiled is not None else self.model
        return network_forward(model, obs, self.bf16, self.channels_last)

    def compile_network(self, obs: torch.Tensor) -> str:
        """Compile the network for the passes that measure nothing, on a pass like ``obs``; what happened."""
        choice = compile_network(self.model, obs.to(self.device), self.bf16, self.channels_last)
        self.compiled = choice.module
        return choice.note

    def share_passes(self, kind: str, pass_obs: Callable[[], torch.Tensor], threads: int) -> str:
        """Run the passes that measure nothing as one team of ``threads`` torch threads or side by side
        (learner_passes; auto: timed on a pass of ``pass_obs()``, as the run's passes run); what was chosen."""
        if self.compiled is not None:
            # Two threads running compiled code deadlocked when one of them compiled again (a new
            # pass shape): torch.compile is not thread-safe.
            return "team passes (compiled passes run on one thread's team)"
        if kind == "team":
            return "team passes (set)"
        workers = SideBySide(threads)
        schedule = (choose_pass_schedule(self.params, self.forward, pass_obs().to(self.device), workers)
                    if kind == "auto" else PassSchedule(kind, "set"))
        if schedule.kind == "side-by-side":
            self.route.side_by_side = workers
        else:
            workers.close()
        return f"{schedule.kind} passes ({schedule.why})"

    def close(self) -> None:
        """Stop the side-by-side pass workers, if any."""
        if self.route.side_by_side is not None:
            self.route.side_by_side.close()
            self.route.side_by_side = None

    def rows(self, x: np.ndarray) -> torch.Tensor:
        """A [n_steps, n_envs, ...] batch array as flat rows on the learner's device (row = step * n_envs + env)."""
        return torch.from_numpy(np.ascontiguousarray(x)).to(self.device).flatten(0, 1)

    def flat_weights(self) -> np.ndarray:
        """The parameters as one float32 vector, for the rollout actors."""
        return flat_weights(self.model)

    def index(self, rows: np.ndarray) -> torch.Tensor:
        """Row indices as a tensor on the learner's device."""
        return torch.from_numpy(rows).to(self.device)

    # ------------------------------------------------------------------ measuring

    def env_group_rows(self, rows: np.ndarray, n_envs: int) -> list[np.ndarray]:
        """``rows`` (flat row indices) split into the noise estimator's env groups (a row's env is row % n_envs)."""
        return [rows[np.isin(rows % n_envs, cols)] for cols in env_groups(n_envs, self.noise_settings.noise_groups)]

    def begin_batch(self, batch: Batch) -> bool:
        """Whether this batch measures the noise scale: not while new environments settle (noise_settle).

        Counted on the whole batch's environments (with data-parallel learners too, so that every
        learner decides alike and their all-reduces match)."""
        n_envs = self.whole_batch_envs(batch)
        if n_envs > self.batch_envs:
            self.settling = math.ceil(self.noise_settings.noise_settle / self.agent.n_steps)
        self.batch_envs = n_envs
        self.measuring = self.noise_settings.measure_noise and self.settling == 0
        self.settling = max(0, self.settling - 1)
        return self.measuring

    def environments_restarted(self) -> None:
        """Every environment is new (``Pool.restart``): the next batch settles as a start's does, whatever
        size the environments before it had (so a measurement's race, and the run after it, settle alike
        in this process and in a race's own one)."""
        self.batch_envs = 0

    def measure_parts_now(self) -> bool:
        every = self.noise_settings.noise_parts_every
        return (self.noise_settings.measure_noise and every > 0 and self.updates % every == 0
                and self.data_parallel is None)  # the free estimate of data-parallel learners has no parts

    def whole_batch_envs(self, batch: Batch) -> int:
        """The environments of the whole batch, of which a data-parallel learner holds a share."""
        return batch.n_envs if self.data_parallel is None else self.data_parallel.share.n_envs

    def own_rows(self, rows: np.ndarray) -> np.ndarray:
        """This learner's rows among ``rows`` of the whole batch (all of them without data parallelism)."""
        return rows if self.data_parallel is None else self.data_parallel.rows(rows)

    def gradient(self, loss: RowsLoss, rows: np.ndarray, n_envs: int, measure: bool) -> GradientReport:
        """The gradient of the mean loss over ``rows`` (of this learner's batch) in ``p.grad``, and its report.

        One learner: ``rows`` split into the estimator's env groups when
        measuring. Data-parallel learners: one plain pass over this learner's
        rows, then the all-reduce, whose local and global norms are the noise
        estimate (rlscale/data_parallel.py).
        """
        if self.data_parallel is None:
            groups = self.env_group_rows(rows, n_envs) if measure else [rows]
            # Measuring passes run eager: they hook into layers (gradients.py's taps) and
            # B_noise takes gradients of gradients, which compiled graphs do not offer.
            self.compiled_passes = not measure
            try:
                return backward(self.model, self.route, loss, groups, measure=measure,
                                parts=self.measure_parts_now())
            finally:
                self.compiled_passes = False
        local = backward(self.model, self.route, loss, [rows], measure=False, parts=False) if rows.size else None
        return self.data_parallel.combine(self.params, local, measure)

    def record_noise(self, grad: GradientReport, observations: float) -> dict[str, float]:
        """Feed a finite gradient's group norms to the noise meter; ``observations``: fresh ones (0 on reuse)."""
        if not grad.finite or not self.measuring:  # settling batches neither add to the averages nor age them
            return {}
        self.noise.observe(observations)
        metrics: dict[str, float] = {}
        for part, norms in grad.sq_norms.items():
            if norms:
                metrics.update(self.noise.record(part, norms, grad.sizes, grad.big_sq_norms[part]))
        return metrics

    def measure_metrics_now(self) -> bool:
        """Whether this batch measures B_P, B_noise and B_PH (every curvature_every batches, one learner only)."""
        n = self.noise_settings
        return (self.measuring and n.measure_curvature and self.batches % n.curvature_every == 0
                and self.data_parallel is None and n.noise_groups >= 3)

    def record_metrics(self, loss: RowsLoss, rows: np.ndarray, n_envs: int) -> dict[str, float]:
        """B_P's, B_noise's and B_PH's samples for ``rows`` into the noise meter, after ``record_noise`` of the same step.

        Separate passes (rlscale/agents/curvature.py), so ``p.grad`` keeps the update's gradient.
        """
        start = time.perf_counter()
        samples = metric_samples(self.params, loss, self.env_group_rows(rows, n_envs),
                                 preconditioner(self.optimizer, self.params))
        for metric in tags.METRICS:  # MetricSamples has a field per metric, named as the metric
            sample = getattr(samples, metric)
            if sample is not None:
                self.noise.record_sample(metric, sample)
        return {tags.CURVATURE_SECONDS: time.perf_counter() - start}

    # ------------------------------------------------------------------ the step

    def step(self, grad: GradientReport, lr: float) -> dict[str, float]:
        """Clip and take one optimizer step at ``lr`` — unless the gradient is not finite."""
        metrics: dict[str, float] = {tags.loss_stat(k): v for k, v in grad.stats.items()}
        metrics[tags.GRAD_NORM] = math.sqrt(grad.big_sq_norms["total"]) if grad.finite else math.nan
        if not grad.finite:
            # Never apply a non-finite step; the training loop decides when too many in a row is fatal.
            self.optimizer.zero_grad(set_to_none=True)
            self.skipped_updates += 1
            self.skipped_in_a_row += 1
            metrics[tags.SKIPPED_UPDATES] = float(self.skipped_updates)
            return metrics
        self.skipped_in_a_row = 0
        if self.agent.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.agent.max_grad_norm)
        set_lr(self.optimizer, lr)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.updates += 1
        metrics[tags.SKIPPED_UPDATES] = float(self.skipped_updates)
        return metrics

    def update(self, batch: Batch, lr: float | None = None) -> dict[str, float]:
        """One learner update on a batch at learning rate ``lr`` (None: the configured one)."""
        raise NotImplementedError

    def batch_loss(self, batch: Batch) -> RowsLoss:
        """The loss ``update`` optimises on ``batch``, as a function of its rows (targets fixed now)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "noise": self.noise.state_dict(),
            "updates": self.updates,
            "skipped_updates": self.skipped_updates,
            "batches": self.batches,
        }

    def start_from(self, state: dict[str, Any]) -> None:
        """A branch's start: another run's network and optimizer state, and none of its counters or noise
        averages (those measured the trunk's batch and learning rate)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.start_from(state)  # the network and optimizer; then what a resumed run also continues
        self.noise.load_state_dict(state["noise"])
        self.updates = int(state["updates"])
        self.skipped_updates = int(state["skipped_updates"])
        # The curvature measurement's cadence continues where it was (absent before 2026-11-26: restart it).
        self.batches = int(state.get("batches", 0))
