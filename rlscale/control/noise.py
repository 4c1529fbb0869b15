"""The simple gradient noise scale B_simple = tr(Sigma) / |G|^2 (paper eq. 2.9, appendix A.1).

Pure math on squared gradient norms: no torch, no Ray, no I/O.

From k group gradients g_1..g_k over b_1..b_k observations and their
size-weighted mean G_big (the full-batch gradient over B = sum b_j):

    E|g_j|^2    = |G|^2 + tr(Sigma) / b_j
    E|G_big|^2  = |G|^2 + tr(Sigma) / B

so with |G_small|^2 = mean_j |g_j|^2 and B_small = 1 / mean_j(1/b_j) (the
harmonic mean, equal to B/k when the groups are equal), eq. A.2 gives unbiased
per-update estimates of |G|^2 and tr(Sigma). Their ratio is biased and a single
|G|^2 estimate is often negative, so each is smoothed by its own
bias-corrected exponential moving average and B_simple is the ratio of the two
averages, reported only when the |G|^2 average is positive.

An optional clip bounds what one update can do to the averages: with
``clip`` = k each estimate enters at most k times the running average of the
estimates' absolute values. On Gaussian noise such a bound almost never binds
(the truth tests check the averages stay within 5 %), while MinAtar Breakout
runs held 0-4 updates whose |G|^2 estimate was > 1,000x the run's level: one
moved a 200,000-observation average of B_simple from 1,025 to 9
(docs/results.md).

``NoiseMeter`` keeps one such average per loss part (total, policy, value)
and names their TensorBoard tags; learners feed it per optimizer step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from rlscale import tags

# Samples before the clip binds: its scale, the average absolute estimate, needs a few to mean anything.
CLIP_AFTER = 10


@dataclass(frozen=True)
class NoiseSample:
    """Unbiased per-update estimates from one batch."""

    grad_sq: float  # estimate of |G|^2
    trace_sigma: float  # estimate of tr(Sigma), per observation
    b_small: float  # observations behind the small-batch norm (harmonic mean of group sizes)
    b_big: float  # observations in the whole batch


def estimate(group_sq_norms: Sequence[float], group_sizes: Sequence[float],
             big_sq_norm: float) -> NoiseSample:
    """Eq. A.2 from the group gradients' squared norms and the full-batch one.

    ``big_sq_norm`` must be the squared norm of the size-weighted mean of the
    group gradients, i.e. of the gradient of the mean loss over the batch.
    """
    if len(group_sq_norms) != len(group_sizes) or len(group_sizes) < 2:
        raise ValueError("need at least two groups, one size per group norm")
    if min(group_sizes) <= 0:
        raise ValueError("group sizes must be positive")
    b_big = float(sum(group_sizes))
    b_small = len(group_sizes) / sum(1.0 / b for b in group_sizes)
    small_sq = sum(group_sq_norms) / len(group_sq_norms)
    grad_sq = (b_big * big_sq_norm - b_small * small_sq) / (b_big - b_small)
    trace_sigma = (small_sq - big_sq_norm) / (1.0 / b_small - 1.0 / b_big)
    return NoiseSample(grad_sq, trace_sigma, b_small, b_big)


def equilibrium_grad_sq(lr: float, batch: float, trace_metric_sigma: float) -> float:
    """G^T P G that preconditioned SGD's noise alone holds up in equilibrium on a quadratic (appendix C).

    The step theta <- theta - lr * P * g_B, on L = theta^T H theta / 2 with per-observation
    gradient covariance Sigma, is plain SGD in phi = P^(-1/2) theta with Hessian
    P^(1/2) H P^(1/2) and covariance P^(1/2) Sigma P^(1/2). Its stationary covariance M
    solves H'M + MH' = (lr/B) Sigma' to first order in lr (the paper's M H + H M = (eps/B) Sigma),
    and the trace of that equation times H' gives E[G^T P G] = lr * tr(PHP Sigma) / (2B): the
    gradient a run at temperature lr/B keeps by noise alone, with no slope left to descend.
    ``trace_metric_sigma`` is tr(PHP Sigma) per observation (``tr(H Sigma)`` for plain SGD, P = 1).
    A measured G^T P G well below it says the run is not at that equilibrium.
    """
    if lr <= 0 or batch <= 0:
        raise ValueError("the learning rate and the batch must be positive")
    return lr * trace_metric_sigma / (2.0 * batch)


def slow_gradient_sq(mean_sq_norm: float, trace_over_batch: Sequence[float]) -> float:
    """|mean over W updates of G|^2 from the squared norm of the mean of their W batch gradients.

    Each batch gradient is the true gradient at that update plus independent noise of covariance
    Sigma_t / B_t, so the mean of W of them carries noise sum_t tr(Sigma_t)/B_t / W^2 in its squared
    norm; ``trace_over_batch`` holds each update's tr(Sigma_t)/B_t (from ``estimate``). Unbiased
    where the noise of one batch does not move the gradients of the next: the parameters' response to
    it (the restoring step) makes the mean of a real run's gradients smaller, which is what
    benchmarks/gradient_drift.py measures.
    """
    window = len(trace_over_batch)
    if window < 1:
        raise ValueError("need at least one update")
    return mean_sq_norm - sum(trace_over_batch) / window**2


def metric_estimate(group_sizes: Sequence[float], diagonal: Sequence[float],
                    cross: Sequence[float]) -> NoiseSample:
    """G^T M G and tr(M Sigma) for a metric M estimated on independent env groups (docs/noise-scale.md).

    ``diagonal[i]`` is g_i^T M_k g_i with M_k estimated on another group k != i, so
    E = G^T M G + tr(M Sigma)/b_i; each ``cross`` value is g_j^T M_k g_i with i, j, k
    three different groups, so E = G^T M G exactly. An M measured on the rows of
    the vector it multiplies would correlate with it and bias the diagonal (the
    per-sample Hessian of least squares is x x^T: tests/test_noise.py shows the
    bias). Both returned estimates are unbiased; ``grad_sq`` holds G^T M G and
    ``trace_sigma`` tr(M Sigma). With a fixed M (a preconditioner) use ``estimate``
    on M-weighted squared norms instead: the same eq. A.2.
    """
    if len(diagonal) != len(group_sizes) or len(group_sizes) < 3 or not cross:
        raise ValueError("need at least three groups, a diagonal term per group and cross terms")
    if min(group_sizes) <= 0:
        raise ValueError("group sizes must be positive")
    quadratic = sum(cross) / len(cross)
    trace = sum(b * (d - quadratic) for b, d in zip(group_sizes, diagonal, strict=True)) / len(diagonal)
    b_big = float(sum(group_sizes))
    b_small = len(group_sizes) / sum(1.0 / b for b in group_sizes)
    return NoiseSample(quadratic, trace, b_small, b_big)


@dataclass
class NoiseScaleEMA:
    """Bias-corrected EMAs of |G|^2 and tr(Sigma) with a horizon in observations.

    An update over n observations decays the averages by exp(-n / horizon), so
    the smoothing time in observations does not change when the batch does: a
    batch twice as large both counts twice as much and ages the past twice as
    fast. The start-up bias is corrected as Adam does, by dividing by the total
    weight given so far.
    """

    horizon: float
    grad_sq_avg: float = 0.0
    trace_avg: float = 0.0
    weight: float = 0.0  # sum of the weights given so far (1 - prod of decays)
    samples: int = 0
    # The clip's scale: averages of the (clipped) estimates' absolute values, same weights.
    grad_sq_abs_avg: float = 0.0
    trace_abs_avg: float = 0.0
    clipped: int = 0  # estimates the clip has bounded so far
    observations: float = 0.0  # training observations its samples stood for (the n of every update), summed

    def update(self, sample: NoiseSample, observations: float | None = None, clip: float = 0.0) -> None:
        """Add one update's estimates; ``observations`` defaults to the batch size.

        Pass the observations trained on since the previous call when only some
        updates are measured, so the horizon stays in training observations.
        ``clip`` > 0 bounds each estimate at that multiple of the running average
        of the estimates' absolute values, once ``CLIP_AFTER`` samples have set it.
        """
        if not (math.isfinite(sample.grad_sq) and math.isfinite(sample.trace_sigma)):
            return
        grad_sq, trace = sample.grad_sq, sample.trace_sigma
        if clip > 0 and self.samples >= CLIP_AFTER:
            grad_sq = self._bounded(grad_sq, clip * self.grad_sq_abs_avg / self.weight)
            trace = self._bounded(trace, clip * self.trace_abs_avg / self.weight)
        n = sample.b_big if observations is None else observations
        decay = math.exp(-n / self.horizon)
        self.grad_sq_avg = decay * self.grad_sq_avg + (1.0 - decay) * grad_sq
        self.trace_avg = decay * self.trace_avg + (1.0 - decay) * trace
        self.grad_sq_abs_avg = decay * self.grad_sq_abs_avg + (1.0 - decay) * abs(grad_sq)
        self.trace_abs_avg = decay * self.trace_abs_avg + (1.0 - decay) * abs(trace)
        self.weight = decay * self.weight + (1.0 - decay)
        self.samples += 1
        self.observations += n

    def _bounded(self, value: float, bound: float) -> float:
        if abs(value) <= bound:
            return value
        self.clipped += 1
        return math.copysign(bound, value)

    @property
    def grad_sq(self) -> float | None:
        """Bias-corrected average of |G|^2, None before the first update."""
        return self.grad_sq_avg / self.weight if self.weight > 0 else None

    @property
    def trace_sigma(self) -> float | None:
        return self.trace_avg / self.weight if self.weight > 0 else None

    @property
    def b_simple(self) -> float | None:
        """tr(Sigma)/|G|^2 in observations, or None when undefined (|G|^2 average <= 0).

        The bias correction cancels in the ratio; a non-positive |G|^2 average
        means noise dominates the measurement, and a huge number would mislead.
        """
        if self.weight <= 0 or self.grad_sq_avg <= 0:
            return None
        value = self.trace_avg / self.grad_sq_avg
        return value if math.isfinite(value) and value > 0 else None

    @property
    def missing(self) -> str:
        """Why ``b_simple`` is None, in words for a progress line; "" when it is defined."""
        if self.weight <= 0:
            return "none yet"
        if self.grad_sq_avg <= 0:
            return "|G|^2 average <= 0: the noise drowns the gradient"
        return "" if self.b_simple is not None else "tr(Sigma) average <= 0"

    def state_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_state_dict(cls, state: dict[str, float]) -> NoiseScaleEMA:
        # Checkpoints from before the clip lack its scale: it starts from the magnitudes of the averages
        # themselves (same weighting), which can read low where single estimates are mostly noise.
        state = dict(state)
        if "grad_sq_abs_avg" not in state:
            state["grad_sq_abs_avg"] = abs(state["grad_sq_avg"])
            state["trace_abs_avg"] = abs(state["trace_avg"])
        return cls(**state)


def recovered_samples(steps: Sequence[float], averages: Sequence[float], horizon: float) -> list[float]:
    """The samples behind a ``NoiseScaleEMA`` quantity's bias-corrected averages, logged at ``steps``.

    Each sample moved the average by a known weight, 1 - exp(-n / horizon) for the n observations since
    the previous one, so ``sample = (A_t - d A_(t-1)) / (1 - d)`` on the uncorrected averages A, exactly.
    ``steps``: observations trained when each average was logged (the first sample's n counts from 0).
    An average logged unchanged is a batch that took no sample and aged nothing (noise_settle): NaN
    there, and the next sample's n counts from it. So it is exact for a quantity sampled every batch; one
    sampled every k-th batch (the metrics' curvature_every, the parts' noise_parts_every) is aged by
    the batches between, which its log does not tell from settling ones. For reading a run's logged noise
    scale batch by batch (benchmarks/noise_samples.py)."""
    samples, previous, weight, last, logged = [], 0.0, 0.0, 0.0, None
    for step, average in zip(steps, averages, strict=True):
        if average == logged:
            samples.append(math.nan)
            last = step
            continue
        decay = math.exp(-(step - last) / horizon)
        weight = decay * weight + (1.0 - decay)
        uncorrected = average * weight
        samples.append((uncorrected - decay * previous) / (1.0 - decay))
        previous, last, logged = uncorrected, step, average
    return samples


class NoiseMeter:
    """One ``NoiseScaleEMA`` per loss part, with the horizon kept in fresh observations.

    Not every optimizer step is measured (PPO's later epochs reuse data; the
    policy/value split is measured every few updates), so each part counts the
    fresh observations trained on since it last took a sample and gives that
    sample that weight: the horizon stays in training observations.
    """

    def __init__(self, horizon: float, parts: Sequence[str] = tags.SIGNALS, clip: float = 0.0) -> None:
        self.clip = clip  # NoiseScaleEMA.update's bound on one update's estimates (0 = none)
        # Loss parts (total, policy, value) hold B_simple; the metrics (precond, hessian) the total
        # loss's noise scale in that metric, from samples of metric_estimate or M-weighted norms.
        self.emas = {part: NoiseScaleEMA(horizon) for part in parts}
        self.pending = {part: 0.0 for part in parts}  # fresh observations since each part's last sample

    def observe(self, observations: float) -> None:
        """Fresh observations of one optimizer step (0 when it reuses data)."""
        for part in self.pending:
            self.pending[part] += observations

    def record(self, part: str, group_sq_norms: Sequence[float], group_sizes: Sequence[float],
               big_sq_norm: float) -> dict[str, float]:
        """One measured step of ``part``; returns its raw estimates as TensorBoard scalars."""
        return self.record_sample(part, estimate(group_sq_norms, group_sizes, big_sq_norm))

    def record_sample(self, part: str, sample: NoiseSample) -> dict[str, float]:
        """``record`` for a sample estimated elsewhere (RLlib's learner estimates it remotely)."""
        if self.pending[part] > 0:  # a step on reused data adds no information
            self.emas[part].update(sample, self.pending[part], self.clip)
            self.pending[part] = 0.0
        if part in tags.METRICS:
            return {}
        return {tags.raw_noise("grad_sq", part): sample.grad_sq,
                tags.raw_noise("trace_sigma", part): sample.trace_sigma}

    def b_simple(self, part: str) -> float | None:
        """The noise scale of a signal (``tags.SIGNALS``): a part's B_simple, or a metric's B_P / B_noise."""
        ema = self.emas.get(part)
        return None if ema is None else ema.b_simple

    def taken(self, part: str) -> float:
        """The training observations that ``part``'s average has taken so far (0 where it is not measured): the
        settling batches after new environments join, which neither add nor age, are not among them."""
        ema = self.emas.get(part)
        return 0.0 if ema is None else ema.observations

    def missing(self, part: str) -> str:
        """Why ``b_simple(part)`` is None (``NoiseScaleEMA.missing``); "" when it is defined."""
        ema = self.emas.get(part)
        if ema is None:
            return "not measured"
        if part in tags.METRICS and ema.weight > 0 and ema.b_simple is None:
            # G^T M G, not |G|^2: under the Hessian a value <= 0 may be real negative curvature, not noise.
            return "G^T M G or tr(M Sigma) average <= 0"
        return ema.missing

    def eps_max(self) -> float | None:
        """|G|^2 / G^T H G (eq. 2.6), or None while either is not positive."""
        total, hessian = self.emas.get("total"), self.emas.get("hessian")
        if total is None or hessian is None or total.grad_sq is None or hessian.grad_sq is None:
            return None
        return total.grad_sq / hessian.grad_sq if total.grad_sq > 0 and hessian.grad_sq > 0 else None

    def metrics(self) -> dict[str, float]:
        """The averages of every part and metric, each under its one tag (``tags.signal_tag`` names the signal's)."""
        out: dict[str, float] = {}
        for part, ema in self.emas.items():
            names = (tags.METRIC_TAGS[part] if part in tags.METRICS else
                     tuple(tags.noise(q, part) for q in ("b_simple", "grad_sq", "trace_sigma")))
            for name, value in zip(names, (ema.b_simple, ema.grad_sq, ema.trace_sigma), strict=True):
                if value is not None and ema.samples:
                    out[name] = value
        if self.clip > 0 and "total" in self.emas:
            out[tags.NOISE_CLIPPED] = float(self.emas["total"].clipped)
        eps_max = self.eps_max()
        if eps_max is not None:
            out[tags.EPS_MAX] = eps_max
        return out

    def state_dict(self) -> dict[str, dict[str, float]]:
        return {"emas": {part: ema.state_dict() for part, ema in self.emas.items()},
                "pending": dict(self.pending)}

    def load_state_dict(self, state: dict[str, dict]) -> None:
        # A checkpoint written before the metrics existed holds the parts only: the metrics start fresh.
        self.emas |= {part: NoiseScaleEMA.from_state_dict(s) for part, s in state["emas"].items()}
        self.pending |= {part: float(v) for part, v in state["pending"].items()}
