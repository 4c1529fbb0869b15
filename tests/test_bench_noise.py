"""benchmarks/bench_noise.py times what its variants name: each one's first timed update measures."""

from __future__ import annotations

import importlib

import pytest

from rlscale import tags
from tests.conftest import ROOT


@pytest.mark.timeout(120)
def test_each_noise_benchmark_variant_measures_from_its_first_update(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("bench_noise")
    batch, spec = bench.pong_batch(4)
    sampled, curvature = tags.raw_noise("grad_sq", "total"), tags.CURVATURE_SECONDS  # noise and metrics measured
    measured = {}
    for name in ("off", "total (k=4)", "total + metrics"):
        metrics = bench.variant_learner(name, spec, 4).update(batch)
        measured[name] = (sampled in metrics, curvature in metrics)
    assert measured == {"off": (False, False), "total (k=4)": (True, False), "total + metrics": (True, True)}
