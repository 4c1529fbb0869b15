"""Rollouts without Ray: the Batch, the worker that fills it, and the pool's bookkeeping.

One update is: the learner's weights go to every worker as one flat vector,
every worker steps all its environments ``n_steps`` times with them, and the
fragments come back as one batch that keeps each observation's environment id
(the learner groups its gradient by environment). ``SerialPool`` runs one
worker in this process, for debugging and small tests; ``rlscale.distributed.ray_pool``
runs one worker per Ray actor with the same bookkeeping.

Environments come in vector envs of ``vector_size``; the pool grows by
adding vector envs to the least loaded workers and shrinks by closing the
newest ones on the most loaded workers. Removed environments drop their
unfinished episode; finished episodes are delivered with the fragment of the
update in which they finished, so none is lost or counted twice.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rlscale.config import Config, EnvConfig, PoolConfig
from rlscale.envs.vector import EnvSpec, Episode, Step, VectorEnv, sample_observations
from rlscale.models.nets import build_network, sample_actions
from rlscale.models.precision import (
    InferenceChoice,
    choose_inference,
    describe_inference,
    has_convolutions,
    inference_model,
    network_forward,
)


def flat_weights(model: torch.nn.Module) -> np.ndarray:
    """The model's parameters as one float32 vector (what the pool broadcasts)."""
    # reshape, not view: channels-last weights are not contiguous; reshape copies them
    # in logical (NCHW) order, which is the order load_flat_weights reads.
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).float().cpu().numpy()


@torch.no_grad()
def load_flat_weights(model: torch.nn.Module, weights: np.ndarray) -> None:
    """Copy a ``flat_weights`` vector into the model's parameters, keeping each one's memory layout
    and dtype (a bf16 actor's weights are rounded to bf16 as they are copied).

    (``vector_to_parameters`` would replace channels-last weights by NCHW views
    of the vector, and alias a buffer that Ray's object store keeps read-only.)
    """
    params = list(model.parameters())
    size = sum(p.numel() for p in params)
    if weights.size != size:
        raise ValueError(f"{weights.size} weights for a model of {size} parameters")
    with warnings.catch_warnings():
        # Ray hands the vector over read-only and torch warns about that; it is only read
        # here (copied into the parameters), so no copy of the whole vector is needed first.
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        flat = torch.from_numpy(weights)
    offset = 0
    for p in params:
        p.copy_(flat[offset:offset + p.numel()].view(p.shape))
        offset += p.numel()


# The time-major [n_steps, n_envs, ...] arrays of a Batch (split by column, joined by column).
STEP_ARRAYS = ("obs", "actions", "rewards", "terminated", "truncated", "truncation_values", "values", "logprobs")


@dataclass
class Batch:
    """Time-major arrays [n_steps, n_envs, ...]; column j is environment env_ids[j]."""

    obs: np.ndarray
    actions: np.ndarray  # int64
    rewards: np.ndarray  # float32, clipped where the env config says so
    terminated: np.ndarray  # bool
    truncated: np.ndarray  # bool
    truncation_values: np.ndarray  # float32: V(terminal obs) where truncated, else 0
    values: np.ndarray  # float32: V(obs) by the acting policy
    logprobs: np.ndarray  # float32: log pi(action | obs) by the acting policy
    bootstrap_values: np.ndarray  # float32 [n_envs]: V(obs after the last step)
    env_ids: np.ndarray  # int64 [n_envs]
    episodes: list[Episode] = field(default_factory=list)
    starting_envs: int = 0  # environments still being built in the background, not in the batch
    warmup_steps: int = 0  # random warm-up steps of the environments that joined with this batch
    # The worker's own seconds for this batch (weights in, every step, the arrays built); joined
    # batches keep their slowest worker's: the rest of a rollout's time is the trip through the pool.
    acting_seconds: float = 0.0

    @property
    def n_steps(self) -> int:
        return self.actions.shape[0]

    @property
    def n_envs(self) -> int:
        return self.actions.shape[1]

    @property
    def size(self) -> int:
        """Observations in the batch (n_steps x n_envs)."""
        return self.actions.size

    def columns(self, cols: np.ndarray) -> Batch:
        """The batch of environments ``cols`` only (a data-parallel learner's share; no episodes)."""
        return Batch(**{n: np.ascontiguousarray(getattr(self, n)[:, cols]) for n in STEP_ARRAYS},
                     bootstrap_values=self.bootstrap_values[cols], env_ids=self.env_ids[cols])

    @staticmethod
    def concat(fragments: list[Batch]) -> Batch:
        all_fragments = fragments
        fragments = [f for f in fragments if f.n_envs > 0] or fragments[:1]
        arrays = {n: np.concatenate([getattr(f, n) for f in fragments], axis=1) for n in STEP_ARRAYS}
        return Batch(
            **arrays,
            bootstrap_values=np.concatenate([f.bootstrap_values for f in fragments]),
            env_ids=np.concatenate([f.env_ids for f in fragments]),
            episodes=[e for f in fragments for e in f.episodes],
            starting_envs=sum(f.starting_envs for f in all_fragments),
            warmup_steps=sum(f.warmup_steps for f in all_fragments),
            acting_seconds=max(f.acting_seconds for f in all_fragments),
        )


class RolloutWorker:
    """Owns vector envs and a policy copy; steps them with given weights.

    Vector envs added in the background are built and warmed up (emulator
    start-up and 0-500 random steps: seconds for a few Atari envs) on a
    thread of their own while the worker keeps stepping its other envs; ALE
    releases the GIL, so both make progress. A new vector env joins the batch
    at the first rollout after it is ready: gymnasium's inside the worker's
    vector env (``VectorEnv.absorb``), so a grown pool steps as one built at
    its size would.
    """

    def __init__(self, env: EnvConfig, pool: PoolConfig, network: tuple[str, int], spec: EnvSpec, seed: int,
                 torch_threads: int | None = None, inference_rows: int = 1, vectors_at_once: bool = False) -> None:
        """``env``: the environments it builds; ``pool``: its forward passes' precision and layout; ``network``:
        the agent's (name, MLP width), the policy it runs (``of_run`` takes all three from a run's config)."""
        if torch_threads:  # an actor process: one core per worker; the learner has its own
            torch.set_num_threads(torch_threads)
        # Step ALE's vector envs at once, each on its own emulator thread (one process with every core), or
        # one after the other (an actor of one core, whose other cores are the other actors'). Gymnasium's
        # vector envs step in this thread either way.
        self.vectors_at_once = vectors_at_once
        self.env, self.pool = env, pool
        self.spec = spec
        self.vector_envs: list[VectorEnv] = []
        self.starting: list[tuple[Future[VectorEnv], int]] = []  # (being built, its env count), oldest first
        self.builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="env-builder")
        self.policy = build_network(spec, *network)
        self.policy.requires_grad_(False)
        self.inference = self._choose_inference(inference_rows)
        self.policy = inference_model(self.policy, self.inference.precision, self.inference.channels_last)
        self.generator = torch.Generator().manual_seed(seed)

    @classmethod
    def of_run(cls, cfg: Config, spec: EnvSpec, seed: int, **options: Any) -> RolloutWorker:
        """A worker with the sections of the run's config it reads."""
        return cls(cfg.env, cfg.pool, (cfg.agent.network, cfg.agent.mlp_hidden), spec, seed, **options)

    def _choose_inference(self, rows: int) -> InferenceChoice:
        """The actor's precision and layout: timed here, on this node, on batches of ``rows``, or as set."""
        if self.pool.actor_precision == "auto":
            obs = torch.from_numpy(sample_observations(self.spec, max(1, rows)))
            return choose_inference(self.policy, obs)
        channels_last = self.pool.actor_channels_last and has_convolutions(self.policy)
        return InferenceChoice(self.pool.actor_precision, channels_last, {}, {}, "set")

    def inference_choice(self) -> InferenceChoice:
        return self.inference

    def _forward(self, obs: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return network_forward(self.policy, torch.from_numpy(obs), self.inference.precision == "bf16",
                               self.inference.channels_last)

    def add_vector_env(self, env_ids: list[int], seed: int, background: bool = False) -> int:
        """Add a vector env; returns the random warm-up steps it took (0 while in the background)."""
        return self.resize([(env_ids, seed)], 0, background)

    def _keep(self, venvs: list[VectorEnv]) -> None:
        """Step ``venvs`` from the next rollout on: gymnasium's inside the newest vector env, taken in at
        once (one call a step for all; ~50 us an environment to take in, so never one by one), ALE's each
        as one of its own (each steps on its own emulator thread)."""
        joining = [v for v in venvs if not v.native]
        self.vector_envs.extend(v for v in venvs if v.native)
        if joining and not self.vector_envs:
            self.vector_envs.append(joining.pop(0))
        if joining:
            self.vector_envs[-1].absorb(joining)

    def resize(self, adds: list[tuple[list[int], int]], removes: int, background: bool) -> int:
        """Remove ``removes`` vector envs, then add ``adds`` (env ids, seed); one call per resize.

        One call, not one per vector env: a builder thread that holds the GIL
        while an emulator starts would otherwise delay every later call.
        Returns the random warm-up steps of the envs built in the call.
        """
        self.remove_vector_envs(removes)
        if background:
            self.starting += [(self.builder.submit(VectorEnv, self.env, ids, seed), len(ids)) for ids, seed in adds]
            return 0
        built = [VectorEnv(self.env, ids, seed) for ids, seed in adds]
        self._keep(built)
        return sum(v.warmup_steps for v in built)

    def remove_vector_env(self) -> list[int]:
        """Close the newest vector env; its env ids (none for one still starting)."""
        return self.remove_vector_envs(1)

    def remove_vector_envs(self, count: int) -> list[int]:
        """Close the newest ``count`` vector envs, those still starting first (of gymnasium's, the last
        ``vector_size`` environments each of the vector env that took them in); unfinished episodes are
        dropped. Returns the closed env ids."""
        for _ in range(min(count, len(self.starting))):
            future, _ = self.starting.pop()
            future.add_done_callback(_close_when_built)
            count -= 1
        closed: list[int] = []
        envs_left = count * self.env.vector_size
        while envs_left > 0:
            newest = self.vector_envs[-1]
            if newest.n > envs_left:  # gymnasium's, holding the vector envs it took in: closed in one call
                return newest.close_last(envs_left) + closed
            self.vector_envs.pop().close()
            closed = newest.env_ids.tolist() + closed
            envs_left -= newest.n
        return closed

    def _join_ready(self) -> int:
        """Move built vector envs into the batch, in the order they were asked for."""
        ready = []
        while self.starting and self.starting[0][0].done():
            ready.append(self.starting.pop(0)[0].result())  # a build error surfaces here
        self._keep(ready)
        return sum(v.warmup_steps for v in ready)

    def env_ids(self) -> list[int]:
        return [int(i) for v in self.vector_envs for i in v.env_ids]

    def reseed_actions(self, seed: int) -> None:
        """Draw actions from here on from a generator seeded by ``seed``."""
        self.generator.manual_seed(seed)

    def pid(self) -> int:
        """This worker's process id (a Ray actor's own process)."""
        return os.getpid()

    def _act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        logits, value = self._forward(obs)
        action, log_prob = sample_actions(logits, self.generator)
        return action.numpy(), log_prob.numpy(), value.numpy()

    def _step_all(self, spans: list[tuple[VectorEnv, int, int]], actions: np.ndarray) -> list[Step]:
        """One step of every vector env: ALE's all sent before any is received where ``vectors_at_once``
        (each emulates on its own thread), else one after the other."""
        if not self.vectors_at_once:
            return [venv.step(actions[lo:hi]) for venv, lo, hi in spans]
        try:
            for venv, lo, hi in spans:
                venv.send(actions[lo:hi])
            return [venv.receive() for venv, _, _ in spans]
        except BaseException:
            for venv, _, _ in spans:  # every one, whatever one of them raises: the first error is the one
                with contextlib.suppress(BaseException):
                    venv.abandon()
            raise

    @torch.no_grad()
    def rollout(self, weights: np.ndarray, n_steps: int) -> Batch:
        start = time.perf_counter()
        joined_warmup = self._join_ready()
        # One flat float32 vector: a single zero-copy object in Ray's store.
        load_flat_weights(self.policy, weights)
        n = sum(v.n for v in self.vector_envs)
        obs_buf = np.empty((n_steps, n, *self.spec.obs_shape), dtype=self.spec.obs_dtype)
        actions = np.empty((n_steps, n), dtype=np.int64)
        rewards = np.empty((n_steps, n), dtype=np.float32)
        terminated = np.empty((n_steps, n), dtype=bool)
        truncated = np.empty((n_steps, n), dtype=bool)
        truncation_values = np.zeros((n_steps, n), dtype=np.float32)
        values = np.empty((n_steps, n), dtype=np.float32)
        logprobs = np.empty((n_steps, n), dtype=np.float32)
        episodes: list[Episode] = []
        bounds = np.cumsum([0] + [v.n for v in self.vector_envs])
        obs = np.concatenate([v.obs for v in self.vector_envs]) if n else obs_buf[0]
        spans = list(zip(self.vector_envs, bounds[:-1], bounds[1:], strict=True))
        for t in range(n_steps if n else 0):  # a worker whose envs are all starting returns no columns
            obs_buf[t] = obs
            actions[t], logprobs[t], values[t] = self._act(obs)
            for (_, lo, hi), step in zip(spans, self._step_all(spans, actions[t]), strict=True):
                rewards[t, lo:hi] = step.reward
                terminated[t, lo:hi] = step.terminated
                truncated[t, lo:hi] = step.truncated
                episodes.extend(step.episodes)
                if step.final_obs is not None:
                    # Bootstrap through time-limit truncation (Baselines treats it as terminal).
                    rows = lo + np.flatnonzero(step.truncated)
                    truncation_values[t, rows] = self._forward(step.final_obs)[1].numpy()
            obs = np.concatenate([v.obs for v in self.vector_envs]) if n else obs
        bootstrap = self._forward(obs)[1].numpy() if n else np.zeros(0, np.float32)
        return Batch(obs_buf, actions, rewards, terminated, truncated, truncation_values,
                     values, logprobs, bootstrap.astype(np.float32),
                     np.asarray(self.env_ids(), dtype=np.int64), episodes,
                     starting_envs=sum(n for _, n in self.starting), warmup_steps=joined_warmup,
                     acting_seconds=time.perf_counter() - start)

    def close(self) -> None:
        for future, _ in self.starting:
            future.add_done_callback(_close_when_built)
        self.starting = []
        self.builder.shutdown(wait=False, cancel_futures=True)
        for venv in self.vector_envs:
            venv.close()
        self.vector_envs = []


def _close_when_built(future: Future[VectorEnv]) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().close()


@dataclass
class ResizeReport:
    seconds: float
    warmup_steps: int  # random warm-up steps of environments built during the call


class Pool:
    """Placement bookkeeping shared by the serial and the Ray pool."""

    def __init__(self, cfg: Config, n_workers: int) -> None:
        self.cfg = cfg
        self.vector_size = cfg.env.vector_size
        self.vector_envs_per_worker: list[int] = [0] * n_workers
        # Elastic (--envs-per-actor K): ceil(n_envs / K) workers, added and retired as the
        # batch changes; 0: the workers given here, whatever the batch.
        self.max_vector_envs = cfg.pool.envs_per_actor // cfg.env.vector_size
        self.next_env_id = 0
        self.warmup_steps = 0
        self._rollout: Any = None  # the rollout started and not yet collected

    @property
    def n_envs(self) -> int:
        return sum(self.vector_envs_per_worker) * self.vector_size

    def resize(self, n_envs: int, background: bool = False) -> ResizeReport:
        """Grow or shrink to ``n_envs``.

        With ``background`` new environments are built and warmed up by their
        worker while training goes on, and join the batch when ready (a few
        updates later); the call only waits for the workers to take the order.
        """
        self._check_size(n_envs)
        start = time.perf_counter()
        delta = (n_envs - self.n_envs) // self.vector_size
        counts = self.vector_envs_per_worker
        adds = self._place(n_envs, max(delta, 0))
        removes: list[int] = []
        for _ in range(max(-delta, 0)):
            # Elastic pools empty their last workers, which then retire; fixed ones stay balanced.
            w = max(i for i, c in enumerate(counts) if c) if self.max_vector_envs else int(np.argmax(counts))
            removes.append(w)
            counts[w] -= 1
        warmup = self._apply(adds, removes, background)
        self.warmup_steps += warmup
        return ResizeReport(time.perf_counter() - start, warmup)

    def restart(self, n_envs: int, seed: int) -> int:
        """``n_envs`` new environments in place of all the pool has, seeded from ``seed`` alone, and every
        worker's action draws reseeded from it: whatever ran before, the pool then steps as it would
        for any other caller with the same seed and weights (common random numbers for the races
        of ``rlscale measure``, which each start like a fork sweep's run: on new environments). Episodes
        under way are dropped; returns the new environments' random warm-up steps."""
        if self.in_flight:
            raise RuntimeError("a rollout is in flight; collect it before restarting the environments")
        self._check_size(n_envs)
        # Every environment goes and n_envs new ones come, in one order to the workers (each
        # builds only its new ones); placed as a resize from nothing would place them.
        removes = [w for w, count in enumerate(self.vector_envs_per_worker) for _ in range(count)]
        self.vector_envs_per_worker = [0] * len(self.vector_envs_per_worker)
        vectors = n_envs // self.vector_size
        # One seed per vector env, from ``seed`` and its place alone; under 2**31 once each env i of
        # a vector env adds i (MinAtar's and ALE's environments take no larger).
        seeds = np.random.SeedSequence(seed).generate_state(vectors) % (2**31 - self.vector_size)
        adds = [(w, ids, int(s)) for (w, ids, _), s in zip(self._place(n_envs, vectors), seeds, strict=True)]
        warmup = self._apply(adds, removes, background=False)
        self._reseed_actions(seed)
        self.warmup_steps += warmup
        return warmup

    def _reseed_actions(self, seed: int) -> None:
        """Reseed each worker's action generator from ``seed`` (worker w: seed + w)."""
        raise NotImplementedError

    def _check_size(self, n_envs: int) -> None:
        """A pool's size is a positive number of whole vector envs."""
        if n_envs % self.vector_size or n_envs <= 0:
            raise ValueError(f"n_envs {n_envs} is not a positive multiple of {self.vector_size}")

    def _place(self, n_envs: int, vectors: int) -> list[tuple[int, list[int], int]]:
        """Where ``vectors`` new vector envs go in a pool of ``n_envs`` (worker, env ids, seed), counted in
        ``vector_envs_per_worker``: the emptiest worker first; an elastic pool starts the workers
        ``n_envs`` needs first, and they are empty."""
        counts = self.vector_envs_per_worker
        if self.max_vector_envs:
            while len(counts) < self.workers_for(n_envs):
                counts.append(0)
                self._add_worker()
        adds = []
        for _ in range(vectors):
            w = int(np.argmin(counts))
            adds.append((w, *self._new_vector_ids()))
            counts[w] += 1
        return adds

    def workers_for(self, n_envs: int) -> int:
        """Workers an elastic pool keeps for ``n_envs`` environments (at most K each)."""
        return max(1, -(-n_envs // (self.max_vector_envs * self.vector_size)))

    def _add_worker(self) -> None:
        """Start one more worker (the last index); elastic pools only."""
        raise NotImplementedError(f"{type(self).__name__} has a fixed set of workers")

    def _new_vector_ids(self) -> tuple[list[int], int]:
        """Env ids for a new vector env (never reused) and its seed."""
        ids = list(range(self.next_env_id, self.next_env_id + self.vector_size))
        self.next_env_id += self.vector_size
        return ids, self.cfg.run.seed * 1_000_003 + ids[0]

    def _apply(self, adds: list[tuple[int, list[int], int]], removes: list[int], background: bool) -> int:
        raise NotImplementedError

    @property
    def in_flight(self) -> bool:
        """A rollout was started and not yet collected."""
        return self._rollout is not None

    def start(self, weights: np.ndarray) -> None:
        """Begin one rollout of n_steps by every environment with these flat weights.

        The workers step while this process goes on (the Ray pool; the serial
        pool steps only when collected), so the learner can train on the
        previous batch meanwhile: a policy lag of one update.
        """
        if self._rollout is not None:
            raise RuntimeError("a rollout is already in flight; collect it first")
        self._rollout = (self._start(weights), weights)

    def collect(self, weights: np.ndarray | None = None) -> Batch:
        """The rollout in flight, or one started now with ``weights``."""
        if self._rollout is None:
            if weights is None:
                raise RuntimeError("no rollout in flight: collect needs the weights to start one")
            self.start(weights)
        (rollout, weights), self._rollout = self._rollout, None
        batch = self._finish(rollout)
        # A shrink can close the last running envs while others still start: wait for them.
        while batch.n_envs == 0 and batch.starting_envs > 0:
            time.sleep(0.05)
            batch = self._finish(self._start(weights))
        return batch

    def _start(self, weights: np.ndarray) -> Any:
        """Order a rollout; returns what ``_finish`` needs to collect it."""
        raise NotImplementedError

    def _finish(self, rollout: Any) -> Batch:
        raise NotImplementedError

    def describe(self) -> str:
        """Where the workers run, for the run's header line."""
        raise NotImplementedError

    def inference(self) -> list[InferenceChoice]:
        """How each running worker runs its policy (precision and layout)."""
        raise NotImplementedError

    def describe_inference(self) -> str:
        """The workers' inference choices for the header line."""
        return describe_inference(self.inference())

    def close(self) -> None:
        raise NotImplementedError


class SerialPool(Pool):
    """The whole pool in this process: one worker, no Ray."""

    def __init__(self, cfg: Config, spec: EnvSpec) -> None:
        super().__init__(cfg, 1)
        self.worker = RolloutWorker.of_run(cfg, spec, seed=cfg.run.seed, inference_rows=cfg.env.n_envs,
                                           vectors_at_once=True)
        self.resize(cfg.env.n_envs)

    def _apply(self, adds, removes, background) -> int:
        return self.worker.resize([(ids, seed) for _, ids, seed in adds], len(removes), background)

    def _reseed_actions(self, seed: int) -> None:
        self.worker.reseed_actions(seed)

    def _start(self, weights: np.ndarray) -> np.ndarray:
        return weights.copy()  # one process: the rollout runs when collected, with these weights

    def _finish(self, rollout: np.ndarray) -> Batch:
        return self.worker.rollout(rollout, self.cfg.agent.n_steps)

    def describe(self) -> str:
        return "serial (no Ray)"

    def inference(self) -> list[InferenceChoice]:
        return [self.worker.inference]

    def close(self) -> None:
        self.worker.close()
