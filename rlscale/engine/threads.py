"""The learner's torch threads, adapted to the cores actually free (``--learner-threads 0``).

A learner with one torch thread per core runs as a team: each pass waits for
its slowest thread. When another process takes a core, one of the team is
descheduled and the whole pass waits for it: beside one busy process the
default Pong run fell from 830 to 116 agent steps/s, where one thread fewer
ran at 535 (issue 36's measurement on a Xeon). No fixed count is right for a
quiet machine and a busy one, so the learner watches its own update times:

* at each thread count it keeps the quietest median it has seen (the median
  of ``window`` updates, in seconds per agent step, so resized batches
  compare);
* when the median of the last ``window`` updates is ``slowdown`` times that
  quiet median (at most every ``retry_seconds``), it tries one thread fewer
  for ``trial`` updates, and keeps it where that was ``margin`` faster, else
  goes back. That is for another program taking a core, and the run reads
  whether one did (``BusyElsewhere``, every ``BUSY_ELSEWHERE_EVERY`` seconds):
  where none holds even ``MACHINE_SLOWED_BELOW`` of a core, the machine itself
  slowed (drift that neither /proc nor the hypervisor's steal shows: caches,
  memory bandwidth, clocks), which one thread fewer rarely mends, and the look
  waits as the other looks do (below). Where a host's other tenants show in
  /proc/stat (a container's view of a shared machine), they read as busy and
  the looks come as before. On a host whose speed drifted by a third within minutes, the
  default Pong run looked every minute or two and went back every time
  (docs/performance.md, 2026-11-30);
* once, early (after ``settle_seconds``), it tries one thread fewer whatever
  the times say: a run that starts beside a busy process never sees its
  quiet speed, so it cannot tell that it is slow (measured: the default Pong
  run started beside a busy process ran at 0.32x its quiet speed, untouched);
* below the full count it tries one thread more (the busy process may have
  ended); these looks wait ``retry_seconds``, twice as long after each that
  changed nothing (a trial at the wrong count is slow: it should be rare),
  but when the updates at the current count have become ``margin`` faster
  than when the last look failed, the load has changed and it looks again
  at once (after twenty minutes beside two busy processes, the doubled wait
  kept the default Pong run at one thread, 0.65x its quiet speed, for
  minutes after they ended: research/performance-history.md, 2026-11-27).

A reading (a window's or a trial's) spans at least ``min_reading_seconds`` of
learner time: more than ``window`` or ``trial`` updates where updates are short.
A2C's Pong updates take 0.05-0.25 s, so three of them were a fifth of a second
or so, and a moment of the host's could decide a trial: once, beside a busy
process, the default A2C run's early look read one thread at 1.00x two and went
back to two, which it then kept (it never saw its quiet speed), where A2C held
at one thread ran at ~0.7x its quiet speed (2026-11-30, docs/performance.md).
What made that trial read even was not recorded; in four more such starts the
governor dropped to one thread through its slowdown check, with either rule.

A run starts at one thread fewer where, over half a second before its start-up probes, other processes
(not this one, nor its children: an embedded Ray's daemons and actors) keep at least half a core busy
(``cores_busy_elsewhere``). The pool probe then times its updates at the count the governor would come to:
on a two-thread team beside a busy process the A2C probe kept the Ray actors in six of the seven busy
starts measured (serial 0.79-0.97x), where an EPYC's quiet starts took the serial pool every time; held at
one thread beside the busy process, the serial pool ran 1.17-1.24x the actors' speed
(research/data/busy-pools-2026-11-30-xeon-amx.txt).
Such a start looks for a free core after ``settle_seconds`` (the busy process may have ended).

Nothing changes in the first ``settle_seconds`` (start-up is slow for other
reasons) or for updates shorter than ``min_update_seconds`` (their timing is
mostly noise, and so small a learner gains little from a thread team). A
quiet run pays the early look (a trial's reading at one thread fewer) and
keeps its threads. The thread count changes the convolutions' summation order,
so a run whose threads changed is not bitwise the run it would have been:
``--learner-threads N`` fixes them.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rlscale.models.precision import has_convolutions


@dataclass
class ThreadGovernor:
    most: int  # the full count: the machine's cores
    window: int = 5  # the fewest updates whose median is one reading
    slowdown: float = 1.5  # a reading this many times the quiet one: a core has been taken
    trial: int = 3  # the fewest updates whose median is a trial's reading
    margin: float = 1.1  # a trial count must be this much faster to be kept
    retry_seconds: float = 60.0  # the first wait between trials; doubled after each that changed nothing
    settle_seconds: float = 20.0  # no changes before this much time has passed
    min_update_seconds: float = 0.02  # shorter updates are not watched
    min_reading_seconds: float = 1.0  # a reading spans at least this much learner time
    start: int = 0  # the count it starts at (0: ``most``); below ``most`` where a core was busy at start-up
    threads: int = field(init=False)
    quiet: dict[int, float] = field(default_factory=dict)  # threads -> the fastest reading at that count
    _recent: deque[tuple[float, float]] = field(init=False)  # the latest updates: (seconds per step, seconds)
    _trial_from: tuple[int, float] | None = None  # (threads, reading) a trial is compared against
    _start: float | None = None
    _last_trial: float = float("-inf")
    _wait: float = field(init=False)
    _explored: bool = field(init=False, default=False)  # the one look at one thread fewer, early in the run
    # The reading at the current count when a look at more threads last failed: a reading this much
    # faster (``margin``) means the load changed since, so the doubled wait no longer applies.
    _failed_from: float | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.most:
            raise ValueError(f"a governor of {self.most} threads cannot start at {self.start}")
        self.threads = self.start or self.most
        # A start below the full count has read the load already: its first look is for a free core, and
        # the early look at one thread fewer (for a start that cannot tell it is slow) is not needed.
        self._explored = self.threads < self.most
        # Enough updates for the longest reading: the watched ones take at least min_update_seconds.
        longest = math.ceil(self.min_reading_seconds / max(self.min_update_seconds, 1e-3))
        self._recent = deque(maxlen=max(self.window, self.trial, longest) + 1)
        self._wait = self.retry_seconds

    @property
    def kept(self) -> int:
        """The count the governor keeps: the one in use, or, during a trial, the one the trial is measured
        against (which it goes back to unless the trial wins)."""
        return self.threads if self._trial_from is None else self._trial_from[0]

    @property
    def looked(self) -> bool:
        """Whether a look at another thread count has ended and none is under way: after the first, a run
        started beside a busy process has dropped to the count it keeps (benchmarks/bench.py times its
        rows from there)."""
        return self._trial_from is None and self._last_trial > float("-inf")

    def observe(self, seconds: float, steps: int, now: float, elsewhere: float | None = None) -> tuple[int, str] | None:
        """One update's learner time for ``steps`` agent steps, at ``now`` (seconds, monotonic); ``elsewhere``:
        the cores other programs kept busy lately (``BusyElsewhere``), None where unknown.

        Returns (the thread count to set, why) when it should change, else None.
        """
        if self._start is None:
            self._start = now
        if seconds < self.min_update_seconds:
            return None
        self._recent.append((seconds / max(1, steps), seconds))
        reading = self._reading(self.window if self._trial_from is None else self.trial)
        if reading is None:
            return None
        self.quiet[self.threads] = min(reading, self.quiet.get(self.threads, reading))
        if self._trial_from is not None:
            return self._end_trial(reading, now)
        if now - self._start < self.settle_seconds:
            return None
        since = now - self._last_trial
        if self.threads > 1 and reading >= self.slowdown * self.quiet[self.threads]:
            # Where no other program holds any of a core, the machine itself slowed (drift that neither /proc nor
            # the hypervisor's steal shows), which one thread fewer rarely mends: still looked at, but after the
            # doubling wait of the other looks (see the docstring).
            machines_own = elsewhere is not None and elsewhere < MACHINE_SLOWED_BELOW
            if since >= (self._wait if machines_own else self.retry_seconds):
                slower = f"updates {reading / self.quiet[self.threads]:.1f}x slower than their quietest at {self.threads}"
                if elsewhere is None:
                    why = f"{slower}: a core is busy elsewhere"
                elif machines_own:
                    why = f"{slower}, no core busy elsewhere ({elsewhere:.2f}): checking whether one thread fewer is faster"
                else:
                    why = f"{slower}: {elsewhere:.1f} core{'' if elsewhere < 1.05 else 's'} busy elsewhere"
                return self._try(self.threads - 1, reading, now, why)
        if self._failed_from is not None and self._failed_from >= self.margin * reading:
            self._wait, self._failed_from = self.retry_seconds, None
        if since < self._wait:
            return None
        if not self._explored and self.threads > 1:
            # A run that starts beside a busy process never sees its quiet speed: look once.
            self._explored = True
            return self._try(self.threads - 1, reading, now, "checking whether every core is free")
        if self.threads < self.most:
            return self._try(self.threads + 1, reading, now, "checking whether a core came free")
        return None

    def _reading(self, updates: int) -> float | None:
        """The median seconds per step of the latest updates, at least ``updates`` of them and at least
        ``min_reading_seconds`` in all; None until there are that many."""
        per_steps, total = [], 0.0
        for per_step, seconds in reversed(self._recent):
            per_steps.append(per_step)
            total += seconds
            if len(per_steps) >= updates and total >= self.min_reading_seconds:
                return statistics.median(per_steps)
        return None

    def _try(self, threads: int, reading: float, now: float, why: str) -> tuple[int, str]:
        self._trial_from = (self.threads, reading)
        self._last_trial = now
        self.threads = threads
        self._recent.clear()
        return threads, f"trying {threads}: {why}"

    def _end_trial(self, reading: float, now: float) -> tuple[int, str] | None:
        before, before_reading = self._trial_from
        self._trial_from = None
        self._last_trial = now
        self._recent.clear()
        speedup = before_reading / reading
        if speedup >= self.margin:
            self._wait, self._failed_from = self.retry_seconds, None
            return self.threads, f"keeping {self.threads}: {speedup:.2f}x the speed of {before}"
        self._wait *= 2
        tried, self.threads = self.threads, before
        if tried > before:
            self._failed_from = before_reading
        return before, f"back to {before}: {tried} ran at {speedup:.2f}x its speed"


# A learner pass shorter than this on one thread is too small for a team of threads: its members
# wait for one another (and for the slowest, beside a busy process) longer than they share work.
TEAM_PASS_SECONDS = 0.02
PROBE_ROWS = 32


def one_thread_pass_seconds(model: torch.nn.Module, obs: torch.Tensor, limit: float = TEAM_PASS_SECONDS) -> float:
    """The CPU seconds of one forward and backward pass over ``obs`` on one thread (the smaller of two
    after a warm-up; the first that already exceeds ``limit`` is returned at once). The calling
    thread's CPU time, not the wall clock: the work, which a busy process beside it does not change
    (the wall clock read 2.7x more for MinAtar's pass beside two busy processes on two cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        best = math.inf
        for attempt in range(3):
            start = time.thread_time()
            logits, value = model(obs)
            (logits.float().mean() + value.float().mean()).backward()
            seconds = time.thread_time() - start
            model.zero_grad(set_to_none=True)
            if attempt > 0:
                best = min(best, seconds)
                if best > limit:
                    break
        return best
    finally:
        torch.set_num_threads(threads)


def default_learner_threads(model: torch.nn.Module, obs: torch.Tensor, cores: int) -> tuple[int, str]:
    """--learner-threads 0's start, and why: every core (which the governor then adapts to the free
    ones) for a learner whose pass takes at least TEAM_PASS_SECONDS on one thread, else one.

    A small network's passes are a few small products: a team of threads gains nothing on them and
    waits for its slowest member, so beside one busy process a two-thread CartPole learner ran 4.4x
    slower than quiet and MinAtar Breakout's 4.4x, while one thread ran as fast as quiet (0.98x and
    0.92x the time; benchmarks/bench_small_learners.py, docs/performance.md). An MLP is never timed (its passes
    are far shorter); the reading is one thread's, so a start beside a busy process makes the quiet
    start's choice."""
    if cores == 1:
        return 1, "one core"
    if not has_convolutions(model):
        return 1, "an MLP's passes gain nothing from a team"
    # Timed on at most PROBE_ROWS rows and scaled to the pass (a pass's time grows with its rows): a
    # Nature CNN's full 256-row pass takes ~0.5 s on one thread, and the start-up need not wait for it.
    probe = obs[:PROBE_ROWS]
    seconds = one_thread_pass_seconds(model, probe, TEAM_PASS_SECONDS * len(probe) / len(obs)) * len(obs) / len(probe)
    if seconds < TEAM_PASS_SECONDS:
        return 1, f"a pass takes {1e3 * seconds:.1f} ms on one thread: too short for a team"
    return cores, "adapted to the free cores"


BUSY_ELSEWHERE_CORES = 0.5  # other processes keeping this much of the cores busy at start-up hold one
BUSY_ELSEWHERE_SECONDS = 0.5  # the start-up reading's window


BUSY_ELSEWHERE_EVERY = 2.0  # seconds between a run's readings of the cores busy elsewhere
# Below this, no other program holds any of a core: a slowdown is the machine's own. Lower than the start-up's
# BUSY_ELSEWHERE_CORES: a process taking a fifth of a core in bursts can still stall a team of threads.
MACHINE_SLOWED_BELOW = 0.2


@dataclass
class BusyElsewhere:
    """The cores that processes other than this one and its descendants kept busy between one reading and the
    next, read without waiting; a reading sooner than ``every`` seconds after the last returns the last.

    The machine's busy time (/proc/stat) less this process tree's (``own_ticks``): an embedded Ray's daemons
    and actors, started by this process, are its own work, not a busy core. The hypervisor's steal counts as
    busy elsewhere (a vCPU taken away stalls a team of threads as another program does). A process outside
    the tree that ends within the window, or one of the tree's that init adopts and that ends within it, is
    counted as busy elsewhere. Reading /proc for ~100 processes takes a few milliseconds."""

    every: float = BUSY_ELSEWHERE_EVERY
    latest: float | None = field(default=None, init=False)  # None before two readings, or without /proc
    _last: tuple[float, int, dict[int, tuple[int, int, int]]] | None = field(default=None, init=False)

    @property
    def started(self) -> bool:
        """Whether a reading has been taken (none where /proc cannot be read)."""
        return self._last is not None

    def read(self) -> float | None:
        """Cores busy elsewhere since the last reading; None on the first, or where /proc cannot be read."""
        began = time.perf_counter()
        if self._last is not None and began - self._last[0] < self.every:
            return self.latest
        try:
            busy = machine_busy_ticks()
            processes = _process_ticks()
        except (OSError, ValueError, IndexError):
            return None
        last, self._last = self._last, (began, busy, processes)
        if last is not None:
            # The machine's window runs from one /proc/stat read to the next (each right after its clock reading).
            ticks = busy - last[1] - own_ticks(os.getpid(), last[2], processes)
            self.latest = max(0.0, ticks / os.sysconf("SC_CLK_TCK") / (began - last[0]))
        return self.latest


def cores_busy_elsewhere(seconds: float = BUSY_ELSEWHERE_SECONDS) -> float | None:
    """The cores that processes other than this one and its descendants kept busy over the next ``seconds``
    (this process waits through them: ``BusyElsewhere``); None where /proc cannot be read (not Linux)."""
    meter = BusyElsewhere(every=0.0)
    meter.read()  # the window's start
    if not meter.started:
        return None
    time.sleep(seconds)
    return meter.read()


def own_ticks(root: int, before: Mapping[int, tuple[int, int, int]], after: Mapping[int, tuple[int, int, int]]) -> int:
    """The CPU ticks that ``root`` and its descendants took between two snapshots, each pid -> (parent pid,
    ticks, start time).

    A child that ended and was waited for by its parent moves into the parent's ticks (the kernel adds it to
    the parent's children's time), so the tree's totals carry it: a process of the first snapshot's tree whose
    parent still runs is counted as a difference. A descendant that init adopted (its parent ended) and still
    runs is counted by its own difference. One whose parent ended and that ended too went to init with its
    ticks: its work over the window is lost (counted as busy elsewhere), and its ticks from before are not
    taken off (they would be, in full, as if it had done them in the window)."""
    def same(pid: int) -> bool:  # the same process in both snapshots (a pid may be reused)
        return pid in after and after[pid][2] == before[pid][2]

    tree_before, tree_after = descendants(root, before), descendants(root, after)
    adopted = [pid for pid in tree_before - tree_after if same(pid)]
    carried = [pid for pid in tree_before if same(pid) or (before[pid][0] in before and same(before[pid][0]))]
    return (sum(after[pid][1] for pid in tree_after) + sum(after[pid][1] for pid in adopted)
            - sum(before[pid][1] for pid in carried))


def descendants(root: int, processes: Mapping[int, tuple[int, int, int]]) -> set[int]:
    """``root`` and every process below it, from ``processes``: pid -> (parent pid, ...)."""
    children: dict[int, list[int]] = {}
    for pid, (parent, *_) in processes.items():
        children.setdefault(parent, []).append(pid)
    tree: set[int] = set()
    todo = [root] if root in processes else []
    while todo:
        pid = todo.pop()
        if pid not in tree:  # a pid reused within one scan could make a loop
            tree.add(pid)
            todo.extend(children.get(pid, ()))
    return tree


def machine_busy_ticks() -> int:
    """Clock ticks the whole machine has spent busy since boot (/proc/stat; benchmarks/benchtiming.py reads it too)."""
    # user nice system idle iowait irq softirq steal (guest time is in user's already): all but idle and iowait
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(fields) - fields[3] - fields[4]


def _process_ticks() -> dict[int, tuple[int, int, int]]:
    """Every process's parent, CPU ticks (its own and its waited-for children's) and start time."""
    processes = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()  # a name may hold ")" or bytes
        except OSError:  # ended since the listing
            continue
        processes[int(entry.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]), int(fields[19]))
    return processes
