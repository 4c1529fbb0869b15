"""--learner-threads 0: the learner's thread count follows the cores actually free (the rule, on known times)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rlscale.engine.threads import ThreadGovernor


def drive(governor: ThreadGovernor, seconds_per_step, updates: int, start: float = 0.0,
          period: float = 2.0, seed: int = 0, elsewhere: float | None = None) -> tuple[list[int], list[str]]:
    """Feed ``updates`` updates of 1,024 steps ``period`` seconds apart, each taking
    seconds_per_step(threads) ms per step x 10 % noise; ``elsewhere``: the cores busy elsewhere it reads."""
    rng = np.random.default_rng(seed)
    counts, notes = [], []
    for i in range(updates):
        seconds = 1024e-3 * seconds_per_step(governor.threads) * rng.uniform(0.95, 1.05)
        change = governor.observe(seconds, 1024, start + i * period, elsewhere)
        if change is not None:
            notes.append(change[1])
        counts.append(governor.threads)
    return counts, notes


QUIET = {2: 1.0, 1: 1.34}  # ms per step: the quiet two-thread team is 1.34x one thread (830 vs 618 measured)
BUSY = {2: 7.2, 1: 1.55}  # a core taken: the team collapses, one thread only loses its share


def test_a_quiet_machine_looks_once_and_keeps_every_thread():
    governor = ThreadGovernor(2)
    counts, notes = drive(governor, QUIET.get, 500)  # 1,000 s
    assert notes[0] == "trying 1: checking whether every core is free"
    assert notes[1].startswith("back to 2: 1 ran at 0.") and len(notes) == 2
    assert counts.count(1) == governor.trial and counts[-1] == 2


def test_during_a_trial_the_kept_count_is_the_one_the_trial_is_measured_against():
    """What a benchmark reads as the run's choice: not the count a trial is trying."""
    governor = ThreadGovernor(2)
    counts, notes = drive(governor, QUIET.get, 500)
    first_trial = counts.index(1)
    governor = ThreadGovernor(2)
    drive(governor, QUIET.get, first_trial)
    assert not governor.looked  # a benchmark's row waits for the first look to end (benchmarks/bench.py)
    drive(governor, QUIET.get, 1, start=2.0 * first_trial)  # the update that began the trial
    assert governor.threads == 1 and governor.kept == 2 and not governor.looked
    drive(governor, QUIET.get, governor.trial, start=2.0 * (first_trial + 1))  # the trial ends: back to 2
    assert governor.threads == 2 and governor.kept == 2 and governor.looked


def test_a_run_started_beside_a_busy_process_finds_one_thread_faster():
    """It never sees its quiet speed (the default Pong run so started stayed at 0.32x quiet)."""
    governor = ThreadGovernor(2)
    counts, notes = drive(governor, BUSY.get, 100)
    assert notes[:2] == ["trying 1: checking whether every core is free", "keeping 1: 4.98x the speed of 2"]
    assert counts.index(1) <= governor.settle_seconds / 2 + governor.window + 1 and counts[-1] == 1


def test_a_busy_core_drops_a_thread_and_its_end_restores_it():
    governor = ThreadGovernor(2)
    counts, notes = drive(governor, QUIET.get, 50)  # 100 s quiet: the early look, and back to 2
    assert counts[-1] == 2 and len(notes) == 2
    counts, notes = drive(governor, BUSY.get, 100, start=100)  # 200 s beside a busy process
    dropped = counts.index(1)
    assert dropped <= governor.window + governor.trial  # within a window and a trial
    assert notes[0].startswith("trying 1: updates 7.") and notes[1].startswith("keeping 1: 4.")
    # Trials of 2 while still busy go back to 1, the second after twice the wait (60 s, then 120 s).
    assert notes[2:] == ["trying 2: checking whether a core came free", "back to 1: 2 ran at 0.20x its speed",
                         "trying 2: checking whether a core came free"]
    assert sum(c == 2 for c in counts[dropped:]) <= 2 * governor.trial
    counts, notes = drive(governor, QUIET.get, 50, start=300)  # quiet again: the trial under way keeps 2
    assert set(counts) == {2} and notes[0].startswith("keeping 2: 1.")


def test_a_long_busy_stretch_does_not_delay_the_return_to_every_thread():
    """Twenty minutes beside a busy process double the wait between looks at two threads to minutes; once
    the updates at one thread run faster than when the last look failed, it looks again at once."""
    governor = ThreadGovernor(2)
    drive(governor, QUIET.get, 50)  # the early look, back to 2
    counts, notes = drive(governor, BUSY.get, 600, start=100)  # 1,200 s busy
    assert counts[-1] == 1 and sum(n.startswith("back to 1: 2 ran at 0.2") for n in notes) >= 4
    assert governor._wait >= 16 * governor.retry_seconds  # without the reset: minutes before the next look
    counts, notes = drive(governor, QUIET.get, 50, start=1_300)
    assert notes[0] == "trying 2: checking whether a core came free" and notes[1].startswith("keeping 2: 1.3")
    back = counts.index(2)
    assert back <= governor.window + 1 and set(counts[back:]) == {2}


def test_a_machine_slower_at_every_count_keeps_its_threads():
    """All counts slowed alike (a throttled CPU): one trial of one thread fewer, and back."""
    governor = ThreadGovernor(2)
    drive(governor, QUIET.get, 50)  # the early look included
    counts, notes = drive(governor, lambda t: 2 * QUIET[t], 50, start=100)
    assert counts[-1] == 2
    assert notes[0].startswith("trying 1") and notes[1].startswith("back to 2: 1 ran at 0.")


def test_a_machine_that_slows_with_no_core_busy_elsewhere_looks_at_one_thread_fewer_ever_more_rarely():
    """A host's other tenants slow every count alike: a look at one thread fewer each minute goes back each time
    (the default Pong run on a drifting host did so every minute or two); where the run reads that no other
    program holds a core, the looks wait twice as long after each that changed nothing."""
    def looks(elsewhere: float | None) -> list[str]:
        governor = ThreadGovernor(2)
        drive(governor, QUIET.get, 50, elsewhere=elsewhere)  # the early look, and back to 2
        counts, notes = drive(governor, lambda t: 2 * QUIET[t], 600, start=100, elsewhere=elsewhere)  # 20 min slow
        assert counts[-1] == 2 and all(n.startswith("back to 2") for n in notes[1::2])
        return notes[0::2]

    unknown, quiet = looks(None), looks(0.1)
    assert len(unknown) >= 15 and unknown[0].endswith("slower than their quietest at 2: a core is busy elsewhere")
    # After the early look's (60 s -> 120 s), the waits double: 120, 240, 480 s... in 20 minutes at most four.
    assert 1 <= len(quiet) <= 4
    assert quiet[0].endswith(", no core busy elsewhere (0.10): checking whether one thread fewer is faster")
    # A program holding a fifth of a core or more can stall a team: its slowdowns are looked at within the minute.
    assert len(looks(0.3)) >= 15


def test_a_core_taken_by_another_program_drops_a_thread_at_once_after_the_machines_own_slowdowns():
    """Looks grown rare on a slow host do not delay the answer to a busy process: the reading says one is there."""
    governor = ThreadGovernor(2)
    drive(governor, QUIET.get, 50, elsewhere=0.0)
    drive(governor, lambda t: 2 * QUIET[t], 600, start=100, elsewhere=0.0)  # 20 min of the host's slowdowns
    assert governor._wait >= 8 * governor.retry_seconds
    counts, notes = drive(governor, BUSY.get, 100, start=1_300, elsewhere=1.0)
    assert counts.index(1) <= governor.window + governor.trial
    assert notes[0].endswith(": 1.0 core busy elsewhere") and notes[1].startswith("keeping 1: ")


def scripted_proc(monkeypatch, snapshots: list[dict], machine: list[int], clock: list[float]) -> list[int]:
    """rlscale.engine.threads reading scripted /proc snapshots, machine ticks (100 a second) and clock readings
    in turn, its sleeps skipped; the returned list grows by one at each scan of the processes."""
    import types

    from rlscale.engine import threads

    scans: list[int] = []
    snapshots_left, machine_left, clock_left = iter(snapshots), iter(machine), iter(clock)

    def scan() -> dict:
        scans.append(1)
        return next(snapshots_left)

    monkeypatch.setattr(threads, "_process_ticks", scan)
    monkeypatch.setattr(threads, "machine_busy_ticks", lambda: next(machine_left))
    monkeypatch.setattr(threads, "time", types.SimpleNamespace(perf_counter=lambda: next(clock_left),
                                                               sleep=lambda seconds: None))
    monkeypatch.setattr(threads.os, "sysconf", lambda name: 100)
    return scans


def test_the_busy_elsewhere_reading_is_taken_at_most_every_few_seconds(monkeypatch):
    """A run reads it at each update (A2C's take ~0.1 s): /proc is read once per ``every`` seconds."""
    from rlscale.engine import threads

    me = os.getpid()
    scans = scripted_proc(monkeypatch, snapshots=[{me: (1, 1000, 0)}, {me: (1, 1100, 0)}, {me: (1, 1150, 0)}],
                          machine=[5000, 5300, 5400], clock=[10.0, 11.0, 12.0, 12.5, 14.0])
    meter = threads.BusyElsewhere(every=2.0)
    assert meter.read() is None and len(scans) == 1  # the first reading only starts the window
    assert meter.read() is None and len(scans) == 1  # 1 s later: too soon, nothing read
    assert meter.read() == pytest.approx(1.0) and len(scans) == 2  # (300 - this process's 100) / 100 / 2 s
    assert meter.read() == pytest.approx(1.0) and len(scans) == 2  # 0.5 s later: the last reading
    assert meter.read() == pytest.approx(0.25) and len(scans) == 3  # (100 - 50) / 100 / 2 s


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a governed team needs two cores")
def test_the_engine_hands_the_governor_what_it_reads_busy_elsewhere(monkeypatch):
    """Each update's learner time goes to the governor with the latest reading of the cores busy elsewhere."""
    from rlscale.config import build_config
    from rlscale.engine import native as engine_module
    from rlscale.engine import threads

    # A governed learner without the Nature CNN's cost: CartPole's, given a team as a convolutional one gets.
    monkeypatch.setattr(engine_module, "default_learner_threads", lambda model, obs, cores: (2, "a team"))
    monkeypatch.setattr(engine_module, "cores_busy_elsewhere", lambda: 0.0)
    monkeypatch.setattr(threads.BusyElsewhere, "read", lambda self: 0.25)
    seen = []
    real_observe = ThreadGovernor.observe

    def observe(self, seconds, steps, now, elsewhere=None):
        seen.append(elsewhere)
        return real_observe(self, seconds, steps, now, elsewhere)

    monkeypatch.setattr(ThreadGovernor, "observe", observe)
    threads_before = torch.get_num_threads()
    engine = engine_module.NativeEngine(build_config("cartpole", None, {"pool": "serial", "n_envs": 4}), 4)
    try:
        assert engine.threads is not None
        for _ in range(3):
            engine.update(engine.cfg.agent.lr)
    finally:
        engine.close()
        torch.set_num_threads(threads_before)
    assert seen == [0.25] * 3


def test_short_updates_are_left_alone():
    """A small learner's updates (CartPole's, MinAtar's) are too short to time or to gain from a team."""
    governor = ThreadGovernor(2, min_update_seconds=2.0)  # every update here takes ~1-7 s x 1.024
    drive(governor, QUIET.get, 50)
    counts, notes = drive(governor, lambda t: BUSY[t] / 4, 100, start=100)  # busy, but each update < 2 s
    assert set(counts) == {2} and notes == []


def test_a_trial_of_short_updates_spans_a_second_so_a_hiccup_cannot_decide_it():
    """A2C's Pong updates (80 steps, ~0.1 s): a run started beside a busy process, whose early look at one
    thread meets two slow updates at once (a hiccup of the host, a measured update). Three updates were a
    fifth of a second: their median was the hiccup, the look went back to two threads, and a run that never
    saw its quiet speed stayed there. A reading of a second outlasts it."""
    seconds_at = {2: 0.24, 1: 0.09}  # beside a busy process: the team waits for its descheduled member

    def run(governor: ThreadGovernor) -> tuple[list[int], list[str]]:
        counts, notes, now, since_switch = [], [], 0.0, 0
        for _ in range(600):
            seconds = 0.30 if governor.threads == 1 and since_switch < 2 else seconds_at[governor.threads]
            now += seconds + 0.05  # the rollout between updates
            change = governor.observe(seconds, 80, now)
            since_switch += 1
            if change is not None:
                notes.append(change[1])
                since_switch = 0
            counts.append(governor.threads)
        return counts, notes

    counts, notes = run(ThreadGovernor(2))
    assert notes[0] == "trying 1: checking whether every core is free" and notes[1].startswith("keeping 1: 2.")
    assert counts[-1] == 1
    counts, notes = run(ThreadGovernor(2, min_reading_seconds=0.0))  # three updates a trial, as before
    assert notes[1].startswith("back to 2: 1 ran at 0.8") and counts[-1] == 2


def test_nothing_changes_while_the_run_settles():
    governor = ThreadGovernor(2, settle_seconds=20.0)
    counts, _ = drive(governor, lambda t: BUSY[t] if governor.quiet else QUIET[t], 10, period=1.0)
    assert set(counts) == {2}  # 10 s in: slow, but not yet settled


@pytest.mark.timeout(120)
@pytest.mark.parametrize("preset, rows, expected", [
    ("cartpole", 40, 1),  # an MLP: never a team
    ("minatar-breakout", 80, 1),  # MinAtar's small CNN: a pass of a few ms on one thread
    ("pong", 256, 2),  # the Nature CNN: a team, which the governor then adapts to the free cores
])
def test_the_start_up_thread_choice_beside_a_busy_process_is_the_quiet_choice(preset, rows, expected, busy_core):
    from rlscale.config import build_config
    from rlscale.engine.threads import default_learner_threads
    from rlscale.envs.vector import probe_spec, sample_observations
    from rlscale.models.nets import build_network

    cfg = build_config(preset, None, {})
    spec = probe_spec(cfg.env)
    model = build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden)
    obs = torch.from_numpy(sample_observations(spec, rows))
    quiet, _ = default_learner_threads(model, obs, cores=2)
    with busy_core():
        busy, why = default_learner_threads(model, obs, cores=2)
    assert quiet == busy == expected, why


def test_a_benchmark_row_is_timed_once_the_governors_first_look_has_ended(monkeypatch):
    """benchmarks/bench.py's rlscale rows: beside a busy process the run's first ~20 s are at the count it drops;
    the timed part is the count it keeps."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from benchtiming import timed

    # No later looks (retry_seconds): the timed part is the kept count's alone.
    governor, clock, threads_timed = ThreadGovernor(2, settle_seconds=0.2, retry_seconds=1e9), [0.0], []

    def update() -> int:
        seconds = 1e-3 * BUSY[governor.threads] * 80 * 10  # ~0.1-0.6 s of "learner", on a clock of its own
        clock[0] += seconds
        governor.observe(seconds, 80, clock[0])
        threads_timed.append(governor.threads)
        return 80

    rate = timed(update, 0.05, warmup=2, settled=lambda: governor.looked)
    assert governor.looked
    assert 2 in threads_timed[:rate.warmup_loops] and set(threads_timed[rate.warmup_loops:]) == {1}


def test_a_governor_started_below_the_full_count_looks_for_a_free_core_once_settled():
    governor = ThreadGovernor(2, start=1)
    counts, notes = drive(governor, QUIET.get, 60)  # the busy process ended as the run started
    assert counts[:10] == [1] * 10  # settling: 20 s of updates 2 s apart
    assert notes[0] == "trying 2: checking whether a core came free" and notes[1].startswith("keeping 2: ")
    assert len(notes) == 2 and counts[-1] == 2  # no early look at one thread fewer: the start read the load


def test_a_governor_started_below_the_full_count_beside_a_busy_process_stays_there():
    governor = ThreadGovernor(2, start=1)
    counts, notes = drive(governor, BUSY.get, 100)
    assert notes[0] == "trying 2: checking whether a core came free" and notes[1].startswith("back to 1: ")
    assert counts.count(2) <= 2 * governor.trial and counts[-1] == 1


def test_a_process_trees_ticks_are_its_own_and_its_descendants():
    from rlscale.engine.threads import descendants, own_ticks

    # pid: (parent, ticks, start); 10 is the root, 11 and 12 its children, 13 a grandchild, 20 and 21 elsewhere.
    before = {1: (0, 5, 0), 10: (1, 100, 1), 11: (10, 30, 2), 12: (10, 7, 3), 13: (11, 4, 4), 20: (1, 50, 5),
              21: (20, 9, 6)}
    assert descendants(10, before) == {10, 11, 12, 13} and descendants(11, before) == {11, 13}
    assert descendants(99, before) == set()  # ended: nothing of it left
    # Over the window: the root takes 10; 12 takes 3 more and ends, 11 takes 2 more and ends, and the root waits
    # for both (their ticks move into the root's count); init adopts 11's child 13, which takes 6; a new child 14
    # takes 2; 20, elsewhere, takes 40.
    after = {1: (0, 5, 0), 10: (1, 100 + 10 + 10 + 32, 1), 13: (1, 10, 4), 14: (10, 2, 7), 20: (1, 90, 5),
             21: (20, 9, 6)}
    assert own_ticks(10, before, after) == 10 + 3 + 2 + 6 + 2
    # Had the adopted 13 ended too (init waits for it: its ticks leave the tree's count), its work over the
    # window is lost, and its 4 from before are not taken off as if they were the window's; the same where its
    # pid has gone to another process since.
    ended = {pid: row for pid, row in after.items() if pid != 13}
    assert own_ticks(10, before, ended) == 10 + 3 + 2 + 2
    assert own_ticks(10, before, {**ended, 13: (1, 1, 8)}) == 10 + 3 + 2 + 2


def test_the_busy_elsewhere_reading_is_the_machines_busy_time_less_this_process_trees(monkeypatch):
    from rlscale.engine import threads

    me = os.getpid()
    scripted_proc(monkeypatch, snapshots=[{me: (1, 1000, 0), 42: (1, 0, 0)}, {me: (1, 1000 + 60, 0), 42: (1, 40, 0)}],
                  machine=[5000, 5000 + 150],  # 1.5 s of ticks at 100 a second over the window
                  clock=[10.0, 11.0])  # a one-second window
    assert threads.cores_busy_elsewhere() == pytest.approx(0.9)  # (150 - this process's 60) / 100 / 1 s


@pytest.mark.timeout(60)
@pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="reads /proc")
def test_a_core_busy_in_another_program_reads_as_busy_elsewhere_and_a_child_is_in_this_process_tree(busy_core):
    from rlscale.engine.threads import _process_ticks, cores_busy_elsewhere, own_ticks

    with busy_core():
        assert cores_busy_elsewhere() >= 0.7  # the other worker of a test run may add to it, never take
    # A child of this process (as an embedded Ray's daemons and actors are) counts as this process's own work.
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        before, start = _process_ticks(), time.perf_counter()
        time.sleep(0.5)
        own = own_ticks(os.getpid(), before, _process_ticks()) / os.sysconf("SC_CLK_TCK")
        assert own / (time.perf_counter() - start) >= 0.2  # its share of the cores, beside whatever else runs
    finally:
        child.kill()
        child.wait(timeout=10)


@pytest.mark.timeout(120)
@pytest.mark.skipif((os.cpu_count() or 1) != 2 or not Path("/proc/stat").is_file(),
                    reason="one busy core of two leaves one thread; reads /proc")
def test_a_run_started_beside_another_programs_busy_core_starts_at_one_thread_and_says_why(busy_core):
    from rlscale.config import build_config
    from rlscale.engine.native import NativeEngine

    # The default Pong PPO's passes (256 rows): a team of threads on a quiet machine.
    cfg = build_config("pong", "ppo", {"pool": "serial", "warmup_max_steps": 0,
                                       "learner_precision": "fp32", "learner_compile": "off",
                                       "actor_precision": "fp32"})
    threads = torch.get_num_threads()
    try:
        with busy_core():
            engine = NativeEngine(cfg, cfg.env.n_envs)
        try:
            assert torch.get_num_threads() == 1 and engine.threads is not None and engine.threads.threads == 1
            header = engine.describe()
            assert "(1 thread: " in header and " busy elsewhere at start-up, adapted to the free cores)" in header, header
        finally:
            engine.close()
    finally:
        torch.set_num_threads(threads)
