"""``python -m rlscale.train <env>``: the command line of a training run, and ``rlscale.train(...)``.

Resolves the config (presets, flags, or a resumed run's saved config) and
hands it to ``rlscale.training.trainer``, which runs the one training loop.
From Python the module itself is called: ``rlscale.train("cartpole", n_envs=8)``
is ``train()`` below, through the same parser as the command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import types
from datetime import datetime
from pathlib import Path
from typing import Any

from rlscale import presets
from rlscale.api import TrainedRun, settings_argv
from rlscale.cli import Parser, command_name, interrupts_raise
from rlscale.config import (
    COMMON_SETTINGS,
    FIELDS,
    FLAGS,
    RESUME_OVERRIDABLE,
    SECTIONS,
    Config,
    add_config_flags,
    build_config,
    cli_flag,
    load_saved,
    parse_with_config,
    resumed,
    runs_root,
    spelled,
)
from rlscale.envs.vector import check_env_id
from rlscale.errors import UserError, exits_cleanly
from rlscale.rundir.branch import pinned
from rlscale.rundir.checkpoint import CONFIG_FILE, SUMMARY_FILE
from rlscale.training import trainer


def default_run_dir(cfg: Config) -> Path:
    name = cfg.env.env_id.replace("ALE/", "").replace("/", "-").split("-v")[0].lower()
    return runs_root() / f"{name}-{cfg.agent.algo}-{datetime.now():%Y%m%d-%H%M%S}"


def _flags(keys: set[str]) -> str:
    return ", ".join(spelled(key) for key in sorted(keys))


def resume(run_dir: Path, overrides: dict[str, Any]) -> int:
    config_file = run_dir / CONFIG_FILE
    if not config_file.is_file():
        raise UserError(f"{run_dir} is not a run directory (no {CONFIG_FILE}); check the path")
    cfg = load_saved(config_file)
    fixed = set(overrides) - RESUME_OVERRIDABLE
    if fixed:
        raise UserError(f"--resume keeps the run's settings; only {_flags(RESUME_OVERRIDABLE)} "
                        f"may change (got {_flags(fixed)})")
    return trainer.run(resumed(cfg, overrides, str(run_dir)), run_dir, resume=True)


HELP_ALL = "--help-all"


def parser(values: Config | None = None, values_from: str = "default", everything: bool = True) -> Parser:
    """The command's parser; its help shows ``values`` (a preset's) and, unless ``everything``,
    only the settings most runs touch (config.COMMON_SETTINGS)."""
    p = Parser(prog="python -m rlscale.train",
               description="Train an agent; measure the gradient noise scale; resize the batch to follow it.",
               epilog=settings_without_flags(values or Config(), values_from) if everything else
               f"{HELP_ALL} lists every flag and the settings set with --set; each is also a keyword of rlscale.train().",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env", nargs="?", help="preset (" + ", ".join(presets.available("envs")) + "; or "
                   "envs/NAME.toml in this folder), a preset file (FILE.toml) or a gymnasium id (ALE/Breakout-v5)")
    p.add_argument("--agent", help="agent preset (" + ", ".join(presets.available("agents")) + "; default: the "
                   "env preset's)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    p.add_argument(HELP_ALL, action="store_true", help="show every setting")
    add_config_flags(p, values, None if everything else COMMON_SETTINGS, values_from)
    return p


def settings_without_flags(values: Config, values_from: str) -> str:
    """--help-all's last part: every setting a preset's TOML holds that has no flag, one line each."""
    lines = [f"settings without a flag: in a preset's TOML, or --set NAME=VALUE ({values_from.rstrip(':')} values; "
             "docs/usage.md):"]
    for section, cls in SECTIONS.items():
        names = [f.name for f in dataclasses.fields(cls) if f.name not in FLAGS]
        if not names:  # every setting of the section has a flag
            continue
        lines += [f"  [{section}]"] + [
            f"    {name:<20}{_shown(getattr(getattr(values, section), name)):>10}  {_gist(_unscoped(FIELDS[name][1].metadata['help']))}"
            for name in names]
    return "\n".join(lines)


def _unscoped(text: str) -> str:
    """A help text without its scope ("PPO: ", "auto: "), which the one-line listing has no room for."""
    scope, sep, rest = text.partition(": ")
    return rest if sep and len(scope) <= 12 else text


def _shown(value: Any) -> str:
    return "-" if value in ("", None) else f"{value:g}" if isinstance(value, float) else str(value)


def _gist(text: str, width: int = 58) -> str:
    """The first clause of a setting's help, for the one-line listing."""
    for stop in (" (", "; ", ": "):
        text = text.split(stop, 1)[0]
    return text if len(text) <= width else text[: width - 1] + "…"


def short_help(values: Config, label: str) -> str:
    """One screen: the command, the environment and the settings most runs touch, one line each."""
    prog = command_name("python -m rlscale.train")
    lines = [f"usage: {prog} ENV [--agent AGENT] [--resume RUN_DIR] [--SETTING VALUE ...]", "",
             "Train an agent; measure the gradient noise scale; resize the batch to follow it.", "",
             "  ENV                 a preset (" + ", ".join(presets.available("envs")) + "),",
             "                      envs/NAME.toml in this folder, a FILE.toml, or a gymnasium id",
             "  --agent AGENT       agent preset (" + ", ".join(presets.available("agents"))
             + "); default: the env preset's",
             "  --resume RUN_DIR    continue the run in RUN_DIR from its last checkpoint", "",
             f"settings most runs touch ({label} values):"]
    for name in COMMON_SETTINGS:
        section, f = FIELDS[name]
        value = getattr(getattr(values, section), name)
        shown = _shown(value)
        kind = f.type if isinstance(f.type, str) else f.type.__name__
        flag = cli_flag(name) + ("" if kind == "bool" else f" {kind.upper()}")
        lines.append(f"  {flag:<22}{shown:>10}  {_gist(f.metadata['help'])}")
    lines += ["", f"{prog} ENV {HELP_ALL} lists every flag with its unit, and the settings --set gives; each is also",
              "a keyword of rlscale.train() in Python. Guide: docs/usage.md"]
    return "\n".join(lines)


def print_help(argv: list[str]) -> None:
    """The help, with the named preset's values where one is named (the defaults otherwise)."""
    named = Parser(add_help=False)
    named.add_argument("env", nargs="?")
    named.add_argument("--agent")
    known, _ = named.parse_known_args(argv)
    values, preset = Config(), None
    if known.env:
        try:
            values, preset = build_config(known.env, known.agent, {}), Path(known.env).stem
        except UserError:  # an unknown preset or a bad file: the help shows the defaults
            pass
    if HELP_ALL in argv:
        parser(values, f"{preset}:" if preset else "default").print_help()
    else:
        print(short_help(values, f"{preset}'s" if preset else "default"))


def config_from_args(args: Any, overrides: dict[str, Any]) -> Config:
    """The config of a new run: presets, then the flags; the run directory named."""
    if not args.env:
        raise UserError("name an environment, e.g. rlscale train pong (or --resume RUN_DIR)")
    # RLlib's backend runs PPO, so it picks the PPO preset unless told otherwise.
    agent = args.agent or ("ppo" if overrides.get("backend") == "rllib" else None)
    if overrides.get("init_from"):
        overrides["init_from"] = pinned(overrides["init_from"])
    cfg = build_config(args.env, agent, overrides).check_signal_measured()
    check_env_id(cfg.env.env_id)
    run_dir = Path(cfg.run.run_dir) if cfg.run.run_dir else default_run_dir(cfg)
    cfg.run.run_dir = str(run_dir)
    return cfg


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if {"-h", "--help", HELP_ALL} & set(argv):
        print_help(argv)
        return 0
    args, overrides = parse_with_config(parser(), argv)
    if args.resume:
        with interrupts_raise():
            return resume(Path(args.resume), overrides)
    cfg = config_from_args(args, overrides)
    with interrupts_raise():
        return trainer.run(cfg, Path(cfg.run.run_dir))


INTERRUPTED = 130  # the exit code of a run stopped by Ctrl-C or SIGTERM (it checkpointed first)


def train(env: str | None = None, **settings: Any) -> TrainedRun:
    """The command from Python: train on ``env`` (a preset, a preset file or a gymnasium id) with the
    command's settings as keywords; ``resume=RUN_DIR`` continues a run. Returns the finished run;
    raises UserError on bad input (the command's one line) and KeyboardInterrupt when interrupted,
    after the run has written its checkpoint."""
    args, overrides = parse_with_config(parser(), settings_argv(env, settings))
    with interrupts_raise():
        if args.resume:
            run_dir = Path(args.resume)
            code = resume(run_dir, overrides)
        else:
            cfg = config_from_args(args, overrides)
            run_dir = Path(cfg.run.run_dir)
            code = trainer.run(cfg, run_dir)
    if code == INTERRUPTED:
        raise KeyboardInterrupt(f"run interrupted; it checkpointed in {run_dir}")
    return TrainedRun(run_dir, json.loads((run_dir / SUMMARY_FILE).read_text()))


class _CallableModule(types.ModuleType):
    """``rlscale.train`` is this command's module and also the Python API's ``train()``.

    Importing a submodule sets it as an attribute of its package, so once anything imports
    this module (``python -m``, a test, a sweep) the name ``rlscale.train`` is the module,
    whatever rlscale/__init__.py bound it to: calling the module calls the API.
    """

    def __call__(self, env: str | None = None, **settings: Any) -> TrainedRun:
        return train(env, **settings)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
