"""``python -m rlscale.train <env>``: the command line of a training run.

Resolves the config (presets, flags, or a resumed run's saved config) and
hands it to ``rlscale.training.trainer``, which runs the one training loop.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from rlscale.cli import Parser
from rlscale.config import (
    FIELDS,
    Config,
    add_config_flags,
    build_config,
    cli_flag,
    load_saved,
    parse_with_config,
    runs_root,
)
from rlscale.envs.vector import check_env_id
from rlscale.errors import UserError, exits_cleanly
from rlscale.training import trainer
from rlscale.training.branch import pinned
from rlscale.training.checkpoint import CONFIG_FILE


def default_run_dir(cfg: Config) -> Path:
    name = cfg.env.env_id.replace("ALE/", "").replace("/", "-").split("-v")[0].lower()
    return runs_root() / f"{name}-{cfg.agent.algo}-{datetime.now():%Y%m%d-%H%M%S}"


def _raise_interrupt(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler API
    raise KeyboardInterrupt


@contextmanager
def interrupts_raise() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt, so a run checkpoints before it exits.

    Both handlers explicitly: a process started with SIGINT ignored (a background
    job of a non-interactive shell) would otherwise never see Ctrl-C. Only the
    main thread may set handlers (a Ray Tune trial runs in another one).
    """
    main_thread = threading.current_thread() is threading.main_thread()
    previous = ({sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
                if main_thread else {})
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# What a resumed run may change: where it stops (budget, score) and how it reports and
# checkpoints, not how it trains. A larger budget extends a run; with annealing on, the
# learning rate then continues from the new schedule's value at the current step.
RESUME_OVERRIDABLE = {"total_frames", "stop_return", "log_interval", "checkpoint_every", "keep_checkpoints",
                      "address"}


def _flags(keys: set[str]) -> str:
    return ", ".join(cli_flag(key) for key in sorted(keys))


def resume(run_dir: Path, overrides: dict[str, Any]) -> int:
    config_file = run_dir / CONFIG_FILE
    if not config_file.is_file():
        raise UserError(f"{run_dir} is not a run directory (no {CONFIG_FILE}); check the path")
    cfg = load_saved(config_file)
    fixed = set(overrides) - RESUME_OVERRIDABLE
    if fixed:
        raise UserError(f"--resume keeps the run's settings; only {_flags(RESUME_OVERRIDABLE)} "
                        f"may change (got {_flags(fixed)})")
    for key, value in overrides.items():
        section, _ = FIELDS[key]
        setattr(getattr(cfg, section), key, value)
    cfg.run.run_dir = str(run_dir)  # a copied or moved run directory resumes where it is now
    return trainer.run(cfg.validate(), run_dir, resume=True)


def parser() -> Parser:
    p = Parser(prog="python -m rlscale.train",
               description="Train an agent; measure the gradient noise scale; resize the batch to follow it.")
    p.add_argument("env", nargs="?", help="preset (pong, breakout, cartpole) or gymnasium id (ALE/Breakout-v5)")
    p.add_argument("--agent", help="agent preset (a2c, ppo; default: a2c)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    add_config_flags(p)
    return p


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    args, overrides = parse_with_config(parser(), argv)
    if args.resume:
        with interrupts_raise():
            return resume(Path(args.resume), overrides)
    if not args.env:
        raise UserError("name an environment, e.g. python -m rlscale.train pong (or --resume RUN_DIR)")
    # RLlib's backend runs PPO, so it picks the PPO preset unless told otherwise.
    agent = args.agent or ("ppo" if overrides.get("backend") == "rllib" else None)
    if overrides.get("init_from"):
        overrides["init_from"] = pinned(overrides["init_from"])
    cfg = build_config(args.env, agent, overrides)
    check_env_id(cfg.env.env_id)
    run_dir = Path(cfg.run.run_dir) if cfg.run.run_dir else default_run_dir(cfg)
    cfg.run.run_dir = str(run_dir)
    with interrupts_raise():
        return trainer.run(cfg, run_dir)


if __name__ == "__main__":
    sys.exit(main())
