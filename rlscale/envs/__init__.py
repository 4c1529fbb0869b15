"""Environments: the vector env the rollout actors step (ALE, MinAtar, gymnasium)."""
