"""The per-run tables of the auto studies' data folders, read from run directories.

    python research/experiments/run_tables.py runs SWEEP_DIR...            # runs.txt lines
    python research/experiments/run_tables.py paths [--with-folder] RUN_DIR...  # envs-paths.txt lines
    python research/experiments/run_tables.py grid SWEEP_DIR GOAL          # grid.txt: batch x rate
    python research/experiments/run_tables.py reversals GOAL RUN_DIR...    # resizes.txt lines
    python research/experiments/run_tables.py decisions RUN_DIR...         # decisions.txt lines
    python research/experiments/run_tables.py waits RUN_DIR...             # resize-waits.txt lines
    python research/experiments/run_tables.py signal RUN_DIR...            # signal-by-batch.txt lines

``runs``: one line per run under each sweep folder: its agent steps, final envs, training seconds and the
goals it met (agent steps, training seconds), from summary.json. ``paths``: each run's environment count
where it changed, with the agent steps (k) and the learning rate there, from TensorBoard's batch/n_envs
and train/lr. ``grid``: the median agent steps and seconds to GOAL per (batch, rate) cell of a rate grid,
and how many seeds reached it. ``reversals``: each ``auto`` run's resizes and changes of direction up to
GOAL (research/experiments/auto_overhead.py counts them over whole runs instead). ``waits``: each run's resizes after
its first two and how many followed a cool-down of observations the noise average took (``cooldown_measured``).
``decisions``: each ``auto``
run's learning line (agent steps, and the goal window's mean and spread there), its goals, the share of its agent steps after which the controller did each
kind of thing (summary.json's batch_decisions, since 5df7c0d; of all its agent steps, so steps from before
the counts show as unrecorded), and after the learning line the most environments
it held and its resizes and reversals. ``signal``: after each ``auto`` run's learning line, the 10th, 50th and
90th percentiles of its target batch and the median B_simple it read in each band of environment counts (with
how many readings; a reading is paired with the count logged at its step, which after a resize is the new one),
from TensorBoard's batch/target, noise/b_simple_total and batch/n_envs.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from rlscale import tags
from rlscale.config import load_saved
from rlscale.goals import GOAL_WINDOW
from rlscale.rundir.events import read_scalars


def summary(run: Path) -> dict | None:
    f = run / "summary.json"
    return json.loads(f.read_text()) if f.exists() else None


def goals_met(s: dict) -> dict[str, tuple[int, float]]:
    return {k: (v["agent_steps"], v["wall_seconds"]) for k, v in s.get("goals", {}).items()}


def runs(sweeps: list[Path]) -> None:
    for sweep in sweeps:
        for run in sorted(p for p in sweep.iterdir() if p.is_dir()):
            s = summary(run)
            if s is None:
                continue
            print(f"{sweep.name}/{run.name} {s['agent_steps']} {s['n_envs']} {s['wall_seconds']:.2f} {goals_met(s)}"
                  + ("" if s.get("finished", True) else " (not finished)"))


def paths(run_dirs: list[Path], with_folder: bool = False) -> None:
    for run in run_dirs:
        scalars = read_scalars(run)
        steps, envs = scalars["batch/n_envs"]
        lr = dict(zip(*scalars["train/lr"], strict=True)) if "train/lr" in scalars else {}
        changes, last = [], None
        for step, n in zip(steps, envs, strict=True):
            if n != last:
                changes.append(f"{step / 1000:.0f}k:{n:.0f}@{lr.get(step, float('nan')):.1e}")
                last = n
        print(f"{run.parent.name}/{run.name}" if with_folder else run.name, " ".join(changes))


def grid(sweep: Path, goal: str) -> None:
    cell = re.compile(r"b(\d+)-lr([0-9.e-]+)-s\d+$")
    found = [m for p in sweep.iterdir() if p.is_dir() and (m := cell.match(p.name))]
    batches = sorted({int(m[1]) for m in found})
    rates = sorted({m[2] for m in found}, key=float)
    seeds = len(found) // max(1, len(batches) * len(rates))
    print(f"median agent steps (k) / training seconds to {goal} over seeds, reached of {seeds}; rows: batch, "
          "columns: rate")
    print("batch " + " ".join(f"{rate:>22s}" for rate in rates))
    for batch in batches:
        row = []
        for rate in rates:
            steps, seconds = [], []
            for f in sorted(sweep.glob(f"b{batch}-lr{rate}-s*/summary.json")):
                g = json.loads(f.read_text())["goals"].get(goal)
                steps.append(g["agent_steps"] if g else np.inf)
                seconds.append(g["wall_seconds"] if g else np.inf)
            row.append(f"{np.median(steps) / 1e3:7.0f}k {np.median(seconds):5.1f}s "
                       f"{int(np.sum(np.isfinite(steps)))}/{len(steps)}")
        print(f"{batch:5d} " + " ".join(f"{c:>22s}" for c in row))


def resizes_and_reversals(n_envs: np.ndarray) -> tuple[int, int]:
    """The resizes in a run's logged environment counts, and how many of them went the other way from the one
    before (a grow the next resize undoes, or a shrink)."""
    moves = np.sign(np.diff(n_envs))
    moves = moves[moves != 0]
    return len(moves), int(np.sum(moves[1:] != moves[:-1]))


def reversals(goal: str, run_dirs: list[Path]) -> None:
    for run in run_dirs:
        s = summary(run) or {}
        steps, envs = read_scalars(run)["batch/n_envs"]
        g = s.get("goals", {}).get(goal)
        keep = steps <= (g["agent_steps"] if g else steps[-1])
        resizes, turns = resizes_and_reversals(envs[keep])
        reached = f"{g['agent_steps'] / 1e6:.2f}M steps {g['wall_seconds']:.0f} s" if g else "missed"
        print(f"{run.name:28s} resizes {resizes:3d} reversals {turns:3d}  to {goal}: {reached}"
              f"  envs median {np.median(envs[keep]):.0f}")


def waits(run_dirs: list[Path]) -> None:
    """Each run's resizes after auto's first two (its probe and the next move, which wait for no cool-down unless
    probe_cooldown), how many of them came after at least its cool-down of observations the noise average took
    (updates that logged a raw sample of the signal it follows), and the measured observations behind the first
    few that came sooner. A signal without raw samples (B_P, B_noise, B_PH) cannot be read so: the run is named."""
    for run in run_dirs:
        control = load_saved(run / "config.toml").control
        scalars = read_scalars(run)
        raw = tags.raw_noise("grad_sq", control.signal)
        if raw not in scalars:
            print(f"{run.name:28s} follows {control.signal}, which logs no raw samples: not read")
            continue
        cooldown, exempt = control.cooldown, 2 if control.batch == "auto" and not control.probe_cooldown else 0
        steps, envs = scalars["batch/n_envs"]
        measured = set(scalars[raw][0].tolist())
        taken, count, waited, short = 0, 0, 0, []
        for before, step, old, new in zip(steps, steps[1:], envs, envs[1:], strict=False):
            taken += step - before if step in measured else 0
            if new != old:
                count += 1
                if count > exempt:
                    waited += taken >= cooldown
                    short += [] if taken >= cooldown else [int(taken)]
                taken = 0
        first = "after the first two" if exempt else "in all"
        print(f"{run.name:28s} resizes {first} {max(count - exempt, 0):3d}, after >= {cooldown:g} measured "
              f"{waited:3d}; sooner, with measured: {short[:6]}")


def decisions(run_dirs: list[Path]) -> None:
    for run in run_dirs:
        s = summary(run) or {}
        decided, learned = s.get("batch_decisions", {}), s.get("learned_at")
        total = s.get("agent_steps") or 1  # of all its steps: a run resumed from before the counts shows the gap
        unrecorded = total - sum(decided.values())
        counts = sorted({**decided, **({"unrecorded": unrecorded} if unrecorded > 0 else {})}.items(),
                        key=lambda item: -item[1])
        shares = " ".join(f"{kind.replace(' ', '_')}:{100 * n / total:.0f}%" for kind, n in counts)
        goals = " ".join(f"{k}:{v['agent_steps'] / 1000:.0f}k" for k, v in s.get("goals", {}).items())
        after, line = "", "-"
        if learned is not None:
            scalars = read_scalars(run)
            steps, envs = scalars["batch/n_envs"]
            later = envs[steps >= learned]
            if len(later):
                resizes, turns = resizes_and_reversals(later)
                after = f"  after it: most envs {later.max():.0f}, resizes {resizes}, reversals {turns}"
            episode_steps, returns = scalars["rollout/episode_return"]
            window = returns[:np.searchsorted(episode_steps, learned, side="right")][-GOAL_WINDOW:]
            line = f"{learned / 1000:.0f}k (window mean {window.mean():.2f}, sd {window.std(ddof=1):.2f})"
        print(f"{run.name} learned {line}  goals {goals}  {shares}{after}")


# Bands of environment counts; a band with 5 readings or fewer is left out.
ENV_BANDS = ((0, 40), (40, 80), (80, 160), (160, 10**6))


def signal(run_dirs: list[Path]) -> None:
    for run in run_dirs:
        learned = (summary(run) or {}).get("learned_at")
        scalars = read_scalars(run)
        if learned is None or "batch/target" not in scalars:
            print(f"{run.name} no learning line or no target: skipped")
            continue
        envs_at = dict(zip(*scalars["batch/n_envs"], strict=True))
        steps, values = scalars["noise/b_simple_total"]
        pairs = np.array([(envs_at[k], v) for k, v in zip(steps, values, strict=True) if k >= learned and k in envs_at],
                         dtype=float).reshape(-1, 2)
        target_steps, targets = scalars["batch/target"]
        later = targets[target_steps >= learned]
        aims = " ".join(f"{q:.0f}" for q in np.percentile(later, [10, 50, 90])) if len(later) else "-"
        bands = [f"envs {lo}-{hi if hi < 10**6 else ''}: {np.median(pairs[k, 1]):,.0f} (n {k.sum()})"
                 for lo, hi in ENV_BANDS if (k := (pairs[:, 0] >= lo) & (pairs[:, 0] < hi)).sum() > 5]
        print(f"{run.name} learned {learned / 1000:.0f}k  target p10/50/90 {aims}  "
              f"B_simple median by envs: {'; '.join(bands)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="table", required=True)
    sub.add_parser("runs").add_argument("sweeps", type=Path, nargs="+")
    paths_parser = sub.add_parser("paths")
    paths_parser.add_argument("runs", type=Path, nargs="+")
    paths_parser.add_argument("--with-folder", action="store_true", help="name each run with its sweep folder")
    g = sub.add_parser("grid")
    g.add_argument("sweep", type=Path)
    g.add_argument("goal")
    r = sub.add_parser("reversals")
    r.add_argument("goal")
    r.add_argument("runs", type=Path, nargs="+")
    sub.add_parser("waits").add_argument("runs", type=Path, nargs="+")
    sub.add_parser("decisions").add_argument("runs", type=Path, nargs="+")
    sub.add_parser("signal").add_argument("runs", type=Path, nargs="+")
    args = p.parse_args()
    if args.table == "runs":
        runs(args.sweeps)
    elif args.table == "paths":
        paths(args.runs, args.with_folder)
    elif args.table == "grid":
        grid(args.sweep, args.goal)
    elif args.table == "reversals":
        reversals(args.goal, args.runs)
    elif args.table == "waits":
        waits(args.runs)
    elif args.table == "decisions":
        decisions(args.runs)
    else:
        signal(args.runs)


if __name__ == "__main__":
    main()
