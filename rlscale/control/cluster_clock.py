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
from dataclasses import dataclass

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


@dataclass
class ClusterClock:
    """The wall time and node-seconds a run's updates would have taken on ``cluster``, update by update.

    The learning is the run's own; only the time is modelled, with the run's current fit of T(B).
    """

    cluster: ElasticCluster
    wall_seconds: float = 0.0
    node_seconds: float = 0.0

    def tick(self, fit: Fit, batch: float) -> None:
        """One update at optimizer batch ``batch``."""
        seconds = self.cluster.update_seconds(fit, batch)
        self.wall_seconds += seconds
        self.node_seconds += self.cluster.nodes_for(batch) * seconds
