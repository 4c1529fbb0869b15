"""``python -m rlscale.pbt <env> --members 4 --stop-return G``: Population Based Training over the batch
size and the learning rate (Ray Tune's ``PopulationBasedTraining``), the proxy-free peer of
``rlscale measure``.

Each member trains in segments of ``--interval`` frames. A segment is a run of its own (a fixed batch,
its rate, a seed of its own) that starts from the member's last checkpoint, as ``--init-from`` branches
do: the network and the optimizer state carry over, the environments start afresh. After each segment
the member reports the mean return of its last episodes; a member in the bottom quarter then takes the
checkpoint of one in the top quarter and perturbs its batch (the next size up or down the
``--batch-sizes`` list, or a new draw) and its rate (x0.8 or x1.2, or a new draw in ``--lr-range``).
All members stop when one reaches ``--stop-return`` or a member's lineage (its own segments and those of
every checkpoint it took, the ``--init-from`` trunk not counted) has trained ``--total-frames``.

The population's cost is what every member ran: the agent steps, examples, optimizer steps and the CPU
seconds of all segments (pbt.json and the last line). A segment that the stop cuts short counts to its
last checkpoint (ten a segment), and the line gives the bound that adds a tenth of a segment and an update
for each.

Each segment's own output is in its run directory (stdout.txt): ``PBT_DIR/member<i>/segment<k>``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rlscale.cli import Parser, writable_dir
from rlscale.config import Config, add_config_flags, build_config, parse_with_config, runs_root
from rlscale.envs.vector import check_env_id
from rlscale.errors import UserError, exits_cleanly
from rlscale.rundir import checkpoint
from rlscale.rundir.checkpoint import SUMMARY_FILE
from rlscale.sweep import Trial, env_slug, trial_config

PBT_FILE = "pbt.json"
SEGMENT_FILE = "segment.json"  # in each segment's run directory: what the member ran and what it cost
MEMBER_STATE = "member.json"  # in each reported Tune checkpoint, beside the policy


@dataclass(frozen=True)
class Plan:
    """What every member needs to run its segments (sent to each Tune trial)."""

    env: str
    agent: str | None
    overrides: dict[str, Any]
    dir: str
    interval_frames: int
    budget_frames: int  # a member's lineage stops here
    stop_return: float
    seed: int
    init_from: str  # the population's common start ("" from scratch)


@dataclass(frozen=True)
class Segment:
    member: int
    index: int
    batch_size: int
    lr: float
    seed: int
    started_from: str  # the checkpoint it started from ("" from scratch)
    agent_steps: int
    examples: int
    updates: int
    cpu_seconds: float
    wall_seconds: float
    mean_return: float | None
    lineage_steps: int  # agent steps of the member's lineage (through every checkpoint it took) at its end
    reached: bool
    cut_short: bool = False  # stopped mid-way (by the stop): its counters are its last checkpoint's


def population_totals(segments: list[Segment], gap_steps: int) -> dict[str, float]:
    """What the population ran, all members and segments: the cost PBT is compared by. A segment the stop
    cut short counts to its last checkpoint; ``agent_steps_at_most`` adds ``gap_steps``, the most agent
    steps between two checkpoints, to each."""
    steps = sum(s.agent_steps for s in segments)
    return {"segments": len(segments),
            "cut_short": sum(s.cut_short for s in segments),
            "agent_steps": steps,
            "examples": sum(s.examples for s in segments),
            "updates": sum(s.updates for s in segments),
            "cpu_seconds": round(sum(s.cpu_seconds for s in segments), 1),
            "agent_steps_at_most": steps + sum(s.cut_short for s in segments) * gap_steps}


def read_segments(pbt_dir: Path) -> list[Segment]:
    """Every segment that ran: finished ones from their record, cut-short ones from their last checkpoint's
    summary (their CPU seconds read as its wall seconds: a segment runs on one thread)."""
    segments = [Segment(**json.loads(p.read_text())) for p in pbt_dir.glob(f"member*/segment*/{SEGMENT_FILE}")]
    for folder in pbt_dir.glob("member*/segment*"):
        if (folder / SEGMENT_FILE).is_file():
            continue
        summary = folder / SUMMARY_FILE  # none yet: cut short before its first checkpoint
        s = json.loads(summary.read_text()) if summary.is_file() else {}
        member, index = int(folder.parent.name.removeprefix("member")), int(folder.name.removeprefix("segment"))
        segments.append(Segment(member, index, 0, float(s.get("base_lr", 0.0)), 0, "", int(s.get("agent_steps", 0)),
                                int(s.get("examples", 0)), int(s.get("updates", 0)),
                                round(float(s.get("wall_seconds", 0.0)), 2), round(float(s.get("wall_seconds", 0.0)), 2),
                                s.get("mean_return"), 0, False, cut_short=True))
    return sorted(segments, key=lambda s: (s.member, s.index))


def update_steps(cfg: Config, batch: int) -> float:
    """Agent steps of one update at ``batch`` observations per optimizer step."""
    return batch / cfg.observations_per_env * cfg.agent.n_steps


def segment_seed(seed: int, member: int, index: int) -> int:
    """A seed per segment: a segment's environments and sampling are its own, not a replay of another's."""
    return seed * 100_000 + member * 1_000 + index


def _member(params: dict[str, Any], plan: Plan) -> None:
    """The Ray Tune trainable: one member, segment after segment, reporting after each."""
    from ray import tune

    from rlscale.training import trainer

    # The member is the trial, named at its creation: an exploit copies the donor's whole config.
    member = int(tune.get_context().get_trial_name().removeprefix("member"))
    batch, lr = int(params["batch_size"]), float(params["lr"])
    home = Path(plan.dir) / f"member{member}"
    home.mkdir(parents=True, exist_ok=True)
    # The goal among the run's goals, so a segment's summary records when it met it (a preset's goals may
    # not hold it; --stop-return alone stops a run without recording it).
    goals = sorted({*build_config(plan.env, plan.agent, plan.overrides).env.goals, plan.stop_return})
    start, lineage, last_mean = plan.init_from, 0, -math.inf
    given = tune.get_checkpoint()
    if given is not None:  # this member's own last checkpoint, or (exploit) a better member's
        with given.as_directory() as folder:
            state = json.loads((Path(folder) / MEMBER_STATE).read_text())
            start = str(home / f"from-{state['source']}.pt")
            shutil.copy(Path(folder) / "policy.pt", start)
            lineage, last_mean = int(state["lineage_steps"]), float(state["mean_return"])
    while True:  # until the stopper ends the trial: the goal met (by any member) or the lineage's budget spent
        index = len(list(home.glob("segment*")))
        run_dir = home / f"segment{index:03d}"
        seed = segment_seed(plan.seed, member, index)
        overrides = {**plan.overrides, "init_from": start, "total_frames": plan.interval_frames,
                     "stop_return": plan.stop_return, "goals": goals, "log_interval": 600.0}
        cfg = trial_config(plan.env, plan.agent, overrides, Trial(batch, lr, seed), run_dir.resolve())
        # Ten checkpoints a segment: each rewrites its summary, so a segment the stop cuts short still says
        # (to a tenth of a segment) what it ran.
        steps_per_update = cfg.env.n_envs * cfg.agent.n_steps
        passes = cfg.agent.n_epochs * cfg.agent.n_minibatches if cfg.agent.algo == "ppo" else 1
        every = max(1, cfg.total_agent_steps // steps_per_update * passes // 10)
        cfg = replace(cfg, run=replace(cfg.run, checkpoint_every=every))
        run_dir.mkdir(parents=True)
        cpu, wall = time.process_time(), time.perf_counter()
        with open(run_dir / "stdout.txt", "w") as out, contextlib.redirect_stdout(out):
            code = trainer.run(cfg, run_dir)
        if code != 0:
            raise RuntimeError(f"member {member} segment {index} stopped with exit code {code}: see {run_dir}")
        summary = json.loads((run_dir / SUMMARY_FILE).read_text())
        lineage += int(summary["agent_steps"])
        reached = f"{plan.stop_return:g}" in summary.get("goals", {})  # the key the trainer records it by
        segment = Segment(member, index, batch, lr, seed, start, int(summary["agent_steps"]),
                          int(summary["examples"]), int(summary["updates"]), round(time.process_time() - cpu, 2),
                          round(time.perf_counter() - wall, 2), summary.get("mean_return"), lineage, reached)
        checkpoint.write_json(run_dir / SEGMENT_FILE, asdict(segment))
        start = str(checkpoint.latest(run_dir))
        if segment.mean_return is not None:  # else no episode ended in the segment: the last score stands
            last_mean = segment.mean_return
        with tempfile.TemporaryDirectory() as folder:
            shutil.copy(start, Path(folder) / "policy.pt")
            (Path(folder) / MEMBER_STATE).write_text(json.dumps(
                {"source": f"m{member}s{index}", "lineage_steps": lineage, "mean_return": last_mean}))
            tune.report({"mean_return": last_mean, "reached": int(reached), "lineage_steps": lineage,
                         "lineage_frames": lineage * cfg.frames_per_step, "batch_size": batch, "lr": lr,
                         "member": member}, checkpoint=tune.Checkpoint.from_directory(folder))


def run_population(plan: Plan, members: int, batch_sizes: list[int], lr_range: tuple[float, float],
                   address: str) -> int:
    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining
    from ray.tune.search.basic_variant import BasicVariantGenerator

    from rlscale.distributed.ray_pool import ray_runtime

    # Tune's own tables and its advice to reuse actors (a member restarts from a checkpoint anyway) would
    # bury the one line a segment that Progress prints; RAY_AIR_NEW_OUTPUT=0 makes verbose=0 silent.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    warnings.filterwarnings("ignore", message=".*reuse_actors.*")
    pbt_dir = Path(plan.dir)
    random.seed(plan.seed)  # PBT's perturbations draw from Python's random module in this process
    scheduler = PopulationBasedTraining(
        time_attr="training_iteration", metric="mean_return", mode="max", perturbation_interval=1,
        hyperparam_mutations={"batch_size": batch_sizes, "lr": tune.loguniform(*lr_range)}, synch=True)
    started = time.perf_counter()

    class Progress(tune.Callback):
        """One line a segment, in the driver: the member, its batch and rate, its score."""

        def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
            print(f"member {result['member']}: batch {result['batch_size']}, lr {result['lr']:.3g}, mean return "
                  f"{result['mean_return']:.1f} after {result['lineage_steps']:,} agent steps of its lineage "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)

    class FirstToGoal(tune.Stopper):
        """Every member stops once one has met the goal or spent the budget: in synch mode a member stopped
        alone would leave the others paused at the round's end for good. (The trainables never return: a
        trial that ends by itself while PBT pauses it is restarted.)"""

        def __init__(self) -> None:
            self.done = False

        def __call__(self, trial_id: str, result: dict) -> bool:
            self.done = self.done or bool(result.get("reached")) or result["lineage_frames"] >= plan.budget_frames
            return self.done

        def stop_all(self) -> bool:
            return self.done

    # Every checkpoint is kept: an exploit restores the donor's, which it may have reported past since.
    # The members' own output goes to their segments' stdout.txt, and Ray's notices about them stay there.
    with ray_runtime(address, log_to_driver=False):
        cpus = float(ray.cluster_resources().get("CPU", 1))
        share = min(1.0, cpus / members)  # every member at once: PBT compares them at the same points
        tuner = tune.Tuner(
            tune.with_resources(tune.with_parameters(_member, plan=plan), {"cpu": share}),
            param_space={"member": tune.grid_search(list(range(members))), "batch_size": tune.choice(batch_sizes),
                         "lr": tune.loguniform(*lr_range)},
            tune_config=tune.TuneConfig(scheduler=scheduler, reuse_actors=False,
                                        search_alg=BasicVariantGenerator(random_state=plan.seed),
                                        trial_name_creator=lambda t: f"member{t.config['member']}",
                                        trial_dirname_creator=lambda t: f"member{t.config['member']}"),
            run_config=tune.RunConfig(name="tune", storage_path=str((pbt_dir / ".tune").resolve()), verbose=0,
                                      stop=FirstToGoal(), callbacks=[Progress()],
                                      failure_config=tune.FailureConfig(fail_fast=True)),
        )
        results = tuner.fit()
    return report_population(plan, members, batch_sizes, lr_range, results, time.perf_counter() - started)


def report_population(plan: Plan, members: int, batch_sizes: list[int], lr_range: tuple[float, float],
                      results: Any, wall: float) -> int:
    """What the population did, from its segments' files: pbt.json, the last line, the exit code."""
    pbt_dir = Path(plan.dir)
    segments = read_segments(pbt_dir)
    # The first to the goal: the earliest round, then the fewest steps in it (synch mode: rounds run together).
    winners = sorted((s for s in segments if s.reached), key=lambda s: (s.index, s.agent_steps))
    base = build_config(plan.env, plan.agent, plan.overrides)
    frames_per_step = base.frames_per_step
    # Checkpoints come every tenth of a segment, rounded up to whole updates (at most one, at the largest batch).
    totals = population_totals(segments, math.ceil(plan.interval_frames / frames_per_step / 10
                                                   + update_steps(base, max(batch_sizes))))
    checkpoint.write_json(pbt_dir / PBT_FILE, {
        "env": plan.env, "members": members, "batch_sizes": batch_sizes, "lr_range": list(lr_range),
        "plan": asdict(plan), "reached": bool(winners), "wall_seconds": round(wall, 1), "cost": totals,
        "winner": asdict(winners[0]) if winners else None, "segments": [asdict(s) for s in segments]})
    failed = [r for r in results if r.error is not None]
    for result in failed:
        print(f"failed: {result.path}: {str(result.error).splitlines()[0]}", file=sys.stderr)
    cost = (f"the population ran {totals['agent_steps']:,} agent steps, {totals['examples']:,} examples, "
            f"{totals['updates']:,} updates and {totals['cpu_seconds']:,.0f} CPU seconds in {totals['segments']} "
            f"segments ({members} members, {wall:.0f} s)")
    if totals["cut_short"]:
        cost += (f", {totals['cut_short']} of them cut short (by the stop or a failure) and counted to their last checkpoint "
                 f"(at most {totals['agent_steps_at_most']:,} agent steps in all)")
    spent = any(s.lineage_steps * frames_per_step >= plan.budget_frames for s in segments)
    if not winners and not spent and not failed:  # neither the goal nor the budget: Ctrl-C (Tune ends the trials)
        print(f"interrupted: {cost}; {pbt_dir / PBT_FILE} (a population does not resume)", file=sys.stderr, flush=True)
        return 130
    if winners:
        w = winners[0]
        print(f"goal {plan.stop_return:g} reached by member {w.member} (batch {w.batch_size}, lr {w.lr:.3g}) after "
              f"{w.lineage_steps:,} agent steps of its lineage; {cost}; {pbt_dir / PBT_FILE}", flush=True)
    else:
        print(f"goal {plan.stop_return:g} not reached; {cost}; {pbt_dir / PBT_FILE}", flush=True)
    return 1 if failed else 0


def parser() -> Parser:
    p = Parser(prog="python -m rlscale.pbt", description=__doc__.splitlines()[0])
    p.add_argument("env", help="preset (cartpole, minatar-breakout, …) or gymnasium id")
    p.add_argument("--agent", help="agent preset: a2c, ppo (default: the env's, else a2c)")
    p.add_argument("--members", type=int, default=4, help="the population's size (default: 4)")
    p.add_argument("--interval", type=int, required=True, metavar="FRAMES",
                   help="frames a member trains between perturbations (a segment): long enough to end many "
                        "episodes at every batch, since a segment's environments start afresh")
    p.add_argument("--batch-sizes", type=int, nargs="+", required=True,
                   help="the batches a member may train at (observations per optimizer step), in order: "
                        "a perturbation moves to a neighbour")
    p.add_argument("--lr-range", type=float, nargs=2, metavar=("LOW", "HIGH"),
                   help="the learning rates a member may draw (log-uniform; default: the preset's /4 to x4)")
    p.add_argument("--pbt-dir", type=Path, help="where the members' segments go (default: <runs root>/pbt-<env>)")
    add_config_flags(p)
    return p


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    args, overrides = parse_with_config(parser(), argv)
    for forbidden in ("n_envs", "lr", "batch", "pool", "run_dir"):
        if forbidden in overrides:
            raise UserError(f"--{forbidden.replace('_', '-')} is set per member by PBT; "
                            "use --batch-sizes, --lr-range and --pbt-dir")
    if args.members < 2:
        raise UserError(f"--members {args.members}: a population needs at least 2 members")
    base: Config = build_config(args.env, args.agent, overrides)
    check_env_id(base.env.env_id)
    if not math.isfinite(base.run.stop_return):
        raise UserError("give the goal with --stop-return: the population stops when one member reaches it")
    if min(args.batch_sizes) <= 0 or args.interval <= 0:
        raise UserError("--batch-sizes and --interval must be positive")
    update_frames = update_steps(base, max(args.batch_sizes)) * base.frames_per_step
    if args.interval < update_frames:
        raise UserError(f"--interval {args.interval:,} frames is shorter than one update at batch "
                        f"{max(args.batch_sizes)} ({update_frames:,.0f} frames); give a longer interval")
    lr_range = tuple(args.lr_range) if args.lr_range else (base.agent.lr / 4, base.agent.lr * 4)
    if not 0 < lr_range[0] < lr_range[1]:
        raise UserError(f"--lr-range {lr_range[0]:g} {lr_range[1]:g}: give 0 < LOW < HIGH")
    if base.run.backend != "native" or base.learner.learners > 1:
        raise UserError("a PBT member's segments branch from checkpoints: the native engine with one learner "
                        "(not --backend rllib or --learners > 1)")
    if overrides.get("init_from"):
        from rlscale.rundir.branch import load_branch_point, pinned

        overrides["init_from"] = pinned(overrides["init_from"])
        # A wrong trunk is one line now, not a failed member each.
        print(load_branch_point(build_config(args.env, args.agent, overrides)).describe(), flush=True)
    pbt_dir = args.pbt_dir or runs_root() / f"pbt-{env_slug(args.env)}"
    plan = Plan(args.env, args.agent, {k: v for k, v in overrides.items() if k not in ("total_frames", "init_from")},
                str(pbt_dir.resolve()), args.interval, base.env.total_frames, base.run.stop_return, base.run.seed,
                overrides.get("init_from", ""))
    for batch in args.batch_sizes:  # every batch must make a valid run before anything starts
        trial_config(args.env, args.agent, plan.overrides, Trial(batch, lr_range[0], 0), pbt_dir.resolve() / "check")
    if read_segments(pbt_dir.resolve()):  # before anything is printed or set in this process
        raise UserError(f"{pbt_dir} already holds a population's segments; a population does not resume "
                        "(Ray Tune's PBT restarts members from checkpoints it keeps only while it runs): "
                        "give another --pbt-dir")
    writable_dir(pbt_dir.resolve(), "--pbt-dir")
    print(f"population: {args.members} members, batches {', '.join(map(str, args.batch_sizes))}, learning rates "
          f"{lr_range[0]:.3g}-{lr_range[1]:.3g}, segments of {args.interval:,} frames, until one reaches "
          f"{base.run.stop_return:g} or a lineage {base.env.total_frames:,} frames; {pbt_dir}", flush=True)
    return run_population(plan, args.members, sorted(set(args.batch_sizes)), lr_range, base.run.address)


if __name__ == "__main__":
    sys.exit(main())
