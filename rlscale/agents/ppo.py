"""PPO (Schulman et al. 2017) as in CleanRL's ppo_atari.py, with the gradient grouped by environment.

Same section order and names as a2c.py. The noise scale is measured on the
first epoch's minibatches only: later epochs reuse the data, so their
gradients are no longer fresh draws and would bias it. Each minibatch is a
random subset of the batch (as CleanRL shuffles); its groups for the
estimator are its observations from k disjoint sets of whole environments, so
the groups are independent; the minibatch is the optimizer batch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlscale import tags
from rlscale.agents.gradients import PPO_CPU_CHUNK_ROWS, LossParts, RowsLoss
from rlscale.agents.learner import Learner
from rlscale.rollout.worker import Batch


def gae_advantages(batch: Batch, gamma: float, lam: float) -> np.ndarray:
    """Generalised advantage estimates [n_steps, n_envs].

    A terminated step has no future; a truncated one bootstraps its TD error from
    V(terminal obs) and, like a terminated one, ends the GAE chain.
    """
    advantages = np.empty_like(batch.rewards)
    next_value = batch.bootstrap_values.astype(np.float32)
    running = np.zeros(batch.n_envs, dtype=np.float32)
    for t in reversed(range(batch.n_steps)):
        done = batch.terminated[t] | batch.truncated[t]
        next_value = np.where(batch.truncated[t], batch.truncation_values[t], next_value)
        next_value = np.where(batch.terminated[t], 0.0, next_value)
        delta = batch.rewards[t] + gamma * next_value - batch.values[t]
        running = delta + gamma * lam * np.where(done, 0.0, running)
        advantages[t] = running
        next_value = batch.values[t]
    return advantages


def explained_variance(predicted: np.ndarray, target: np.ndarray,
                       variance: Callable[[np.ndarray], float] = np.var) -> float:
    """1 - Var(target - predicted) / Var(target); ``variance``: over this batch, or over all learners'."""
    var = variance(target)
    return float("nan") if var == 0 else float(1 - variance(target - predicted) / var)


@dataclass
class PPORows:
    """The batch as flat rows on the learner's device."""

    obs: torch.Tensor
    actions: torch.Tensor
    returns: torch.Tensor
    advantages: torch.Tensor
    old_logprobs: torch.Tensor
    old_values: torch.Tensor


class MinibatchMeans:
    """Scalars of an update's minibatches, by tag; ``means`` gives each tag's mean over the minibatches that logged it.

    A non-finite value stays in the mean (a NaN shows in the update's scalar), as it would in A2C's single step.
    """

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def add(self, metrics: dict[str, float]) -> None:
        for tag, value in metrics.items():
            self.values.setdefault(tag, []).append(float(value))

    def means(self) -> dict[str, float]:
        return {tag: math.fsum(values) / len(values) for tag, values in self.values.items()}


class PPOLearner(Learner):
    cpu_chunk_rows = PPO_CPU_CHUNK_ROWS  # one pass per default minibatch (measured faster than two)

    def loss(self, data: PPORows, adv_mean: float, adv_std: float, rows: np.ndarray) -> LossParts:
        """Mean clipped policy part (with the entropy bonus) and value part over ``rows``.

        ``adv_mean``, ``adv_std``: the minibatch's advantage statistics, computed
        before it is split into env groups, so every group normalises alike.
        """
        a = self.agent
        idx = self.index(rows)
        logits, value = self.forward(data.obs[idx])
        dist = torch.distributions.Categorical(logits=logits)
        logratio = dist.log_prob(data.actions[idx]) - data.old_logprobs[idx]
        ratio = logratio.exp()
        adv = data.advantages[idx]
        if a.norm_adv:
            adv = (adv - adv_mean) / (adv_std + 1e-8)
        pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - a.clip_coef, 1 + a.clip_coef)).mean()
        returns, old_values = data.returns[idx], data.old_values[idx]
        value_loss = (value - returns).pow(2)
        if a.clip_value_loss:
            clipped = old_values + (value - old_values).clamp(-a.clip_coef, a.clip_coef)
            value_loss = torch.max(value_loss, (clipped - returns).pow(2))
        value_loss = 0.5 * value_loss.mean()
        entropy = dist.entropy().mean()
        with torch.no_grad():
            stats = {"policy_loss": pg_loss, "value_loss": value_loss, "entropy": entropy,
                     "approx_kl": ((ratio - 1) - logratio).mean(),  # CleanRL's low-variance k3
                     "clipfrac": ((ratio - 1).abs() > a.clip_coef).float().mean()}
        return pg_loss - a.ent_coef * entropy, a.vf_coef * value_loss, stats

    def update(self, batch: Batch, lr: float | None = None) -> dict[str, float]:
        a = self.agent
        lr = a.lr if lr is None else lr
        # 1. Targets: GAE advantages and returns, from the acting policy's values.
        data = self.targets(batch)
        returns = data.returns.cpu().numpy()

        # 2. Gradient of each minibatch's loss; per env group in the first epoch's minibatches.
        #    Minibatches are drawn over the whole batch, so data-parallel learners (each
        #    holding some of its environments) draw the same ones and take their own rows.
        measure = self.begin_batch(batch)
        # Each minibatch's scalars, logged as their means over the update: the loss statistics and
        # the gradient norm over every minibatch of every epoch; the raw noise estimates over the
        # measured minibatches (each an unbiased estimate, so their mean is one too).
        stepped = MinibatchMeans()
        raw = MinibatchMeans()
        measured: dict[str, float] = {}  # the metrics' measurement, on the batch's first minibatch
        generator = np.random.default_rng(self.updates)
        whole_batch = batch.n_steps * self.whole_batch_envs(batch)
        measured_minibatches = self.noise_settings.noise_minibatches or a.n_minibatches
        for epoch in range(a.n_epochs):
            for index, mb in enumerate(np.array_split(generator.permutation(whole_batch), a.n_minibatches)):
                mb = self.own_rows(mb)
                adv_mean, adv_std = self.minibatch_mean_std(data.advantages[self.index(mb)])
                loss = functools.partial(self.loss, data, adv_mean, adv_std)
                grad = self.gradient(loss, mb, batch.n_envs,
                                     measure=measure and epoch == 0 and index < measured_minibatches)

                # 3. Noise scale (in the other metrics every few batches), clip and step (skipped when not finite).
                raw.add(self.record_noise(grad, sum(grad.sizes) if epoch == 0 else 0.0))
                if epoch == 0 and not measured and grad.finite and self.measure_metrics_now():
                    measured = self.record_metrics(loss, mb, batch.n_envs)
                stepped.add(self.step(grad, lr))
        self.batches += 1
        metrics = raw.means() | stepped.means() | measured
        if tags.SKIPPED_UPDATES in metrics:  # a count so far, not a per-minibatch quantity
            metrics[tags.SKIPPED_UPDATES] = float(self.skipped_updates)
        metrics[tags.EXPLAINED_VARIANCE] = explained_variance(
            batch.values.ravel(), returns.ravel(), np.var if self.data_parallel is None else self.data_parallel.variance)
        return metrics

    def targets(self, batch: Batch) -> PPORows:
        """The batch as rows with its GAE advantages and returns, from the acting policy's values."""
        a = self.agent
        advantages = gae_advantages(batch, a.gamma, a.gae_lambda)
        return PPORows(self.rows(batch.obs), self.rows(batch.actions), self.rows(advantages + batch.values),
                       self.rows(advantages), self.rows(batch.logprobs), self.rows(batch.values))

    def batch_loss(self, batch: Batch) -> RowsLoss:
        # The clipped objective against the acting policy, advantages normalised over the whole batch.
        data = self.targets(batch)
        adv_mean, adv_std = self.minibatch_mean_std(data.advantages)
        return functools.partial(self.loss, data, adv_mean, adv_std)

    def minibatch_mean_std(self, advantages: torch.Tensor) -> tuple[float, float]:
        """The minibatch's advantage mean and std, over every learner's share of it."""
        if self.data_parallel is None:
            return float(advantages.mean()), float(advantages.std())
        return self.data_parallel.mean_std(advantages)

