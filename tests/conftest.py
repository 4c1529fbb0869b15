"""Shared fixtures: a bounded embedded Ray, and a helper to run the commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ray_instance():
    """An embedded Ray for one module's tests that need actors; always shut down.

    Per module, not per session: the cluster tests connect this process to a
    simulated multi-node cluster instead.
    """
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()


def run_command(args: list[str], timeout: float = 240, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m <args>`` as a user would; output captured as text."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=env)


def train_subprocess(args: list[str]) -> subprocess.Popen:
    """``python -m rlscale.train ARGS`` in the background, output captured."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "rlscale.train", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def interrupt_when(proc: subprocess.Popen, ready, timeout: float, settle: float = 0.0) -> str:
    """Wait until ``ready()`` (the process must stay alive), then send SIGINT; its stderr."""
    import signal
    import time

    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "not ready in time"
            time.sleep(0.2)
        time.sleep(settle)
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
