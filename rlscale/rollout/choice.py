"""Which pool a run on one machine steps its environments in, timed at start-up (``--pool auto``).

Ray actors step each actor's vector envs on a core of their own and pay a trip every rollout
(weights out, calls in, batches back: ~8 ms an update for Pong A2C on a 2-core EPYC); the serial
pool steps every vector env at once in this process (ALE steps them on threads of its own) with
one forward pass and no trip. Which collects faster depends on the CPU, the game and the update:
for Pong A2C the serial pool ran ~1.2x the actors' speed on a 2-core EPYC with bf16 units and
~1.08x without them, for PPO the two were level (docs/performance.md). So a run that may choose
times both on the updates it is about to run and keeps the faster.

Each pool's update is timed whole: it collects a batch with the learner's weights and the learner
trains on it, since the pool changes both phases (the actors' rollout ran 4-6 ms slower after a
learner update than without one). The pools take turns, each turn a block of updates of half a
second or more (one PPO update; ~6 of A2C's on Pong): beside a busy process, updates with the two
pools alternating one by one timed the actors at 1.95 ms an agent step and the serial pool at 3.28,
where runs of either alone read 3.34 and 2.65 (the actors, asleep through the serial pool's update,
woke to the scheduler's favour over the busy process). Which pool goes first in a turn follows the
Thue-Morse sequence (AB BA BA AB BA AB AB BA ...): a load that drifts weighs on both alike. With turns
of one update (PPO's), the order also hands the learner's periodic measurements to both pools alike:
plain alternation (AB BA AB BA) of single updates gave every 4th update, A2C's policy/value noise
measurement (noise_parts_every 4), to the same pool, and the probe read the serial pool level with the
actors where it ran 1.14-1.38x their speed (research/data/pool-probe-2026-11-30.txt); in blocks of
several updates their lengths spread it. Turns are whole blocks to the end (a pool with enough timed
updates keeps taking its turns), so no turn is a lone update after the other pool's block. The first turn is not counted
(first passes, caches, the batch-0 measurement of B_P). The caller puts the learner's state back
afterwards. Median seconds per agent step decide: the serial pool has to be ``MARGIN`` faster to be
chosen, since the actors are what a run scales out with and a near tie is noise. Pure of Ray: the
pools are handed in.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from rlscale.rollout.worker import Batch, Pool

MARGIN = 0.05  # the serial pool is chosen where its updates run more than 5 % faster than the actors'
MIN_TIMED = 4  # timed updates with each pool, at least
MAX_TIMED = 40  # the probe ends once each pool has this many (or MIN_TIMED and the budget spent)
BUDGET_SECONDS = 8.0  # past MIN_TIMED, the probe stops once it has run this long
BLOCK_SECONDS = 0.5  # a pool's turn: updates back to back for this long at least (one, where an update is longer)


@dataclass(frozen=True)
class ProbeLimits:
    """How long the probe runs."""

    min_timed: int = MIN_TIMED
    max_timed: int = MAX_TIMED
    budget_seconds: float = BUDGET_SECONDS
    block_seconds: float = BLOCK_SECONDS


@dataclass(frozen=True)
class PoolChoice:
    """What the start-up probe timed and chose."""

    chosen: str  # "serial" or "actors"
    serial_seconds: float  # median seconds per agent step of the serial pool's timed updates
    actors_seconds: float  # the same with the Ray actors
    timed: int  # updates timed with each pool, at least (the faster pool fits more into its turns)
    probe_seconds: float  # the probe's wall time, untimed turns and learner updates included
    probe_steps: int  # agent steps both pools collected for it (not trained on by the run)

    @property
    def serial_speedup(self) -> float:
        """The speed of updates with the serial pool over those with the actors."""
        return self.actors_seconds / self.serial_seconds

    def describe(self) -> str:
        """The header's words: what was chosen, by how much, and what timing it cost."""
        ratio = self.serial_speedup
        took = f"; timed in {self.probe_seconds:.1f} s"
        if self.chosen == "serial":
            return f"chosen at start-up (updates ran {ratio:.2f}x as fast as with Ray actors{took})"
        return (f"chosen at start-up (updates with the serial pool ran {ratio:.2f}x as fast, under the "
                f"{1 + MARGIN:.2f}x it needs{took})")


def choose(serial: list[float], actors: list[float], margin: float = MARGIN) -> str:
    """"serial" where the serial pool's median seconds per agent step beat the actors' by ``margin``."""
    if not serial or not actors:
        raise ValueError("each pool needs timed updates to choose between them")
    return "serial" if statistics.median(serial) * (1 + margin) < statistics.median(actors) else "actors"


def time_pools(pools: Mapping[str, Pool], weights: Callable[[], np.ndarray], learn: Callable[[Batch], object],
               min_timed: int = MIN_TIMED, max_timed: int = MAX_TIMED, budget_seconds: float = BUDGET_SECONDS,
               block_seconds: float = BLOCK_SECONDS) -> tuple[dict[str, list[float]], int]:
    """Seconds per agent step of each pool's timed updates (collect a batch, hand it to ``learn``), the pools
    taking turns in blocks of updates lasting ``block_seconds`` at least; and the agent steps collected in all."""
    if not 1 <= min_timed <= max_timed:
        raise ValueError(f"the probe needs 1 <= min_timed <= max_timed, got {min_timed} and {max_timed}")
    names = list(pools)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    steps = 0
    start = time.perf_counter()
    turn = 0
    while True:
        for name in names if bin(turn).count("1") % 2 == 0 else names[::-1]:  # Thue-Morse: see the docstring
            pool = pools[name]
            block = time.perf_counter()
            while True:
                began = time.perf_counter()
                pool.start(weights())
                batch = pool.collect()
                learn(batch)
                done = time.perf_counter()
                steps += batch.size
                if turn > 0:
                    seconds[name].append((done - began) / batch.size)
                if done - block >= block_seconds:  # whole blocks only: see the module's docstring
                    break
        turn += 1
        timed = min(len(times) for times in seconds.values())
        if timed >= max_timed or (timed >= min_timed and time.perf_counter() - start >= budget_seconds):
            return seconds, steps


def probe(serial: Pool, actors: Pool, weights: Callable[[], np.ndarray], learn: Callable[[Batch], object],
          limits: ProbeLimits | None = None) -> PoolChoice:
    """Time both pools (``time_pools``) and choose between them."""
    limits = limits or ProbeLimits()
    start = time.perf_counter()
    seconds, steps = time_pools({"serial": serial, "actors": actors}, weights, learn, limits.min_timed,
                                limits.max_timed, limits.budget_seconds, limits.block_seconds)
    return PoolChoice(choose(seconds["serial"], seconds["actors"]), statistics.median(seconds["serial"]),
                      statistics.median(seconds["actors"]), min(len(seconds["serial"]), len(seconds["actors"])),
                      time.perf_counter() - start, steps)
