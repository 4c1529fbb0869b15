"""The README's "From Python" example, run as written (its pool chosen at start-up, as a user's run has it)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT


def readme_python_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## From Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.timeout(300)
def test_the_readmes_python_example_runs(tmp_path, monkeypatch):
    code = readme_python_example()
    assert "rlscale.train(" in code and "rlscale.load(" in code and "policy.act(" in code
    monkeypatch.chdir(tmp_path)  # its run directory is relative: runs/... here
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    run, action = namespace["run"], namespace["action"]
    assert (tmp_path / run.dir / "summary.json").is_file() and run.agent_steps >= 20_000
    # It learned, not only ran: CartPole's A2C passes a mean return of 100 within 20,000 frames (seed 0
    # got there at 8,680 agent steps on 2026-12-04), and the values the example prints say so.
    assert 100.0 in run.goals_reached and 0 < run.goals_reached[100.0] <= run.agent_steps
    assert run.mean_return is not None and run.mean_return >= 100
    assert namespace["env"].action_space.contains(action)
