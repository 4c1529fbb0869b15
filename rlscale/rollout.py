"""The rollout pool: workers that own environments and a policy copy.

The only module that imports Ray. One update is: the learner's weights go
into the object store once, every worker steps all its environments
``n_steps`` times with them, and the fragments come back as one batch that
keeps each observation's environment id (the learner groups its gradient by
environment). ``SerialPool`` runs the same worker code in this process, for
debugging and small tests; ``RayPool`` runs one worker per Ray actor.

Environments come in vector envs of ``vector_size``; the pool grows by
adding vector envs to the least loaded workers and shrinks by closing the
newest ones on the most loaded workers. Removed environments drop their
unfinished episode; finished episodes are delivered with the fragment of the
update in which they finished, so none is lost or counted twice.
"""

from __future__ import annotations

import os
import socket
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch

from rlscale.config import Config
from rlscale.env import EnvGroup, EnvSpec, Episode
from rlscale.errors import UserError
from rlscale.nets import build_network


def flat_weights(model: torch.nn.Module) -> np.ndarray:
    """The model's parameters as one float32 vector (what the pool broadcasts)."""
    # reshape, not view: channels-last weights are not contiguous; reshape copies them
    # in logical (NCHW) order, which is the order vector_to_parameters fills.
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu().numpy()


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

    @staticmethod
    def concat(fragments: list[Batch]) -> Batch:
        all_fragments = fragments
        fragments = [f for f in fragments if f.n_envs > 0] or fragments[:1]
        names = ["obs", "actions", "rewards", "terminated", "truncated", "truncation_values",
                 "values", "logprobs"]
        arrays = {n: np.concatenate([getattr(f, n) for f in fragments], axis=1) for n in names}
        return Batch(
            **arrays,
            bootstrap_values=np.concatenate([f.bootstrap_values for f in fragments]),
            env_ids=np.concatenate([f.env_ids for f in fragments]),
            episodes=[e for f in fragments for e in f.episodes],
            starting_envs=sum(f.starting_envs for f in all_fragments),
            warmup_steps=sum(f.warmup_steps for f in all_fragments),
        )


class RolloutWorker:
    """Owns vector envs and a policy copy; steps them with given weights.

    Vector envs added in the background are built and warmed up (emulator
    start-up and 0-500 random steps: seconds for a few Atari envs) on a
    thread of their own while the worker keeps stepping its other envs; ALE
    releases the GIL, so both make progress. A new vector env joins the batch
    at the first rollout after it is ready.
    """

    def __init__(self, cfg: Config, spec: EnvSpec, seed: int, torch_threads: int | None = None) -> None:
        if torch_threads:  # an actor process: one core per worker; the learner has its own
            torch.set_num_threads(torch_threads)
        self.cfg = cfg
        self.spec = spec
        self.groups: list[EnvGroup] = []
        self.starting: list[tuple[Future[EnvGroup], int]] = []  # (being built, its env count), oldest first
        self.builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="env-builder")
        self.policy = build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden)
        self.policy.requires_grad_(False)
        self.generator = torch.Generator().manual_seed(seed)

    def add_group(self, env_ids: list[int], seed: int, background: bool = False) -> int:
        """Add a vector env; returns the random warm-up steps it took (0 while in the background)."""
        if background:
            self.starting.append((self.builder.submit(EnvGroup, self.cfg.env, env_ids, seed), len(env_ids)))
            return 0
        group = EnvGroup(self.cfg.env, env_ids, seed)
        self.groups.append(group)
        return group.warmup_steps

    def resize_groups(self, adds: list[tuple[list[int], int]], removes: int, background: bool) -> int:
        """Remove ``removes`` vector envs, then add ``adds`` (env ids, seed); one call per resize.

        One call, not one per vector env: a builder thread that holds the GIL
        while an emulator starts would otherwise delay every later call.
        """
        for _ in range(removes):
            self.remove_group()
        return sum(self.add_group(ids, seed, background) for ids, seed in adds)

    def remove_group(self) -> list[int]:
        """Close the newest vector env (one still starting first); unfinished episodes are dropped."""
        if self.starting:
            future, _ = self.starting.pop()
            future.add_done_callback(_close_when_built)
            return []
        group = self.groups.pop()
        group.close()
        return group.env_ids.tolist()

    def _join_ready(self) -> int:
        """Move built vector envs into the batch, in the order they were asked for."""
        warmup = 0
        while self.starting and self.starting[0][0].done():
            group = self.starting.pop(0)[0].result()  # a build error surfaces here
            self.groups.append(group)
            warmup += group.warmup_steps
        return warmup

    def env_ids(self) -> list[int]:
        return [int(i) for g in self.groups for i in g.env_ids]

    def peak_rss_mb(self) -> float:
        """Peak resident memory of this process (Linux reports KB)."""
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def node_id(self) -> str:
        """The Ray node this worker runs on ('' outside Ray); also a readiness probe."""
        try:
            import ray

            return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
        except ImportError:
            return ""

    def _act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        logits, value = self.policy(torch.from_numpy(obs))
        dist = torch.distributions.Categorical(logits=logits)
        action = torch.multinomial(dist.probs, 1, generator=self.generator).squeeze(1)
        return action.numpy(), dist.log_prob(action).numpy(), value.numpy()

    @torch.no_grad()
    def rollout(self, weights: np.ndarray, n_steps: int) -> Batch:
        joined_warmup = self._join_ready()
        # One flat float32 vector: a single zero-copy object in Ray's store.
        torch.nn.utils.vector_to_parameters(torch.from_numpy(weights.copy()), self.policy.parameters())
        n = sum(g.n for g in self.groups)
        obs_buf = np.empty((n_steps, n, *self.spec.obs_shape), dtype=self.spec.obs_dtype)
        actions = np.empty((n_steps, n), dtype=np.int64)
        rewards = np.empty((n_steps, n), dtype=np.float32)
        terminated = np.empty((n_steps, n), dtype=bool)
        truncated = np.empty((n_steps, n), dtype=bool)
        truncation_values = np.zeros((n_steps, n), dtype=np.float32)
        values = np.empty((n_steps, n), dtype=np.float32)
        logprobs = np.empty((n_steps, n), dtype=np.float32)
        episodes: list[Episode] = []
        bounds = np.cumsum([0] + [g.n for g in self.groups])
        obs = np.concatenate([g.obs for g in self.groups]) if n else obs_buf[0]
        for t in range(n_steps if n else 0):  # a worker whose envs are all starting returns no columns
            obs_buf[t] = obs
            actions[t], logprobs[t], values[t] = self._act(obs)
            for g, lo, hi in zip(self.groups, bounds[:-1], bounds[1:], strict=True):
                step = g.step(actions[t, lo:hi])
                rewards[t, lo:hi] = step.reward
                terminated[t, lo:hi] = step.terminated
                truncated[t, lo:hi] = step.truncated
                episodes.extend(step.episodes)
                if step.final_obs is not None:
                    # Bootstrap through time-limit truncation (Baselines treats it as terminal).
                    rows = lo + np.flatnonzero(step.truncated)
                    truncation_values[t, rows] = self.policy(torch.from_numpy(step.final_obs))[1].numpy()
            obs = np.concatenate([g.obs for g in self.groups]) if n else obs
        bootstrap = self.policy(torch.from_numpy(obs))[1].numpy() if n else np.zeros(0, np.float32)
        return Batch(obs_buf, actions, rewards, terminated, truncated, truncation_values,
                     values, logprobs, bootstrap.astype(np.float32),
                     np.asarray(self.env_ids(), dtype=np.int64), episodes,
                     starting_envs=sum(n for _, n in self.starting), warmup_steps=joined_warmup)

    def close(self) -> None:
        for future, _ in self.starting:
            future.add_done_callback(_close_when_built)
        self.starting = []
        self.builder.shutdown(wait=False, cancel_futures=True)
        for g in self.groups:
            g.close()
        self.groups = []


def _close_when_built(future: Future[EnvGroup]) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().close()


@dataclass
class ResizeReport:
    n_envs_before: int
    n_envs_after: int
    seconds: float
    warmup_steps: int


class _Pool:
    """Placement bookkeeping shared by the serial and the Ray pool."""

    def __init__(self, cfg: Config, n_workers: int) -> None:
        self.cfg = cfg
        self.vector_size = cfg.env.vector_size
        self.worker_groups: list[int] = [0] * n_workers  # vector envs per worker
        self.next_env_id = 0
        self.warmup_steps = 0

    @property
    def n_envs(self) -> int:
        return sum(self.worker_groups) * self.vector_size

    def resize(self, n_envs: int, background: bool = False) -> ResizeReport:
        """Grow or shrink to ``n_envs``.

        With ``background`` new environments are built and warmed up by their
        worker while training goes on, and join the batch when ready (a few
        updates later); the call only waits for the workers to take the order.
        """
        if n_envs % self.vector_size or n_envs <= 0:
            raise ValueError(f"n_envs {n_envs} is not a positive multiple of {self.vector_size}")
        start, before = time.perf_counter(), self.n_envs
        delta = (n_envs - before) // self.vector_size
        adds: list[tuple[int, list[int], int]] = []
        removes: list[int] = []
        for _ in range(max(delta, 0)):
            w = int(np.argmin(self.worker_groups))
            adds.append((w, *self._new_vector_ids()))
            self.worker_groups[w] += 1
        for _ in range(max(-delta, 0)):
            w = int(np.argmax(self.worker_groups))
            removes.append(w)
            self.worker_groups[w] -= 1
        warmup = self._apply(adds, removes, background)
        self.warmup_steps += warmup
        return ResizeReport(before, self.n_envs, time.perf_counter() - start, warmup)

    def _new_vector_ids(self) -> tuple[list[int], int]:
        """Env ids for a new vector env (never reused) and its seed."""
        ids = list(range(self.next_env_id, self.next_env_id + self.vector_size))
        self.next_env_id += self.vector_size
        return ids, self.cfg.run.seed * 1_000_003 + ids[0]

    def _apply(self, adds: list[tuple[int, list[int], int]], removes: list[int], background: bool) -> int:
        raise NotImplementedError

    def collect(self, weights: np.ndarray) -> Batch:
        """One rollout of n_steps by every environment with the given flat weights."""
        batch = self._collect_once(weights)
        # A shrink can close the last running envs while others still start: wait for them.
        while batch.n_envs == 0 and batch.starting_envs > 0:
            time.sleep(0.05)
            batch = self._collect_once(weights)
        return batch

    def _collect_once(self, weights: np.ndarray) -> Batch:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SerialPool(_Pool):
    """The whole pool in this process: one worker, no Ray."""

    def __init__(self, cfg: Config, spec: EnvSpec) -> None:
        super().__init__(cfg, 1)
        self.worker = RolloutWorker(cfg, spec, seed=cfg.run.seed)
        self.resize(cfg.env.n_envs)

    def _apply(self, adds, removes, background) -> int:
        return self.worker.resize_groups([(ids, seed) for _, ids, seed in adds], len(removes), background)

    def _collect_once(self, weights: np.ndarray) -> Batch:
        return self.worker.rollout(weights, self.cfg.agent.n_steps)

    def describe(self) -> str:
        return "serial (no Ray)"

    def close(self) -> None:
        self.worker.close()


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Ray retries an unreachable GCS for minutes; a plain TCP probe fails in seconds."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--address must be auto or HOST:PORT, got '{address}'")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as err:
        raise UserError(
            f"cannot reach a Ray cluster at {address} ({err.strerror or err}); start one with "
            "'ray start --head' or drop --address to run on this machine"
        ) from None


def init_ray(address: str) -> None:
    """Start an embedded Ray, or join the cluster at ``address``."""
    import ray

    if ray.is_initialized():
        return
    if address and address != "auto":
        _check_reachable(address)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        if address:
            ray.init(address=address, logging_level="ERROR", log_to_driver=True)
        else:
            ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=True)
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = f"at '{address}'" if address else "embedded"
        raise UserError(
            f"cannot start or reach Ray {where} ({str(err).splitlines()[0]}); "
            "check the address, or drop --address to run on this machine"
        ) from None


def actor_cpu_share(node_cpus: list[float], n_actors: int) -> float:
    """The largest share 1/m of a CPU (at most 1) such that n_actors of them fit on the nodes.

    Equal fractional shares must pack node by node: three 1-CPU nodes hold
    four actors at 1/2 CPU each, not at 3/4 (only one 3/4 fits on a node).
    """
    for m in range(1, n_actors + 1):
        if sum(int(c * m + 1e-9) for c in node_cpus) >= n_actors:
            return 1.0 / m
    return 1.0 / n_actors  # no CPUs reported at all: let Ray queue them


def _alive_node_cpus() -> list[float]:
    import ray

    return [n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")]


class RayPool(_Pool):
    """One RolloutWorker per Ray actor, spread over the cluster's nodes.

    A worker that dies (killed, out of memory, an environment crash, its node
    lost) is replaced by a new actor with fresh environments (new ids; the
    dead ones' unfinished episodes are lost) and only its part of the update
    is collected again, so the update keeps its full batch and the surviving
    workers' fragments, finished episodes included, are kept.
    """

    PLACEMENT_TIMEOUT = 10.0  # seconds a replacement actor may wait for a CPU

    def __init__(self, cfg: Config, spec: EnvSpec) -> None:
        import ray

        super().__init__(cfg, cfg.run.n_actors)
        self.owns_ray = not ray.is_initialized()  # shut down on close only what we started
        init_ray(cfg.run.address)
        # Honest resources: a worker keeps one core busy while it steps; where
        # there are fewer cores than workers they share them, in equal shares
        # that pack onto the nodes (see actor_cpu_share).
        self.actor_cpus = actor_cpu_share(_alive_node_cpus(), cfg.run.n_actors)
        self.spec = spec
        self.failures = 0
        self.unconfirmed: list = []  # background resize orders not yet confirmed
        self.actors = [self._new_actor(i) for i in range(cfg.run.n_actors)]
        self.resize(cfg.env.n_envs)

    def _new_actor(self, index: int, cpus: float | None = None):
        import ray

        remote = ray.remote(RolloutWorker).options(
            num_cpus=self.actor_cpus if cpus is None else cpus, scheduling_strategy="SPREAD",
            max_restarts=0)
        seed = self.cfg.run.seed * 7919 + index + 1_000 * self.failures
        return remote.remote(self.cfg, self.spec, seed, 1)

    def describe(self) -> str:
        nodes = len(set(self.placement()))
        return (f"{len(self.actors)} Ray actors on {nodes} node{'s' if nodes > 1 else ''} "
                f"({self.actor_cpus:.2g} CPU each)")

    def placement(self) -> list[str]:
        """The node id of each actor."""
        import ray

        return ray.get([actor.node_id.remote() for actor in self.actors])

    def _start_replacement(self, w: int):
        """A new actor for slot w, on whatever nodes are left.

        After a node is lost the surviving nodes' CPUs may all be reserved by
        the other actors. Then the replacement is started without a CPU
        reservation (it shares the survivors' cores, which is what running the
        same environments on fewer machines means) and the console says so.
        """
        import ray
        from ray.exceptions import GetTimeoutError

        actor = self._new_actor(w)
        try:
            ray.get(actor.node_id.remote(), timeout=self.PLACEMENT_TIMEOUT)
            return actor
        except GetTimeoutError:
            ray.kill(actor)
        print(f"no free CPU for a replacement rollout actor after {self.PLACEMENT_TIMEOUT:.0f} s; "
              "starting it without a CPU reservation on the nodes left", flush=True)
        actor = self._new_actor(w, cpus=0.0)
        try:
            ray.get(actor.node_id.remote(), timeout=6 * self.PLACEMENT_TIMEOUT)
        except GetTimeoutError:
            ray.kill(actor)
            raise ActorFailures("no node can take a replacement rollout actor; check the cluster") from None
        return actor

    def _apply(self, adds, removes, background) -> int:
        import ray

        refs = []
        for w, actor in enumerate(self.actors):
            mine = [(ids, seed) for worker, ids, seed in adds if worker == w]
            n_removes = removes.count(w)
            if mine or n_removes:
                refs.append(actor.resize_groups.remote(mine, n_removes, background))
        if background:
            # Not waited for: an actor runs its calls in order, so the order is taken
            # before its next rollout, and starting emulators hold the GIL of the actor
            # for a moment (ALE's constructor), which would otherwise block this loop.
            self.unconfirmed.extend(refs)
            return 0
        return sum(ray.get(refs))

    def _replace(self, w: int) -> None:
        """A new actor in slot w with as many fresh vector envs as the dead one had."""
        import ray

        self.failures += 1
        if self.failures > self.cfg.run.max_actor_failures:
            raise ActorFailures(
                f"{self.failures} rollout actor failures (limit --max-actor-failures "
                f"{self.cfg.run.max_actor_failures}); check the environment and memory"
            )
        print(f"rollout actor {w} died; replacing it ({self.failures} failures so far)", flush=True)
        self.actors[w] = self._start_replacement(w)
        adds = [self.actors[w].add_group.remote(*self._new_vector_ids())
                for _ in range(self.worker_groups[w])]
        self.warmup_steps += sum(ray.get(adds))

    def _collect_once(self, weights: np.ndarray) -> Batch:
        import ray
        from ray.exceptions import RayActorError

        weights_ref = ray.put(weights)  # broadcast once through the object store
        n_steps = self.cfg.agent.n_steps
        pending = {w: self.actors[w].rollout.remote(weights_ref, n_steps)
                   for w, groups in enumerate(self.worker_groups) if groups > 0}
        fragments: dict[int, Batch] = {}
        while pending:
            w, ref = next(iter(pending.items()))
            try:
                fragments[w] = ray.get(ref)
                del pending[w]
            except RayActorError:
                self._replace(w)
                pending[w] = self.actors[w].rollout.remote(weights_ref, n_steps)
        # Done by now (each ran before its actor's rollout); a dead actor's order is moot.
        unconfirmed, self.unconfirmed = self.unconfirmed, []
        for ref in unconfirmed:
            try:
                ray.get(ref)
            except RayActorError:
                pass
        return Batch.concat([fragments[w] for w in sorted(fragments)])

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()


class ActorFailures(UserError):
    """Too many rollout actors died: the run stops with a checkpoint."""


def make_pool(cfg: Config, spec: EnvSpec) -> _Pool:
    return SerialPool(cfg, spec) if cfg.run.serial else RayPool(cfg, spec)
