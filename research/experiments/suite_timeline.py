"""A pytest plugin that logs each test's worker, start, end and this process's CPU seconds, one JSON line a test,
into $TIMELINE_OUT-<worker>.jsonl (default /tmp/suite-timeline): where the suite's wall time goes.

    PYTHONPATH=research/experiments .venv/bin/python -m pytest -p suite_timeline
    python research/experiments/suite_timeline.py /tmp/suite-timeline   # each worker's modules in order

CPU seconds count the worker and the children it waited for, not Ray's actors.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time

import pytest

OUT = os.environ.get("TIMELINE_OUT", "/tmp/suite-timeline")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001 - pytest's signature
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    start, cpu = time.time(), _cpu()
    yield
    with open(f"{OUT}-{worker}.jsonl", "a") as f:
        f.write(json.dumps({"w": worker, "test": item.nodeid, "t0": start, "t1": time.time(),
                            "cpu": _cpu() - cpu}) + "\n")


def summary(prefix: str) -> None:
    rows = [json.loads(line) for path in glob.glob(f"{prefix}-*.jsonl") for line in open(path)]
    t0, t1 = min(r["t0"] for r in rows), max(r["t1"] for r in rows)
    print(f"span {t1 - t0:.0f} s")
    for worker in sorted({r["w"] for r in rows}):
        mine = sorted((r for r in rows if r["w"] == worker), key=lambda r: r["t0"])
        modules: list[list] = []
        for r in mine:
            name = r["test"].split("::")[0].removeprefix("tests/").removesuffix(".py")
            if not modules or modules[-1][0] != name:
                modules.append([name, r["t0"], r["t1"]])
            modules[-1][2] = r["t1"]
        busy = sum(r["t1"] - r["t0"] for r in mine)
        print(f"{worker}: {len(mine)} tests, busy {busy:.0f} s: " + " ".join(f"{m}:{b - a:.0f}" for m, a, b in modules))


if __name__ == "__main__":
    summary(sys.argv[1] if len(sys.argv) > 1 else OUT)
