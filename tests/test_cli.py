"""Bad input: one line naming the problem and the fix, exit code 2, no traceback."""

from __future__ import annotations

import pytest

from tests.conftest import run_command, run_in_process

TRAIN = ["rlscale.train"]


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr + result.stdout
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("args, fragments", [
    (["pongg"], ["unknown environment 'pongg'", "pong"]),
    (["Foo-v0"], ["unknown environment id 'Foo-v0'"]),
    (["ALE/Pongg-v5"], ["unknown environment id 'ALE/Pongg-v5'", "ALE/Pong-v5"]),
    (["pong", "--agent", "dqn"], ["unknown agent 'dqn'", "a2c"]),
    (["pong", "--n-envs", "abc"], ["--n-envs", "invalid int value"]),
    (["pong", "--n-envs", "-4"], ["--n-envs must be positive"]),
    (["pong", "--min-envs", "64", "--max-envs", "8"], ["--min-envs (64) is larger than --max-envs (8)"]),
    (["pong", "--batch", "huge"], ["--batch", "invalid choice"]),
    (["cartpole", "--batch", "auto", "--hysteresis", "2", "--max-resize-factor", "2"],
     ["--batch auto needs --hysteresis (2) below --max-resize-factor (2)"]),
    (["pong", "--frobnicate"], ["unrecognized arguments: --frobnicate"]),
    ([], ["name an environment"]),
    (["cartpole", "--address", "127.0.0.1:1"], ["cannot reach a Ray cluster at 127.0.0.1:1"]),
    (["cartpole", "--address", "nonsense"], ["--address must be auto or HOST:PORT"]),
    (["cartpole", "--serial", "--learner-device", "cuda"], ["torch sees no GPU"]),
    (["cartpole", "--signal", "precond", "--optimizer", "sgd"],
     ["--signal precond cannot be followed here", "--optimizer sgd has no preconditioner"]),
    (["cartpole", "--signal", "precond_hessian", "--optimizer", "sgd"],
     ["--signal precond_hessian cannot be followed here", "--optimizer sgd has no preconditioner"]),
    (["cartpole", "--signal", "hessian", "--no-measure-curvature"], ["--signal hessian cannot be followed here"]),
    (["cartpole", "--signal", "hessian", "--learners", "2"], ["data-parallel learners measure B_simple only"]),
    (["cartpole", "--curvature-every", "0"], ["--curvature-every must be positive"]),
    (["cartpole", "--signal", "bsimple"], ["--signal", "invalid choice"]),
    (["cartpole", "--batch", "replay"], ["--batch replay and --replay-from RUN_DIR go together"]),
    (["cartpole", "--replay-from", "runs/x"], ["--batch replay and --replay-from RUN_DIR go together"]),
    (["cartpole", "--batch", "replay", "--replay-from", "/nonexistent"],
     ["--replay-from /nonexistent: no config.toml there"]),
])
def test_bad_input(args, fragments, tmp_path):
    # The train command's main() with its arguments, in this process; the tests below run it as
    # `python -m rlscale.train`, where the same errors must reach the user the same way.
    result = run_in_process([*TRAIN, *args, "--run-dir", str(tmp_path / "run")])
    assert_one_line_error(result, *fragments)


def test_malformed_and_unknown_key_presets(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("[env\nenv_id = 'CartPole-v1'\n")
    assert_one_line_error(run_command([*TRAIN, str(broken)], timeout=60), "malformed TOML")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[env]\nenv_id = 'CartPole-v1'\nspeed = 3\n")
    assert_one_line_error(run_in_process([*TRAIN, str(unknown)]), "unknown key 'speed'")
    missing = tmp_path / "missing.toml"
    assert_one_line_error(run_in_process([*TRAIN, str(missing)]), "cannot read")


def test_unwritable_run_dir(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run_in_process([*TRAIN, "cartpole", "--serial", "--run-dir", str(blocker / "run")])
    assert_one_line_error(result, "cannot write to", "--run-dir")


def test_resume_missing_and_corrupt(tmp_path):
    assert_one_line_error(run_in_process([*TRAIN, "--resume", str(tmp_path / "nope")]),
                          "is not a run directory")
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.toml").write_text('[env]\nenv_id = "CartPole-v1"\nn_envs = 4\nvector_size = 2\n')
    assert_one_line_error(run_in_process([*TRAIN, "--resume", str(run_dir)]), "no checkpoint")
    (run_dir / "checkpoints" / "ckpt-000000001000.pt").write_bytes(b"not a checkpoint at all")
    assert_one_line_error(run_command([*TRAIN, "--resume", str(run_dir)], timeout=60),
                          "corrupt or not an rlscale checkpoint")
    assert_one_line_error(
        run_in_process([*TRAIN, "--resume", str(run_dir), "--lr", "0.1"]),
        "--resume keeps the run's settings")
