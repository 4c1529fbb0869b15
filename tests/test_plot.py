"""The run plot reads real TensorBoard files back and writes a PNG."""

from __future__ import annotations

import numpy as np

from rlscale.goals import rolling_mean
from rlscale.reports.events import break_gaps
from rlscale.reports.plot import main as plot_main
from rlscale.train import main as train_main


def test_plot_of_a_short_run(tmp_path):
    run_dir = tmp_path / "run"
    assert train_main(["cartpole", "--serial", "--total-frames", "3000", "--run-dir", str(run_dir)]) == 0
    assert plot_main([str(run_dir)]) == 0
    png = run_dir / "run.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_plot_bad_input(tmp_path, capsys):
    assert plot_main([str(tmp_path / "missing")]) == 2
    assert plot_main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not a directory" in err and "holds no TensorBoard events" in err


def test_rolling_mean_and_gaps_by_hand():
    np.testing.assert_allclose(rolling_mean(np.array([1, 2, 3, 4, 5]), 2), [1, 1.5, 2.5, 3.5, 4.5])
    steps, values = break_gaps(np.array([10, 20, 30, 200, 210]), np.array([1, 2, 3, 4, 5]))
    assert np.isnan(values[3]) and steps.size == 6


