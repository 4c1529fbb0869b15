"""Measurement and control, pure math: the noise scale, the cost model, the batch controller."""
