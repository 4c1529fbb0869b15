"""The lean peers: what a careful user writes by hand in one file (fp32, no framework, one process).

Imported by the benchmark scripts from their folder. ``lean_a2c``: A2C, n-step
returns, TF-style RMSprop. ``lean_ppo``: CleanRL's ppo_atari.py settings
(8 envs x 128 steps, GAE, 4 epochs x 4 minibatches, clipped policy and value
losses, Adam). Both step ale-py's native vector env in one thread and return a
``Rate`` over the wall time given.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
import torch
from benchtiming import Rate, timed

from rlscale.agents.optim import RMSpropTF
from rlscale.config import build_config
from rlscale.envs.vector import probe_spec
from rlscale.models.nets import build_network


@contextlib.contextmanager
def random_pong(n_envs: int) -> Iterator[Callable[[], int]]:
    """ale-py's native vector env of ``n_envs`` Pongs in one thread; yields a call that steps
    them all with random actions and returns the agent steps taken (the emulator alone)."""
    from ale_py.vector_env import AtariVectorEnv

    env = AtariVectorEnv("pong", n_envs, num_threads=1, reward_clipping=False)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    try:
        yield lambda: (env.step(rng.integers(0, 6, n_envs)), n_envs)[1]
    finally:
        env.close()


def pong_network(algo: str) -> torch.nn.Module:
    spec = probe_spec(build_config("pong", algo, {}).env)
    return build_network(spec, "nature_cnn", 64)


def lean_a2c(n_envs: int, seconds: float, n_steps: int = 5, gamma: float = 0.99) -> Rate:
    """The reference: what a careful user writes in one file (fp32, no framework)."""
    from ale_py.vector_env import AtariVectorEnv

    env = AtariVectorEnv("pong", n_envs, num_threads=1)  # clips rewards itself
    obs, _ = env.reset(seed=0)
    model = pong_network("a2c")
    optimizer = RMSpropTF(model.parameters(), lr=7e-4, alpha=0.99, eps=1e-5)
    state = {"obs": obs}

    def update() -> int:
        obs_buf, actions, rewards, dones, values = [], [], [], [], []
        with torch.no_grad():
            for _ in range(n_steps):
                o = torch.from_numpy(state["obs"])
                logits, value = model(o)
                action = torch.distributions.Categorical(logits=logits).sample()
                state["obs"], reward, term, trunc, _ = env.step(action.numpy())
                obs_buf.append(o)
                actions.append(action)
                rewards.append(torch.as_tensor(reward, dtype=torch.float32))
                dones.append(torch.as_tensor(term | trunc, dtype=torch.float32))
                values.append(value)
            ret = model(torch.from_numpy(state["obs"]))[1]
        returns = []
        for r, d in zip(reversed(rewards), reversed(dones), strict=True):
            ret = r + gamma * ret * (1 - d)
            returns.append(ret)
        returns = torch.stack(returns[::-1]).flatten()
        logits, value = model(torch.cat(obs_buf))
        dist = torch.distributions.Categorical(logits=logits)
        advantages = returns - torch.cat(values)
        loss = (-(advantages * dist.log_prob(torch.cat(actions))).mean()
                + 0.5 * (returns - value).pow(2).mean() - 0.01 * dist.entropy().mean())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        return n_envs * n_steps

    try:
        return timed(update, seconds)
    finally:
        env.close()


def lean_ppo(seconds: float, n_envs: int = 8, n_steps: int = 128, epochs: int = 4, minibatches: int = 4,
             gamma: float = 0.99, lam: float = 0.95, clip: float = 0.1) -> Rate:
    """CleanRL's PPO for Atari, one process: collect 1,024 steps, then 16 minibatch updates of 256 rows."""
    from ale_py.vector_env import AtariVectorEnv

    env = AtariVectorEnv("pong", n_envs, num_threads=1)  # clips rewards itself
    obs, _ = env.reset(seed=0)
    model = pong_network("ppo")
    optimizer = torch.optim.Adam(model.parameters(), lr=2.5e-4, eps=1e-5)
    state = {"obs": obs}
    generator = np.random.default_rng(0)

    def update() -> int:
        obs_buf, actions, logprobs, rewards, dones, values = [], [], [], [], [], []
        with torch.no_grad():
            for _ in range(n_steps):
                o = torch.from_numpy(state["obs"])
                logits, value = model(o)
                dist = torch.distributions.Categorical(logits=logits)
                action = dist.sample()
                state["obs"], reward, term, trunc, _ = env.step(action.numpy())
                obs_buf.append(o)
                actions.append(action)
                logprobs.append(dist.log_prob(action))
                rewards.append(torch.as_tensor(reward, dtype=torch.float32))
                dones.append(torch.as_tensor(term | trunc, dtype=torch.float32))
                values.append(value)
            next_value = model(torch.from_numpy(state["obs"]))[1]
        advantages, running = [], torch.zeros(n_envs)
        for t in reversed(range(n_steps)):
            following = next_value if t == n_steps - 1 else values[t + 1]
            delta = rewards[t] + gamma * following * (1 - dones[t]) - values[t]
            running = delta + gamma * lam * (1 - dones[t]) * running
            advantages.append(running)
        advantages = torch.stack(advantages[::-1]).flatten()
        values_flat = torch.stack(values).flatten()
        returns = advantages + values_flat
        b_obs, b_actions, b_logprobs = torch.cat(obs_buf), torch.cat(actions), torch.cat(logprobs)
        size = n_envs * n_steps
        for _ in range(epochs):
            for mb in np.array_split(generator.permutation(size), minibatches):
                logits, value = model(b_obs[mb])
                dist = torch.distributions.Categorical(logits=logits)
                logratio = dist.log_prob(b_actions[mb]) - b_logprobs[mb]
                ratio = logratio.exp()
                adv = advantages[mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()
                clipped = values_flat[mb] + (value - values_flat[mb]).clamp(-clip, clip)
                v_loss = 0.5 * torch.max((value - returns[mb]).pow(2), (clipped - returns[mb]).pow(2)).mean()
                loss = pg_loss - 0.01 * dist.entropy().mean() + 0.5 * v_loss
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                optimizer.step()
        return size

    try:
        return timed(update, seconds, warmup=1)
    finally:
        env.close()
