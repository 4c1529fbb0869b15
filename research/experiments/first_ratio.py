"""How far PPO's first ratio starts from 1 through precision alone: a trained Pong policy's log-probabilities of the
actions its actors drew, as a bf16 actor computes them (bf16 weights, channels-last) and as the learner does (fp32
weights under bf16 autocast, eager), against fp32. PPO clips the ratio at 1 ± 0.1; a ratio off by rounding alone is
clipped before the policy has moved.

    python research/experiments/first_ratio.py CHECKPOINT [--steps 256]

Observations: the checkpoint's own policy playing Pong (8 envs, fp32 actions), so the states are the ones it sees.
The learner's compiled bf16 passes (torch.compile, as the default PPO learner runs them here) are read too, in
minibatches of 256.
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


def log_probs(model: torch.nn.Module, obs: torch.Tensor, actions: torch.Tensor, bf16: bool,
              channels_last: bool) -> torch.Tensor:
    logits, _ = network_forward(model, obs, bf16, channels_last)
    return (logits - logits.logsumexp(-1, keepdim=True)).gather(1, actions[:, None]).squeeze(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint")
    parser.add_argument("--steps", type=int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = build_config("pong", None, {})
    spec = probe_spec(cfg.env)
    model = build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden)
    state = torch.load(args.checkpoint, weights_only=False)
    model.load_state_dict(state["engine"]["learner"]["model"])
    model.requires_grad_(False)
    actor = inference_model(copy.deepcopy(model), "bf16", channels_last=True)
    venv = VectorEnv(cfg.env, list(range(8)), seed=123)
    generator = torch.Generator().manual_seed(0)
    obs_rows, action_rows = [], []
    with torch.no_grad():
        for _ in range(args.steps):
            obs = torch.from_numpy(venv.obs)
            logits, _ = network_forward(model, obs, False, False)
            action, _ = sample_actions(logits, generator)
            obs_rows.append(obs)
            action_rows.append(action)
            venv.step(action.numpy())
        obs, actions = torch.cat(obs_rows), torch.cat(action_rows)
        fp32 = log_probs(model, obs, actions, False, False)
        actor_bf16 = log_probs(actor, obs, actions, True, True)
        learner_bf16 = log_probs(model, obs, actions, True, True)
    venv.close()
    # The learner's compiled passes (bf16 PPO on a CPU compiles them: rlscale/training/engine.py), on PPO's minibatches.
    model.requires_grad_(True)
    compiled = compile_network(model, obs[:256], bf16=True, channels_last=True)
    model.requires_grad_(False)
    with torch.no_grad():
        compiled_bf16 = (torch.cat([log_probs(compiled.module, obs[i:i + 256], actions[i:i + 256], True, True)
                                    for i in range(0, len(obs), 256)]) if compiled.module is not None else None)
    print(compiled.note)
    print(f"{len(obs)} states of the policy's own play, {args.checkpoint}")
    pairs = [("learner bf16 eager / actor bf16", learner_bf16, actor_bf16),
             ("learner bf16 / actor fp32", learner_bf16, fp32),
             ("learner fp32 / actor bf16", fp32, actor_bf16)]
    if compiled_bf16 is not None:
        pairs.append(("learner bf16 compiled / actor bf16 (the default here)", compiled_bf16, actor_bf16))
    for name, new, old in pairs:
        off = (new - old).exp().sub(1).abs().numpy()
        print(f"{name:55s} |ratio-1|: median {np.median(off):.4f}  95th {np.percentile(off, 95):.4f}  "
              f"max {off.max():.3f}  beyond the clip 0.1: {np.mean(off > 0.1):.2%}")


if __name__ == "__main__":
    main()
