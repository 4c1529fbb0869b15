"""Actor-critic networks: the Nature CNN for Atari frames, MinAtar's network, an MLP for vectors."""

from __future__ import annotations

import math

import torch
from torch import nn

from rlscale.envs.vector import EnvSpec


def _init(layer: nn.Module, gain: float) -> nn.Module:
    """Orthogonal weights, zero biases, as in Baselines."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class ActorCritic(nn.Module):
    """A trunk with a policy head (logits) and a value head.

    The value head reads the same trunk (Nature CNN, as Baselines and CleanRL on
    Atari) or a trunk of its own (the MLP, as SB3's and CleanRL's classic-control
    policies: a shared small MLP lets the large value gradients swamp the policy).
    """

    def __init__(self, trunk: nn.Module, features: int, n_actions: int, scale: float,
                 value_trunk: nn.Module | None = None) -> None:
        super().__init__()
        self.trunk = trunk
        self.value_trunk = value_trunk
        self.scale = scale  # observations are divided by it (255 for frames)
        self.policy_head = _init(nn.Linear(features, n_actions), 0.01)
        self.value_head = _init(nn.Linear(features, 1), 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = obs.float() / self.scale
        hidden = self.trunk(x)
        value_hidden = hidden if self.value_trunk is None else self.value_trunk(x)
        return self.policy_head(hidden), self.value_head(value_hidden).squeeze(-1)


def sample_actions(logits: torch.Tensor, generator: torch.Generator | None = None,
                   greedy: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """One action per row of a policy's ``logits`` [rows, actions], and its log-probability.

    Drawn from ``generator`` as ``torch.multinomial`` draws from ``Categorical(logits=logits)``'s
    probs, with its log_prob, bit for bit, without building the distribution: on Pong's 4 rows that
    took 49 us a step, this 22 (2026-11-27). ``greedy``: each row's most probable action instead
    (the logits' argmax), nothing drawn. Rollouts, evaluation and ``rlscale.load(...).act`` all act
    through here.
    """
    logits = logits.float()
    log_probs = logits - logits.logsumexp(-1, keepdim=True)
    if greedy:
        action = logits.argmax(-1, keepdim=True)
    else:
        action = torch.multinomial(log_probs.softmax(-1), 1, generator=generator)
    return action.squeeze(1), log_probs.gather(1, action).squeeze(1)


def nature_cnn(in_channels: int) -> nn.Sequential:
    """Mnih et al. 2015: 3 conv layers and a 512-unit layer (1.7M parameters at 84x84)."""
    g = math.sqrt(2)
    return nn.Sequential(
        _init(nn.Conv2d(in_channels, 32, 8, stride=4), g), nn.ReLU(),
        _init(nn.Conv2d(32, 64, 4, stride=2), g), nn.ReLU(),
        _init(nn.Conv2d(64, 64, 3, stride=1), g), nn.ReLU(),
        nn.Flatten(),
        _init(nn.Linear(64 * 7 * 7, 512), g), nn.ReLU(),
    )


def minatar_cnn(in_channels: int) -> nn.Sequential:
    """Young & Tian 2019: one 3x3 convolution with 16 channels, a 128-unit layer (10x10xC grids).

    MinAtar's observations are channels-last (10, 10, C): the network moves the
    channels first itself, so the environments and the batch keep them as they come.
    """
    g = math.sqrt(2)
    return nn.Sequential(
        ChannelsFirst(),
        _init(nn.Conv2d(in_channels, 16, 3, stride=1), g), nn.ReLU(),
        nn.Flatten(),
        _init(nn.Linear(16 * 8 * 8, 128), g), nn.ReLU(),
    )


class ChannelsFirst(nn.Module):
    """[N, H, W, C] -> [N, C, H, W]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, 3, 1, 2)


def is_minatar(shape: tuple[int, ...]) -> bool:
    """MinAtar's 10x10 grids with one channel per object kind."""
    return len(shape) == 3 and shape[:2] == (10, 10)


def mlp(inputs: int, hidden: int) -> nn.Sequential:
    """Two tanh layers, as CleanRL and SB3 use for classic control."""
    g = math.sqrt(2)
    return nn.Sequential(
        nn.Flatten(),
        _init(nn.Linear(inputs, hidden), g), nn.Tanh(),
        _init(nn.Linear(hidden, hidden), g), nn.Tanh(),
    )


def build_network(spec: EnvSpec, kind: str, mlp_hidden: int) -> ActorCritic:
    if kind == "auto":
        kind = "minatar_cnn" if is_minatar(spec.obs_shape) else "nature_cnn" if spec.is_image else "mlp"
    if kind == "minatar_cnn":
        if not is_minatar(spec.obs_shape):
            raise ValueError(f"the MinAtar network needs 10x10xC grids, got {spec.obs_shape}")
        return ActorCritic(minatar_cnn(spec.obs_shape[2]), 128, spec.n_actions, 1.0)
    if kind == "nature_cnn":
        if spec.obs_shape[1:] != (84, 84):
            raise ValueError(f"the Nature CNN needs 84x84 frames, got {spec.obs_shape}")
        return ActorCritic(nature_cnn(spec.obs_shape[0]), 512, spec.n_actions, 255.0)
    inputs = math.prod(spec.obs_shape)
    return ActorCritic(mlp(inputs, mlp_hidden), mlp_hidden, spec.n_actions, 1.0,
                       value_trunk=mlp(inputs, mlp_hidden))
