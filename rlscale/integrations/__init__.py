"""Bridges to other RL frameworks (optional extras)."""
