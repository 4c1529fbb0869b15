"""What a measured run would take on a bigger cluster: the planner's math. Pure.

A run gives two things that carry over to other hardware (docs/scaling.md):

* its noise-scale trajectory: each of its optimizer steps, at optimizer batch B
  and noise scale Bn, made 1/(1 + Bn/B) of a full-batch step of progress
  (paper eq. D.1), so the run to its goal is a sequence of progress increments
  with the noise scale each was made at;
* its cost model T(B) = a + b*B seconds per update, with b split into the
  rollout's share (environments and the actors' inference) and the learner's.

On a cluster of N nodes of C cores with L data-parallel learners the rollout's
cost per observation falls with the cores that step environments and the
learner's with the learners; the per-update overhead a stays:

    b(N, L) = b_rollout * C_ref / (N * C) + b_learner / L

(rollout and learning take turns, as in the default loop, so the rollout has
every core while it runs; one learner per node; the all-reduce's cost and
stragglers are not modelled, so the prediction is a floor that grows less
accurate with N). Every increment of progress is then made at the batch
B* = sqrt((a/b) * Bn) of that cluster, within [min_batch, max_batch], and costs
(1 + Bn/B*) optimizer steps of (a + b*B*)/k seconds each (k optimizer steps per
update: PPO's epochs x minibatches). Summed over the run: the wall time, the
core-hours and the examples to the goal on that cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlscale.control.cost import Fit, optimal_batch


@dataclass(frozen=True)
class MeasuredCost:
    """The run's T(B) = a + b*B (optimizer-batch units) and how b splits."""

    overhead: float  # a: seconds per update
    per_observation: float  # b: seconds per optimizer-batch observation, on the run's machine
    rollout_share: float  # the rollout's fraction of b (the learner has the rest)
    reference_cores: int  # cores of the machine the run was measured on

    def __post_init__(self) -> None:
        if not (self.overhead >= 0 and self.per_observation > 0 and 0 <= self.rollout_share <= 1
                and self.reference_cores > 0):
            raise ValueError(f"not a cost model: {self}")


@dataclass(frozen=True)
class Cluster:
    nodes: int
    cores_per_node: int
    learners: int = 1

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.cores_per_node < 1 or not 1 <= self.learners <= self.nodes:
            raise ValueError(f"a cluster needs nodes >= 1, cores >= 1 and 1 <= learners <= nodes: {self}")

    @property
    def cores(self) -> int:
        return self.nodes * self.cores_per_node


def cluster_fit(cost: MeasuredCost, cluster: Cluster) -> Fit:
    """T(B) = a + b(N, L)*B on ``cluster``."""
    rollout = cost.per_observation * cost.rollout_share * cost.reference_cores / cluster.cores
    learner = cost.per_observation * (1.0 - cost.rollout_share) / cluster.learners
    return Fit(cost.overhead, rollout + learner)


@dataclass(frozen=True)
class Stretch:
    """A stretch of the measured run: optimizer steps at one batch and noise scale."""

    optimizer_steps: float
    batch: float  # optimizer batch the run trained at
    noise_scale: float

    @property
    def progress(self) -> float:
        """Full-batch steps of progress these optimizer steps made (eq. D.1)."""
        return self.optimizer_steps / (1.0 + self.noise_scale / self.batch)


@dataclass(frozen=True)
class Plan:
    cluster: Cluster
    wall_seconds: float
    optimizer_steps: float
    examples: float  # optimizer-batch observations consumed: sum of steps x batch
    first_batch: float
    last_batch: float

    @property
    def core_hours(self) -> float:
        return self.wall_seconds * self.cluster.cores / 3600.0


def steps_and_seconds(fit: Fit, stretch: Stretch, batch: float, steps_per_update: float) -> tuple[float, float]:
    """Optimizer steps and seconds to make ``stretch``'s progress at ``batch`` on ``fit``."""
    steps = stretch.progress * (1.0 + stretch.noise_scale / batch)
    return steps, steps / steps_per_update * fit.seconds(batch)


def plan(stretches: list[Stretch], cost: MeasuredCost, cluster: Cluster, steps_per_update: float,
         min_batch: float, max_batch: float = math.inf) -> Plan:
    """The run's progress remade at each stretch's B* on ``cluster``."""
    if not stretches:
        raise ValueError("no stretches to plan")
    fit = cluster_fit(cost, cluster)
    wall = steps_total = examples = 0.0
    batches = []
    for stretch in stretches:
        batch, steps, seconds = at_optimal_batch(fit, stretch, steps_per_update, min_batch, max_batch)
        wall, steps_total, examples = wall + seconds, steps_total + steps, examples + steps * batch
        batches.append(batch)
    return Plan(cluster, wall, steps_total, examples, batches[0], batches[-1])


def at_optimal_batch(fit: Fit, stretch: Stretch, steps_per_update: float, min_batch: float,
                     max_batch: float) -> tuple[float, float, float]:
    """B* for the stretch within [min_batch, max_batch], and the optimizer steps and seconds there."""
    batch = min(max(optimal_batch(fit, stretch.noise_scale), min_batch), max_batch)
    return (batch, *steps_and_seconds(fit, stretch, batch, steps_per_update))


def replay_seconds(stretches: list[Stretch], fit: Fit, steps_per_update: float) -> float:
    """Seconds ``fit`` gives the stretches at the batches they ran at."""
    return sum(steps_and_seconds(fit, s, s.batch, steps_per_update)[1] for s in stretches)


def replay(stretches: list[Stretch], cost: MeasuredCost, steps_per_update: float) -> float:
    """Seconds the model gives the run as it ran (its own batches, its own machine): a check of the model."""
    return replay_seconds(stretches, Fit(cost.overhead, cost.per_observation), steps_per_update)


def control_ceiling(stretches: list[Stretch], fit: Fit, steps_per_update: float, min_batch: float,
                    max_batch: float = math.inf) -> float:
    """How much faster the run's progress would be made at B* at every step, on the same machine.

    The most any batch control can gain over the batches the run used, by the model
    (the noise scale as the run measured it, the learning rate right for every batch):
    the time at its own batches divided by the time at each stretch's B*, clipped to
    [min_batch, max_batch]. One stretch: tau(B)/tau(B*), ``cost.predicted_speedup``.
    """
    if not stretches:
        raise ValueError("no stretches to remake")
    at_optimum = sum(at_optimal_batch(fit, s, steps_per_update, min_batch, max_batch)[2] for s in stretches)
    return replay_seconds(stretches, fit, steps_per_update) / at_optimum


def last_paying(plans: list[Plan], min_efficiency: float = 0.5) -> int:
    """Index of the largest cluster still worth growing to.

    Growing from n to m cores pays when it buys at least ``min_efficiency`` of the
    ideal speed-up in log terms: log(t_n / t_m) >= min_efficiency * log(m / n)
    (0.5: doubling the cores still makes training at least sqrt(2) = 1.41x faster).
    The first cluster where a step stops paying ends the search.
    """
    best = 0
    for i in range(1, len(plans)):
        before, after = plans[i - 1], plans[i]
        gain = math.log(before.wall_seconds / after.wall_seconds)
        if gain < min_efficiency * math.log(after.cluster.cores / before.cluster.cores):
            break
        best = i
    return best
