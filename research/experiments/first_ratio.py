"""How far PPO's first ratio starts from 1 through precision alone: on a trained Pong policy, the log-probability
of each action as a bf16 actor stored it when it drew the action (bf16 weights, channels-last, 4 rows a pass on one
thread, as each of the default run's 2 actors steps its 4 envs: rlscale/rollout/worker.py), against the learner's
for the same action (fp32 weights channels-last under bf16 autocast, two threads, minibatches of 256 rows with
gradients on, eager and through torch.compile as the default PPO learner here runs them). PPO clips the ratio at
1 ± 0.1, so a ratio off by rounding alone would be clipped before the policy has moved. One checkpoint: what it
shows holds for that policy's states, not for every stage of a run.

    python research/experiments/first_ratio.py CHECKPOINT [--steps 256]
"""

from __future__ import annotations

import argparse
import copy

import numpy as np
import torch

from rlscale.config import build_config
from rlscale.envs.vector import VectorEnv, probe_spec
from rlscale.models.compiled import compile_network
from rlscale.models.nets import build_network
from rlscale.models.precision import inference_model, network_forward
from rlscale.rollout.worker import sample_actions

ACTORS, ENVS_PER_ACTOR, MINIBATCH = 2, 4, 256


def log_probs(model: torch.nn.Module, obs: torch.Tensor, actions: torch.Tensor, bf16: bool) -> torch.Tensor:
    """The learner's log-probabilities of ``actions``, as PPO's loss takes them (rlscale/agents/ppo.py)."""
    logits, _ = network_forward(model, obs, bf16, channels_last=True)
    return torch.distributions.Categorical(logits=logits).log_prob(actions).detach()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint")
    parser.add_argument("--steps", type=int, default=256)
    args = parser.parse_args()
    cfg = build_config("pong", None, {})
    spec = probe_spec(cfg.env)
    model = build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden)
    model.load_state_dict(torch.load(args.checkpoint, weights_only=False)["engine"]["learner"]["model"])
    model = model.to(memory_format=torch.channels_last)  # as Learner.__init__ lays it out
    actor = inference_model(copy.deepcopy(model).requires_grad_(False), "bf16", channels_last=True)
    venv = VectorEnv(cfg.env, list(range(ACTORS * ENVS_PER_ACTOR)), seed=123)
    generator = torch.Generator().manual_seed(0)
    torch.set_num_threads(1)  # an actor's thread
    obs_rows, action_rows, stored_rows = [], [], []
    with torch.no_grad():
        for _ in range(args.steps):
            obs = torch.from_numpy(venv.obs)
            step_actions = []
            for lo in range(0, len(obs), ENVS_PER_ACTOR):  # each actor its own 4 rows
                logits, _ = network_forward(actor, obs[lo:lo + ENVS_PER_ACTOR], True, True)
                action, log_prob = sample_actions(logits, generator)
                step_actions.append(action)
                stored_rows.append(log_prob)
            action = torch.cat(step_actions)
            obs_rows.append(obs)
            action_rows.append(action)
            venv.step(action.numpy())
    venv.close()
    obs, actions, stored = torch.cat(obs_rows), torch.cat(action_rows), torch.cat(stored_rows)
    torch.set_num_threads(2)  # the learner's team
    compiled = compile_network(model, obs[:MINIBATCH], bf16=True, channels_last=True)
    print(compiled.note)

    def learner(net: torch.nn.Module, bf16: bool) -> torch.Tensor:  # gradients on, as in the update
        return torch.cat([log_probs(net, obs[i:i + MINIBATCH], actions[i:i + MINIBATCH], bf16)
                          for i in range(0, len(obs), MINIBATCH)])

    pairs = [("learner bf16 eager / actor bf16", learner(model, True)),
             ("learner fp32 / actor bf16", learner(model, False))]
    if compiled.module is not None:
        pairs.append(("learner bf16 compiled / actor bf16 (the default here)", learner(compiled.module, True)))
    print(f"{len(obs)} states of the policy's own play (actions drawn by the bf16 actors), {args.checkpoint}")
    for name, new in pairs:
        off = (new - stored).exp().sub(1).abs().numpy()
        print(f"{name:55s} |ratio-1|: median {np.median(off):.1e}  95th {np.percentile(off, 95):.1e}  "
              f"max {off.max():.1e}  beyond the clip 0.1: {np.mean(off > 0.1):.2%}")


if __name__ == "__main__":
    main()
