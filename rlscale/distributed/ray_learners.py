"""Data-parallel learners as Ray actors (``--learners N``): one torch.distributed process group.

Each actor is a process with a replica of the network and optimizer (an A2C
or PPO ``Learner`` with a ``DataParallel``); the group is a plain
torch.distributed process group over the actors (gloo on CPU, NCCL when each
learner has a GPU), initialised from rank 0's address like Ray Train's torch
backend does. Every update the driver sends each learner its environments'
columns of the batch; the learners all-reduce their gradients and take the
same step, and rank 0 returns the metrics, the noise meter's state and the
new weights for the rollout actors. The noise-scale math is in
``data_parallel``; the rollout actors in ``ray_pool``.

A learner that dies stops the run with a clear message: the survivors may be
part-way through a PPO update (several optimizer steps), so their state is not
a clean checkpoint; the last periodic checkpoint resumes the run.
"""

from __future__ import annotations

import datetime
import os
import socket
from typing import Any

import numpy as np
import ray
import torch
import torch.distributed as dist
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from rlscale.agents.data_parallel import DataParallel, Share, env_shares
from rlscale.agents.learner import Learner, resolve_device
from rlscale.agents.registry import LEARNERS
from rlscale.config import Config
from rlscale.control.noise import NoiseMeter
from rlscale.distributed.ray_pool import init_ray, notices_path, this_node
from rlscale.envs.vector import EnvSpec
from rlscale.errors import UserError
from rlscale.models.nets import build_network
from rlscale.rollout.worker import Batch, flat_weights

# Seconds a collective may wait for a peer: a learner that died mid-update makes the
# survivors' all-reduce fail after this instead of hanging the run.
COLLECTIVE_TIMEOUT = 120.0
# Seconds the group may take to form (processes starting, torch imported, models built).
START_TIMEOUT = 300.0


class LearnerLost(UserError):
    """A data-parallel learner died: the run stops; the last checkpoint resumes it."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class LearnerProcess:
    """One data-parallel learner: a replica of the network and optimizer in its own process."""

    def __init__(self, cfg: Config, spec: EnvSpec, rank: int, world_size: int) -> None:
        self.cfg, self.spec, self.rank, self.world_size = cfg, spec, rank, world_size
        self.learner: Learner | None = None

    def node_id(self) -> str:
        return this_node()

    def share_cores(self, learners_on_this_node: int) -> int:
        """torch threads: --learner-threads, or this node's cores shared by the learners placed on it."""
        threads = self.cfg.learner.learner_threads or max(1, (os.cpu_count() or 1) // learners_on_this_node)
        torch.set_num_threads(threads)
        return torch.get_num_threads()

    def address(self) -> tuple[str, int]:
        """Where the group meets (asked of rank 0)."""
        return ray.util.get_node_ip_address(), free_port()

    def join(self, host: str, port: int) -> None:
        """Join the process group and build the replica; every replica starts from rank 0's weights."""
        device = resolve_device(self.cfg.learner.learner_device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"tcp://{host}:{port}",
                                rank=self.rank, world_size=self.world_size,
                                timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT))
        torch.manual_seed(self.cfg.run.seed)
        model = build_network(self.spec, self.cfg.agent.network, self.cfg.agent.mlp_hidden).to(device)
        self.learner = LEARNERS[self.cfg.agent.algo].from_config(model, self.cfg, DataParallel())
        self._load_flat(self._broadcast(flat_weights(self.learner.model)))

    def _broadcast(self, flat: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(flat).to(self.learner.device)
        dist.broadcast(t, src=0)
        return t

    def _load_flat(self, flat: torch.Tensor) -> None:
        offset = 0
        with torch.no_grad():
            for p in self.learner.model.parameters():  # copy_ keeps each weight's memory format
                p.copy_(flat[offset:offset + p.numel()].view(p.shape))
                offset += p.numel()

    def update(self, batch: Batch, share: Share, lr: float) -> tuple[dict[str, float], int, int, Any, Any]:
        """Learn from this learner's share of the batch; rank 0 also returns the noise state and weights."""
        learner = self.learner
        learner.data_parallel.share = share
        # Ray hands large arrays over read-only (zero-copy); torch wants writable memory.
        for name, value in vars(batch).items():
            if isinstance(value, np.ndarray) and not value.flags.writeable:
                setattr(batch, name, value.copy())
        metrics = learner.update(batch, lr)
        if self.rank != 0:
            return {}, learner.updates, learner.skipped_in_a_row, None, None
        return (metrics, learner.updates, learner.skipped_in_a_row, learner.noise.state_dict(),
                flat_weights(learner.model))

    def weights(self) -> np.ndarray:
        return flat_weights(self.learner.model)

    def state_dict(self) -> dict[str, Any]:
        return self.learner.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


class LearnerGroup:
    """N learner actors, driven like one learner: ``update``, the noise meter, weights, state.

    Each learner takes whole environments of the batch (``env_shares``), so the
    group needs at least as many environments as learners (config checks it).
    """

    def __init__(self, cfg: Config, spec: EnvSpec) -> None:
        n = cfg.learner.learners
        self.owns_ray = init_ray(cfg.run.address, log_to_driver=False, notices=notices_path(cfg))  # as RayPool: the driver speaks
        self.cfg = cfg
        gpu = cfg.learner.learner_device == "cuda"
        # No CPU reservation: the learners and the rollout actors take turns (collect, then
        # learn), and the rollout actors already reserve the cores. SPREAD puts one per node.
        remote = ray.remote(LearnerProcess).options(num_cpus=0, num_gpus=1 if gpu else 0,
                                                    scheduling_strategy="SPREAD", max_restarts=0)
        self.actors = [remote.remote(cfg, spec, rank, n) for rank in range(n)]
        try:
            nodes = ray.get([actor.node_id.remote() for actor in self.actors], timeout=START_TIMEOUT)
            self.threads = ray.get([actor.share_cores.remote(nodes.count(node))
                                    for actor, node in zip(self.actors, nodes, strict=True)])
            host, port = ray.get(self.actors[0].address.remote(), timeout=START_TIMEOUT)
            ray.get([actor.join.remote(host, port) for actor in self.actors], timeout=START_TIMEOUT)
            self.weights = ray.get(self.actors[0].weights.remote())
        except GetTimeoutError:
            self.close()
            raise UserError(f"{n} learner actors did not start within {START_TIMEOUT:.0f} s "
                            f"(a GPU each: {gpu}); check the cluster's free resources") from None
        self.device = torch.device("cuda" if gpu else "cpu")
        self.backend = "nccl" if gpu else "gloo"
        self.noise = NoiseMeter(cfg.noise.noise_horizon, clip=cfg.noise.noise_clip)
        self.updates = 0
        self.skipped_in_a_row = 0

    def describe(self) -> str:
        return f"{len(self.actors)} data-parallel learners ({self.backend}) on {self.device}"

    def _get(self, refs: list) -> list:
        try:
            return ray.get(refs)
        except (RayActorError, RayTaskError) as err:
            # A dead peer makes the survivors' all-reduce fail too (a task error): name the dead.
            dead = [rank for rank, actor in enumerate(self.actors) if not _alive(actor)]
            if not dead and not isinstance(err, RayActorError):
                raise  # a learner's own error, not a lost process
            raise LearnerLost(f"learner {dead or '?'} of {len(self.actors)} died ({type(err).__name__}); "
                              "the run stops (the survivors may be part-way through an update): "
                              "resume from the last checkpoint with python -m rlscale.train --resume RUN_DIR"
                              ) from None

    def update(self, batch: Batch, lr: float) -> dict[str, float]:
        refs = [actor.update.remote(batch.columns(cols), Share(batch.n_envs, int(cols[0]), cols.size), lr)
                for actor, cols in zip(self.actors, env_shares(batch.n_envs, len(self.actors)), strict=True)]
        metrics, self.updates, self.skipped_in_a_row, noise_state, self.weights = self._get(refs)[0]
        self.noise.load_state_dict(noise_state)
        return metrics

    def flat_weights(self) -> np.ndarray:
        return self.weights

    def state_dict(self) -> dict[str, Any]:
        return self._get([self.actors[0].state_dict.remote()])[0]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._get([actor.load_state_dict.remote(state) for actor in self.actors])
        self.weights = self._get([self.actors[0].weights.remote()])[0]
        self.noise.load_state_dict(state["noise"])
        self.updates = int(state["updates"])

    def pids(self) -> list[int]:
        """The learners' process ids (for tests that kill one)."""
        return self._get([actor.pid.remote() for actor in self.actors])

    def close(self) -> None:
        for actor in self.actors:
            try:
                ray.get(actor.close.remote(), timeout=10)
            except (RayActorError, GetTimeoutError):
                pass
            ray.kill(actor)
        self.actors = []
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()


def _alive(actor) -> bool:
    try:
        ray.get(actor.pid.remote(), timeout=5)
        return True
    except (RayActorError, GetTimeoutError):
        return False
