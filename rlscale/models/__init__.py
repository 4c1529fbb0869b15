"""Networks and the precision/layout they run in."""
