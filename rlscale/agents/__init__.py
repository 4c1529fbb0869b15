"""Learners: what A2C and PPO share, the two algorithms, the measured backward pass, data-parallel groups, optimizers."""
