"""--branches-at-once N: a measurement's races side by side, each a Ray task of its own.

``--batch measured --progress reach`` races every branch from the trunk's state to the next goal
(rlscale/training/measure.py). One after the other in the run's process, a measurement costs the sum
of its races' time; here up to N run at once, each in a Ray worker process with an engine of its own
(serial environments, a one-thread learner), spread over a cluster's nodes, so a measurement costs
about its slowest race's time where there are cores for all. The races are the same: the engine is
built from the trunk's snapshot and the run's resolved settings (learner precision, the actors'
precision and layout), and each race restarts its environments on the same seeds as it would in the
run's process, so a serial run reads what it would read one after the other (tests/test_measure_ray.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import ray

from rlscale.config import Config
from rlscale.distributed.ray_pool import init_ray, notices_path, this_node
from rlscale.training.engine import NativeEngine
from rlscale.training.measure import BranchRun, train_branch


def race_config(engine: NativeEngine) -> Config:
    """The run's settings as its engine resolved them, for an engine of one race: serial environments,
    one learner thread on the CPU (a race is a task without a GPU), the actors' precision and layout as
    the run's first actor measured them (the run's own setting while no actor is up)."""
    cfg = engine.cfg
    race = replace(cfg.run, serial=True, pool="serial", learner_threads=1, learner_passes="team", learner_device="cpu")
    measured = engine.pool.inference()
    if not measured:  # an elastic pool with no actor up yet: each race times its own, as the run's setting says
        return replace(cfg, run=race)
    return replace(cfg, run=replace(race, actor_precision=measured[0].precision,
                                    actor_channels_last=measured[0].channels_last))


def race_in_its_own_process(cfg: Config, trunk: dict[str, Any], branch: BranchRun, scale: float,
                            window_steps: float, target: float | None, env_seed: int) -> BranchRun:
    """One branch's race (``train_branch``) on an engine of its own holding the trunk's state."""
    engine = NativeEngine(cfg, branch.n_envs)
    try:
        # The trunk's learner and RNG, loaded once the engine is built (building its pool drew from the RNG).
        engine.restore(trunk)
        train_branch(engine, cfg, branch, scale, None, None, window_steps, target, env_seed)
    finally:
        engine.close()
    branch.node = this_node()
    return branch


class RemoteRaces:
    """Up to ``at_once`` races at a time as Ray tasks (rlscale.training.measure.Races).

    Each task asks Ray for no CPU: the trunk's rollout actors keep theirs through a measurement (they
    wait), so a race asking for one might never be placed beside them on a small machine. Each race
    keeps one core busy; --branches-at-once says how many run at once, SPREAD puts them on different
    nodes. Ray is started here for a serial run (and stopped by ``close``), or joined as the pool did.
    """

    def __init__(self, cfg: Config, at_once: int) -> None:
        """``cfg``: a race's settings (``race_config`` of the run's engine)."""
        self.owns_ray = init_ray(cfg.run.address, log_to_driver=False, notices=notices_path(cfg))
        self.at_once = at_once
        self.cfg = cfg
        self.task = ray.remote(race_in_its_own_process).options(
            num_cpus=0, scheduling_strategy="SPREAD", max_retries=0)

    def describe(self) -> str:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        cpus = sum(n["Resources"].get("CPU", 0.0) for n in nodes)
        return (f"measurement races {self.at_once} at once (Ray tasks on {len(nodes)} node"
                f"{'s' if len(nodes) > 1 else ''}, {cpus:g} CPUs)")

    def race(self, trunk: dict[str, Any], branches: list[BranchRun], scale: float, window_steps: float,
             target: float | None, seeds: list[int]) -> list[BranchRun | BaseException]:
        cfg, state = ray.put(self.cfg), ray.put(trunk)
        outcomes: list[BranchRun | BaseException | None] = [None] * len(branches)
        queue = list(enumerate(branches))
        pending: dict[ray.ObjectRef, int] = {}
        try:
            while queue or pending:
                while queue and len(pending) < self.at_once:
                    i, branch = queue.pop(0)
                    pending[self.task.remote(cfg, state, branch, scale, window_steps, target, seeds[i])] = i
                ready, _ = ray.wait(list(pending), num_returns=1)
                i = pending.pop(ready[0])
                try:
                    outcomes[i] = ray.get(ready[0])
                except ray.exceptions.RayTaskError as err:  # the race's own error, as raised in its process
                    outcomes[i] = err.cause if isinstance(err.cause, BaseException) else err
                except ray.exceptions.RayError as err:  # its process died
                    outcomes[i] = err
        except BaseException:
            for ref in pending:  # an interrupt: no race goes on after the measurement is abandoned
                ray.cancel(ref, force=True)
            raise
        return [outcome for outcome in outcomes if outcome is not None]

    def close(self) -> None:
        if self.owns_ray:
            ray.shutdown()
