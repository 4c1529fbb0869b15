"""The one exception type that reaches a user as a single line.

Anything a user can get wrong (a flag, a preset, a path, an address) raises
``UserError`` with a message that names the problem and the fix; the command
entry points turn it into one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import TypeVar

EXIT_USAGE = 2

F = TypeVar("F", bound=Callable[..., int])


class UserError(Exception):
    """Bad input: shown to the user as one line, exit code 2, no traceback."""


class ActorFailures(UserError):
    """Too many rollout actors died: the run stops with a checkpoint."""


def exits_cleanly(main: F) -> F:
    """Wrap a command's main(): UserError becomes one stderr line and exit code 2."""

    @wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_USAGE

    return wrapper  # type: ignore[return-value]
