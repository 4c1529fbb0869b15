"""The Python API (rlscale.train, rlscale.load), the `rlscale` command and the train command's help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlscale
from rlscale.commands import COMMANDS
from rlscale.config import FIELDS, FLAGS, cli_flag
from tests.conftest import run_in_process

SCREEN = 40  # lines of one terminal screen


@pytest.mark.parametrize("settings, flags", [
    ({"n_envs": 0}, ["--n-envs", "0"]),
    ({"lr": -1.0}, ["--lr", "-1.0"]),
    ({"batch": "huge"}, ["--batch", "huge"]),
    ({"pool": "serial", "total_frames": "many"}, ["--pool", "serial", "--total-frames", "many"]),
])
def test_a_bad_setting_raises_the_line_the_command_prints(settings, flags, tmp_path):
    with pytest.raises(rlscale.UserError) as raised:
        rlscale.train("cartpole", run_dir=str(tmp_path / "r"), **settings)
    command = run_in_process(["rlscale.train", "cartpole", "--run-dir", str(tmp_path / "r"), *flags])
    assert command.returncode == 2
    assert command.stderr.strip() == f"error: {raised.value}"
    assert not (tmp_path / "r").exists()  # refused before anything is written


def test_an_unknown_keyword_is_a_user_error_naming_it():
    with pytest.raises(rlscale.UserError, match="unknown setting 'nenvs'"):
        rlscale.train("cartpole", nenvs=4)
    with pytest.raises(rlscale.UserError, match="unknown environment 'nosuchgame'"):
        rlscale.train("nosuchgame")


@pytest.mark.timeout(240)
def test_a_preset_dropped_into_envs_trains_by_name_and_its_policy_acts(tmp_path, monkeypatch):
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "mygame.toml").write_text(
        '# my own task\n[env]\nenv_id = "Acrobot-v1"\nn_envs = 4\ntotal_frames = 1200\n')
    monkeypatch.chdir(tmp_path)
    run = rlscale.train("mygame", pool="serial", seed=3, run_dir="runs/mine", log_interval=600.0)
    assert run.dir == Path("runs/mine") and run.agent_steps == 1200
    assert (tmp_path / "runs/mine/config.toml").read_text().count('env_id = "Acrobot-v1"') == 1
    policy = rlscale.load(run.dir)
    env = policy.make_env()
    obs, _ = env.reset(seed=0)
    action = policy.act(obs)
    assert isinstance(action, int) and env.action_space.contains(action)
    batch = np.stack([obs, env.observation_space.sample()])
    assert policy.act(batch, greedy=True).shape == (2,)
    # Greedy is the logits' argmax: the same action for the same observation every time.
    assert len({policy.act(obs, greedy=True) for _ in range(5)}) == 1


def test_resume_through_the_api_continues_the_run(tmp_path):
    run_dir = tmp_path / "r"
    first = rlscale.train("cartpole", pool="serial", total_frames=400, n_envs=4, run_dir=str(run_dir))
    assert first.agent_steps == 400
    more = rlscale.train(resume=str(run_dir), total_frames=800)
    assert more.dir == run_dir and more.agent_steps == 800


def _lines(text: str) -> list[str]:
    return text.rstrip("\n").splitlines()


def test_the_train_help_fits_one_screen_with_the_presets_values():
    pong = run_in_process(["rlscale.train", "pong", "--help"])
    assert pong.returncode == 0 and len(_lines(pong.stdout)) <= SCREEN
    assert "pong's values" in pong.stdout
    rows = {line.split()[0]: line.split()[2] for line in _lines(pong.stdout) if line.startswith("  --")
            and len(line.split()) > 2 and line.split()[1].isupper()}
    assert rows["--lr"] == "0.00025" and rows["--n-envs"] == "8" and rows["--stop-return"] == "18"
    cartpole = run_in_process(["rlscale.train", "cartpole", "--help"])
    assert "cartpole's values" in cartpole.stdout and cartpole.stdout != pong.stdout
    plain = run_in_process(["rlscale.train", "--help"])
    assert "default values" in plain.stdout and len(_lines(plain.stdout)) <= SCREEN


def test_help_all_lists_every_setting_with_the_presets_values():
    full = run_in_process(["rlscale.train", "pong", "--help-all"])
    assert full.returncode == 0
    flags, rest = full.stdout.split("settings without a flag")
    missing = [name for name in FIELDS if (cli_flag(name) not in flags if name in FLAGS else f" {name} " not in rest)]
    assert not missing, missing
    assert "    reward_clip               True  " in rest  # a setting without a flag, with pong's value
    assert "(pong: 0.00025)" in " ".join(full.stdout.split())  # the lr's help, rewrapped


def test_the_rlscale_command_lists_and_runs_its_subcommands():
    script = Path(sys.executable).parent / "rlscale"
    top = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert top.returncode == 0 and len(_lines(top.stdout)) <= SCREEN
    for name in ("train", "plot", "evaluate", "sweep", "pareto", "plan", "study", "compare"):
        assert f"  {name} " in top.stdout and name in COMMANDS
    train_help = subprocess.run([str(script), "train", "pong", "--help"], capture_output=True, text=True,
                                timeout=60)
    assert train_help.stdout.startswith("usage: rlscale train ENV") and len(_lines(train_help.stdout)) <= SCREEN
    bad = subprocess.run([str(script), "trian", "pong"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown command 'trian'" in bad.stderr
    bad_flag = subprocess.run([str(script), "plot", "runs/x", "--nope"], capture_output=True, text=True, timeout=60)
    assert bad_flag.returncode == 2 and bad_flag.stderr.startswith("error: unrecognized arguments: --nope")
    assert "(see rlscale plot --help)" in bad_flag.stderr and "Traceback" not in bad_flag.stderr
