"""The batch-size controller (paper appendix D): pure logic, no Ray, no I/O.

Every update it reads the measured noise scale and decides the number of
environments and the learning rate. The batch it compares with the target is
the optimizer's: n_envs x n_steps observations for A2C, that divided by the
number of minibatches for PPO.

* fixed:    never resize.
* critical: target batch = B_crit (train at the critical batch size).
* sqrt:     target batch = sqrt(r * B_crit) (eq. D.6), r in examples per step.
* auto:     target batch = B* = sqrt((a/b) * B_crit), the wall-time optimum of the
            measured cost model T(B) = a + b*B (``rlscale.control.cost``, docs/batch-control.md). Until
            the model is identified (two batch sizes timed), one probe resize by
            max_resize_factor (down before anything is learned; up from --min-envs on one machine), as soon as
            the start has its timings, gives it a second size (on a cluster with cluster_one_node_first, the
            default: the shrinks to one node before learning, or the probe after it);
            while its fitted overhead is 0 (B* = 0) it times one batch a factor smaller, and while its slope
            is not positive (B* unbounded) one a factor larger. It resizes only when the
            model predicts B* at least ``min_gain`` faster per unit of progress than the
            current batch: near B* the time is flat and a resize is not free.
            With ``cluster_nodes`` it chooses for an elastic cluster instead: the fewest
            node-hours per unit of progress within ``cluster_slack`` of the cluster's
            fastest batch (``rlscale.control.cluster_clock.cluster_batch``), priced with ``cluster_fit``'s
            T(B) where given (after its own two sizes are timed), else its own fit. It does not grow
            before the run has learned anything: the noise scale reads high while the gradient is
            mostly noise, and a larger batch then spends examples (or, on a cluster, machines) that
            teach nothing (on a cluster, with ``cluster_one_node_first`` on by default, it trains on its
            start, or one node's batch where the start spans more, until then). On one machine it may then still grow to the cost
            model's exchange rate r = a/b where its start lies below: there an update's time is mostly its
            fixed overhead (on MinAtar Asterix T(B) = 3.8 ms + 0.051 ms x B puts an example at 10 observations
            at 4.4x the time of one at 80: research/data/auto-study-2026-12-06-xeon-amx/minatar-asterix-aa7a509/oracle.txt).
* replay:   the environments and learning rate a recorded run took at each agent step
            (``rlscale.control.schedule``), open-loop: the studies' control for feedback.

B_crit is read as B_simple / crit_ratio: 1 where the theory's B_simple ~ B_crit
holds; a task's measured ratio (``rlscale.reports.pareto``) otherwise. The learning-rate
rule keeps the measured B_simple, the quantity its alpha was measured with, and
sets lr(B) from the run's first batch and learning rate (its tuned point), so
that a batch that returns to where it started returns to its learning rate.

A resize happens only when the target leaves a hysteresis band around the
current batch, changes the batch by at most a bounded factor (a larger one to
shrink: a smaller batch costs no examples), waits for a
cool-down (observations trained since the last resize, so the estimate reflects the current batch; with
``cooldown_measured`` only those the noise average took, not the batches while new environments settle; not auto's
probe nor its first move after it, which follow timings, not the estimate) and respects [min_envs, max_envs]. A missing or
non-finite estimate means hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rlscale import tags
from rlscale.config import ControlConfig
from rlscale.control.cluster_clock import ElasticCluster, cluster_batch
from rlscale.control.cost import CostModel, Fit, optimal_batch, predicted_speedup
from rlscale.control.schedule import Schedule

NOTHING_LEARNED = "nothing learned yet (the mean return has not risen): not growing"
ONE_NODE_HELD = "nothing learned yet (the mean return has not risen): holding one node's batch or less"


# What a decision did, one word or two for each reason: the run's summary sums agent steps under each
# (``batch_decisions``), so that a run's stretches at one batch say what held them there.
RESIZE, FIXED, REPLAY = "resize", "fixed", "replay"
NO_ESTIMATE, TIMING, KIND_NOTHING_LEARNED = "no estimate", "timing", "nothing learned"
COOLING_DOWN, SMALL_GAIN, HYSTERESIS, AT_BOUND = "cooling down", "small gain", "within hysteresis", "at bound"
AT_FLOOR = "at learning floor"  # learning_floor: a shrink held at the batch of the learning line
READING_BAND = "reading band"  # cluster_hysteresis: a cluster move held by a reading within the band


@dataclass(frozen=True)
class Decision:
    n_envs: int  # environments for the next update (the current count when holding)
    lr: float  # learning rate for the next update
    target_batch: float | None  # observations the mode asks for, None without an estimate
    reason: str  # why it resized or held, for the console
    kind: str  # what it did, one of the kinds above

    def note(self) -> str:
        """For the progress line: why it holds, with the batch it aims at where the reason leaves it out ("resized"
        after a resize, which has a line of its own)."""
        if self.kind == RESIZE:
            return "resized"
        reason_omits_target = (self.target_batch is not None
                               and self.kind in (AT_BOUND, COOLING_DOWN, KIND_NOTHING_LEARNED, HYSTERESIS, AT_FLOOR,
                                                 READING_BAND))
        return f"{self.reason} (target {self.target_batch:,.0f})" if reason_omits_target else self.reason


def scaled_lr(lr: float, noise_scale: float, batch_before: float, batch_after: float,
              alpha: float) -> float:
    """Eq. 2.6 / A.3: lr(B) ~ (1 + Bn/B)^-alpha, so lr1 = lr0 * ((1+Bn/B0)/(1+Bn/B1))^alpha."""
    return lr * ((1.0 + noise_scale / batch_before) / (1.0 + noise_scale / batch_after)) ** alpha


def target_batch(mode: str, noise_scale: float, r: float) -> float:
    if mode == "critical":
        return noise_scale
    if mode == "sqrt":
        return math.sqrt(r * noise_scale)
    raise ValueError(f"mode {mode} has no target")


@dataclass
class BatchController:
    cfg: ControlConfig
    # Observations one environment adds to one optimizer step: n_steps for A2C,
    # n_steps / n_minibatches for PPO (the minibatch is the optimizer batch).
    observations_per_env: float
    vector_size: int  # environments are added and removed in multiples of this
    observations_since_resize: float = 0.0  # what the cool-down counts (cooldown_measured: those the average took)
    # Every observation trained since the last resize: the count above never exceeds it. A noise sample can stand for
    # observations trained before the resize (PPO's unmeasured minibatches, a part measured every few updates).
    trained_since_resize: float = 0.0
    # Set by the probe resize: its batch was chosen to time the cost model, not by the
    # estimate, so the first move toward B* need not wait out a cool-down there.
    probed: bool = False
    # Update times per optimizer batch (auto mode): fed by the training loop, in optimizer-batch units.
    cost: CostModel = field(default_factory=CostModel)
    # The learning-rate rule's anchor: the first (optimizer batch, learning rate) the controller saw,
    # the run's tuned point. Each resize sets lr(B) from it, not from the last lr: multiplied resize
    # by resize under a noise scale that moves in between, the factors do not cancel, and on
    # Breakout oscillating resizes ratcheted lr 2.24e-2 -> 5.85e-2 until the policy collapsed
    # (docs/results.md, 2026-11-26).
    reference: tuple[float, float] | None = None
    schedule: Schedule | None = None  # batch replay: the recorded run's path
    agent_steps: float = 0.0  # trained so far: where the replayed schedule stands
    # auto does not grow before the run has learned anything (rlscale.goals.learning_began): growing then
    # buys examples, or a cluster's machines, that teach nothing. Set by the trainer.
    hold_until_learning: bool = False
    # With the hold, on one machine: it may grow up to the larger of its start and the cost model's exchange
    # rate a/b, below which a larger batch costs little time per update. Set by the trainer.
    grow_to_exchange_rate: bool = False
    # The optimizer batch at the run's learning line (0 before it): with learning_floor auto does not shrink below it.
    floor: float = 0.0

    def __post_init__(self) -> None:
        # The elastic cluster auto chooses for (--cluster-nodes), None for this machine.
        self.cost.outlier_factor = self.cfg.cost_outlier_factor
        self.cluster = (ElasticCluster(self.cfg.cluster_nodes, self.cfg.cluster_node_envs * self.observations_per_env,
                                       self.cfg.cluster_round_trip) if self.cfg.cluster_nodes > 0 else None)
        # The T(B) the cluster clock prices with where the user gave one (cluster_fit): auto then chooses on the model
        # its run is priced by. Else its own fit, of this machine's timings at whatever batches the run visited.
        given = self.cfg.cluster_cost()
        self.cluster_priced = Fit(*given) if given is not None and self.cluster is not None else None

    def step(self, n_envs: int, noise_scale: float | None, observations: float, lr: float,
             learned: bool = True, missing: str = "", measured: float | None = None) -> Decision:
        """Called once per update, after it trained on ``observations``; ``learned``: whether the run has
        learned anything yet (its return has risen); ``missing``: why ``noise_scale`` is None, if it is
        (``NoiseMeter.missing``), for the decision's line; ``measured``: the observations of this update that
        the noise average took (``NoiseMeter.taken``; None: all of them), which the cool-down counts with
        ``cooldown_measured``."""
        self.trained_since_resize += observations
        if self.cfg.cooldown_measured and measured is not None:
            self.observations_since_resize = min(self.observations_since_resize + measured, self.trained_since_resize)
        else:
            self.observations_since_resize += observations
        self.agent_steps += observations
        self.anchor(n_envs, lr)
        if learned and not self.floor:
            self.floor = n_envs * self.observations_per_env
        if self.cfg.batch == "fixed":
            return Decision(n_envs, lr, None, "fixed batch", FIXED)
        if self.cfg.batch == "replay":
            return self._replay(n_envs, lr)
        if noise_scale is None or not math.isfinite(noise_scale) or noise_scale <= 0:
            return Decision(n_envs, lr, None, f"no noise-scale estimate ({missing})" if missing
                            else "no noise-scale estimate", NO_ESTIMATE)
        current = n_envs * self.observations_per_env
        fit = self.cost.fit
        # The largest batch it may grow to now: any, once learning shows (or without the hold).
        ceiling = math.inf if learned or not self.hold_until_learning else self.growth_ceiling(fit)
        if (self.cfg.batch == "auto" and self.cluster is not None and self.cfg.cluster_one_node_first
                and not learned and self.hold_until_learning):
            return self._one_node_until_learning(n_envs, noise_scale, current, lr)
        if self.cfg.batch == "auto" and fit is None:
            return self._probe(n_envs, noise_scale, current, lr, ceiling)
        if self.cfg.batch == "auto" and fit.unresolved:
            return self._probe_unresolved(n_envs, noise_scale, current, lr, fit.unresolved, ceiling)
        critical = self.critical_batch(noise_scale)
        left_out = f"; {fit.left_out:,.0f}'s timings left out: off the line" if fit is not None and fit.left_out else ""
        gain = 0.0
        priced = self.cluster_priced or fit  # the T(B) a cluster choice is made on
        if self.cfg.batch == "auto" and self.cluster is not None:
            price = self.cfg.cluster_price
            target = cluster_batch(priced, self.cluster, critical, self.cfg.cluster_slack, self._candidates(), price)
            gain = math.inf  # the node-hours it saves or the time it wins: min_gain weighs one machine's time
            rule = (f"has the least time + {price:g} x node-seconds" if price > 0 else
                    f"is within {self.cfg.cluster_slack:.0%} of the fastest batch at the fewest node-hours")
            priced_by = "; T(B) of cluster_fit" if self.cluster_priced else ""
            why = (f"on up to {self.cluster.max_nodes} nodes, {target:,.0f} {rule} ({self._signal_text(noise_scale)}"
                   f"{left_out}{priced_by})")
        elif self.cfg.batch == "auto":
            target = optimal_batch(fit, critical)
            gain = predicted_speedup(fit, current, critical) - 1.0
            why = (f"B* = sqrt(r {fit.exchange_rate:,.0f} x {self._signal_text(noise_scale)}) = {target:,.0f}, "
                   f"{gain:.0%} faster (T = {1e3 * fit.overhead:.0f} ms + {1e3 * fit.per_observation:.3f} ms x batch"
                   f"{left_out})")
        else:
            target = target_batch(self.cfg.batch, critical, self.cfg.r)
            why = f"target batch {target:,.0f}"
        if self.probed:
            self.probed = False
        elif not self._cooled():
            return Decision(n_envs, lr, target, "cooling down", COOLING_DOWN)
        if self.cfg.batch == "auto" and gain < self.cfg.min_gain:
            return Decision(n_envs, lr, target, f"B* {target:,.0f} only {gain:.1%} faster (< min_gain)", SMALL_GAIN)
        # The band weighs the readings of a run that has learned (before that the hold decides), and only a move.
        if (self.cfg.batch == "auto" and self.cluster is not None and self.cfg.cluster_hysteresis > 1.0
                and ceiling == math.inf and not 1 / self.cfg.hysteresis <= target / current <= self.cfg.hysteresis):
            held = self._reading_band_holds(priced, noise_scale, current, grow=target > current)
            if held:
                return Decision(n_envs, lr, target, held, READING_BAND)
        if self.cfg.learning_floor and self.cluster is None and self.cfg.batch == "auto" and target < self.floor:
            if self.floor * self.cfg.hysteresis >= current:  # the floor is the batch it has, or near it
                return Decision(n_envs, lr, target, f"at the learning floor, {self.floor:,.0f} observations", AT_FLOOR)
            why = f"{why}; floor {self.floor:,.0f} observations, the batch at the learning line"
            target = self.floor
        return self._resize_toward(n_envs, noise_scale, current, target, lr, why, ceiling)

    def _reading_band_holds(self, fit: Fit, noise_scale: float, current: float, grow: bool) -> str:
        """Why a cluster move is held ("" to make it): the current batch is, within the batch's hysteresis band, the
        cluster batch at some reading up to ``cluster_hysteresis`` times the other way from the one measured (below it
        for a grow, above for a shrink; four checked). The cluster's target jumps at the one-node/many-node tie (80 to
        1,040-2,560 observations on MinAtar Breakout), so the batch's own band cannot hold it. A batch that no such
        reading chooses (two nodes, inside the jump) is left as before; any cluster move is weighed, not only a jump."""
        band, h = self.cfg.cluster_hysteresis, self.cfg.hysteresis
        candidates = self._candidates()
        for k in range(1, 5):
            reading = noise_scale * band ** (-k / 4 if grow else k / 4)
            batch = cluster_batch(fit, self.cluster, self.critical_batch(reading), self.cfg.cluster_slack, candidates,
                                  self.cfg.cluster_price)
            if current / h <= batch <= current * h:
                return (f"within the reading's band: {self._signal_text(reading)}, within {band:g}x of the "
                        f"{noise_scale:,.0f} read, puts the cluster batch at {batch:,.0f}")
        return ""

    def growth_ceiling(self, fit: Fit | None) -> float:
        """The largest optimizer batch the hold lets a run grow to before it has learned anything. Where growing
        buys machines, none: it only shrinks. (Letting it fill a cluster's first node, paid for either way, was
        measured and lost: on MinAtar Breakout from 40 observations, at 80 before learning, the runs' return rose
        3x later in agent steps and they reached goal 5 later on the cluster clock; docs/batch-control.md.) On one
        machine (``grow_to_exchange_rate``) the larger of its start and a resolved cost model's a/b; on a line with
        no slope (a larger batch costs no more time), one factor above its start, so that noise read as a flat
        line cannot double it to max_envs."""
        if not self.grow_to_exchange_rate or fit is None:
            return 0.0
        start = self.reference[0] if self.reference is not None else 0.0
        if fit.unresolved == "no slope":
            return start * self.cfg.max_resize_factor
        return 0.0 if fit.unresolved else max(start, fit.exchange_rate)

    def critical_batch(self, noise_scale: float) -> float:
        """The signal's estimate of B_crit: what the targets, B* and its predicted speed-up read."""
        return noise_scale / self.cfg.crit_ratio

    def _signal_text(self, noise_scale: float) -> str:
        text = f"{tags.signal_label(self.cfg.signal)} {noise_scale:,.0f}"
        return text if self.cfg.crit_ratio == 1.0 else f"{text} / {self.cfg.crit_ratio:g}"

    def _candidates(self) -> list[float]:
        """The optimizer batches the bounds allow, one vector of environments apart."""
        unit = self.vector_size
        return [envs * self.observations_per_env
                for envs in range(-(-self.cfg.min_envs // unit) * unit, self.cfg.max_envs + 1, unit)]

    def _probe(self, n_envs: int, noise_scale: float, current: float, lr: float,
               ceiling: float = math.inf) -> Decision:
        """No cost model yet: once the current batch is timed, move by the largest factor to time another
        (down, where the hold's ``ceiling`` leaves no room to grow until learning; up from ``min_envs`` on one
        machine, where nothing smaller can be timed). It waits for the timings alone, not the cool-down: a
        probe's batch is chosen to time the cost model, not read from the noise scale, and on CartPole the
        5,000-observation cool-down was 500 updates of 10 observations, about a fixed run's whole time.
        ``probe_cooldown`` waits it, as runs saved before 2026-12-06 did."""
        if not self._timed(current) or (self.cfg.probe_cooldown and not self._cooled()):
            return Decision(n_envs, lr, None, "timing this batch for the cost model", TIMING)
        if ceiling <= current and n_envs <= self.cfg.min_envs:  # nothing smaller to time
            if not self.grow_to_exchange_rate:  # and no growing before learning
                return Decision(n_envs, lr, None, NOTHING_LEARNED, KIND_NOTHING_LEARNED)
            # On one machine time one size up instead, so that the hold's ceiling, a/b, is known before learning:
            # from CartPole's --min-envs (10 observations) the hold kept 4-ms updates of 10 observations for 5-50k
            # agent steps where a/b read about 465 (docs/batch-control.md).
            ceiling = current * self.cfg.max_resize_factor
        grow = ceiling > current and n_envs * self.cfg.max_resize_factor <= self.cfg.max_envs
        target = current * (self.cfg.max_resize_factor if grow else 1.0 / self.cfg.max_resize_factor)
        decision = self._resize_toward(n_envs, noise_scale, current, target, lr,
                                       "probe: timing a second batch size for the cost model", ceiling)
        self.probed = decision.n_envs != n_envs and not self.cfg.probe_cooldown
        return decision

    def _one_node_until_learning(self, n_envs: int, noise_scale: float, current: float, lr: float) -> Decision:
        """cluster_one_node_first, before the learning line: hold any batch on one node (the start, where it fits
        one); from a start that spans more, shrink by up to ``max_shrink_factor`` at a time, once the current batch
        is timed (so that the cost model has its sizes), to one node's batch or below. The reading is noise there in
        both directions; one node pays no round trip (on SpaceInvaders two nodes' update took 3x one node's), and
        its batch passes a plateau counted in updates sooner than a smaller one (on Asterix 40 rather than 20)."""
        target = min(self.reference[0], self.cluster.node_batch)  # anchored by step() before this
        if self.cluster.nodes_for(current) == 1:
            return Decision(n_envs, lr, target, ONE_NODE_HELD, KIND_NOTHING_LEARNED)
        if not self._timed(current):
            return Decision(n_envs, lr, target, "timing this batch for the cost model", TIMING)
        # Rounded down and past the hysteresis band: a step that ended just above one node (100 from 400
        # observations, then 100 -> 80 inside the band) would otherwise sit on two nodes until the learning line.
        step_to = max(target, current / self.cfg.max_shrink_factor) / self.observations_per_env
        new_envs = max(self.vector_size, math.floor(step_to / self.vector_size + 1e-9) * self.vector_size)
        new_envs = min(max(new_envs, self.cfg.min_envs), self.cfg.max_envs)
        if new_envs >= n_envs:
            return Decision(n_envs, lr, target, "at min_envs", AT_BOUND)
        return self._resized(n_envs, new_envs, noise_scale, current, target, lr,
                             f"one node ({target:,.0f} observations) until the learning line")

    def _timed(self, current: float) -> bool:
        """The current batch has the timings it needs to enter the cost model's fit."""
        return len(self.cost.timings.get(current, ())) >= self.cost.min_samples

    def _cooled(self) -> bool:
        """The cool-down since the last resize has passed."""
        return self.observations_since_resize >= self.cfg.cooldown

    def _probe_unresolved(self, n_envs: int, noise_scale: float, current: float, lr: float, unresolved: str,
                          ceiling: float = math.inf) -> Decision:
        """The line through the timings says nothing about the machine: after the cool-down, time one
        more size, one factor away; the new size enters the fit.

        No slope (B* unbounded): one factor up. Such a line is either noise or a real flat stretch (on 2
        Ray actors, CartPole's 40 and 80 observations took the same ~23 ms); jumping to its B* once took
        a SpaceInvaders run to 1,280 observations aiming at 18,560 (docs/results.md).
        No overhead (B* = 0): one factor down. Such a line is either a few noisy update times or a
        machine whose time per observation grows with the batch; holding judged neither, and on Pong
        from 64 envs `auto` held at its probe's 128 for a whole run, where an observation took longer
        than at 64 (docs/results.md). At a bound it stays."""
        if unresolved == "no overhead":
            cause, size, factor = "the time grew faster than the batch", "smaller", 1.0 / self.cfg.max_resize_factor
        else:
            cause, size, factor = "the time did not grow with the batch", "larger", self.cfg.max_resize_factor
        if not (self._timed(current) and self._cooled()):  # its line came from a run that has moved before
            return Decision(n_envs, lr, None, f"cost model: {cause}; timing this one", TIMING)
        return self._resize_toward(n_envs, noise_scale, current, current * factor, lr,
                                   f"probe: {cause}; timing a {size} one", ceiling)

    def _replay(self, n_envs: int, lr: float) -> Decision:
        if self.schedule is None:
            raise ValueError("batch replay needs the recorded schedule")
        planned = self.schedule.at(self.agent_steps)
        if planned is None or planned == (n_envs, lr):
            return Decision(n_envs, lr, None, "as recorded", REPLAY)
        new_envs, new_lr = planned
        if new_envs == n_envs:
            return Decision(n_envs, new_lr, None, "the recorded learning rate", REPLAY)
        self.observations_since_resize = self.trained_since_resize = 0.0
        direction = "grow" if new_envs > n_envs else "shrink"
        return Decision(new_envs, new_lr, None, f"{direction}: replay: the recorded run took {new_envs} envs "
                                                f"after {self.agent_steps:,.0f} agent steps", RESIZE)

    def _resize_toward(self, n_envs: int, noise_scale: float, current: float, target: float, lr: float,
                       why: str, ceiling: float = math.inf) -> Decision:
        """Move toward ``target`` within the band, the factor and the bounds, growing to at most ``ceiling``
        observations (the hold before learning; at or below the current batch: shrink only)."""
        ratio = target / current
        h = self.cfg.hysteresis
        if 1.0 / h <= ratio <= h:
            return Decision(n_envs, lr, target, "within hysteresis", HYSTERESIS)
        limited = min(max(ratio, 1.0 / self.cfg.max_shrink_factor), self.cfg.max_resize_factor)
        vectors = max(1, math.floor(current * limited / self.observations_per_env / self.vector_size + 0.5))
        new_envs = vectors * self.vector_size
        if new_envs == n_envs:  # rounding ate the change: move by one vector env
            new_envs += self.vector_size if ratio > 1 else -self.vector_size
        new_envs = min(max(new_envs, self.cfg.min_envs), self.cfg.max_envs)
        if new_envs == n_envs:
            bound = "max_envs" if ratio > 1 else "min_envs"
            return Decision(n_envs, lr, target, f"at {bound}", AT_BOUND)
        if new_envs > n_envs and new_envs * self.observations_per_env > ceiling:  # the hold before learning
            new_envs = max(n_envs, math.floor(ceiling / self.observations_per_env / self.vector_size) * self.vector_size)
            if new_envs * self.observations_per_env < current * h:  # a step smaller than the band: not worth a resize
                return Decision(n_envs, lr, target, NOTHING_LEARNED, KIND_NOTHING_LEARNED)
        return self._resized(n_envs, new_envs, noise_scale, current, target, lr, why)

    def _resized(self, n_envs: int, new_envs: int, noise_scale: float, current: float, target: float, lr: float,
                 why: str) -> Decision:
        """A resize to ``new_envs``: its learning rate by the run's rule, the cool-down restarted."""
        lr = self.lr_for(new_envs * self.observations_per_env, noise_scale, lr)
        self.observations_since_resize = self.trained_since_resize = 0.0
        direction = "grow" if new_envs > n_envs else "shrink"
        return Decision(new_envs, lr, target, f"{direction}: {why} vs {current:,.0f} observations", RESIZE)

    def anchor(self, n_envs: int, lr: float) -> None:
        """The learning-rate rule's anchor, once: the first environments and rate the controller sees."""
        if self.reference is None:
            self.reference = (n_envs * self.observations_per_env, lr)

    def lr_for(self, new_batch: float, noise_scale: float | None, lr: float) -> float:
        """The learning rate at optimizer batch ``new_batch`` by the run's rule (``lr`` where none)."""
        if not self.cfg.scales_lr or self.reference is None:
            return lr
        reference_batch, reference_lr = self.reference
        if self.cfg.lr_rule_in_force == "power":
            # Breakout's grid: the best rate doubles per 4x batch (B^0.5) over 20-1,280, while the
            # noise rule, fed the small B_simple of early training, kept it nearly flat there.
            return reference_lr * (new_batch / reference_batch) ** self.cfg.lr_alpha
        if noise_scale is None or not math.isfinite(noise_scale) or noise_scale <= 0:
            return lr
        return scaled_lr(reference_lr, noise_scale, reference_batch, new_batch, self.cfg.lr_alpha)

    def state_dict(self) -> dict[str, Any]:
        return {"observations_since_resize": self.observations_since_resize, "probed": self.probed,
                "trained_since_resize": self.trained_since_resize,
                "cost": self.cost.state_dict(), "agent_steps": self.agent_steps,
                "reference": list(self.reference) if self.reference is not None else None, "floor": self.floor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.observations_since_resize = float(state["observations_since_resize"])
        # Checkpoints from before the cap: their count read as what was trained (exact where it counted every
        # observation; a lower bound for bf07db9's runs with cooldown_measured, which only tightens the cap).
        self.trained_since_resize = float(state.get("trained_since_resize", self.observations_since_resize))
        self.probed = bool(state.get("probed", False))  # absent from checkpoints before it existed
        self.agent_steps = float(state.get("agent_steps", 0.0))  # likewise; read only by replay, which is newer
        self.floor = float(state.get("floor", 0.0))  # likewise: from such a run the next learned update sets it
        self.cost.load_state_dict(state["cost"])
        # Checkpoints from before the anchor existed: the next update's batch and lr become it.
        reference = state.get("reference")
        self.reference = (float(reference[0]), float(reference[1])) if reference else None
