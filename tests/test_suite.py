"""The suite's own runner (pyproject.toml's addopts and tests/conftest.py's scheduler), on a throw-away suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_crashed_worker_ends_the_run_with_one_failure_that_names_the_test(tmp_path: Path):
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    (tmp_path / "pytest.ini").write_text(f"[pytest]\naddopts = {options['addopts']}\n")
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_crashes.py").write_text(
        "import os\n\n\ndef test_before():\n    pass\n\n\ndef test_crash():\n    os._exit(1)\n\n\n"
        "def test_after():\n    pass\n")
    (tmp_path / "test_other.py").write_text("".join(f"def test_{i}():\n    pass\n\n\n" for i in range(4)))
    # Its own temporary directory: its lock file is not this suite's (tests/conftest.py, MachineShare).
    # COLUMNS fixed: the short summary cuts each line at the terminal's width, so what a line holds depends on it.
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "200"})
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout[-2000:]
    failed = [line for line in lines if line.startswith("FAILED ")]
    assert len(failed) == 1 and failed[0].startswith("FAILED test_crashes.py::test_crash "), result.stdout[-2000:]
    # Not replaced by a new worker: a new one would be handed the crashing module again, up to eight times.
    assert result.stdout.count("worker restarting disabled") >= 1, result.stdout[-2000:]
    assert " 1 failed, 5 passed in " in lines[-1], result.stdout[-2000:]
