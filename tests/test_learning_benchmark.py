"""The learning benchmark: its statistics on samples with known answers, its reference file, its input.

The statistics are rlscale/reports/regression.py; the benchmark itself is benchmarks/learning.py,
run here as a user runs it (a real CartPole seed, serial, no Ray).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rlscale.reports.regression import (
    ALPHA,
    as_steps,
    compare,
    detection_power,
    median_ratio,
    rank_test,
    verdict_line,
)
from tests.conftest import _interruptible

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "learning.py"
REFERENCE = ROOT / "benchmarks" / "learning-reference.json"


@pytest.fixture
def learning(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import learning

    return learning


def test_fully_separated_samples_give_the_exact_rank_test_p_value():
    # 8 against 8 with every new value above every reference value: U = 0, and the two-sided exact
    # p-value is 2 / C(16, 8) (the two most extreme orderings of 12,870).
    reference = np.arange(100.0, 108.0)
    new = reference + 50
    assert rank_test(new, reference) == pytest.approx(2 / math.comb(16, 8), rel=1e-12)
    result = compare(new.tolist(), reference.tolist())
    assert result.verdict == "more steps"
    assert compare(reference.tolist(), new.tolist()).verdict == "fewer steps"


def test_the_same_sample_is_as_before():
    steps = [84_400.0, 95_320.0, 70_000.0, 120_000.0]
    result = compare(steps, list(steps))
    assert result.p_value == 1.0
    assert result.verdict == "as before"
    assert result.ratio == 1.0


def test_overlapping_samples_are_as_before_at_the_level():
    # Interleaved ranks: U = 10 of 25 for 5 against 5, two-sided exact p = 0.690 (scipy's table).
    reference, new = [1.0, 3.0, 5.0, 7.0, 9.0], [2.0, 4.0, 6.0, 8.0, 10.0]
    result = compare(new, reference)
    assert result.p_value == pytest.approx(0.6904761904761905)
    assert result.p_value >= ALPHA and result.verdict == "as before"


def test_a_seed_that_never_reached_the_goal_ranks_slowest():
    reference = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    new = [None] * 6
    result = compare(new, reference)
    assert np.isinf(as_steps(new)).all()
    assert result.verdict == "more steps"
    assert math.isinf(result.ratio)
    assert "new median not reached" in verdict_line("t", result)


def test_the_median_ratio_and_its_interval_are_read_from_both_samples():
    reference = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0])
    ratio, low, high = median_ratio(2 * reference, reference)
    assert ratio == 2.0  # 80 / 40
    assert low < 2.0 < high
    # Each end is a ratio of two resampled medians, so it lies between the extremes such ratios take.
    assert low >= 20 / 70 and high <= 140 / 10


def test_the_verdict_line_names_the_numbers():
    result = compare([200.0] * 3 + [210.0] * 5, [100.0] * 4 + [110.0] * 4)
    line = verdict_line("cartpole-a2c@fp32", result)
    assert line.startswith("cartpole-a2c@fp32: more steps, p = ")
    assert "reached 8/8, reference 8/8" in line


def test_the_stored_reference_has_the_format_and_every_default_task(learning):
    data = json.loads(REFERENCE.read_text())
    assert learning.reference_problem(data) is None
    for name, task in learning.TASKS.items():
        if task.default:
            entry = data["tasks"][learning.reference_key(name, "fp32")]
            assert entry["task"] == {**learning.asdict(task), "precision": "fp32"}
            # the seeds a default run takes, so that a default run compares like with like
            assert sorted(map(int, entry["seeds"])) == list(learning.default_seeds(name))
            assert entry["commit"] and entry["cpu"] and entry["date"] and entry["why"]
            reached = [row["steps"] for row in entry["seeds"].values() if row["steps"] is not None]
            assert reached, f"no seed of the reference reached {name}'s goal"


def test_a_reference_missing_a_field_is_named(learning):
    data = json.loads(REFERENCE.read_text())
    key = next(iter(data["tasks"]))
    del data["tasks"][key]["why"]
    assert learning.reference_problem(data) == f"task {key} has no 'why'"
    assert "format" in learning.reference_problem({"tasks": {}})


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=240)


@pytest.mark.parametrize("args, words", [
    (["--tasks", "cartpole-dqn"], "unknown task cartpole-dqn"),
    (["--tasks", "cartpole-a2c", "--reference", "/nonexistent/ref.json"], "no reference file"),
    (["--update-reference"], "needs --why"),
    (["--plant", "half-lr", "--update-reference", "--why", "x"], "never a reference"),
])
def test_bad_input_is_one_line_and_exit_2(args, words):
    out = run_script(*args)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and words in out.stderr and "Traceback" not in out.stderr


def test_a_task_without_a_reference_is_one_line_and_exit_2(tmp_path):
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"format": 1, "tasks": {}}))
    out = run_script("--tasks", "cartpole-a2c", "--reference", str(ref))
    assert out.returncode == 2
    assert out.stderr.strip() == (f"error: {ref} has no reference for cartpole-a2c@fp32: "
                                  "make one with --update-reference --why '...'")


def test_a_reference_made_for_other_settings_is_refused_before_any_run(tmp_path):
    ref = tmp_path / "ref.json"
    data = json.loads(REFERENCE.read_text())
    data["tasks"]["cartpole-a2c@fp32"]["task"]["goal"] = 400.0  # made when the task's goal was another
    ref.write_text(json.dumps(data))
    out = run_script("--tasks", "cartpole-a2c", "--reference", str(ref), "--out", str(tmp_path / "out"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "the reference of cartpole-a2c was made for" in out.stderr
    assert not (tmp_path / "out" / "cartpole-a2c").exists()  # refused before anything trained


def test_the_benchmark_trains_a_preset_that_uses_auto_at_its_starting_batch(learning, tmp_path):
    from rlscale.config import build_config, parse_with_config
    from rlscale.train import parser

    preset = tmp_path / "game.toml"
    preset.write_text('[env]\nenv_id = "CartPole-v1"\nn_envs = 8\n[control]\nbatch = "auto"\n')
    pinned = learning.Checkout.at(learning.REPO).pinned("fp32")
    _, overrides = parse_with_config(parser(), [str(preset), *pinned])
    cfg = build_config(str(preset), "a2c", overrides)
    assert cfg.control.batch == "fixed" and cfg.env.n_envs == 8 and cfg.pool.pool == "serial"


def test_ctrl_c_checkpoints_the_run_the_rerun_resumes_it_then_reads_it_back(tmp_path):
    # A real CartPole seed, serial, as a user runs it: Ctrl-C (to the whole process group, as a
    # terminal sends it) while the seed trains, the same command again, then a comparison.
    ref, out_dir = tmp_path / "ref.json", tmp_path / "out"
    common = ["--tasks", "cartpole-a2c", "--seeds", "7", "--jobs", "1", "--out", str(out_dir), "--reference", str(ref)]
    make = [*common, "--update-reference", "--why", "a test"]
    log = out_dir / "cartpole-a2c" / "seed-7.log"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *make], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=_interruptible)
    try:
        deadline = time.monotonic() + 180
        while not (log.is_file() and "\n[" in log.read_text()):  # its first progress line: it trains
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the seed did not start training in time"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, _ = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert "interrupted: finished seeds are kept" in stdout
    assert "interrupted: checkpoint" in log.read_text()  # the run wrote its checkpoint on the way out
    assert not ref.exists() and not (out_dir / "cartpole-a2c" / "seed-7.json").exists()

    again = run_script(*make)
    assert again.returncode == 0, again.stderr
    assert "resuming from " in log.read_text()  # from its checkpoint, not from scratch
    entry = json.loads(ref.read_text())["tasks"]["cartpole-a2c@fp32"]
    assert entry["why"] == "a test" and entry["jobs"] == 1 and list(entry["seeds"]) == ["7"]
    summary = json.loads((out_dir / "cartpole-a2c" / "seed-7" / "summary.json").read_text())
    assert entry["seeds"]["7"]["steps"] == summary["goals"]["475"]["agent_steps"]  # the run's own record
    assert len(entry["seeds"]["7"]["curve"]) > 10

    compared = run_script(*common)
    assert compared.returncode == 0, compared.stderr
    assert log.read_text().count("run directory:") == 2  # read back, not trained a third time
    assert "cartpole-a2c@fp32: as before" in compared.stdout
    assert (out_dir / "learning.png").stat().st_size > 10_000


def test_the_sensitivity_reads_the_references_spread():
    tight = [100.0, 101.0, 99.0, 102.0, 98.0, 100.5, 99.5, 100.2]  # sd of log ~1 %
    wide = [50.0, 200.0, 90.0, 400.0, 120.0, 60.0, 300.0, 150.0]  # sd of log ~0.7
    assert detection_power(tight, 1.0, 8) <= ALPHA  # no change: at most the test's level
    assert detection_power(tight, 1.3, 8) > 0.99  # a 30 % shift far outside a 1 % spread
    assert detection_power(wide, 1.3, 8) < 0.5  # and lost in a wide one
    assert detection_power(wide, 1.3, 32) > detection_power(wide, 1.3, 8)  # more seeds see more
    assert detection_power([100.0, None, None, 120.0], 1.3, 8) is None  # two reached: no spread to read
