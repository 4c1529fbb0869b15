"""A run directory on disk: checkpoints, TensorBoard events read back, branch points and recorded schedules."""
