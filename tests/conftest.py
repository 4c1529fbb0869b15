"""Shared fixtures: a bounded embedded Ray, and a helper to run the commands."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Modules that start no Ray and time nothing: math, configs, reports, and commands run serially
# (``--serial``) or on bad input. With pytest-xdist (``-n 2`` in pyproject.toml) they run on a
# second worker beside one queue that holds every other test, one after another in one process, as
# a plain ``pytest`` runs them: the autoscaling test's ``ray stop --force`` stops every Ray on the
# machine, the cluster tests connect to "the" cluster of this machine, and the precision and
# priority tests time the machine. An allow-list, so a new module joins that queue until it is
# added here.
RAY_FREE_MODULES = frozenset({
    "test_cli", "test_config", "test_control", "test_cost", "test_docs", "test_evaluate",
    "test_learner", "test_metrics", "test_noise", "test_optim", "test_pareto_fit", "test_plan",
    "test_plot", "test_study", "test_threads", "test_branch", "test_api", "test_critical",
    "test_tensorboard_docs", "test_measure",
})


def work_unit(nodeid: str) -> str:
    """The unit pytest-xdist gives one worker: a Ray-free module, or the one machine queue."""
    path = nodeid.split("::", 1)[0]
    return path if Path(path).stem in RAY_FREE_MODULES else "machine"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    # xdist's own grouping (--dist loadgroup) renames test ids, which pytest >= 9.2 no longer lets it
    # do; its scope scheduler with our split is the same thing without the renaming.
    from xdist.scheduler import LoadScopeScheduling

    class MachineQueue(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _reschedule(self, node) -> None:
            # The machine queue is the suite's longest path: its worker takes nothing else until it
            # is through (the Ray-free tests go to the other worker, niced by ray_free_niced).
            work = self.assigned_work.get(node, {})
            if self.workqueue and "machine" in work and self._pending_of(work) > 0:
                return
            super()._reschedule(node)

    return MachineQueue(config, log)


@pytest.fixture(autouse=True)
def ray_free_niced(request: pytest.FixtureRequest) -> None:
    """A pytest-xdist worker that runs Ray-free tests beside the machine queue gives way to it (nice 10,
    children included): at the same priority it slowed the cluster module from 63 s (alone) to 95 s; niced, 78 s."""
    if "PYTEST_XDIST_WORKER" in os.environ and work_unit(request.node.nodeid) != "machine" and os.nice(0) == 0:
        os.nice(10)


@pytest.fixture(scope="module")
def ray_instance():
    """rlscale's embedded Ray (``init_ray``, as a run without --address starts it) for one module.

    In-process runs find it running and use it instead of starting and stopping one of
    their own (~3.5 s each here); always shut down at the module's end. Per module, not
    for the whole test run: the cluster tests connect this process to a simulated
    multi-node cluster instead, and tests/test_embedded_ray.py checks what a run does
    when no Ray is running.
    """
    import ray

    from rlscale.distributed.ray_pool import init_ray

    assert init_ray("", log_to_driver=False), "a Ray was already running in the test process"
    yield ray
    ray.shutdown()


@pytest.fixture
def busy_core():
    """A context manager that keeps one core busy with a Python loop, as a browser tab or an indexer would."""

    @contextlib.contextmanager
    def busy() -> Iterator[subprocess.Popen]:
        proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            yield proc
        finally:
            proc.kill()
            proc.wait(timeout=10)

    return busy


def run_command(args: list[str], timeout: float = 240, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m <args>`` as a user would; output captured as text."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=env)


def run_in_process(args: list[str]) -> subprocess.CompletedProcess:
    """``python -m <args>`` run as the command's ``main(argv)`` in this process; output captured.

    For bad-input tests: the same entry point and error path as the command line
    without a new interpreter's ~1.5 s of imports. Each command's bad input is also
    checked once through ``run_command`` (a real ``python -m``)."""
    import contextlib
    import importlib
    import io

    main = importlib.import_module(args[0]).main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args[1:])
        except SystemExit as exit_:  # argparse's own exits (usage errors, --help)
            code = exit_.code if isinstance(exit_.code, int) else 1
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def train_subprocess(args: list[str], stdout: Path | None = None) -> subprocess.Popen:
    """``python -m rlscale.train ARGS`` in the background, output captured (stdout into a file if given,
    which a test can read while the run goes on)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with contextlib.ExitStack() as files:  # the child has its own copy of the file's descriptor
        out = subprocess.PIPE if stdout is None else files.enter_context(stdout.open("w"))
        return subprocess.Popen([sys.executable, "-m", "rlscale.train", *args], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible)


def _interruptible() -> None:
    """Ctrl-C's default in the child: pytest-xdist's workers ignore SIGINT, and a child inherits that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_when(proc: subprocess.Popen, ready, timeout: float, settle: float = 0.0,
                   sig: signal.Signals = signal.SIGINT) -> str:
    """Wait until ``ready()`` (the process must stay alive), then send ``sig``; its stderr."""
    import time

    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "not ready in time"
            time.sleep(0.2)
        time.sleep(settle)
        proc.send_signal(sig)
        return proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
