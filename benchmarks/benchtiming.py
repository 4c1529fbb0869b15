"""Timing shared by the benchmark scripts (imported from their folder: python benchmarks/<bench>.py)."""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from rlscale.engine.threads import machine_busy_ticks
from rlscale.models.precision import bf16_units


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


@dataclass(frozen=True)
class Rate:
    steps_per_s: float  # agent steps per second
    cores_busy: float  # the machine's busy CPU time over the wall time (2.0: both cores of two)
    warmup_seconds: float = 0.0  # the untimed start of the loop
    warmup_loops: int = 0  # its iterations

    @property
    def cpu_ms_per_step(self) -> float:
        """CPU time the whole machine spent per agent step: the work, apart from how parallel it ran."""
        return 1e3 * self.cores_busy / self.steps_per_s


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat: all but idle and iowait)."""
    return machine_busy_ticks() / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def busy_process(seconds_at_most: float = 3600.0) -> Iterator[None]:
    """One core kept busy by a Python loop, as a browser tab or an indexer would: another program's, not a
    child of this process (its launcher exits at once), since a run counts its own children's time as its
    own at start-up (rlscale/engine/threads.py, cores_busy_elsewhere). No parent waits for it, so it ends
    by itself after ``seconds_at_most``, should this process die before killing it."""
    loop = f"import time\nend = time.monotonic() + {seconds_at_most}\nwhile time.monotonic() < end: pass"
    launcher = subprocess.run(
        [sys.executable, "-c", "import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', sys.argv[1]], "
         "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)", loop],
        capture_output=True, text=True, timeout=30, check=True)
    pid = int(launcher.stdout)
    # A handle on this process, not on its pid: once the loop has ended by itself, the pid may be another's.
    handle = os.pidfd_open(pid)
    try:
        time.sleep(0.5)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        os.close(handle)


def timed(loop_once: Callable[[], int], seconds: float, warmup: int = 3,
          settled: Callable[[], bool] | None = None, most_warmup_seconds: float = 120.0) -> Rate:
    """Agent steps per second of ``loop_once`` (returns the steps it took) over ``seconds``,
    and how many cores the machine kept busy meanwhile (all processes: Ray's actors too).

    ``warmup`` iterations are not timed, and then, with ``settled``, more until it says the loop has
    settled (at most ``most_warmup_seconds`` of warm-up in all)."""
    began = time.perf_counter()
    for _ in range(warmup):
        loop_once()
    while settled is not None and not settled() and time.perf_counter() - began < most_warmup_seconds:
        loop_once()
        warmup += 1
    warmup_seconds = time.perf_counter() - began
    steps, start, busy = 0, time.perf_counter(), busy_cpu_seconds()
    while time.perf_counter() - start < seconds:
        steps += loop_once()
    wall = time.perf_counter() - start
    return Rate(steps / wall, (busy_cpu_seconds() - busy) / wall, warmup_seconds, warmup)


def cpu_model() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it."""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):  # noqa: SIM115 - read to the first match
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_kind() -> str:
    """What a measurement ran on: model, cores, bf16 units (and an emulation's caps), torch."""
    units = bf16_units()
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    kind = {True: "bf16 units", False: "no bf16 units", None: "bf16 units unknown (not x86)"}[units]
    emulated = f" (oneDNN capped at {cap}, ATen at {torch.backends.cpu.get_cpu_capability()})" if cap else ""
    return f"{cpu_model()}, {os.cpu_count()} cores, {kind}{emulated}, torch {torch.__version__}"
