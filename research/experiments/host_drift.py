"""How steady this host's cores are: a fixed pure-Python loop, its rate printed every 5 s.

    python research/experiments/host_drift.py 30 solo
    python research/experiments/host_drift.py 90 A & python research/experiments/host_drift.py 90 B; wait

Nothing else should run. On a steady host the rate stays within a few per cent from window to window.
"""

import sys
import time

if __name__ == "__main__":
    seconds, name = float(sys.argv[1]), sys.argv[2]
    start = last = time.time()
    loops = 0
    while time.time() - start < seconds:
        x = 0
        for i in range(200_000):
            x += i * i
        loops += 1
        now = time.time()
        if now - last >= 5:
            print(f"{name} t={now - start:5.0f} {loops / (now - last):6.1f} loops/s", flush=True)
            loops, last = 0, now
