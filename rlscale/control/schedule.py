"""A recorded batch and learning-rate schedule, replayed open-loop (``batch replay``): pure, no I/O.

The studies' rule 4 (docs/studies.md): next to an adaptive run, replay its own
batch and learning-rate path, as a function of agent steps, in a run that
measures nothing and reacts to nothing. If the replay trains as fast (on other
seeds), the gain was the schedule, not the feedback.

A run logs, after each update, the environments the next update takes
(``batch/n_envs``) and the learning rate the update just used (``train/lr``);
so the rate that follows the update ending at step s_i is the one logged at
s_(i+1). ``Schedule.from_logged`` pairs them that way.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    steps: tuple[int, ...]  # agent steps at the end of each recorded update, rising
    n_envs: tuple[int, ...]  # environments of the update after it
    lrs: tuple[float, ...]  # learning rate (before annealing) of the update after it

    def __post_init__(self) -> None:
        if not self.steps or not len(self.steps) == len(self.n_envs) == len(self.lrs):
            raise ValueError("a schedule needs one n_envs and one lr per recorded step, and at least one step")
        if any(b <= a for a, b in zip(self.steps, self.steps[1:], strict=False)):
            raise ValueError("a schedule's steps must rise")

    @classmethod
    def from_logged(cls, n_env_steps: Sequence[int], n_envs: Sequence[float],
                    lr_steps: Sequence[int], lrs: Sequence[float]) -> Schedule:
        """From a run's logged ``batch/n_envs`` and ``train/lr`` series (one point per update)."""
        if list(n_env_steps) != list(lr_steps):
            raise ValueError("batch/n_envs and train/lr were not logged at the same updates")
        following = list(lrs[1:]) + list(lrs[-1:])  # the last update's successor keeps its rate
        return cls(tuple(int(s) for s in n_env_steps), tuple(int(round(n)) for n in n_envs),
                   tuple(float(lr) for lr in following))

    def at(self, agent_steps: float) -> tuple[int, float] | None:
        """(environments, learning rate) the recorded run took after training ``agent_steps``; None before
        its first update ended (the run's start, which the replaying run's own config gives)."""
        i = bisect.bisect_right(self.steps, agent_steps) - 1
        return None if i < 0 else (self.n_envs[i], self.lrs[i])

    @property
    def last_step(self) -> int:
        return self.steps[-1]
