"""The run plot reads real TensorBoard files back and writes a PNG."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import to_hex, to_rgb
from PIL import Image

from rlscale import tags
from rlscale.goals import GOAL_WINDOW, rolling_mean
from rlscale.reports import plot as plot_module
from rlscale.reports.plot import batch_lines
from rlscale.reports.plot import main as plot_main
from rlscale.rundir.events import CACHE_FILE, break_gaps, read_scalars
from rlscale.train import main as train_main
from rlscale.training.logger import RunLogger
from tests.test_train import scalars


def figure_contents(fig) -> list[dict]:
    """Each panel's labels and lines, read off a matplotlib figure before it is saved."""
    panels = []
    for ax in fig.axes:
        lines = {}
        for line in ax.get_lines():
            lines[line.get_label()] = (np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float),
                                       to_hex(line.get_color()))
        panels.append({"ylabel": ax.get_ylabel(), "xlabel": ax.get_xlabel(), "yscale": ax.get_yscale(),
                       "box": ax.get_position().extents, "lines": lines})
    return panels


def points(line) -> tuple[np.ndarray, np.ndarray]:
    """A plotted line's points, its NaN breaks left out."""
    x, y, _ = line
    keep = ~np.isnan(y)
    return x[keep], y[keep]


@pytest.mark.timeout(120)
def test_plot_of_a_short_run(tmp_path, monkeypatch):
    """Each of the four panels draws the run's own series, as its TensorBoard events hold them, into the PNG."""
    run_dir = tmp_path / "run"
    assert train_main(["cartpole", "--pool", "serial", "--total-frames", "3000", "--run-dir", str(run_dir)]) == 0
    saved = []
    real_save = plot_module.save_figure

    def capture(fig, out, *args, **kwargs):
        saved.append(figure_contents(fig))
        real_save(fig, out, *args, **kwargs)

    monkeypatch.setattr(plot_module, "save_figure", capture)
    assert plot_main([str(run_dir)]) == 0
    assert len(saved) == 1
    returns_panel, noise_panel, envs_panel, lr_panel = saved[0]

    # The truth: TensorBoard's own reader on the event files (not rlscale's reader or its cache).
    events = scalars(run_dir)

    def series(tag):
        found = events.Scalars(tag)
        return np.array([e.step for e in found], float), np.array([e.value for e in found], float)

    steps, returns = series(tags.EPISODE_RETURN)
    assert returns.size > GOAL_WINDOW  # enough episodes that the mean is a rolling one
    assert returns_panel["ylabel"] == "episode return"
    assert set(returns_panel["lines"]) == {"episode", f"mean of last {GOAL_WINDOW}"}
    x, y, _ = returns_panel["lines"]["episode"]
    np.testing.assert_array_equal(x, steps)
    np.testing.assert_allclose(y, returns, rtol=1e-6)
    x, y, _ = returns_panel["lines"][f"mean of last {GOAL_WINDOW}"]
    by_hand = [returns[max(0, i + 1 - GOAL_WINDOW):i + 1].mean() for i in range(returns.size)]
    np.testing.assert_array_equal(x, steps)
    np.testing.assert_allclose(y, by_hand, rtol=1e-6)

    # Noise scales on a log axis, each with a NaN break wherever an update was logged without it (none
    # in this run: |G|^2's averages turn positive at 440-520 steps and stay so) and nowhere else.
    update_steps = series(tags.N_ENVS)[0]
    assert noise_panel["ylabel"] == "observations" and noise_panel["yscale"] == "log"
    expected = {f"B_simple {part}": tags.noise("b_simple", part) for part in tags.PARTS}
    assert set(noise_panel["lines"]) == {*expected, "optimizer batch (observations)"}
    for label, tag in expected.items():
        noise_steps, noise_values = series(tag)
        x, y = points(noise_panel["lines"][label])
        np.testing.assert_array_equal(x, noise_steps, err_msg=label)
        np.testing.assert_allclose(y, noise_values, rtol=1e-6, err_msg=label)
        skipped = sum(((update_steps > a) & (update_steps < b)).any()
                      for a, b in zip(noise_steps[:-1], noise_steps[1:], strict=True))
        assert np.isnan(noise_panel["lines"][label][1]).sum() == skipped, label
    x, y, _ = noise_panel["lines"]["optimizer batch (observations)"]
    np.testing.assert_array_equal(x, series(tags.OPTIMIZER_BATCH)[0])
    np.testing.assert_array_equal(y, series(tags.OPTIMIZER_BATCH)[1])
    assert set(y) == {40.0}  # 8 envs x 5 steps

    assert envs_panel["ylabel"] == "environments" and len(envs_panel["lines"]) == 1
    (x, y, _), = envs_panel["lines"].values()
    np.testing.assert_array_equal(x, update_steps)
    np.testing.assert_array_equal(y, series(tags.N_ENVS)[1])
    assert lr_panel["ylabel"] == "learning rate" and len(lr_panel["lines"]) == 1
    (x, y, lr_color), = lr_panel["lines"].values()
    np.testing.assert_array_equal(x, series(tags.LR)[0])
    np.testing.assert_allclose(y, series(tags.LR)[1], rtol=1e-6)
    assert lr_panel["xlabel"] == "agent steps"

    # The PNG: 9 x 11 inches at 110 dpi, and each panel's own line colour drawn inside that panel
    # (a line across a panel is >1,000 such pixels; a legend's sample of it ~50).
    with Image.open(run_dir / "run.png") as png:
        assert png.format == "PNG" and png.size == (990, 1210)
        pixels = np.asarray(png.convert("RGB")).astype(int)

    def drawn(panel, color) -> int:
        left, bottom, right, top = panel["box"]
        h, w = pixels.shape[:2]
        inside = pixels[round((1 - top) * h) + 3:round((1 - bottom) * h) - 3, round(left * w) + 3:round(right * w) - 3]
        return int((np.abs(inside - np.array(to_rgb(color)) * 255).max(axis=2) < 40).sum())

    assert drawn(returns_panel, returns_panel["lines"][f"mean of last {GOAL_WINDOW}"][2]) > 300
    for label in expected:
        assert drawn(noise_panel, noise_panel["lines"][label][2]) > 300, label
    assert drawn(envs_panel, "black") > 300
    assert drawn(lr_panel, lr_color) > 300 and drawn(envs_panel, lr_color) == 0


def test_plot_bad_input(tmp_path, capsys):
    assert plot_main([str(tmp_path / "missing")]) == 2
    assert plot_main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not a directory" in err and "holds no TensorBoard events" in err


def test_rolling_mean_by_hand():
    np.testing.assert_allclose(rolling_mean(np.array([1, 2, 3, 4, 5]), 2), [1, 1.5, 2.5, 3.5, 4.5])


def test_gaps_are_updates_without_a_value_not_long_intervals():
    updates = np.array([10, 20, 30, 110, 190, 270])  # the batch grew 8x after step 30
    steps, values = break_gaps(np.array([10, 20, 30, 110, 190, 270]), np.arange(6.0), updates)
    assert not np.isnan(values).any() and steps.size == 6
    steps, values = break_gaps(np.array([10, 20, 190, 270]), np.arange(4.0), updates)  # undefined at 30, 110
    np.testing.assert_array_equal(np.isnan(values), [False, False, True, False, False])


def test_plot_draws_every_point_of_a_run_whose_batch_grows_8x(tmp_path):
    """Written through the run's own logger: 150 updates at a batch of 80, then 50 at 640."""
    run_dir = tmp_path / "grows"
    logger = RunLogger(str(run_dir))
    step = 0
    for update in range(200):
        batch = 80 if update < 150 else 640
        step += batch
        logger.scalars({tags.N_ENVS: batch / 5, tags.OPTIMIZER_BATCH: batch,
                        tags.noise("b_simple", "total"): 100.0 + update}, step)
    logger.close()
    lines = batch_lines(read_scalars(run_dir))
    steps, values, *_ = lines["B_simple total"]
    assert steps.size == 200 and not np.isnan(values).any()
    assert plot_main([str(run_dir)]) == 0


def test_scalars_are_read_from_the_cache_until_the_event_files_change(tmp_path):
    """Reports read a run's scalars once; a resumed run's new events file is read again."""
    run_dir = tmp_path / "cached"
    logger = RunLogger(str(run_dir))
    for step in range(1, 51):
        logger.scalars({tags.OPTIMIZER_BATCH: 80.0, tags.LR: 1e-3 * step}, step)
    logger.close()
    first = read_scalars(run_dir)
    cache = run_dir / CACHE_FILE
    assert cache.is_file()
    # What the next read returns comes from the cache: plant a value in it and see it come back.
    with np.load(cache) as data:
        arrays = dict(data)
    lr = list(arrays["tags"]).index(tags.LR)
    arrays[f"values{lr}"] = arrays[f"values{lr}"] * 0 + 7.0
    np.savez(cache, **arrays)
    assert set(read_scalars(run_dir)[tags.LR][1]) == {7.0}
    assert read_scalars(run_dir)[tags.OPTIMIZER_BATCH][0].tolist() == first[tags.OPTIMIZER_BATCH][0].tolist()
    logger = RunLogger(str(run_dir))  # a resume: a second events file
    logger.scalars({tags.LR: 5.0}, 51)
    logger.close()
    again = read_scalars(run_dir)
    assert again[tags.LR][0][-1] == 51 and again[tags.LR][1][0] == first[tags.LR][1][0] != 7.0
