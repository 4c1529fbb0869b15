"""What the training loop drives: the native engine (rollout pool and learner) and its thread governor."""
