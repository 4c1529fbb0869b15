"""The one training loop, its engines, checkpoints and logger."""
