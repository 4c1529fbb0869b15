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
