"""Races side by side: each a Ray task of its own, up to N at once, spread over a cluster's nodes.

``rlscale measure --at-once N`` races a checkpoint's branches to a goal (rlscale/measure.py). One after
the other in one process, a measurement costs the sum of its races' time; here up to N run at once,
each in a Ray worker process with an engine of its own, so it costs about its slowest race's time where
there are cores for all. What a race does is the caller's function; this module only places the tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray

from rlscale.distributed.ray_pool import init_ray, this_node


def on_this_node(race: Callable[..., Any], *args: Any) -> tuple[Any, str]:
    """``race(*args)`` in a Ray worker, with the node it ran on."""
    return race(*args), this_node()


class RemoteRaces:
    """Runs ``race(*shared, *call)`` for each call's arguments as Ray tasks, at most ``at_once`` at a time.

    Each task asks Ray for one CPU: a race keeps a core busy (serial environments, a one-thread
    learner), and SPREAD puts the tasks on different nodes. Ray is started here (and stopped by
    ``close``), or joined at ``address`` as the training pool joins it.
    """

    def __init__(self, address: str, at_once: int, notices: Path | None = None) -> None:
        self.owns_ray = init_ray(address, log_to_driver=False, notices=notices)
        self.at_once = at_once
        self.task = ray.remote(on_this_node).options(num_cpus=1, scheduling_strategy="SPREAD", max_retries=0)

    def describe(self) -> str:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        cpus = sum(n["Resources"].get("CPU", 0.0) for n in nodes)
        return f"{self.at_once} races at once (Ray tasks on {len(nodes)} node{'s' if len(nodes) > 1 else ''}, {cpus:g} CPUs)"

    def run(self, race: Callable[..., Any], shared: tuple[Any, ...], calls: list[tuple[Any, ...]],
            done: Callable[[int, Any, str], None]) -> None:
        """Each call's ``race(*shared, *call)``; ``done(i, result or error, node)`` as each finishes, in the
        order they finish. ``shared`` (a checkpoint's state, say) goes to Ray's object store once, not once a
        call. An interrupt cancels the races still running and is raised."""
        common = [ray.put(race), *(ray.put(value) for value in shared)]
        queue = list(enumerate(calls))
        pending: dict[ray.ObjectRef, int] = {}
        try:
            while queue or pending:
                while queue and len(pending) < self.at_once:
                    i, call = queue.pop(0)
                    pending[self.task.remote(*common, *call)] = i
                ready, _ = ray.wait(list(pending), num_returns=1)
                i = pending.pop(ready[0])
                try:
                    result, node = ray.get(ready[0])
                except ray.exceptions.RayTaskError as err:  # the race's own error, as raised in its process
                    result, node = (err.cause if isinstance(err.cause, BaseException) else err), ""
                except ray.exceptions.RayError as err:  # its process died
                    result, node = err, ""
                done(i, result, node)
        except BaseException:
            for ref in pending:  # no race goes on after the measurement is abandoned
                ray.cancel(ref, force=True)
            raise

    def close(self) -> None:
        if self.owns_ray:
            ray.shutdown()
