"""Argument parsing shared by the commands: one line and exit code 2 on bad input."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rlscale.errors import UserError

CONSOLE_COMMAND = "rlscale"


def command_name(module_form: str) -> str:
    """How the user called a command: ``rlscale train`` under the console script, else the
    ``python -m rlscale.train`` form its parser is declared with."""
    if Path(sys.argv[0]).name == CONSOLE_COMMAND and module_form.startswith("python -m rlscale."):
        return f"{CONSOLE_COMMAND} {module_form.removeprefix('python -m rlscale.')}"
    return module_form


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is a UserError: one line naming the fix (exit code 2 from a
    command, an exception from the Python API, with the same text)."""

    def __init__(self, *args, prog: str | None = None, description: str | None = None, **kwargs) -> None:
        # Module docstrings start "``python -m rlscale.x …``: what it does"; help shows the what.
        if description and description.startswith("``") and "``: " in description:
            description = description.split("``: ", 1)[1]
            description = description[:1].upper() + description[1:]
        super().__init__(*args, prog=command_name(prog) if prog else None, description=description, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"{message} (see {self.prog} --help)")


def writable_dir(path: Path, flag: str = "--run-dir") -> Path:
    """Create ``path`` if needed and check that files can be written in it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise UserError(
            f"cannot write to {path} ({err.strerror}); choose another directory with {flag}"
        ) from None
    return path


def writable_file(path: Path, *suffixes: str) -> Path:
    """Fail before long work, not after it, when an output file cannot be written."""
    if path.suffix.lower() not in suffixes:
        raise UserError(f"{path}: the file name must end in {' or '.join(suffixes)}")
    folder = path.parent
    if not folder.is_dir():
        raise UserError(f"{path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UserError(f"{path}: folder {folder} is not writable")
    return path


def _raise_interrupt(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler API
    raise KeyboardInterrupt


@contextmanager
def interrupts_raise() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt, so a command saves its work before it exits
    (a run its checkpoint, a measurement its finished races).

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
