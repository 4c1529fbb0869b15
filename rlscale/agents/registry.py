"""The learner types by algorithm name, for the engine and the data-parallel learner actors."""

from __future__ import annotations

from rlscale.agents.a2c import A2CLearner
from rlscale.agents.learner import Learner
from rlscale.agents.ppo import PPOLearner

LEARNERS: dict[str, type[Learner]] = {"a2c": A2CLearner, "ppo": PPOLearner}
