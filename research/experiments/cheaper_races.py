"""Issue 61: cheaper `--progress reach` measurements, replayed from the races already run at the MinAtar forks
(research/notebook/results.md, "cheaper races, replayed").

    python research/experiments/cheaper_races.py [--draws 2000] [--pool runs4|all]

Reads every "measured at" line in research/data/reach-at-forks-*.txt (each lists the examples every race of
a measurement took to the goal, in the order the races ran: ascending batch, a batch's races together, and
names the batches whose races missed it within the 960,000-step limit), pools each fork's races by batch,
and replays measurement designs by drawing races with replacement from the pools: which batches, how many
races a batch, and a cap (a race stops once it has used CAP times the fewest examples any finished race of
the measurement took; its batch then drops out of the read-out, as a missed race's batch does). The replay
is exact race by race, because a race's examples to the goal do not depend on the other races: a race a
cap would have stopped is known to have needed more than the cap. Each drawn measurement is read by the
package's own read-out (``read_reach``) and judged by reach_at_forks.py's rule (within 2x of the sweep's
B_crit at either goal). Prints each design's share within 2x and its mean agent steps, per fork.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import numpy as np

from rlscale.training.races import BranchRun, pooled_races, read_reach

DATA = Path(__file__).resolve().parents[1] / "data"
BATCHES = (40, 80, 160, 320, 640, 1280)
LIMIT = 960_000  # --branch-window 6000 updates at the trunk's 32 envs x 5 steps: a race's most agent steps
# The sweeps' B_crit at the two goals after each fork (reach_at_forks.py's summaries in research/data).
SWEEP = {"si-s0": (483, 685), "si-s1": (419, 875), "bo-s0": (583, 606), "bo-s1": (650, 831)}
LINE = re.compile(r"measured at ([\d,]+) agent steps.*?\(to [\d.]+ in ([\d,/]+) examples(?:; not reached at ([\d, ]+))?\)")
SUMMARY = re.compile(r"^(\S+) reach(?:-runs\d)?: .*agent steps a measurement ([\d, ]+)$")


def parse() -> dict[str, dict[int, list[list[float]]]]:
    """fork -> runs a batch (1, 2, 4) -> columns: the examples of one race at each batch, all on the same
    environment seeds (a measurement's k-th race of every batch shares them); inf where it missed the goal.
    Which of a batch's races missed is not printed: its misses are put first, in the first columns."""
    fork_of: dict[int, str] = {}
    lines: set[str] = set()
    for path in sorted(DATA.glob("reach-at-forks-*.txt")):
        for line in path.read_text().splitlines():
            if (m := SUMMARY.match(line.strip())):
                for steps in m.group(2).split():
                    fork_of[int(steps.replace(",", ""))] = m.group(1)
            if "measured at" in line and "by the examples to the goal" in line:
                lines.add(line.strip())
    races: dict[str, dict[int, list[list[float]]]] = {}
    for line in sorted(lines):
        m = LINE.search(line)
        if m is None:
            raise SystemExit(f"unreadable measurement line: {line[:120]}")
        steps = int(m.group(1).replace(",", ""))
        if steps not in fork_of:
            raise SystemExit(f"no fork summary lists a measurement of {steps:,} agent steps")
        reached = [int(x.replace(",", "")) for x in m.group(2).split("/")]
        missed = [int(x.replace(",", "")) for x in m.group(3).split(", ")] if m.group(3) else []
        runs, rest = divmod(len(reached) + len(missed), len(BATCHES))
        if rest:
            raise SystemExit(f"{len(reached) + len(missed)} races are not a whole number a batch: {line[:120]}")
        found = iter(reached)
        by_batch = []
        for batch in BATCHES:
            misses = missed.count(batch)
            by_batch.append([math.inf] * misses + [float(next(found)) for _ in range(runs - misses)])
        columns = [list(column) for column in zip(*by_batch, strict=True)]
        if sum(reached) + LIMIT * len(missed) < 0.98 * steps - LIMIT:
            raise SystemExit(f"the races do not add up to the measurement's agent steps: {line[:120]}")
        races.setdefault(fork_of[steps], {}).setdefault(runs, []).extend(columns)
    return races


def replay(columns: np.ndarray, batches: tuple[int, ...], runs: tuple[int, int], cap: tuple[float, str],
           width: float, paired: bool, rng: np.random.Generator) -> tuple[float, int]:
    """One drawn measurement from ``columns`` (races x BATCHES): (its reading, nan where unread; its agent
    steps). Races run round by round (the k-th race of every batch, ascending, then the next round), not a
    batch's races together as a run runs them: with a cap, the fewest examples then come from more batches.
    ``cap`` (factor, "any" or "batch"): a race stops at factor x the fewest examples of any finished race, or of
    its own batch's finished races (its batch's first race runs uncapped).
    ``runs`` (fewest, most) races a batch: from the fewest, one more race a batch while the read-out's
    90 % interval spans more than ``width`` (high / low; an undefined one counts as too wide). Paired: each
    batch's k-th race on one drawn column's seeds, as a live measurement runs them; unpaired: each batch's
    races drawn on their own."""
    fewest_runs, most_runs = runs
    drawn = rng.integers(0, len(columns), size=(len(BATCHES), most_runs))
    if paired:
        drawn[:] = drawn[0]
    branches: list[BranchRun] = []
    cost, fewest = 0, {"any": math.inf}
    factor, scope = cap
    for k in range(most_runs):
        for batch in batches:
            examples = columns[drawn[BATCHES.index(batch), k], BATCHES.index(batch)]
            key = "any" if scope == "any" else batch
            branch = race(batch, examples, min(LIMIT, factor * fewest.get(key, math.inf)))
            cost += branch.examples
            if branch.reached:
                fewest[key] = min(fewest.get(key, math.inf), branch.examples)
            branches.append(branch)
        if k + 1 < fewest_runs:
            continue
        reading, span = read_out(branches)
        if span <= width:
            break
    return reading, cost


def race(batch: int, examples: float, limit: float) -> BranchRun:
    """A race at ``batch`` that needed ``examples`` to the goal (inf: it missed), stopped at ``limit``."""
    done = examples <= limit
    used = int(examples) if done else int(limit)
    return BranchRun(1.0, 1, float(batch), 0.0, agent_steps=used, examples=used,
                     optimizer_steps=max(1, round(used / batch)), reached=bool(done))


def read_out(branches: list[BranchRun]) -> tuple[float, float]:
    """The package's reading of the races (nan: fewer than two batches read) and its 90 % interval's high / low
    (inf: no interval)."""
    if len(pooled_races(branches)) < 2:
        return math.nan, math.inf
    reading, (low, high) = read_reach(branches)
    return reading.critical_batch, high / low if math.isfinite(low) and low > 0 else math.inf


INF = math.inf
DESIGNS = [  # (name, batches, races a batch (fewest, most), cap, interval width to stop adding races at)
    ("6 batches x 4 (today)", BATCHES, (4, 4), (INF, "any"), INF),
    ("6 x 4, cap 8x", BATCHES, (4, 4), (8.0, "any"), INF),
    ("6 x 4, cap 5x", BATCHES, (4, 4), (5.0, "any"), INF),
    ("6 x 4, cap 3x", BATCHES, (4, 4), (3.0, "any"), INF),
    ("40-640 x 4", BATCHES[:-1], (4, 4), (INF, "any"), INF),
    ("80-1280 x 4", BATCHES[1:], (4, 4), (INF, "any"), INF),
    ("40/160/640 x 4", (40, 160, 640), (4, 4), (INF, "any"), INF),
    ("80/320/1280 x 4", (80, 320, 1280), (4, 4), (INF, "any"), INF),
    ("6 x 3", BATCHES, (3, 3), (INF, "any"), INF),
    ("6 x 2", BATCHES, (2, 2), (INF, "any"), INF),
    ("6 x 4, cap 3x within a batch", BATCHES, (4, 4), (3.0, "batch"), INF),
    ("6 x 4, cap 2x within a batch", BATCHES, (4, 4), (2.0, "batch"), INF),
    ("6 x 3, cap 2x within a batch", BATCHES, (3, 3), (2.0, "batch"), INF),
    ("6 x 2, cap 8x", BATCHES, (2, 2), (8.0, "any"), INF),
    ("6 x 1 (one race)", BATCHES, (1, 1), (INF, "any"), INF),
    ("6 x 2-4, to a 4x interval", BATCHES, (2, 4), (INF, "any"), 4.0),
    ("6 x 2-4, to an 8x interval", BATCHES, (2, 4), (INF, "any"), 8.0),
    ("6 x 1-4, to a 4x interval", BATCHES, (1, 4), (INF, "any"), 4.0),
    ("6 x 2-6, to a 4x interval", BATCHES, (2, 6), (INF, "any"), 4.0),
]


def pooled(races: dict, fork: str, pool: str) -> list[list[float]]:
    """A fork's columns of races: the four-race measurements' ("runs4") or every recorded one ("all")."""
    return [column for runs, columns in races[fork].items() if pool == "all" or runs == 4 for column in columns]


def widths(races: dict, args: argparse.Namespace) -> None:
    """Share within 2x of the readings whose interval spans at most CUT (high / low), and of the wider ones."""
    for runs in (1, 3):
        rows = []
        for fork, (low, high) in SWEEP.items():
            columns = np.array(pooled(races, fork, args.pool))
            rng = np.random.default_rng(args.seed)
            for _ in range(args.draws):
                reading, width = replay_with_width(columns, runs, rng)
                rows.append((width, math.isfinite(reading) and low / 2 <= reading <= high * 2))
        for cut in (4, 8, 16, 32):
            narrow = [ok for w, ok in rows if w <= cut]
            wide = [ok for w, ok in rows if w > cut]
            print(f"{runs} race(s) a batch, interval <= {cut}x: {len(narrow) / len(rows):.0%} of readings, "
                  f"{np.mean(narrow) if narrow else math.nan:.0%} within 2x; the wider ones {np.mean(wide) if wide else math.nan:.0%}")


def replay_with_width(columns: np.ndarray, runs: int, rng: np.random.Generator) -> tuple[float, float]:
    """One paired measurement of all six batches: its reading and its interval's high / low (inf: none)."""
    drawn = rng.integers(0, len(columns), size=runs)
    return read_out([race(batch, examples, LIMIT) for i, batch in enumerate(BATCHES) for examples in columns[drawn, i]])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=2000, help="drawn measurements per design and fork")
    p.add_argument("--pool", choices=["runs4", "all"], default="runs4",
                   help="the four-race measurements' races only, or every recorded race")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default="", help="only the designs whose name contains this text")
    p.add_argument("--widths", action="store_true",
                   help="instead: whether the read-out's 90 %% interval flags the readings that miss (1 and 3 races)")
    p.add_argument("--unpaired", action="store_true",
                   help="draw each batch's races on their own, not whole columns of races on common seeds")
    args = p.parse_args()
    races = parse()
    if args.widths:
        return widths(races, args)
    print(f"{args.draws} drawn measurements a design and fork, races from the "
          f"{'four-race measurements' if args.pool == 'runs4' else 'measurements of every kind (one to four races)'}")
    header = "design".ljust(30) + "".join(f"{fork:>22}" for fork in SWEEP) + "   all forks"
    print(header + "\n" + " " * 30 + "".join(f"{'within 2x, agent steps':>22}" for _ in SWEEP))
    for name, batches, runs, cap, width in (d for d in DESIGNS if args.only in d[0]):
        row, shares, costs = name.ljust(30), [], []
        for fork, (low, high) in SWEEP.items():
            columns = np.array(pooled(races, fork, args.pool))
            rng = np.random.default_rng(args.seed)
            outcomes = [replay(columns, batches, runs, cap, width, not args.unpaired, rng) for _ in range(args.draws)]
            readings = np.array([r for r, _ in outcomes])
            within = float(np.mean(np.isfinite(readings) & (readings >= low / 2) & (readings <= high * 2)))
            cost = float(np.mean([c for _, c in outcomes]))
            shares.append(within)
            costs.append(cost)
            row += f"{within:>11.0%} {cost / 1e6:>7.2f} M  "
        print(row + f"{np.mean(shares):>6.0%} {np.mean(costs) / 1e6:.2f} M", flush=True)
    pools = {fork: pooled(races, fork, args.pool) for fork in SWEEP}
    print("pools (races a batch, races that missed the goal):", "; ".join(
        f"{fork} {len(cs)}, {sum(1 for c in cs for e in c if not math.isfinite(e))}" for fork, cs in pools.items()))


if __name__ == "__main__":
    main()
