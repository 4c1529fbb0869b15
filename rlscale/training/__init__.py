"""The one training loop: it steps the engine and the controller, logs, and checkpoints."""
