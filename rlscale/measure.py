"""``rlscale measure RUN``: the critical batch at one checkpoint of a run, read by racing branches to a goal.

From the run's checkpoint (its latest, or ``--checkpoint``), each batch of ``--batches`` (multiples of
the run's batch there) is raced ``--races`` times to ``--goal`` (the run's next goal above its mean
return there, by default) on new environments seeded alike for every batch; B_crit is fitted by
eq. 2.11 to the optimizer steps and examples the batches took (rlscale/training/races.py). It prints
the reading, its 90 % interval and what the races spent, and writes them to a JSON file (beside the run
directory by default: the run itself is never written to, and may go on training meanwhile).

A measurement costs about as much as a fixed-batch run over the same stretch of training: it is a
question asked on purpose (docs/batch-control.md, "Measuring the critical batch"). Races run one after
the other in this process, or ``--at-once N`` side by side as Ray tasks (on a cluster with
``--address``). Each finished race is written at once: an interrupted measurement resumes where it
stopped when the same command is run again.
"""

from __future__ import annotations

import copy
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rlscale.cli import Parser, interrupts_raise
from rlscale.config import Config
from rlscale.errors import UserError, exits_cleanly
from rlscale.rundir import checkpoint
from rlscale.rundir.branch import checkpoint_file, read_trunk
from rlscale.training.races import BranchRun, pooled_races, race_seed, read_reach, train_branch

FORMAT = 1
DEFAULT_BATCHES = (0.5, 1.0, 2.0, 4.0)
# Four races a batch: one reads within 2x of a fork sweep about half the time, three or four 85 % of the
# time (docs/batch-control.md).
DEFAULT_RACES = 4
# A race that has not met the goal after this many updates' worth of the run's batch counts as not reaching it.
DEFAULT_CAP_UPDATES = 10_000


@dataclass(frozen=True)
class Start:
    """The checkpoint the races start from: its run's settings and what the run had there."""

    path: Path
    cfg: Config
    learner: dict[str, Any]
    agent_steps: int
    n_envs: int
    lr: float  # the run's learning rate there, annealing included
    mean_return: float | None

    @classmethod
    def read(cls, run: Path, given: str) -> Start:
        if not run.is_dir():
            raise UserError(f"{run} is not a run directory; give the directory a training run wrote")
        flag = "--checkpoint" if given else "RUN"
        path = checkpoint_file(Path(given) if given else run, flag)
        saved, cfg = read_trunk(path, flag)
        learner, trainer = saved["engine"]["learner"], saved["trainer"]
        agent_steps, lr = int(trainer["agent_steps"]), float(trainer["base_lr"])
        if cfg.agent.anneal_lr:  # the rate the run trained at there
            lr *= max(0.0, 1.0 - agent_steps / cfg.total_agent_steps)
        window = saved.get("goal_window") or []
        return cls(path.resolve(), cfg, learner, agent_steps, int(trainer["n_envs"]), lr,
                   sum(window) / len(window) if window else None)

    def goal(self, given: float | None) -> float:
        if given is not None:
            return given
        above = [g for g in self.cfg.score_goals if self.mean_return is None or g > self.mean_return]
        if not above:
            score = "no episodes yet" if self.mean_return is None else f"mean return {self.mean_return:.1f}"
            raise UserError(f"{self.path}: no goal of the run lies above its score there ({score}); give --goal")
        return above[0]

    def branches(self, multipliers: list[float], races: int, alpha: float) -> list[BranchRun]:
        """Each distinct batch's races, race by race (every batch's first race, then every second one...),
        at the square-root rule's rate, lr (B/B0)^alpha."""
        unit, per_env = self.cfg.pool_unit, self.cfg.observations_per_env
        batches: dict[int, float] = {}
        for m in sorted(multipliers):
            batches.setdefault(max(unit, round(self.n_envs * m / unit) * unit), m)
        return [BranchRun(m, n, n * per_env, self.lr * (n / self.n_envs) ** alpha, run=k)
                for k in range(races) for n, m in batches.items()]


def race_config(start: Start, seed: int) -> Config:
    """A race's engine: the run's settings in one process (serial environments, one learner thread on the
    CPU), the precision the run chose, and no noise measurement (the reading does not use it)."""
    cfg = start.cfg
    learner = replace(cfg.learner, learner_threads=1, learner_passes="team", learner_device="cpu")
    return replace(cfg, run=replace(cfg.run, seed=seed, run_dir=""), pool=replace(cfg.pool, pool="serial"),
                   learner=learner, noise=replace(cfg.noise, measure_noise=False, measure_curvature=False))


def race(cfg: Config, learner: dict[str, Any], branch: BranchRun, cap_steps: float, goal: float,
         env_seed: int) -> BranchRun:
    """One race on an engine of its own, started from the checkpoint's network and optimizer state."""
    from rlscale.engine.native import NativeEngine

    # A copy: the optimizer takes the state's tensors as its own and steps them in place, so a second race in
    # this process would otherwise start from where the first one ended.
    engine = NativeEngine(cfg, branch.n_envs, start_from=copy.deepcopy(learner))
    try:
        train_branch(engine, cfg, branch, cap_steps, goal, env_seed)
    finally:
        engine.close()
    return branch


def default_out(run: Path, agent_steps: int) -> Path:
    return run.resolve().parent / f"{run.resolve().name}-measure-{agent_steps}.json"


def describe_race(branch: BranchRun, goal: float) -> str:
    what = (f"reached {goal:g} in {branch.examples:,} examples" if branch.reached
            else f"did not reach {goal:g} in {branch.examples:,} examples")
    return (f"batch {branch.batch:,.0f} ({branch.multiplier:g}x, {branch.n_envs} envs, lr {branch.lr:.2e}), race "
            f"{branch.run + 1}: {what}, {branch.seconds:.1f} s")


def reading_record(done: list[BranchRun]) -> tuple[dict[str, Any] | None, str]:
    """The reading as JSON and as one line; None (and why) where fewer than two batches met the goal."""
    pooled = pooled_races(done)
    if len(pooled) < 2:
        return None, (f"{len(pooled)} batch{'es' if len(pooled) != 1 else ''} met the goal in every race, too few "
                      "to read B_crit: choose a nearer --goal, or allow more with --cap-updates")
    reading, (low, high) = read_reach(done)
    interval = (f"90 % {low:,.0f}-{high:,.0f}" if math.isfinite(low) else "no interval from two batches"
                if len(pooled) < 3 else "no interval: only a bound")
    def number(x: float) -> float | None:  # JSON has no NaN
        return x if math.isfinite(x) else None

    record = {"critical_batch": number(reading.critical_batch), "shown": number(reading.shown_batch),
              "bound": reading.bound, "low": number(low), "high": number(high), "batches": [b for b, _, _ in pooled]}
    return record, f"{reading.describe()}; {interval}"


def cost_line(done: list[BranchRun], elapsed: float) -> str:
    return (f"{len(done)} races: {sum(b.agent_steps for b in done):,} agent steps, "
            f"{sum(b.examples for b in done):,} examples, {sum(b.seconds for b in done):.0f} race-seconds, "
            f"{elapsed:.0f} s here")


def parser() -> Parser:
    p = Parser(prog="rlscale measure", description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="the run directory")
    p.add_argument("--checkpoint", default="", help="a ckpt-*.pt file of the run (default: its latest)")
    p.add_argument("--goal", type=float, default=None,
                   help="the mean return of a race's last 20 episodes it races to (default: the run's next goal "
                        "above its score at the checkpoint)")
    p.add_argument("--batches", type=float, nargs="+", default=list(DEFAULT_BATCHES),
                   help="multiples of the run's batch at the checkpoint to race (at least 2 distinct batches)")
    p.add_argument("--races", type=int, default=DEFAULT_RACES, help="races of each batch, each on its own seeds")
    p.add_argument("--cap-updates", type=float, default=DEFAULT_CAP_UPDATES,
                   help="updates' worth of the run's batch after which a race counts as not reaching the goal")
    p.add_argument("--at-once", type=int, default=0,
                   help="races side by side as Ray tasks (0: as many as this machine has cores, one after the "
                        "other where it has one; 1: one after the other in this process)")
    p.add_argument("--address", default="", help="a Ray cluster to race on (HOST:PORT or auto)")
    p.add_argument("--seed", type=int, default=0, help="seed of the races' environments and action draws")
    p.add_argument("--out", type=Path, default=None, help="the JSON file (default: RUN-measure-STEPS.json beside RUN)")
    return p


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.races < 1 or args.cap_updates < 1 or args.at_once < 0:
        raise UserError("--races and --cap-updates take at least 1, --at-once at least 0")
    if any(not (m > 0 and math.isfinite(m)) for m in args.batches):
        raise UserError("--batches takes positive multiples of the run's batch, e.g. 0.5 1 2 4")
    start = Start.read(args.run, args.checkpoint)
    goal = start.goal(args.goal)
    branches = start.branches(args.batches, args.races, start.cfg.control.lr_alpha)
    if len({b.n_envs for b in branches}) < 2:
        raise UserError(f"--batches {' '.join(f'{m:g}' for m in args.batches)} give one batch at "
                        f"{start.n_envs} envs; give multiples that differ by a whole vector env at least")
    out = args.out or default_out(args.run, start.agent_steps)
    settings = {"checkpoint": str(start.path), "goal": goal, "batches": sorted({b.n_envs for b in branches}),
                "races": args.races, "cap_updates": args.cap_updates, "seed": args.seed}
    done = load_done(out, settings)
    cfg = race_config(start, args.seed)
    finished_races = {(d.n_envs, d.run) for d in done}
    todo = [b for b in branches if (b.n_envs, b.run) not in finished_races]
    at_once = args.at_once or (os.cpu_count() or 1)
    at_once = 1 if len(todo) <= 1 else min(at_once, len(todo))
    score = "no episodes yet" if start.mean_return is None else f"mean return {start.mean_return:.1f}"
    print(f"measuring B_crit at {start.path} ({start.agent_steps:,} agent steps, {score}, batch "
          f"{start.n_envs * start.cfg.observations_per_env:,.0f}, lr {start.lr:.2e}): {len(branches)} races to "
          f"{goal:g}, {len(done)} already done; results in {out}", flush=True)

    def finished(branch: BranchRun) -> None:
        done.append(branch)
        write(out, settings, done, None)
        print(f"[{len(done)}/{len(branches)}] {describe_race(branch, goal)}", flush=True)

    began = time.perf_counter()
    try:
        with interrupts_raise():
            run_races(cfg, start, todo, args, goal, at_once, finished)
    except KeyboardInterrupt:
        print(f"interrupted: {len(done)} finished races are kept in {out}; run the same command to resume",
              file=sys.stderr, flush=True)
        return 130
    reading, line = reading_record(done)
    write(out, settings, done, reading)
    print(f"{'measured' if reading else 'no reading'} at {start.agent_steps:,} agent steps to {goal:g}: {line}",
          flush=True)
    print(f"cost: {cost_line(done, time.perf_counter() - began)}; written to {out}", flush=True)
    return 0 if reading else 1


def run_races(cfg: Config, start: Start, todo: list[BranchRun], args: Any, goal: float, at_once: int,
              finished: Any) -> None:
    """Each race, one after the other here or ``at_once`` side by side as Ray tasks; ``finished`` as each ends."""
    cap_steps = args.cap_updates * start.n_envs * cfg.agent.n_steps
    shared = (cfg, start.learner)
    calls = [(b, cap_steps, goal, race_seed(args.seed, b.run)) for b in todo]
    if at_once <= 1 and not args.address:
        for call in calls:
            finished(race(*shared, *call))
        return
    from rlscale.distributed.ray_branches import RemoteRaces

    races = RemoteRaces(args.address, at_once)
    print(f"racing {races.describe()}", flush=True)

    def done(i: int, result: Any, node: str) -> None:
        if isinstance(result, BaseException):  # said, and left undone: the same command runs it again
            print(f"batch {todo[i].batch:,.0f} race {todo[i].run + 1} failed ({type(result).__name__}: {result}); "
                  "run the same command again to retry it", file=sys.stderr, flush=True)
            return
        result.node = node
        finished(result)

    try:
        races.run(race, shared, calls, done)
    finally:
        races.close()


def load_done(out: Path, settings: dict[str, Any]) -> list[BranchRun]:
    """The races an earlier, interrupted measurement with these settings finished (none for other settings)."""
    if not out.is_file():
        return []
    try:
        saved = json.loads(out.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise UserError(f"{out}: not a measurement's JSON ({err}); remove it or give --out") from None
    if saved.get("settings") != settings:
        raise UserError(f"{out} holds a measurement with other settings; give another --out, or remove it")
    return [BranchRun(**race) for race in saved.get("races", [])]


def write(out: Path, settings: dict[str, Any], done: list[BranchRun], reading: dict[str, Any] | None) -> None:
    checkpoint.write_json(out, {"format": FORMAT, "settings": settings, "reading": reading,
                                "races": [asdict(b) for b in done]})


if __name__ == "__main__":
    sys.exit(main())
