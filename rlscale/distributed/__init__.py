"""Ray core: the rollout actor pool and the data-parallel learner actors."""
