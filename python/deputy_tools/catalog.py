"""The sweep specs shipped in deputy_tools/specs/, addressable by name.

`deputy-tools sweep mover_fig2` works from any directory, and the same
files are what `reproduce` runs, so the documented experiments and the
one-command reproduction cannot drift apart.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from deputy_tools.spec import SpecError


def specs_dir() -> Path:
    return Path(str(resources.files("deputy_tools") / "specs"))


def shipped_specs() -> list[Path]:
    return sorted(specs_dir().glob("*.json"))


def resolve_spec(name_or_path: str) -> Path:
    """A path to a spec file, or the name of a shipped spec (with or without .json)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    shipped = {p.stem: p for p in shipped_specs()}
    if path.stem in shipped and path.parent == Path("."):
        return shipped[path.stem]
    raise SpecError(f"{name_or_path}: no such spec file, nor a shipped spec "
                    f"(shipped: {', '.join(shipped) or 'none'})")
