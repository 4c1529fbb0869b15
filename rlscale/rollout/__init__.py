"""Rollout: batches, flat weights, the rollout worker and its in-process pool."""
