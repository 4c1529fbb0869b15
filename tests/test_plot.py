"""The run plot reads real TensorBoard files back and writes a PNG."""

from __future__ import annotations

import numpy as np

from rlscale import tags
from rlscale.goals import rolling_mean
from rlscale.reports.events import CACHE_FILE, break_gaps, read_scalars
from rlscale.reports.plot import batch_lines
from rlscale.reports.plot import main as plot_main
from rlscale.train import main as train_main
from rlscale.training.logger import RunLogger


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
