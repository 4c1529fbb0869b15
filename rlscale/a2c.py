"""A2C (Mnih et al. 2016) as in OpenAI Baselines, with the gradient grouped by environment."""

from __future__ import annotations

import numpy as np
import torch

from rlscale.learner import Learner
from rlscale.rollout import Batch


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


class A2CLearner(Learner):
    def update(self, batch: Batch, progress: float = 0.0) -> dict[str, float]:
        a = self.cfg.agent
        # 1. Targets: n-step returns; advantages against the acting policy's values (as Baselines).
        dev = self.device
        returns_np = nstep_returns(batch, a.gamma)
        returns, advantages = self.rows(returns_np), self.rows(returns_np - batch.values)
        obs, actions = self.rows(batch.obs), self.rows(batch.actions)

        # 2. Loss of a set of rows (the batch, or one group of whole environments).
        def rows_loss(rows: np.ndarray):
            def loss():
                idx = torch.from_numpy(rows).to(dev)
                logits, value = self.forward(obs[idx])
                dist = torch.distributions.Categorical(logits=logits)
                logprob = dist.log_prob(actions[idx])
                entropy = dist.entropy().mean()
                pg_loss = -(advantages[idx] * logprob).mean()
                value_loss = (returns[idx] - value).pow(2).mean()
                stats = {"policy_loss": pg_loss.detach(), "value_loss": value_loss.detach(),
                         "entropy": entropy.detach()}
                return pg_loss - a.ent_coef * entropy, a.vf_coef * value_loss, stats
            return loss

        # 3. Gradient: per group of environments when the noise scale is measured.
        measure = self.cfg.noise.measure_noise
        rows = np.arange(batch.size)
        groups = self.env_group_rows(rows, batch.n_envs) if measure else [rows]
        grad = self.gradient(rows_loss, groups, measure=measure, parts=self.measure_parts_now())

        # 4. Clip and step (skipped, and counted, when not finite).
        return self.apply(grad, batch.size, self.lr_scale(progress))
