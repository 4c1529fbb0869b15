"""``rlscale evaluate <run dir or checkpoint>``: an honest score, and a video.

Plays full episodes with the checkpoint's policy: no life-loss resets,
unclipped returns, no random warm-up, Atari episodes capped at the standard
108,000 frames (30 minutes of play). Episodes run on a few environments at
once; each environment plays a fixed quota of episodes, decided up front, so
short episodes are not over-represented the way "the first N to finish"
would over-represent them.

The video (``--video out.mp4`` or ``clip.gif``) is the first episode of
environment 0, at the agent's decision rate (frames per second = 60 / frame skip
on Atari), showing the colour frame the agent's input was made from;
``--video-frames N`` keeps its first N frames (a clip for a README).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from rlscale.cli import Parser, writable_file
from rlscale.config import Config, loads_saved
from rlscale.envs.vector import Episode, VectorEnv, check_env_id, probe_spec
from rlscale.errors import UserError, exits_cleanly
from rlscale.models.nets import ActorCritic, build_network, sample_actions
from rlscale.models.precision import has_convolutions
from rlscale.reports.video import VIDEO_SUFFIXES, GifWriter, VideoWriter, open_video
from rlscale.rundir import checkpoint

ATARI_EPISODE_FRAMES = 108_000


@dataclass
class Agent:
    cfg: Config
    model: ActorCritic
    checkpoint: Path
    agent_steps: int


@dataclass
class Evaluation:
    episodes: list[Episode]
    video_frames: int = 0
    steps: int = 0  # agent steps taken, the episodes past an environment's quota and unfinished ones included

    @property
    def returns(self) -> np.ndarray:
        return np.array([e.episode_return for e in self.episodes])

    @property
    def lengths(self) -> np.ndarray:
        return np.array([e.length for e in self.episodes])


def load_agent(path: Path, env_id: str | None = None) -> Agent:
    """The policy of a checkpoint file, or of a run directory's latest checkpoint.

    ``env_id`` evaluates it on another environment (say, with sticky actions)
    whose observations and actions match the ones it was trained on.
    """
    if path.is_dir():
        path = checkpoint.latest(path)
    elif not path.exists():
        raise UserError(f"{path} does not exist; give a run directory or a checkpoint file (ckpt-*.pt)")
    state = checkpoint.load(path)
    if state["backend"] != "native":
        raise UserError(f"{path} is a --backend {state['backend']} checkpoint; evaluate plays runs of "
                        "the native engine (RLlib's own tools restore RLlib checkpoints)")
    cfg = loads_saved(state["config"], f"config in {path}")
    check_env_id(cfg.env.env_id)
    spec = probe_spec(cfg.env)
    if env_id is not None and env_id != cfg.env.env_id:
        check_env_id(env_id)
        trained_on = cfg.env.env_id
        cfg = replace(cfg, env=replace(cfg.env, env_id=env_id))
        other = probe_spec(cfg.env)
        if (other.obs_shape, other.n_actions) != (spec.obs_shape, spec.n_actions):
            raise UserError(
                f"the policy was trained on {trained_on} (observations {spec.obs_shape}, "
                f"{spec.n_actions} actions); {env_id} has observations {other.obs_shape} and "
                f"{other.n_actions} actions"
            )
    model = build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden)
    try:
        model.load_state_dict(state["engine"]["learner"]["model"])
    except (KeyError, RuntimeError) as err:
        raise UserError(f"{path}: the weights do not fit the network of its config ({err})") from None
    model.eval()
    return Agent(cfg, model, path, int(state["trainer"]["agent_steps"]))


def evaluation_env_config(cfg: Config) -> Config:
    env = replace(cfg.env, warmup_max_steps=0)
    if cfg.is_atari:
        env = replace(env, max_episode_frames=ATARI_EPISODE_FRAMES)
    return replace(cfg, env=env)


def quotas(episodes: int, n_envs: int) -> np.ndarray:
    """Episodes each environment plays: as even as possible, fixed before playing."""
    return np.array([episodes // n_envs + (i < episodes % n_envs) for i in range(n_envs)])


@torch.no_grad()
def evaluate(agent: Agent, episodes: int, deterministic: bool = False, seed: int = 1_000_003,
             n_envs: int = 8, video: VideoWriter | GifWriter | None = None, on_episode=None) -> Evaluation:
    cfg = evaluation_env_config(agent.cfg)
    n = min(n_envs, episodes)
    quota = quotas(episodes, n)
    played = np.zeros(n, dtype=int)
    if video is not None:
        # pygame renders off-screen; without this SDL looks for a display and complains.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    group = VectorEnv(cfg.env, list(range(n)), seed, render=video is not None)
    if video is not None and not cfg.is_atari:
        _check_renders(group)
    generator = torch.Generator().manual_seed(seed)
    result = Evaluation([])
    recording = video is not None
    # A small network's passes on a team of threads wait for the slowest: beside a busy process one
    # CartPole evaluation took 10.7 s on two threads and 0.42 s on one (rlscale/engine/threads.py).
    # The caller's thread count comes back afterwards (a training run measuring by return plays here).
    threads = torch.get_num_threads()
    if not has_convolutions(agent.model):
        torch.set_num_threads(1)
    try:
        if recording:
            video.add(group.frame(0))
        while (played < quota).any():
            logits, _ = agent.model(torch.from_numpy(group.obs))
            actions, _ = sample_actions(logits, generator, greedy=deterministic)
            step = group.step(actions.numpy())
            result.steps += n
            if recording:
                if step.terminated[0] or step.truncated[0] or video.full:
                    recording = False  # the frame now shown is the next episode's first
                else:
                    video.add(group.frame(0))
            for ep in step.episodes:
                if played[ep.env_id] < quota[ep.env_id]:
                    played[ep.env_id] += 1
                    result.episodes.append(ep)
                    if on_episode is not None:
                        on_episode(ep)
    finally:
        torch.set_num_threads(threads)
        group.close()
    result.video_frames = video.frames if video is not None else 0
    return result


def _check_renders(group: VectorEnv) -> None:
    from gymnasium.error import DependencyNotInstalled

    try:
        group.frame(0)
    except DependencyNotInstalled as err:
        group.close()
        raise UserError(f"cannot render for --video: {err}") from None


def video_fps(cfg: Config) -> float:
    if cfg.is_atari:
        return 60.0 / cfg.env.frame_skip
    import gymnasium as gym

    env = gym.make(cfg.env.env_id)
    try:
        return float(env.metadata.get("render_fps") or 30)
    finally:
        env.close()


def _summary(values: np.ndarray, fmt: str) -> str:
    std = values.std(ddof=1) if values.size > 1 else 0.0
    return (f"{values.mean():{fmt}} ± {std:{fmt}} (min {values.min():{fmt}}, max {values.max():{fmt}})")


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError
    return value


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="rlscale evaluate", description=__doc__.splitlines()[0])
    p.add_argument("path", type=Path, help="run directory (its latest checkpoint) or a checkpoint file")
    p.add_argument("--episodes", type=positive_int, default=10, help="full episodes to play (default 10)")
    p.add_argument("--deterministic", action="store_true", help="take the most likely action (default: sample)")
    p.add_argument("--video", type=Path, help="write the first episode of environment 0 to this .mp4 or .gif")
    p.add_argument("--video-frames", type=positive_int, default=None,
                   help="keep only the video's first N frames (a clip; default: the whole episode)")
    p.add_argument("--json", type=Path, help="also write every episode's return and length to this file")
    p.add_argument("--env", help="evaluate on this gymnasium id instead of the training one")
    p.add_argument("--seed", type=int, default=1_000_003, help="seed of the evaluation environments")
    p.add_argument("--n-envs", type=positive_int, default=8, help="environments played at once (default 8)")
    args = p.parse_args(argv)
    if args.video is not None:
        writable_file(args.video, *VIDEO_SUFFIXES)
    elif args.video_frames is not None:
        raise UserError("--video-frames needs --video")
    if args.json is not None:
        writable_file(args.json, ".json")
    agent = load_agent(args.path, args.env)
    policy = "greedy actions" if args.deterministic else "sampled actions"
    print(f"{agent.cfg.env.env_id} | {agent.cfg.agent.algo} | {agent.checkpoint} "
          f"({agent.agent_steps:,} agent steps) | {args.episodes} episodes, {policy}", flush=True)

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    returns: list[float] = []
    progress = Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[mean]}"), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=True)

    def on_episode(ep: Episode) -> None:
        returns.append(ep.episode_return)
        progress.update(task, advance=1, mean=f"mean return {np.mean(returns):.1f}")

    writer = (open_video(args.video, video_fps(agent.cfg), args.video_frames or 0)
              if args.video is not None else None)
    with progress, writer or contextlib.nullcontext():
        task = progress.add_task("eval", total=args.episodes, mean="")
        result = evaluate(agent, args.episodes, args.deterministic, args.seed, args.n_envs,
                          writer, on_episode)
    unit = "agent steps"
    print(f"return  {_summary(result.returns, '.1f')} over {len(result.episodes)} episodes")
    print(f"length  {_summary(result.lengths, ',.0f')} {unit}")
    truncated = int(sum(e.length * agent.cfg.frames_per_step >= ATARI_EPISODE_FRAMES
                        for e in result.episodes)) if agent.cfg.is_atari else 0
    if truncated:
        print(f"{truncated} episode(s) hit the {ATARI_EPISODE_FRAMES:,}-frame cap")
    if args.json is not None:
        report = {"checkpoint": str(agent.checkpoint), "env_id": agent.cfg.env.env_id,
                  "agent_steps": agent.agent_steps, "deterministic": args.deterministic,
                  "seed": args.seed, "mean_return": float(result.returns.mean()),
                  "episodes": [{"env": e.env_id, "return": e.episode_return, "length": e.length}
                               for e in result.episodes],
                  "video": str(args.video) if args.video else None, "video_frames": result.video_frames}
        args.json.write_text(json.dumps(report, indent=2))
    if writer is not None:
        seconds = result.video_frames / writer.fps
        print(f"video   {args.video} ({result.video_frames:,} frames, {math.floor(seconds // 60)}:"
              f"{seconds % 60:04.1f} at {writer.fps:g} fps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
