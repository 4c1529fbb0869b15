"""rlscale: train at the critical batch size.

From Python: ``rlscale.train(env, **settings)`` (rlscale/train.py) and ``rlscale.load(run_dir)``
(rlscale/api.py);
from the shell: ``rlscale train pong`` (rlscale/commands.py), or ``python -m rlscale.train pong``.
"""

from rlscale.errors import UserError

__all__ = ["UserError", "load", "train"]


def load(path, seed: int = 0):  # noqa: ANN001, ANN201 - typed in rlscale.api.load
    """The policy of a run directory's latest checkpoint (rlscale.api.load)."""
    from rlscale.api import load as load_policy

    return load_policy(path, seed)


def __getattr__(name: str):  # noqa: ANN202
    # rlscale.train is the `train` command's module, made callable as the API's train() (see
    # rlscale/train.py); imported on first use, so `import rlscale` stays light and
    # `python -m rlscale.train` does not find it imported already.
    if name == "train":
        import importlib

        return importlib.import_module("rlscale.train")
    raise AttributeError(f"module 'rlscale' has no attribute {name!r}")
