"""rlscale: train at the critical batch size."""
