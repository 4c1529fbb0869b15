"""A2C (Mnih et al. 2016) as in OpenAI Baselines, with the gradient grouped by environment."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from rlscale.agents.gradients import LossParts, RowsLoss
from rlscale.agents.learner import Learner
from rlscale.rollout.worker import Batch


def nstep_returns(batch: Batch, gamma: float) -> np.ndarray:
    """Bootstrapped n-step returns [n_steps, n_envs].

    A terminated step ends the return; a truncated one bootstraps from the value
    of its terminal observation (Baselines treats truncation as termination).
    """
    returns = np.empty_like(batch.rewards)
    future = batch.bootstrap_values.astype(np.float32)
    for t in reversed(range(batch.n_steps)):
        future = np.where(batch.truncated[t], batch.truncation_values[t], future)
        future = batch.rewards[t] + gamma * np.where(batch.terminated[t], 0.0, future)
        returns[t] = future
    return returns


@dataclass
class A2CRows:
    """The batch as flat rows on the learner's device."""

    obs: torch.Tensor
    actions: torch.Tensor
    returns: torch.Tensor
    advantages: torch.Tensor
    # With --overlap the batch was collected one update earlier: the acting policy's log-probs
    # weight the policy gradient (IMPALA's truncated importance weight, rho-bar = 1).
    behaviour_logprobs: torch.Tensor | None = None


class A2CLearner(Learner):
    def loss(self, data: A2CRows, rows: np.ndarray) -> LossParts:
        """Mean policy part (with the entropy bonus) and value part over ``rows``."""
        a = self.agent
        idx = self.index(rows)
        logits, value = self.forward(data.obs[idx])
        dist = torch.distributions.Categorical(logits=logits)
        logprob = dist.log_prob(data.actions[idx])
        entropy = dist.entropy().mean()
        advantages = data.advantages[idx]
        if data.behaviour_logprobs is not None:
            advantages = advantages * (logprob.detach() - data.behaviour_logprobs[idx]).exp().clamp(max=1.0)
        pg_loss = -(advantages * logprob).mean()
        value_loss = (data.returns[idx] - value).pow(2).mean()
        stats = {"policy_loss": pg_loss.detach(), "value_loss": value_loss.detach(), "entropy": entropy.detach()}
        return pg_loss - a.ent_coef * entropy, a.vf_coef * value_loss, stats

    def batch_loss(self, batch: Batch) -> RowsLoss:
        # Targets: n-step returns; advantages against the acting policy's values (as Baselines).
        returns = nstep_returns(batch, self.agent.gamma)
        data = A2CRows(self.rows(batch.obs), self.rows(batch.actions), self.rows(returns),
                       self.rows(returns - batch.values),
                       self.rows(batch.logprobs) if self.lagged else None)
        return functools.partial(self.loss, data)

    def update(self, batch: Batch, lr: float | None = None) -> dict[str, float]:
        a = self.agent
        lr = a.lr if lr is None else lr
        # 1-2. The batch's loss (its targets), and its gradient; per env group when the noise scale is measured.
        loss, rows = self.batch_loss(batch), np.arange(batch.size)
        grad = self.gradient(loss, rows, batch.n_envs, measure=self.begin_batch(batch))

        # 3. Noise scale (in the other metrics every few batches), clip and step (skipped when not finite).
        metrics = self.record_noise(grad, sum(grad.sizes))  # the whole batch, with data-parallel learners too
        if grad.finite and self.measure_metrics_now():
            metrics |= self.record_metrics(loss, rows, batch.n_envs)
        self.batches += 1
        return metrics | self.step(grad, lr)
