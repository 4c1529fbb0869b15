"""``python -m rlscale.sweep <env> --batch-sizes …``: a grid of fixed-batch runs with Ray Tune.

The data for the Pareto fronts and the critical batch size (paper section 4,
appendix A.3): one training run per (batch size, learning rate, seed), each in
its own run directory under one sweep directory, run as Ray Tune trials on the
embedded Ray or on a cluster (``--address``). Batch sizes are in observations
per optimizer step (n_envs x n_steps for A2C; that divided by the minibatch
count for PPO). A trial steps its environments in its own process (one CPU,
one torch thread); the parallelism is across trials.

Safe to re-run: a trial whose run directory says it finished is skipped, and an
interrupted one resumes from its last checkpoint. Each trial stops at its
frame budget or when the mean return reaches the highest goal (``--stop-return``
overrides), since nothing past the last goal enters the fit.

With ``--init-from RUN_DIR`` every trial branches from that run's latest
checkpoint (its network and optimizer state, counters from zero): the grid
then measures the critical batch from that point of training on.

Then: ``rlscale pareto <sweep dir>``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlscale.cli import Parser, writable_dir
from rlscale.config import (
    FIELDS,
    RESUME_OVERRIDABLE,
    Config,
    add_config_flags,
    build_config,
    dumps_toml,
    load_saved,
    parse_with_config,
    resumed,
    runs_root,
)
from rlscale.envs.vector import check_env_id
from rlscale.errors import UserError, exits_cleanly
from rlscale.rundir.branch import load_branch_point, pinned
from rlscale.rundir.checkpoint import CONFIG_FILE, SUMMARY_FILE

SWEEP_FILE = "sweep.json"


@dataclass(frozen=True)
class Trial:
    batch_size: int  # the optimizer batch (an adaptive trial's first one)
    lr: float
    seed: int
    mode: str = "fixed"  # or an adaptive batch control (auto, critical), starting from batch_size

    @property
    def name(self) -> str:
        prefix = "" if self.mode == "fixed" else f"{self.mode}-"
        return f"{prefix}b{self.batch_size}-lr{self.lr:g}-s{self.seed}"


def without_cluster(overrides: dict[str, Any]) -> dict[str, Any]:
    """The settings every trial shares, checked without the cluster clock: it is checked per trial (a fixed
    trial needs cluster_fit, an auto one fits its own T(B) or uses cluster_fit where given), not on the preset's fixed
    batch."""
    return {k: v for k, v in overrides.items() if k != "cluster_nodes"}


def trial_config(env: str, agent: str | None, overrides: dict[str, Any], trial: Trial, run_dir: Path) -> Config:
    """The run of one grid point; raises UserError for batch sizes the agent cannot make."""
    base = build_config(env, agent, without_cluster(overrides))
    common = {"lr": trial.lr, "seed": trial.seed, "pool": "serial", "learner_threads": 1, "run_dir": str(run_dir)}
    if "log_interval" not in overrides:
        common["log_interval"] = 60.0  # Ray Tune shows the trials' progress; keep logs short
    for timed_at_start in ("learner_precision", "actor_precision"):
        if timed_at_start not in overrides:
            # Not timed per trial: under the sweep's own load the start-up timing can pick
            # differently from trial to trial, and the trials' wall times are compared.
            common[timed_at_start] = "fp32"
    if "stop_return" not in overrides and base.env.goals:
        common["stop_return"] = max(base.env.goals)
    per_env = base.observations_per_env
    n_envs = trial.batch_size / per_env
    if n_envs != int(n_envs) or n_envs < 1:
        raise UserError(
            f"batch size {trial.batch_size} is not a whole number of environments "
            f"({per_env:g} observations per environment per optimizer step); pick multiples of {per_env:g}"
        )
    n_envs = int(n_envs)
    if trial.mode != "fixed":
        # Same process layout and load as the fixed trials; the preset's bounds and cool-down,
        # started at the trial's batch (the preset's unless --auto-from / --critical-from say otherwise).
        return build_config(env, agent, {**overrides, **common, "batch": trial.mode,
                                         "n_envs": n_envs}).check_signal_measured()
    trial_overrides = {
        **overrides, **common,
        "n_envs": n_envs, "vector_size": n_envs,  # one vector env; fixed runs never resize
        "batch": "fixed", "min_envs": n_envs, "max_envs": n_envs,
    }
    if n_envs < 2:
        trial_overrides["measure_noise"] = False  # two groups of environments at least
    else:
        trial_overrides["noise_groups"] = min(base.noise.noise_groups, n_envs)
    return build_config(env, agent, trial_overrides)


def env_slug(env: str) -> str:
    """A preset, preset file or gymnasium id as part of a directory name: pong, ale-pong-v5, my-task."""
    return env.replace(".toml", "").replace("/", "-").lower()


def trial_state(run_dir: Path) -> str:
    """'finished', 'resumable' (checkpoint but not finished) or 'new'."""
    summary = run_dir / SUMMARY_FILE
    if summary.is_file() and json.loads(summary.read_text()).get("finished"):
        return "finished"
    if list((run_dir / "checkpoints").glob("ckpt-*.pt")):
        return "resumable"
    return "new"


def resumed_config(cfg: Config) -> Config:
    """The config a resumable trial goes on with: the one it ran with (its config.toml, where a setting it predates
    gets the behaviour it ran with), not one rebuilt with today's defaults; from ``cfg``, the sweep's, only what
    ``rlscale train --resume`` may change (its budget, goal and reporting) and where the trial now lies."""
    saved_file = Path(cfg.run.run_dir) / CONFIG_FILE
    if not saved_file.is_file():
        return cfg
    return resumed(load_saved(saved_file), {key: getattr(getattr(cfg, FIELDS[key][0]), key)
                                            for key in RESUME_OVERRIDABLE}, cfg.run.run_dir)


def _run_trial(params: dict[str, Any], plans: dict[str, tuple[str, bool]]) -> None:
    """The Ray Tune trainable: one training run, reporting its headline numbers."""
    from ray import tune

    from rlscale.config import loads_saved
    from rlscale.training import trainer

    config_text, resume = plans[params["name"]]
    cfg = loads_saved(config_text, params["name"])
    code = trainer.run(cfg, Path(cfg.run.run_dir), resume=resume, on_progress=tune.report)
    if code != 0:
        raise RuntimeError(f"trial {params['name']} stopped with exit code {code}")


def run_sweep(env: str, agent: str | None, overrides: dict[str, Any], trials: list[tuple[Trial, Config]],
              sweep_dir: Path, address: str, max_concurrent: int | None) -> int:
    """Run the trials (each with its resolved config) that have not finished yet."""
    from ray import tune

    from rlscale.distributed.ray_pool import ray_runtime

    writable_dir(sweep_dir, "--sweep-dir")
    planned = [(trial, cfg, trial_state(Path(cfg.run.run_dir))) for trial, cfg in trials]
    (sweep_dir / SWEEP_FILE).write_text(json.dumps({
        "env": env, "agent": agent, "overrides": overrides,
        "trials": [{"name": t.name, "batch_size": t.batch_size, "lr": t.lr, "seed": t.seed, "mode": t.mode}
                   for t, _ in trials],
    }, indent=2))
    todo = [(t, cfg, state) for t, cfg, state in planned if state != "finished"]
    done = len(planned) - len(todo)
    print(f"sweep directory: {sweep_dir}  ({len(planned)} trials: {done} finished, "
          f"{sum(s == 'resumable' for *_, s in todo)} to resume, {sum(s == 'new' for *_, s in todo)} new)",
          flush=True)
    if not todo:
        print(f"nothing to do; analyse with: rlscale pareto {sweep_dir}")
        return 0
    with ray_runtime(address):
        plans = {t.name: (dumps_toml(resumed_config(cfg) if state == "resumable" else cfg), state == "resumable")
                 for t, cfg, state in todo}
        tuner = tune.Tuner(
            tune.with_resources(tune.with_parameters(_run_trial, plans=plans), {"cpu": 1}),
            param_space={"name": tune.grid_search(list(plans))},
            tune_config=tune.TuneConfig(
                max_concurrent_trials=max_concurrent,
                trial_name_creator=lambda t: t.config["name"],
                trial_dirname_creator=lambda t: t.config["name"],
            ),
            run_config=tune.RunConfig(name="tune", storage_path=str((sweep_dir / ".tune").resolve()),
                                      verbose=1),
        )
        results = tuner.fit()
    failed = [r for r in results if r.error is not None]
    # Counted from the trials' own summaries: an interrupted sweep (Ctrl-C) ends its
    # trials without an error, and they are not finished.
    finished = sum(trial_state(Path(cfg.run.run_dir)) == "finished" for _, cfg, _ in planned)
    print(f"{finished} of {len(planned)} trials finished; analyse with: rlscale pareto {sweep_dir}")
    if finished < len(planned):
        print(f"{len(planned) - finished} not finished: the same command resumes them", flush=True)
    for result in failed:
        print(f"failed: {result.path}: {str(result.error).splitlines()[0]}", file=sys.stderr)
    return 1 if failed or finished < len(planned) else 0


def parser() -> Parser:
    p = Parser(prog="python -m rlscale.sweep", description=__doc__.splitlines()[0])
    p.add_argument("env", help="preset (cartpole, pong, …) or gymnasium id")
    p.add_argument("--agent", help="agent preset: a2c, ppo (default: the env's, else a2c)")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[],
                   help="observations per optimizer step, e.g. 10 20 40 80 160 (A2C: multiples of n_steps)")
    p.add_argument("--lrs", type=float, nargs="+", help="learning rates (default: the preset's)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds (default: 0)")
    p.add_argument("--auto", action="store_true",
                   help="also one --batch auto run per learning rate and seed, started at the preset's "
                        "env count, under the same load as the fixed trials (for rlscale study)")
    p.add_argument("--auto-from", type=int, nargs="+", default=[], metavar="BATCH",
                   help="like --auto, started at each of these batch sizes instead of the preset's "
                        "(how much a wrong start costs auto)")
    p.add_argument("--critical-from", type=int, nargs="+", default=[], metavar="BATCH",
                   help="also one --batch critical run per learning rate and seed, started at each of these "
                        "batch sizes (does training at the signal's B_crit land near each goal's Pareto knee?)")
    p.add_argument("--sweep-dir", type=Path, help="where the trials' run directories go "
                   "(default: <runs root>/sweep-<env>-<agent>; see --run-dir)")
    p.add_argument("--max-concurrent", type=int, help="trials at once (default: one per CPU)")
    add_config_flags(p)
    return p


def planned_trials(args: Any, base: Config) -> list[Trial]:
    """The grid: every fixed batch, then every adaptive start, each at every learning rate and seed."""
    lrs = sorted(set(args.lrs or [base.agent.lr]))
    seeds = sorted(set(args.seeds))
    grid = [Trial(b, lr, s) for b in sorted(set(args.batch_sizes)) for lr in lrs for s in seeds]
    auto_starts = ([round(base.env.n_envs * base.observations_per_env)] if args.auto else []) + args.auto_from
    for mode, starts in (("auto", auto_starts), ("critical", args.critical_from)):
        grid += [Trial(start, lr, s, mode) for start in dict.fromkeys(starts) for lr in lrs for s in seeds]
    return grid


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    args, overrides = parse_with_config(parser(), argv)
    for forbidden in ("n_envs", "lr", "seed", "run_dir", "batch", "pool"):
        if forbidden in overrides:
            raise UserError(f"--{forbidden.replace('_', '-')} is set per trial by the sweep; "
                            "use --batch-sizes, --lrs and --seeds")
    if not args.batch_sizes and not args.auto and not args.auto_from and not args.critical_from:
        raise UserError("name the fixed batch sizes with --batch-sizes (and/or add --auto or --critical-from runs)")
    starts = args.batch_sizes + args.auto_from + args.critical_from
    if any(b <= 0 for b in starts) or any(lr <= 0 for lr in args.lrs or []):
        raise UserError("--batch-sizes, --auto-from, --critical-from and --lrs must be positive")
    if overrides.get("init_from"):
        overrides["init_from"] = pinned(overrides["init_from"])
    base = build_config(args.env, args.agent, without_cluster(overrides))
    check_env_id(base.env.env_id)
    if base.run.init_from:  # a wrong trunk is one line now, not a failed trial each
        print(load_branch_point(base).describe(), flush=True)
    grid = planned_trials(args, base)
    sweep_dir = args.sweep_dir or runs_root() / f"sweep-{env_slug(args.env)}-{base.agent.algo}"
    # Every grid point must make a valid config before anything runs.
    trials = [(t, trial_config(args.env, args.agent, overrides, t, (sweep_dir / t.name).resolve())) for t in grid]
    return run_sweep(args.env, args.agent, overrides, trials, sweep_dir, base.run.address,
                     args.max_concurrent)


if __name__ == "__main__":
    sys.exit(main())
