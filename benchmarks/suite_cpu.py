"""Where the test suite's CPU goes: each test's wall time and the machine's busy core-seconds, as a pytest plugin.

    PYTHONPATH=benchmarks .venv/bin/python -m pytest -n 0 -p suite_cpu [SUITE_CPU_OUT=suite-cpu.json]

Run one test at a time (``-n 0``) on a quiet machine: the machine's busy time over a test (from
/proc/stat, every process counted: Ray's daemons and actors, subprocess runs) is then that test's.
At the end it prints the total and the modules by core-seconds, and writes every test's row to
$SUITE_CPU_OUT (default suite-cpu.json). Two cores cannot run the suite faster than its busy
core-seconds over two (docs/performance.md, "The test command's time").
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict

import pytest
from benchtiming import busy_cpu_seconds

_rows: list[tuple[str, float, float]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    busy, wall = busy_cpu_seconds(), time.perf_counter()
    yield
    _rows.append((item.nodeid, time.perf_counter() - wall, busy_cpu_seconds() - busy))


def pytest_terminal_summary(terminalreporter) -> None:
    if not _rows:
        return
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for nodeid, wall, busy in _rows:
        module = nodeid.split("::", 1)[0]
        modules[module][0] += wall
        modules[module][1] += busy
    write = terminalreporter.write_line
    write(f"suite CPU: {sum(r[2] for r in _rows):,.0f} busy core-seconds over {sum(r[1] for r in _rows):,.0f} s "
          f"of tests ({os.cpu_count()} cores: at least {sum(r[2] for r in _rows) / (os.cpu_count() or 1):,.0f} s)")
    for module, (wall, busy) in sorted(modules.items(), key=lambda m: -m[1][1]):
        write(f"  {busy:7,.0f} core-s  {wall:6,.0f} s  {module}")
    with open(os.environ.get("SUITE_CPU_OUT", "suite-cpu.json"), "w") as out:
        json.dump([{"test": n, "seconds": w, "busy_core_seconds": b} for n, w, b in _rows], out, indent=1)
