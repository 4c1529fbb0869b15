"""Argument parsing shared by the commands: one line and exit code 2 on bad input."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlscale.errors import EXIT_USAGE, UserError


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the fix, exit code 2."""

    def __init__(self, *args, description: str | None = None, **kwargs) -> None:
        # Module docstrings start "``python -m rlscale.x …``: what it does"; help shows the what.
        if description and description.startswith("``") and "``: " in description:
            description = description.split("``: ", 1)[1]
            description = description[:1].upper() + description[1:]
        super().__init__(*args, description=description, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


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
