"""Evaluation and comparison of trained runs: real training, real environments, real files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from PIL import Image

from rlscale.config import EnvConfig
from rlscale.envs.vector import Episode, VectorEnv
from rlscale.reports.evaluate import evaluate, load_agent, quotas
from rlscale.reports.video import GifWriter, VideoWriter
from tests.conftest import run_command, run_in_process
from tests.test_cli import assert_one_line_error

GOALS = ["30", "60"]


@pytest.fixture(scope="module")
def trained_runs(tmp_path_factory) -> list[Path]:
    """Two short CartPole A2C runs (serial: no Ray needed for this)."""
    runs = []
    for seed in (1, 2):
        run_dir = tmp_path_factory.mktemp("runs") / f"cartpole-seed{seed}"
        # Goal 60 comes at ~4,400-5,900 agent steps for these seeds: 10,000 reach both goals.
        result = run_in_process(["rlscale.train", "cartpole", "--pool", "serial", "--total-frames", "10000",
                                 "--seed", str(seed), "--goals", *GOALS, "--run-dir", str(run_dir)])
        assert result.returncode == 0, result.stderr
        runs.append(run_dir)
    return runs


def test_quotas_are_fixed_and_even():
    assert quotas(10, 4).tolist() == [3, 3, 2, 2]
    assert quotas(3, 3).tolist() == [1, 1, 1]


def test_evaluation_plays_the_asked_episodes_with_unclipped_returns(trained_runs):
    agent = load_agent(trained_runs[0])
    assert agent.agent_steps == 10_000
    result = evaluate(agent, episodes=7, n_envs=3)
    assert len(result.episodes) == 7
    # Each environment played exactly its quota, decided before playing.
    counts = np.bincount([e.env_id for e in result.episodes], minlength=3)
    assert counts.tolist() == quotas(7, 3).tolist()
    # CartPole pays 1 per step: the return is the length, capped at 500.
    assert (result.returns == result.lengths).all()
    assert ((result.lengths >= 1) & (result.lengths <= 500)).all()


def greedy_episodes_by_hand(agent, seed: int, quota: np.ndarray) -> list[Episode]:
    """What a greedy evaluation must report, from plain gymnasium CartPoles stepped in lockstep.

    Environment i is seeded seed + i (as a vector env seeds its members) and reset unseeded after
    each episode; the policy sees the rows in environment order, as in evaluate. Each environment
    reports its first quota[i] episodes, in the order they finish (ties: lower id first)."""
    import gymnasium as gym

    envs = [gym.make("CartPole-v1") for _ in quota]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    returns, lengths, out = [0.0] * len(envs), [0] * len(envs), []
    played = np.zeros(len(envs), dtype=int)
    try:
        while (played < quota).any():
            with torch.no_grad():
                logits, _ = agent.model(torch.from_numpy(np.stack(obs)))
            for i, (env, action) in enumerate(zip(envs, logits.argmax(dim=1).tolist(), strict=True)):
                obs[i], reward, terminated, truncated, _ = env.step(action)
                returns[i] += reward
                lengths[i] += 1
                if terminated or truncated:
                    if played[i] < quota[i]:
                        out.append(Episode(i, returns[i], lengths[i]))
                        played[i] += 1
                    obs[i], returns[i], lengths[i] = env.reset()[0], 0.0, 0
    finally:
        for env in envs:
            env.close()
    return out


@pytest.mark.timeout(120, func_only=True)  # the test: seconds; the module's training runs are set up before
def test_deterministic_evaluation_repeats_exactly(trained_runs):
    """Greedy actions and a fixed seed: the same episodes of the same environments, in the same order,
    each environment playing its quota (2, 2, 1 of 5), and exactly the games plain CartPoles give."""
    agent = load_agent(trained_runs[0])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 3-row MLP: two threads took 10 s for what one does in 0.4 (a busy 2-core machine)
    try:
        a = evaluate(agent, episodes=5, deterministic=True, n_envs=3, seed=5)
        b = evaluate(agent, episodes=5, deterministic=True, n_envs=3, seed=5)
        by_hand = greedy_episodes_by_hand(agent, 5, quotas(5, 3))
    finally:
        torch.set_num_threads(threads)
    assert a.episodes == b.episodes  # env ids, returns and lengths, unsorted
    assert np.bincount([e.env_id for e in a.episodes], minlength=3).tolist() == quotas(5, 3).tolist() == [2, 2, 1]
    assert a.episodes == by_hand


def test_video_decodes_back_with_one_frame_per_step(trained_runs, tmp_path):
    out, report = tmp_path / "cartpole.mp4", tmp_path / "eval.json"
    result = run_command(["rlscale", "evaluate", str(trained_runs[0]), "--episodes", "2",
                          "--n-envs", "1", "--video", str(out), "--json", str(report)], timeout=120)
    assert result.returncode == 0, result.stderr
    assert "return" in result.stdout and "over 2 episodes" in result.stdout
    assert not list(tmp_path.glob(".*tmp*")), "temporary video left behind"
    # One environment: the video is its first episode, a frame per agent step
    # (the reset frame, then every step but the final one).
    episodes = json.loads(report.read_text())["episodes"]
    assert len(episodes) == 2
    first_length = episodes[0]["length"]
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert stream.codec_context.name == "h264"
    assert len(frames) == first_length > 1
    assert frames[0].shape == (400, 600, 3)  # CartPole's 600x400 render, already 400 tall
    assert frames[0].std() > 0  # a picture, not a blank


def test_atari_colour_twin_replays_the_same_game():
    """The video of an Atari game comes from a second emulator fed the same actions."""
    cfg = EnvConfig(env_id="ALE/Pong-v5", warmup_max_steps=0)
    plain, rendered = VectorEnv(cfg, [0, 1], seed=3), VectorEnv(cfg, [0, 1], seed=3, render=True)
    rng = np.random.default_rng(0)
    rewards = 0.0
    try:
        for _ in range(1500):
            actions = rng.integers(0, 6, size=2)
            a, b = plain.step(actions), rendered.step(actions)
            np.testing.assert_array_equal(a.obs, b.obs)
            np.testing.assert_array_equal(a.reward, b.reward)
            rewards += np.abs(a.reward).sum()
            # The rendered frame is the game the agent sees, in colour.
            gray = rendered.frame(0).astype(float) @ [0.299, 0.587, 0.114]
            assert abs(gray.mean() - a.obs[0, -1].mean()) < 3.0
        assert rendered.frame(1).shape == (210, 160, 3)
        assert rewards > 0  # points were scored, so the two games were compared on something
    finally:
        plain.close()
        rendered.close()


def test_video_writer_pads_odd_frames(tmp_path):
    out = tmp_path / "odd.mp4"
    with VideoWriter(out, fps=10, min_height=1) as writer:
        for i in range(5):
            writer.add(np.full((33, 47, 3), 40 * i, dtype=np.uint8))
    with av.open(str(out)) as container:
        frames = list(container.decode(video=0))
    assert len(frames) == 5
    assert (frames[0].height, frames[0].width) == (34, 48)


def test_gif_clip_keeps_the_first_frames_at_the_decision_rate(trained_runs, tmp_path):
    out = tmp_path / "clip.gif"
    result = run_command(["rlscale", "evaluate", str(trained_runs[0]), "--episodes", "1", "--n-envs", "1",
                          "--video", str(out), "--video-frames", "12"], timeout=120)
    assert result.returncode == 0, result.stderr
    assert "12 frames" in result.stdout
    assert not list(tmp_path.glob(".*tmp*")), "temporary clip left behind"
    with Image.open(out) as gif:
        assert gif.size == (600, 400)  # CartPole's 600x400 render is already tall enough
        # Pillow stores pixel-identical neighbours as one longer frame (a balanced pole barely moves),
        # so the clip's played time is what says 12 frames at 50 fps were kept: 12 x 2 centiseconds.
        durations = []
        for index in range(gif.n_frames):
            gif.seek(index)
            durations.append(gif.info["duration"])
            assert np.asarray(gif.convert("RGB")).std() > 0  # a picture, not a blank
        assert sum(durations) == 12 * 20  # the cap, not the whole episode (a trained episode is longer)
        assert all(duration % 20 == 0 for duration in durations)


def test_gif_writer_scales_small_frames_and_keeps_colours(tmp_path):
    out = tmp_path / "small.gif"
    colours = [(213, 130, 74), (92, 186, 92), (236, 236, 236)]  # Pong's background, paddle, ball
    with GifWriter(out, fps=15, min_height=60) as writer:
        for colour in colours:
            writer.add(np.full((21, 16, 3), colour, dtype=np.uint8))
    with Image.open(out) as gif:
        assert gif.n_frames == 3 and gif.size == (48, 63)  # scaled 3x to reach 60 rows
        assert gif.info["duration"] == 70  # 1/15 s in whole centiseconds
        for i, colour in enumerate(colours):
            gif.seek(i)
            assert tuple(np.asarray(gif.convert("RGB"))[0, 0]) == colour


def test_compare_writes_table_csv_and_png_that_agree_with_training(trained_runs, tmp_path):
    png, table = tmp_path / "cmp.png", tmp_path / "cmp.csv"
    result = run_command(["rlscale", "compare", *map(str, trained_runs), "--goals", *GOALS,
                          "--out", str(png), "--csv", str(table)], timeout=120)
    assert result.returncode == 0, result.stderr
    assert "cartpole-seed1" in result.stdout and "goal 30: agent steps" in result.stdout
    assert png.stat().st_size > 10_000
    rows = list(csv.DictReader(table.open()))
    assert [r["run"] for r in rows] == ["cartpole-seed1", "cartpole-seed2"]
    for row, run_dir in zip(rows, trained_runs, strict=True):
        summary = json.loads((run_dir / "summary.json").read_text())
        # compare reads the same goal crossings the training loop printed.
        for goal in GOALS:
            hit = summary["goals"].get(goal)
            if hit is None:
                assert row[f"goal {goal}: agent steps"] == "-"
            else:
                assert row[f"goal {goal}: agent steps"] == f"{hit['agent_steps']:,}"
                assert row[f"goal {goal}: optimizer steps"] == f"{hit['updates']:,}"
        assert row["agent steps"] == "10,000"


def test_evaluate_and_compare_bad_input(trained_runs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (["rlscale", "evaluate", str(tmp_path / "nope")], ["does not exist"]),
        (["rlscale", "evaluate", str(empty)], ["no checkpoint"]),
        (["rlscale", "evaluate", str(trained_runs[0]), "--video", str(tmp_path / "x.avi")], ["must end in .mp4 or .gif"]),
        (["rlscale", "evaluate", str(trained_runs[0]), "--video-frames", "9"], ["--video-frames needs --video"]),
        (["rlscale", "evaluate", str(trained_runs[0]), "--video", str(tmp_path / "no" / "x.mp4")],
         ["does not exist"]),
        (["rlscale", "evaluate", str(trained_runs[0]), "--env", "Acrobot-v1"], ["trained on CartPole-v1"]),
        (["rlscale", "evaluate", str(trained_runs[0]), "--episodes", "0"], ["--episodes"]),
        (["rlscale", "compare", str(empty)], ["no run directories"]),
        (["rlscale", "compare", str(trained_runs[0]), "--out", str(tmp_path / "x.jpg")], ["must end in .png"]),
    ]
    (first_args, first_fragments), *rest = cases
    assert_one_line_error(run_command(first_args, timeout=120), *first_fragments)  # a real python -m
    for args, fragments in rest:
        assert_one_line_error(run_in_process(args), *fragments)


def test_corrupt_checkpoint_is_one_line(trained_runs, tmp_path):
    bad = tmp_path / "ckpt-000000000001.pt"
    bad.write_bytes(b"not a checkpoint")
    assert_one_line_error(run_command(["rlscale", "evaluate", str(bad)], timeout=60), "corrupt")


def test_run_directories_of_an_older_format_are_refused_in_one_line(tmp_path):
    """A run directory without the optimizer-batch tag (written before it existed) gets a clear message."""
    from torch.utils.tensorboard import SummaryWriter

    from rlscale.config import Config, dumps_toml

    old = tmp_path / "old-run"
    old.mkdir()
    (old / "config.toml").write_text(dumps_toml(Config()))
    with SummaryWriter(str(old)) as writer:
        for step in (80, 160):
            writer.add_scalar("batch/size", 80, step)
            writer.add_scalar("rollout/episode_return", 10.0, step)
    assert_one_line_error(run_command(["rlscale", "compare", str(old), "--out", str(tmp_path / "c.png")],
                                      timeout=120), "older rlscale", "batch/optimizer_batch")


def test_checkpoints_of_an_older_format_are_refused_in_one_line(tmp_path):
    import torch

    old = tmp_path / "ckpt-000000000080.pt"
    torch.save({"format": "rlscale-checkpoint-1", "counters": {"agent_steps": 80}}, old)
    assert_one_line_error(run_command(["rlscale", "evaluate", str(old)], timeout=60),
                          "rlscale-checkpoint-1", "rlscale-checkpoint-2")
