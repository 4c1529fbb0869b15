"""The Ray actor pool: one RolloutWorker per Ray actor, placement, resizing, failures.

The engine's Ray module for rollout actors (the learner actors of
``--learners`` are in ``ray_learners``, Ray Tune in ``sweep``, RLlib in
``integrations``; all start Ray through ``init_ray``/``ray_runtime`` here).
Every update the learner's weights go into the object store once and every
actor steps its environments with them; the bookkeeping of which worker holds
which vector envs is the Ray-free ``rollout.Pool``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError

from rlscale.config import Config
from rlscale.envs.vector import EnvSpec
from rlscale.errors import ActorFailures, UserError
from rlscale.models.precision import InferenceChoice
from rlscale.rollout.worker import Batch, Pool, RolloutWorker

RAY_ADDRESS_VARIABLE = "RAY_ADDRESS"  # Ray's own: the cluster ray.init() joins
RAY_LOGS = "/tmp/ray/session_latest/logs on each node"  # Ray's default place for them
NOTICES_FILE = "ray-notices.log"  # Ray's notices to the driver, in full, in the run directory


@dataclass
class RayNotices:
    """Ray's notices to the driver, one line each on the console and in full in a file.

    Ray's driver prints what the cluster reports (a node's raylet killed: its
    last 20 log lines, twice, and "marked dead" for the same node) from a
    listener thread every driver runs, whatever ``log_to_driver`` says: a lost
    node filled 64 console lines. The pool already says in one line what the
    loss means for the run, so each distinct notice becomes one line naming
    the file that has it in full. Ray offers no setting for this; the
    listener calls ``ray._private.worker.print_to_stdstream`` by name, so
    that is what is replaced (other output is handed to Ray's own printer; a
    Ray without that function keeps its own output).
    """

    original: Callable[..., None]
    path: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / NOTICES_FILE)
    seen: set[str] = field(default_factory=set)

    def __call__(self, data: dict, ignore_prefix: bool) -> None:
        if data.get("pid") != "raylet":
            self.original(data, ignore_prefix)
            return
        text = "\n".join(data.get("lines", []))
        with open(self.path, "a") as f:
            f.write(text.rstrip("\n") + "\n\n")
        headline = summary_line(text)
        if headline not in self.seen:
            self.seen.add(headline)
            print(f"Ray: {headline} (in full: {self.path})", file=sys.stdout, flush=True)


def summary_line(text: str, limit: int = 240) -> str:
    """A notice's first sentences up to ``limit`` characters (Ray's run to a paragraph and a log)."""
    first = text.strip().splitlines()[0].strip() if text.strip() else "(an empty notice)"
    if len(first) <= limit:
        return first
    cut = first.rfind(". ", 0, limit)
    return first[:cut + 1] if cut > 0 else first[:limit] + "…"


def route_ray_notices(path: Path | None) -> None:
    """Ray's notices to the driver go to ``path`` (default: the temp dir) and one console line each."""
    import ray._private.worker as ray_worker

    printer = getattr(ray_worker, "print_to_stdstream", None)
    if printer is None:
        return
    if not isinstance(printer, RayNotices):
        printer = RayNotices(printer)
        ray_worker.print_to_stdstream = printer
    if path is not None:
        printer.path = path


def _check_reachable(address: str, named_by: str, timeout: float = 5.0) -> None:
    """Ray retries an unreachable GCS for minutes; a plain TCP probe fails in seconds."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"{named_by} must be auto or HOST:PORT, got '{address}'")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as err:
        raise UserError(
            f"cannot reach a Ray cluster at {address} ({err.strerror or err}); start one with "
            f"'ray start --head' or {_drop(named_by)} to run on this machine"
        ) from None


def _drop(named_by: str) -> str:
    return f"unset {named_by}" if named_by.startswith("$") else f"drop {named_by}"


def cluster_address(address: str) -> tuple[str, str]:
    """(the cluster to join, what named it): --address, else $RAY_ADDRESS, else ("", "") to start
    a Ray of the run's own.

    A Ray job's entrypoint has $RAY_ADDRESS set by Ray to its cluster (``ray job submit``), so
    a job joins the cluster it was submitted to, as Ray's own ``ray.init()`` does. An http://
    $RAY_ADDRESS is the Jobs API's (Ray's docs export one for ``ray job submit``): not a
    cluster to join.
    """
    if address:
        return address, "--address"
    from_env = os.environ.get(RAY_ADDRESS_VARIABLE, "")
    if from_env and not from_env.startswith(("http://", "https://")):
        return from_env, f"${RAY_ADDRESS_VARIABLE}"
    return "", ""


def init_ray(address: str, log_to_driver: bool = True, notices: Path | None = None) -> bool:
    """Start an embedded Ray, or join the cluster at ``address`` (or $RAY_ADDRESS: ``cluster_address``);
    True when this call started it. Ray's notices go to ``notices`` (``RayNotices``)."""
    route_ray_notices(notices)
    if ray.is_initialized():
        return False
    address, named_by = cluster_address(address)
    if address and address != "auto":
        _check_reachable(address, named_by)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        with handlers_kept(signal.SIGINT, signal.SIGTERM):
            _start_or_join(address, log_to_driver)
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = f"at '{address}'" if address else "embedded"
        raise UserError(
            f"cannot start or reach Ray {where} ({str(err).splitlines()[0]}); "
            f"check the address, or {_drop(named_by or '--address')} to run on this machine"
        ) from None
    return True


@contextmanager
def handlers_kept(*signals: signal.Signals) -> Iterator[None]:
    """The handlers of ``signals`` that the process had set before the block, put back after it.

    ``ray.init`` replaces SIGTERM's with one that exits at once (``sys.exit``), and
    its core worker then prints a C++ stack for the signal: a run stopped by
    SIGTERM (``timeout``, ``kill``, a scheduler, a container's stop) ended
    without the checkpoint its own handler writes. A signal left at its default
    keeps Ray's handler (Ray's exit shuts Ray down). Only the main thread may set
    handlers (a Ray Tune trial runs in another one); one set outside Python
    (``getsignal`` gives None) cannot be put back.
    """
    main_thread = threading.current_thread() is threading.main_thread()
    before = {sig: signal.getsignal(sig) for sig in signals} if main_thread else {}
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler not in (None, signal.SIG_DFL):
                signal.signal(sig, handler)


def _start_or_join(address: str, log_to_driver: bool) -> None:
    if address:
        ray.init(address=address, logging_level="ERROR", log_to_driver=log_to_driver)
    else:
        # "local": a Ray of this run's own, even where another runs on this machine
        # (a second run, a test suite); without it ray.init joins that one.
        # Ray starts its workers at nice 15, below this driver: with --overlap the
        # learner then starved the rollout actors of CPU. They are the work, not
        # background tasks, so they run at the driver's priority (docs/performance.md).
        ray.init(address="local", include_dashboard=False, logging_level="ERROR",
                 log_to_driver=log_to_driver, _system_config={"worker_niceness": 0})


@contextmanager
def ray_runtime(address: str, log_to_driver: bool = True) -> Iterator[None]:
    """Ray for the duration of a block; shut down afterwards only if the block started it."""
    started = init_ray(address, log_to_driver)
    try:
        yield
    finally:
        if started and ray.is_initialized():
            ray.shutdown()


def notices_path(cfg: Config) -> Path | None:
    """Where Ray's notices to a run's driver go: its run directory's NOTICES_FILE."""
    return Path(cfg.run.run_dir) / NOTICES_FILE if cfg.run.run_dir else None


def actor_cpu_share(node_cpus: list[float], n_actors: int) -> float:
    """The largest share 1/m of a CPU (at most 1) such that n_actors of them fit on the nodes.

    Equal fractional shares must pack node by node: three 1-CPU nodes hold
    four actors at 1/2 CPU each, not at 3/4 (only one 3/4 fits on a node).
    """
    for m in range(1, n_actors + 1):
        if sum(int(c * m + 1e-9) for c in node_cpus) >= n_actors:
            return 1.0 / m
    return 1.0 / n_actors  # no CPUs reported at all: let Ray queue them


def ray_running() -> bool:
    """Whether this process already runs Ray (a sweep's trial, a test's, a user's own)."""
    return ray.is_initialized()


def this_node() -> str:
    """The Ray node id of the calling process (inside an actor: where it was placed)."""
    return ray.get_runtime_context().get_node_id()


def _alive_node_cpus() -> list[float]:
    return [n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")]


class RayWorker(RolloutWorker):
    """A RolloutWorker that can say which Ray node it runs on."""

    def node_id(self) -> str:
        """The Ray node of this actor; also a readiness probe."""
        return this_node()


@dataclass
class _Rollout:
    """A rollout ordered from the actors and not yet collected."""

    weights_ref: ray.ObjectRef  # the weights it runs with (an actor that dies reruns with them)
    pending: dict[int, ray.ObjectRef]  # worker index -> its fragment
    resize_orders: list[ray.ObjectRef]  # background resize orders that run before it
    waiting_envs: int = 0  # environments of actors still waiting for a CPU (not in this rollout)


class RayPool(Pool):
    """One RolloutWorker per Ray actor, spread over the cluster's nodes.

    A worker that dies (killed, out of memory, an environment crash, its node
    lost) is replaced by a new actor with fresh environments (new ids; the
    dead ones' unfinished episodes are lost) and only its part of the update
    is collected again, so the update keeps its full batch and the surviving
    workers' fragments, finished episodes included, are kept.
    """

    PLACEMENT_TIMEOUT = 10.0  # seconds a replacement actor may wait for a CPU
    WAITING_NOTICE = 10.0  # seconds after which an elastic pool says an actor waits for a CPU

    def __init__(self, cfg: Config, spec: EnvSpec) -> None:
        super().__init__(cfg, cfg.pool.n_actors)
        elastic = self.max_vector_envs > 0
        if elastic:
            self.vector_envs_per_worker = [0] * self.workers_for(cfg.env.n_envs)
        n_actors = len(self.vector_envs_per_worker)
        # Shut down on close only what we started. The actors print nothing a user needs
        # (the driver says what happens); forwarding their output brought a dying node's
        # C++ stack traces (~70 lines) into the console. They stay in Ray's log files.
        self.owns_ray = init_ray(cfg.run.address, log_to_driver=False, notices=notices_path(cfg))
        self.actors: list = []
        self.actor_cpus = 1.0  # set again once the nodes are known; close() reads it
        try:
            self._start_actors(cfg, spec, n_actors, elastic)
        except BaseException:  # a pool that fails to start leaves no actors and no Ray of its own behind
            with contextlib.suppress(Exception):
                self.close()
            raise

    def _start_actors(self, cfg: Config, spec: EnvSpec, n_actors: int, elastic: bool) -> None:
        # Honest resources: a worker keeps one core busy while it steps; where
        # there are fewer cores than workers they share them, in equal shares
        # that pack onto the nodes (see actor_cpu_share). An elastic pool's actors
        # each ask for a whole CPU: that is the demand the autoscaler answers.
        self.actor_cpus = 1.0 if elastic else actor_cpu_share(_alive_node_cpus(), n_actors)
        self.spec = spec
        self.failures = 0
        self.unconfirmed: list[tuple[int, ray.ObjectRef]] = []  # (worker, background resize order)
        for i in range(n_actors):  # one by one into the list: a failure part-way leaves close() the ones started
            self.actors.append(self._new_actor(i))
        self.placed = [actor.node_id.remote() for actor in self.actors]  # ready once the actor runs
        self.ready: set[int] = set()
        self.started_at = [time.monotonic()] * n_actors  # when each actor was asked for
        self.waiting_said: set[int] = set()
        self._request_cpus()
        if elastic:  # the actors that get a CPU soon start with their environments built
            ray.wait(self.placed, num_returns=n_actors, timeout=self.PLACEMENT_TIMEOUT)
        self.resize(cfg.env.n_envs)

    def _new_actor(self, index: int, cpus: float | None = None):
        remote = ray.remote(RayWorker).options(
            num_cpus=self.actor_cpus if cpus is None else cpus, scheduling_strategy="SPREAD",
            max_restarts=0)
        seed = self.cfg.run.seed * 7919 + index + 1_000 * self.failures
        c = self.cfg  # each actor gets the sections its worker reads
        return remote.remote(c.env, c.pool, (c.agent.network, c.agent.mlp_hidden), self.spec, seed, 1, self.inference_rows)

    @property
    def inference_rows(self) -> int:
        """The rows of an actor's forward pass at the starting batch (what its precision is timed on)."""
        n_envs = self.cfg.env.n_envs
        if self.max_vector_envs:
            return min(n_envs, self.cfg.pool.envs_per_actor)
        return -(-n_envs // max(1, self.cfg.pool.n_actors))

    def inference(self) -> list[InferenceChoice]:
        ready = sorted(self._ready_workers())
        return ray.get([self.actors[w].inference_choice.remote() for w in ready])

    def describe(self) -> str:
        nodes = len(set(self.placement()))
        elastic = f", elastic: up to {self.cfg.pool.envs_per_actor} envs each" if self.max_vector_envs else ""
        actors = len(self.actors)
        return (f"{actors} Ray actor{'s' if actors != 1 else ''} on {nodes} node{'s' if nodes > 1 else ''} "
                f"({self.actor_cpus:.2g} CPU each{elastic})")

    def placement(self) -> list[str]:
        """The node id of each actor (an elastic pool's: of each actor that has a CPU)."""
        return ray.get([self.placed[w] for w in sorted(self._ready_workers())])

    # ------------------------------------------------------------------ elastic pools

    def _request_cpus(self) -> None:
        """Ask the Ray autoscaler for one CPU per actor (elastic pools); the request replaces the last."""
        if self.max_vector_envs:
            from ray.autoscaler.sdk import request_resources

            request_resources(bundles=[{"CPU": self.actor_cpus}] * len(self.actors))

    def _add_worker(self) -> None:
        w = len(self.actors)
        self.actors.append(self._new_actor(w))
        self.placed.append(self.actors[w].node_id.remote())
        self.started_at.append(time.monotonic())
        self._request_cpus()

    def _retire_idle_workers(self) -> None:
        """Stop the last actors an elastic shrink emptied, and lower the autoscaler request."""
        counts = self.vector_envs_per_worker
        if not self.max_vector_envs or counts[-1]:
            return
        keep = self.workers_for(self.n_envs)
        while len(counts) > keep and counts[-1] == 0:
            w = len(counts) - 1
            counts.pop()
            ray.kill(self.actors.pop())
            self.placed.pop()
            self.started_at.pop()
            self.ready.discard(w)
            self.waiting_said.discard(w)
            self.unconfirmed = [(worker, ref) for worker, ref in self.unconfirmed if worker != w]
        self._request_cpus()

    def _ready_workers(self) -> set[int]:
        """Workers whose actor has a CPU and runs; an elastic pool's others wait without holding it up."""
        if not self.max_vector_envs:
            return set(range(len(self.actors)))
        waiting = [w for w in range(len(self.actors)) if w not in self.ready]
        if waiting:
            done, _ = ray.wait([self.placed[w] for w in waiting], num_returns=len(waiting), timeout=0)
            done_ids = {ref.hex() for ref in done}
            self.ready.update(w for w in waiting if self.placed[w].hex() in done_ids)
        for w in range(len(self.actors)):
            slow = time.monotonic() - self.started_at[w] > self.WAITING_NOTICE
            if slow and w not in self.ready and w not in self.waiting_said and self.vector_envs_per_worker[w]:
                self.waiting_said.add(w)
                where = (f"the Ray autoscaler was asked for {len(self.actors)} CPUs" if cluster_address(self.cfg.run.address)[0] else
                         "this machine's Ray has no autoscaler: lower --max-envs or join a cluster with --address")
                print(f"rollout actor {w} waits for a free CPU ({where}); its environments join when it runs",
                      flush=True)
        return set(self.ready)

    def worker_pids(self) -> list[int]:
        """The process id of each actor (for monitoring, and for tests that kill one)."""
        return ray.get([actor.pid.remote() for actor in self.actors])

    def _start_replacement(self, w: int):
        """A new actor for slot w, on whatever nodes are left.

        After a node is lost the surviving nodes' CPUs may all be reserved by
        the other actors. Then the replacement is started without a CPU
        reservation (it shares the survivors' cores, which is what running the
        same environments on fewer machines means) and the console says so.
        Until Ray has marked a lost node dead (a few missed health checks) it
        may still place the replacement there, where it dies at once: then it
        is started again, until the placement deadline.
        """
        deadline = time.monotonic() + 7 * self.PLACEMENT_TIMEOUT
        cpus: float | None = None  # the actors' usual reservation first
        while True:
            actor = self._new_actor(w, cpus=cpus)
            wait = self.PLACEMENT_TIMEOUT if cpus is None else deadline - time.monotonic()
            try:
                ray.get(actor.node_id.remote(), timeout=max(wait, 0.0))
                return actor
            except RayActorError:  # placed on the node being lost, before Ray knew
                if time.monotonic() > deadline:
                    raise ActorFailures("every replacement rollout actor died on start; check the cluster") from None
                time.sleep(1.0)
            except GetTimeoutError:
                ray.kill(actor)
                if cpus is not None:
                    raise ActorFailures("no node can take a replacement rollout actor; check the cluster") from None
                print(f"no free CPU for a replacement rollout actor after {self.PLACEMENT_TIMEOUT:.0f} s; "
                      "starting it without a CPU reservation on the nodes left", flush=True)
                cpus = 0.0

    def _apply(self, adds, removes, background) -> int:
        refs = []
        # An elastic pool's actors still waiting for a CPU build their environments in the
        # background once they run, whatever was asked: waiting for them could be forever.
        ready = self._ready_workers()
        for w, actor in enumerate(self.actors):
            mine = [(ids, seed) for worker, ids, seed in adds if worker == w]
            n_removes = removes.count(w)
            if mine or n_removes:
                refs.append((w, actor.resize.remote(mine, n_removes, background or w not in ready)))
        if background:
            # Not waited for: an actor runs its calls in order, so the order is taken
            # before its next rollout, and starting emulators hold the GIL of the actor
            # for a moment (ALE's constructor), which would otherwise block this loop.
            self.unconfirmed.extend(refs)
            return 0
        self.unconfirmed.extend((w, ref) for w, ref in refs if w not in ready)
        return sum(ray.get([ref for w, ref in refs if w in ready]))

    def _reseed_actions(self, seed: int) -> None:
        # An actor still waiting for a CPU takes the call, in order, when it runs: not waited for.
        ready = self._ready_workers()
        refs = [(w, actor.reseed_actions.remote(seed + w)) for w, actor in enumerate(self.actors)]
        ray.get([ref for w, ref in refs if w in ready])

    def _replace(self, w: int) -> None:
        """A new actor in slot w with as many fresh vector envs as the dead one had."""
        self.failures += 1
        if self.failures > self.cfg.pool.max_actor_failures:
            raise ActorFailures(
                f"{self.failures} rollout actor failures (limit max_actor_failures "
                f"{self.cfg.pool.max_actor_failures}); check the environment and memory"
            )
        print(f"rollout actor {w} died (its process or node was lost); replacing it on the nodes left "
              f"({self.failures} failures so far; Ray's own messages are in its logs, "
              f"{RAY_LOGS})", flush=True)
        self.actors[w] = self._start_replacement(w)
        self.placed[w] = self.actors[w].node_id.remote()
        # One call, so that gymnasium's vector envs join in one rebuild (RolloutWorker.resize).
        adds = [self._new_vector_ids() for _ in range(self.vector_envs_per_worker[w])]
        self.warmup_steps += ray.get(self.actors[w].resize.remote(adds, 0, False))

    def _start(self, weights: np.ndarray) -> _Rollout:
        self._retire_idle_workers()  # the last rollout is collected: its actors are free to go
        ready = self._ready_workers()
        with_envs = [w for w, count in enumerate(self.vector_envs_per_worker) if count > 0]
        if not any(w in ready for w in with_envs):
            # Nothing can step yet (an elastic pool on a cluster without a free CPU): wait for one.
            print(f"waiting for a free CPU for a rollout actor (asked for {len(self.actors)})", flush=True)
            ray.wait([self.placed[w] for w in with_envs], num_returns=1)
            ready = self._ready_workers()
        weights_ref = ray.put(weights)  # broadcast once through the object store
        pending = {w: self.actors[w].rollout.remote(weights_ref, self.cfg.agent.n_steps)
                   for w, count in enumerate(self.vector_envs_per_worker) if count > 0 and w in ready}
        waiting = sum(c for w, c in enumerate(self.vector_envs_per_worker) if w not in ready) * self.vector_size
        # Resize orders given before this rollout ran on their actors before it;
        # later ones, and those of actors still waiting for a CPU, stay for a later rollout.
        ordered = [ref for w, ref in self.unconfirmed if w in ready]
        self.unconfirmed = [(w, ref) for w, ref in self.unconfirmed if w not in ready]
        return _Rollout(weights_ref, pending, ordered, waiting)

    def _finish(self, rollout: _Rollout) -> Batch:
        fragments: dict[int, Batch] = {}
        pending = rollout.pending
        while pending:
            w, ref = next(iter(pending.items()))
            try:
                fragments[w] = ray.get(ref)
                del pending[w]
            except RayActorError:
                self._replace(w)
                pending[w] = self.actors[w].rollout.remote(rollout.weights_ref, self.cfg.agent.n_steps)
        # Done by now (each ran before its actor's rollout); a dead actor's order is moot.
        for ref in rollout.resize_orders:
            try:
                ray.get(ref)
            except RayActorError:
                pass
        batch = Batch.concat([fragments[w] for w in sorted(fragments)])
        batch.starting_envs += rollout.waiting_envs
        return batch

    def close(self) -> None:
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        if self.max_vector_envs and ray.is_initialized():
            self._request_cpus()  # no actors: the request is released
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()
