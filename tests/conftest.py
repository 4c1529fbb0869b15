"""Shared fixtures: a bounded embedded Ray, and a helper to run the commands."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Three kinds of test module, by what they share with the others (pytest-xdist runs whole modules on
# its workers, ``-n 2`` in pyproject.toml; ``-n 0`` runs everything in this process):
# * Ray-free: math, configs, reports, commands run serially (``--pool serial``) or on bad input; beside
#   anything. An allow-list, so a new module is a Ray module until it is added here.
# * machine: they need the machine's Ray to themselves or time the machine: the autoscaling test's
#   ``ray stop --force`` stops every Ray on the machine, the cluster tests start "the" cluster of this
#   machine, the embedded-Ray tests run beside one. Beside Ray-free modules only.
# * alone: they time the machine (the precision probe beside one busy process, as the product claims:
#   beside the other worker's training too, it read bf16 at 0.91x fp32 where it reads ~1.65x, and chose
#   fp32, in a fresh clone's CI run of 2026-11-30). Beside nothing; a few seconds of the other worker's.
# * Ray: each starts an embedded Ray of its own (``address="local"``: never another's); beside
#   Ray-free and other Ray modules. Starting Ray and its actors is mostly waiting (~8 s a run here,
#   a third of the cores idle through a Ray module run alone), which a second module fills.
# The scheduler below keeps the kinds apart; a lock file (``MachineShare``) makes sure of it.
RAY_FREE_MODULES = frozenset({
    "test_cli", "test_config", "test_control", "test_cost", "test_docs", "test_evaluate",
    "test_learner", "test_metrics", "test_noise", "test_optim", "test_pareto_fit", "test_plan",
    "test_plot", "test_study", "test_threads", "test_branch", "test_api", "test_critical",
    "test_tensorboard_docs", "test_measure", "test_side_by_side", "test_suite", "test_pool_choice", "test_learning_benchmark",
    "test_oracle",
})
MACHINE_MODULES = frozenset({"test_autoscaling", "test_cluster", "test_embedded_ray"})
ALONE_MODULES = frozenset({"test_precision"})
MACHINE_LOCK = Path(tempfile.gettempdir()) / f"rlscale-tests-machine-{os.getuid()}.lock"  # per user: CI runs as another
ALONE_LOCK = Path(tempfile.gettempdir()) / f"rlscale-tests-alone-{os.getuid()}.lock"


def module_kind(nodeid: str) -> str:
    """"free", "machine", "alone" or "ray": what a test's module shares with tests on other workers."""
    stem = Path(nodeid.split("::", 1)[0]).stem
    if stem in ALONE_MODULES:
        return "alone"
    return "free" if stem in RAY_FREE_MODULES else "machine" if stem in MACHINE_MODULES else "ray"


def may_run_beside(kind: str, others: set[str]) -> bool:
    """Whether a module of ``kind`` may start while modules of the kinds ``others`` run."""
    if kind == "alone":
        return not others
    if "alone" in others:
        return False
    if kind == "machine":
        return not others & {"machine", "ray"}
    if kind == "ray":
        return "machine" not in others
    return True


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    # Whole modules (xdist's scope scheduler: one module's fixtures, a trunk or a Ray, set up once).
    # A worker takes the first module in the queue that may run beside what the others hold:
    # machine modules first (they need the others on Ray-free work), then Ray modules, longest
    # collections first, then the Ray-free ones that fill around them.
    from xdist.scheduler import LoadScopeScheduling

    order = {"alone": 0, "machine": 1, "ray": 2, "free": 3}

    class ByKind(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid.split("::", 1)[0]

        def _assign_work_unit(self, node) -> None:
            held = {module_kind(scope) for other, work in self.assigned_work.items() if other is not node
                    for scope, tests in work.items() if not all(tests.values())}
            ranked = sorted(self.workqueue, key=lambda m: (order[module_kind(m)], -len(self.workqueue[m])))
            fits = [m for m in ranked if may_run_beside(module_kind(m), held)]
            scope = (fits or ranked)[0]  # none fits: the lock file makes it wait its turn
            self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

        def _reschedule(self, node) -> None:
            # The next module once the current one is down to its last test (which a worker runs only
            # when it knows what follows), not earlier: the choice should see what the others hold then.
            work = self.assigned_work.get(node, {})
            if self.workqueue and self._pending_of(work) > 1 and not node.shutting_down:
                return
            super()._reschedule(node)

    return ByKind(config, log)


class MachineShare:
    """A module's share of the machine across pytest-xdist workers: an alone module holds both lock files
    exclusively, a machine module the machine lock, a Ray module shares it, a Ray-free one skips it (and
    every module but an alone one shares the alone lock); taken before the module's first test,
    given back after its last one's teardown (its module fixtures, its Ray among them, are gone by then).
    Writers wait their turn at a turnstile, so Ray modules arriving after a waiting machine module wait
    behind it. Outside pytest-timeout's clock (tryfirst: it wraps the timeout's own wrapper), so a wait
    for the other worker's module is not counted against the test that waits."""

    def __init__(self) -> None:
        self.held: tuple[str, Any] | None = None  # (module, its open lock file)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        module = item.nodeid.split("::", 1)[0]
        if self.held is None or self.held[0] != module:
            self.give_back()
            self.take(module)
        yield
        if nextitem is None or nextitem.nodeid.split("::", 1)[0] != module:
            self.give_back()

    def take(self, module: str) -> None:
        kind = module_kind(module)
        # Every module shares the alone lock, which an alone module holds by itself; then machine and
        # alone modules hold the machine lock by themselves, Ray modules share it, Ray-free ones skip it.
        locks = [_locked(ALONE_LOCK, exclusive=kind == "alone")]
        if kind != "free":
            locks.append(_locked(MACHINE_LOCK, exclusive=kind in ("machine", "alone")))
        self.held = (module, locks)

    def give_back(self) -> None:
        if self.held is not None:
            for lock in reversed(self.held[1]):
                lock.close()  # closing the file gives the lock back
            self.held = None


def _locked(path: Path, exclusive: bool) -> Any:
    """``path`` opened and locked, after its turnstile: a waiting exclusive holder bars later shared ones."""
    lock = path.open("a")
    with Path(f"{path}.turnstile").open("a") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
    return lock


def pytest_configure(config: pytest.Config) -> None:
    if "PYTEST_XDIST_WORKER" in os.environ:
        config.pluginmanager.register(MachineShare(), "rlscale-machine-share")


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
def busy_core(monkeypatch):
    """A context manager that keeps one core busy with a Python loop, as a browser tab or an indexer would:
    benchmarks/benchtiming.py's, another program's loop (not a child of this process, since a run counts its
    own children's time as its own: rlscale/engine/threads.py), which ends by itself after 10 minutes
    (longer than any test) should this process die before killing it."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from benchtiming import busy_process

    return functools.partial(busy_process, seconds_at_most=600)


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

    # "rlscale COMMAND": the console command's dispatch (rlscale/commands.py), as python -m rlscale runs it.
    main = importlib.import_module("rlscale.commands" if args[0] == "rlscale" else args[0]).main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args[1:])
        except SystemExit as exit_:  # argparse's own exits (usage errors, --help)
            code = exit_.code if isinstance(exit_.code, int) else 1
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def train_subprocess(args: list[str], stdout: Path | None = None, module: str = "rlscale.train") -> subprocess.Popen:
    """``python -m rlscale.train ARGS`` (or another command's ``module``) in the background, output captured
    (stdout into a file if given, which a test can read while the command goes on)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with contextlib.ExitStack() as files:  # the child has its own copy of the file's descriptor
        out = subprocess.PIPE if stdout is None else files.enter_context(stdout.open("w"))
        return subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible)


def _interruptible() -> None:
    """Ctrl-C's default in the child: pytest-xdist's workers ignore SIGINT, and a child inherits that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_when(proc: subprocess.Popen, ready, timeout: float, settle: float = 0.0,
                   sig: signal.Signals = signal.SIGINT) -> str:
    """Wait until ``ready()`` (the process must stay alive), then send ``sig``; its stderr."""
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
