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
    (["pong", "--cooldown", "5"], ["--cooldown is a setting without a flag: give --set cooldown=VALUE"]),
    (["pong", "--no-norm-adv"], ["--no-norm-adv is a setting without a flag: give --set norm_adv=false"]),
    (["pong", "--serial"], ["--serial is spelled --pool serial"]),
    (["pong", "--set", "nope=1"], ["--set nope=1: give NAME=VALUE with NAME a setting"]),
    (["pong", "--set", "cooldown"], ["--set cooldown: give NAME=VALUE"]),
    (["pong", "--set", "cooldown=soon"], ["cooldown must be float, got 'soon'"]),
    (["pong", "--set", "network=resnet"], ["network must be one of"]),
    (["cartpole", "--batch", "auto", "--set", "hysteresis=2", "--set", "max_resize_factor=2"],
     ["--batch auto needs hysteresis (2) below max_resize_factor (2)"]),
    (["pong", "--frobnicate"], ["unrecognized arguments: --frobnicate"]),
    ([], ["name an environment"]),
    (["cartpole", "--address", "127.0.0.1:1"], ["cannot reach a Ray cluster at 127.0.0.1:1"]),
    (["cartpole", "--address", "nonsense"], ["--address must be auto or HOST:PORT"]),
    (["cartpole", "--pool", "serial", "--learner-device", "cuda"], ["torch sees no GPU"]),
    (["cartpole", "--signal", "precond", "--optimizer", "sgd"],
     ["--signal precond cannot be followed here", "--optimizer sgd has no preconditioner"]),
    (["cartpole", "--signal", "precond_hessian", "--optimizer", "sgd"],
     ["--signal precond_hessian cannot be followed here", "--optimizer sgd has no preconditioner"]),
    (["cartpole", "--signal", "hessian", "--set", "measure_curvature=false"], ["--signal hessian cannot be followed here"]),
    (["cartpole", "--signal", "hessian", "--learners", "2"], ["data-parallel learners measure B_simple only"]),
    (["cartpole", "--set", "curvature_every=0"], ["curvature_every must be positive"]),
    (["cartpole", "--batch", "auto", "--set", "measure_noise=false"],
     ["--batch auto follows --signal total, which is not measured here", "measure_noise is off"]),
    (["cartpole", "--batch", "critical", "--signal", "policy", "--set", "noise_parts_every=0"],
     ["--batch critical follows --signal policy, which is not measured here", "noise_parts_every 0"]),
    (["cartpole", "--batch", "auto", "--signal", "value", "--learners", "2"],
     ["--signal value, which is not measured here", "data-parallel learners"]),
    (["cartpole", "--signal", "bsimple"], ["--signal", "invalid choice"]),
    (["cartpole", "--set", "batch=replay"], ["batch replay and replay_from RUN_DIR go together"]),
    (["cartpole", "--set", "replay_from=runs/x"], ["batch replay and replay_from RUN_DIR go together"]),
    (["cartpole", "--set", "batch=replay", "--set", "replay_from=/nonexistent"],
     ["replay_from /nonexistent: no config.toml there"]),
    (["cartpole", "--batch", "sqrt"], ["--batch sqrt is a study tool: give --set batch=sqrt"]),
    (["cartpole", "--batch=replay"], ["--batch replay is a study tool: give --set batch=replay"]),
    (["cartpole", "--batch", "auto", "--cluster-nodes", "-1"], ["--cluster-nodes must be zero or positive"]),
    (["cartpole", "--cluster-nodes", "16"], ["--cluster-nodes with a fixed batch", "--set cluster_fit=A,B"]),
    (["cartpole", "--batch", "auto", "--cluster-nodes", "4", "--set", "cluster_fit=fast,slow"],
     ["cluster_fit 'fast,slow': give T(B) = a + b*B as two positive numbers"]),
    (["cartpole", "--cluster-nodes", "4", "--set", "cluster_fit=0.01,-1"], ["cluster_fit '0.01,-1'"]),
    # 8 envs x 16 steps hold 64 minibatches, but auto may shrink to 2 envs' 32 observations.
    (["cartpole", "--agent", "ppo", "--batch", "auto", "--n-envs", "8", "--min-envs", "2", "--set", "vector_size=2",
      "--n-steps", "16", "--n-minibatches", "64"],
     ["--n-minibatches (64) exceeds the batch (32 at --min-envs, the fewest an adaptive batch may shrink to)"]),
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
    result = run_in_process([*TRAIN, "cartpole", "--pool", "serial", "--run-dir", str(blocker / "run")])
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


def test_set_gives_any_setting_a_flag_does_not_with_its_toml_type():
    from rlscale.config import parse_with_config
    from rlscale.train import parser

    args, overrides = parse_with_config(parser(), ["cartpole", "--set", "cooldown=20000", "--set", "norm-adv=false",
                                                   "--set", "learner_compile=off", "--n-envs", "16"])
    assert overrides == {"n_envs": 16, "cooldown": 20000.0, "norm_adv": False, "learner_compile": "off"}


def test_help_all_lists_at_most_50_flags_and_every_other_setting_by_name():
    from rlscale.config import FIELDS, FLAGS

    out = run_in_process([*TRAIN, "pong", "--help-all"]).stdout
    flags, listed = out.split("settings without a flag")
    named = {line.split()[0].split(",")[-1] for line in flags.splitlines()
             if line.strip().startswith("-") and not line.strip().startswith("--no-")}
    named |= {word.strip(",") for line in flags.splitlines() if line.strip().startswith("-h,") for word in line.split()}
    assert len({n for n in named if n.startswith("--")}) <= 50, sorted(named)
    names = {line.split()[0] for line in listed.splitlines()[1:] if line.startswith("    ")}
    assert names == set(FIELDS) - set(FLAGS)
