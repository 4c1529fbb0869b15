"""A learner's unmeasured passes split across its threads, each thread a pass of its own.

A learner with k torch threads can spend them two ways on one pass of rows: as
one team that shares every layer's work (torch's intra-op threads, which meet
at the end of every operator and wait for the slowest member), or as k
workers that each take 1/k of the rows on one thread and meet once, when
their gradients are summed. The sum of the row-weighted mean-loss gradients
of the parts is the gradient of the whole pass's mean loss, so the update is
the same up to float rounding (``tests/test_side_by_side.py``).

Which is faster is the CPU's and the load's business (docs/performance.md, "Learner passes side
by side"). On a 2-core AMD EPYC with bf16 units a default Pong PPO update (fp32, eager) took
1.11-1.14x the team's time side by side in one benchmark and the run went 1.05x as fast in
another (capped to AVX2); beside a busy process a pass side by side ran 1.45-1.49x as fast as
the team's (quiet 0.98-1.05x). So the team stays the default (``learner_passes team``); ``side-by-side`` forces the split and
``auto`` times both at start-up on the learner's own pass (``choose_pass_schedule``). Only passes
that measure nothing go side by side: the noise scale's passes hook into layers
(``gradients.py``'s taps), which concurrent passes would mix; and only eager ones: two threads
running compiled code deadlocked when one of them compiled again (torch.compile is not thread-safe).
"""

from __future__ import annotations

import concurrent.futures
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

# learner_passes auto keeps the team (the default) unless the workers side by side were at least
# this much faster: on AVX-512 without a cap the probe read them at 0.98-1.05x the team's speed
# (research/data/pass-schedule-probe-2026-11-29.txt), which is no reason to leave the default.
SIDE_BY_SIDE_MIN_SPEEDUP = 1.1


def _one_thread(started: threading.Barrier) -> None:
    # torch sets a new thread's thread count from the process-wide one on its first operator;
    # asking for it first makes that happen now, so the count set next is the one that stays.
    torch.get_num_threads()
    torch.set_num_threads(1)
    started.wait()


class SideBySide:
    """k worker threads of one torch thread each; ``gradients`` runs one part of the rows on each."""

    def __init__(self, workers: int) -> None:
        if workers < 2:
            raise ValueError("side-by-side passes need at least 2 workers")
        self.workers = workers
        caller = torch.get_num_threads()
        started = threading.Barrier(workers + 1)
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="learner-pass",
                                                           initializer=_one_thread, initargs=(started,))
        for _ in range(workers):  # each submit while the others wait at the barrier starts a thread
            self._pool.submit(lambda: None)
        started.wait()
        # set_num_threads(1) in a worker also set torch's process-wide default (what a thread that
        # starts later begins with): the caller's count, set again, puts that back.
        torch.set_num_threads(caller)

    def gradients(self, part_gradient: Callable[[np.ndarray], tuple[list[torch.Tensor], dict[str, float]]],
                  rows: np.ndarray, parts: int = 0) -> tuple[list[torch.Tensor], dict[str, float]]:
        """The row-weighted sum of ``part_gradient`` over ``rows`` split in ``parts`` (0: ``workers``), run
        side by side.

        ``part_gradient(part)`` returns the mean loss's gradient over ``part`` and its statistics.
        """
        pieces = [p for p in np.array_split(rows, min(parts or self.workers, self.workers)) if p.size]
        futures = [self._pool.submit(part_gradient, p) for p in pieces]
        concurrent.futures.wait(futures)  # all of them, even if one failed: none is left using the model
        total: list[torch.Tensor] | None = None
        stats: dict[str, float] = {}
        for part, future in zip(pieces, futures, strict=True):
            grads, part_stats = future.result()
            w = part.size / rows.size
            if total is None:
                total = torch._foreach_mul(grads, w)
            else:
                torch._foreach_add_(total, grads, alpha=w)
            for key, value in part_stats.items():
                stats[key] = stats.get(key, 0.0) + w * value
        assert total is not None
        return total, stats

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@dataclass(frozen=True)
class PassSchedule:
    """How the learner's threads share its unmeasured passes: "team" or "side-by-side"; why."""

    kind: str
    why: str


def _pass_seconds(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def choose_pass_schedule(params: Sequence[torch.nn.Parameter],
                         forward: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
                         obs: torch.Tensor, side: SideBySide, rounds: int = 5) -> PassSchedule:
    """Time one forward and backward pass over ``obs`` by a team of ``side.workers`` threads and by the
    workers of ``side``, in turns, ``rounds`` times; go side by side only where that was at least
    SIDE_BY_SIDE_MIN_SPEEDUP faster in the median of the rounds. ``side`` is left running: the
    workers the passes will use where they go side by side.

    ``forward(obs)`` gives (logits, values) as the learner's passes run them. Wall clock (the
    schedule's whole point is how threads wait for each other), in turns so that a change of load
    falls on both; a busy process beside the start slows the team more than the workers."""
    def gradient(x: torch.Tensor) -> list[torch.Tensor]:
        logits, value = forward(x)
        return list(torch.autograd.grad(logits.float().mean() + value.float().mean(), params))

    threads = side.workers
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        team_run = lambda: gradient(obs)  # noqa: E731
        side_run = lambda: side.gradients(lambda part: (gradient(obs[torch.from_numpy(part)]), {}),  # noqa: E731
                                          np.arange(len(obs)))
        team_run(), side_run()  # warm-up: each layout's kernels chosen once
        team, side_by_side = [], []
        for _ in range(rounds):
            team.append(_pass_seconds(team_run, 2))
            side_by_side.append(_pass_seconds(side_run, 2))
    finally:
        torch.set_num_threads(before)
    speedup = statistics.median(team) / statistics.median(side_by_side)
    measured = f"measured: {threads} passes side by side {speedup:.2f}x the speed of a team of {threads}"
    return PassSchedule("side-by-side" if speedup >= SIDE_BY_SIDE_MIN_SPEEDUP else "team", measured)
