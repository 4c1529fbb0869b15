"""Timing shared by the benchmark scripts (imported from their folder: python benchmarks/<bench>.py)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def interleaved_medians(variants: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds per call of each variant.

    One warm-up call each, then ``repeats`` rounds that call every variant once in
    turn, so that noise from the rest of the machine hits all of them alike. Each
    round starts one variant later than the one before: a variant that always ran
    right after the same other one would carry that one's effect on the caches
    (measured: 9% on the first of ten variants).
    """
    times: dict[str, list[float]] = {name: [] for name in variants}
    for run in variants.values():
        run()
    order = list(variants.items())
    for round_index in range(repeats):
        shift = round_index % len(order)
        for name, run in order[shift:] + order[:shift]:
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(seconds) for name, seconds in times.items()}
