"""Where presets are found: a user's own ``envs/`` and ``agents/`` first, then the shipped ones.

The shipped presets live at the top of the repository (``envs/*.toml``, ``agents/*.toml``) and
are packaged as ``rlscale.presets.envs`` and ``rlscale.presets.agents`` (pyproject.toml maps the
folders), so a wheel, an editable install and a checkout read the same files. A file of the same
name in the working directory's ``envs/`` or ``agents/`` is the user's own and wins: drop
``envs/mygame.toml`` next to where you train and ``rlscale train mygame`` runs it.
"""

from __future__ import annotations

from pathlib import Path

KINDS = ("envs", "agents")


def shipped_folder(kind: str) -> Path:
    """The folder of the presets that come with rlscale (``envs`` or ``agents``).

    In a wheel they lie beside this file; in a checkout (an editable install included) at the
    repository's top. Found by path rather than importlib.resources: setuptools' editable finder
    does not resolve a folder without __init__.py mapped under a regular package.
    """
    packaged = Path(__file__).resolve().parent / kind
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / kind


def search_path(kind: str) -> list[Path]:
    """The folders searched for a preset of ``kind``, first match wins."""
    local = Path.cwd() / kind
    shipped = shipped_folder(kind)
    return [local, shipped] if local.resolve() != shipped.resolve() else [shipped]


def find(kind: str, name: str) -> Path | None:
    """The preset file called ``name`` (without .toml), or None."""
    for folder in search_path(kind):
        path = folder / f"{name}.toml"
        if path.is_file():
            return path
    return None


def available(kind: str) -> list[str]:
    """Every preset name of ``kind`` that ``find`` would resolve, sorted."""
    return sorted({p.stem for folder in search_path(kind) for p in folder.glob("*.toml")})
