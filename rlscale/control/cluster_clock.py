"""What an update would cost on an elastic cluster: the cluster clock's model. Pure math.

On this machine an update at optimizer batch B takes T(B) = a + b*B seconds (rlscale/control/cost.py).
On an elastic cluster of up to N two-core nodes that join and leave with the batch, as Ray's
autoscaler adds and removes them, the same update takes

    T_N(B) = a + b*B/n(B) + c(n(B)),   n(B) = min(N, ceil(B / node_batch)),

where ``node_batch`` is the batch one node carries (the observations its environments and its
data-parallel learner produce and consume per update), and c(n) is the round trip that spreading
an update over more than one node adds: Ray's remote calls and the gradients' all-reduce, taken as
one measured constant c for any n > 1 (0 on one node, whose round trip ``a`` already holds). The
update costs n(B) * T_N(B) node-seconds.

What it leaves out (docs/scaling.md): the network's bandwidth (the all-reduce of the weights grows
with the model, not with n), stragglers (the slowest node sets the update's time), the time a
node takes to join (an autoscaler's minutes), and nodes idle while the learner is the bottleneck.
So it is a floor on the wall time and a model of the node-hours, to be read beside those caveats.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from rlscale.control.cost import Fit


@dataclass(frozen=True)
class ElasticCluster:
    """Up to ``max_nodes`` nodes, each carrying ``node_batch`` observations of an update."""

    max_nodes: int
    node_batch: float  # optimizer-batch observations one node carries per update
    round_trip: float  # c: seconds an update spread over more than one node adds

    def __post_init__(self) -> None:
        if self.max_nodes < 1:
            raise ValueError(f"an elastic cluster needs at least 1 node, not {self.max_nodes}")
        if not (self.node_batch > 0 and math.isfinite(self.node_batch)):
            raise ValueError(f"a node must carry a positive batch, not {self.node_batch}")
        if not (self.round_trip >= 0 and math.isfinite(self.round_trip)):
            raise ValueError(f"the round trip must be finite and not negative, not {self.round_trip}")

    def nodes_for(self, batch: float) -> int:
        """n(B): the nodes a batch needs, at most the cluster's."""
        # The tolerance keeps a batch that fills its nodes exactly from rounding up to one more.
        return max(1, min(self.max_nodes, math.ceil(batch / self.node_batch - 1e-9)))

    def update_seconds(self, fit: Fit, batch: float) -> float:
        """T_N(B) = a + b*B/n(B) + c(n(B))."""
        nodes = self.nodes_for(batch)
        return (fit.overhead + fit.per_observation * batch / nodes
                + (self.round_trip if nodes > 1 else 0.0))

    def node_seconds(self, fit: Fit, batch: float) -> float:
        """n(B) * T_N(B): what one update costs in node time."""
        return self.nodes_for(batch) * self.update_seconds(fit, batch)


def cluster_batch(fit: Fit, cluster: ElasticCluster, critical: float, slack: float,
                  candidates: Iterable[float], price: float = 0.0) -> float:
    """The batch ``auto`` aims at on an elastic cluster: the fewest node-seconds per unit of progress
    among the candidate batches whose wall time per unit of progress is within ``slack`` of the fastest;
    with a ``price`` > 0 (the wall seconds one node-second is worth) instead the least wall time plus
    ``price`` x node-seconds per unit of progress, T_N(B)(1 + B_crit/B)(1 + price n(B)).

    Progress per update is 1/(1 + B_crit/B) of a full-batch step (paper eq. D.1), so a candidate's wall
    time per unit of progress is T_N(B)(1 + B_crit/B) and its cost n(B) T_N(B)(1 + B_crit/B). While a
    batch fits the cluster, T_N hardly grows with B, so the fastest batch fills the cluster; a batch
    many times B_crit is nearly as fast, and where B_crit is small that takes a fraction of the nodes.
    The slack is the price: the time a user gives up for node-hours. Ties go to the smaller batch.
    """
    batches = sorted(set(candidates))
    if not batches:
        raise ValueError("no candidate batch")
    wall = [cluster.update_seconds(fit, b) * (1.0 + critical / b) for b in batches]
    if price > 0:
        return min((w * (1.0 + price * cluster.nodes_for(b)), b) for b, w in zip(batches, wall, strict=True))[1]
    fastest = min(wall)
    allowed = [(cluster.nodes_for(b) * w, b) for b, w in zip(batches, wall, strict=True)
               if w <= (1.0 + slack) * fastest]
    return min(allowed)[1]


@dataclass
class ClusterClock:
    """The wall time and node-seconds a run's updates would have taken on ``cluster``.

    It counts the run's updates at each optimizer batch; the time is priced with whatever fit
    of T(B) is given when it is read (the run's latest), so updates taken before the fit was identified
    count too. The learning is the run's own; only the time is modelled.
    """

    cluster: ElasticCluster
    updates: dict[float, int] = field(default_factory=dict)  # updates taken at each optimizer batch

    def tick(self, batch: float, updates: int = 1) -> None:
        """``updates`` updates at optimizer batch ``batch`` (T(B) prices a whole update: PPO's epochs too)."""
        self.updates[batch] = self.updates.get(batch, 0) + updates

    def wall_seconds(self, fit: Fit) -> float:
        return sum(n * self.cluster.update_seconds(fit, b) for b, n in self.updates.items())

    def node_seconds(self, fit: Fit) -> float:
        return sum(n * self.cluster.node_seconds(fit, b) for b, n in self.updates.items())

    def state_dict(self) -> dict[str, list]:
        return {"updates": [[b, n] for b, n in self.updates.items()]}

    def load_state_dict(self, state: dict[str, list]) -> None:
        self.updates = {float(b): int(n) for b, n in state["updates"]}
