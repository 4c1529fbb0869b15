"""``rlscale <command> ...``: one console command over the package's commands.

Each subcommand is the ``main(argv)`` of its module. ``python -m rlscale <command>`` is the same
command (rlscale/__main__.py); ``python -m rlscale.train``, ``.sweep`` and ``.pbt`` run their modules
directly too.
"""

from __future__ import annotations

import importlib
import sys

# name -> (module with main(argv), what it does)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("rlscale.train", "train an agent (a preset, a preset file or a gymnasium id)"),
    "evaluate": ("rlscale.reports.evaluate", "play full episodes with a run's policy; record a video"),
    "plot": ("rlscale.reports.plot", "one PNG of a run: return, noise scales, batch, learning rate"),
    "compare": ("rlscale.reports.compare", "runs side by side: steps, examples and time to each goal"),
    "sweep": ("rlscale.sweep", "fixed-batch runs over batch sizes, rates and seeds (Ray Tune)"),
    "measure": ("rlscale.measure", "the critical batch at a run's checkpoint, read by racing branches to a goal"),
    "pbt": ("rlscale.pbt", "Population Based Training over batch size and rate (Ray Tune), to a goal"),
    "pareto": ("rlscale.reports.pareto", "Pareto fronts of a sweep and B_crit per goal (eq. 2.11)"),
    "study": ("rlscale.reports.study", "a batch-control study's table: time to goal against fixed batches"),
    "plan": ("rlscale.reports.plan", "how many nodes a task can use, from a run's measured costs"),
    "oracle": ("rlscale.reports.oracle", "the most any batch control could gain, from a fixed-batch sweep"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: rlscale COMMAND [ARGS ...]", "",
             "Train RL agents at the critical batch size; measure it; plan the machines.", "", "commands:"]
    lines += [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    lines += ["", "rlscale COMMAND --help says more; rlscale train pong --help shows Pong's settings.",
              "Each command also runs as python -m rlscale COMMAND. Guide: docs/usage.md"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"error: unknown command '{name}': choose one of {', '.join(COMMANDS)} (see rlscale --help)",
              file=sys.stderr)
        return 2
    return importlib.import_module(COMMANDS[name][0]).main(rest)


if __name__ == "__main__":
    sys.exit(main())
