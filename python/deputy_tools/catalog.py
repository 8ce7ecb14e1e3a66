"""The sweep specs shipped in deputy_tools/specs/, addressable by name.

`deputy-tools sweep mover_fig2` works from any directory, and the same
files are what `reproduce` runs, so the documented experiments and the
one-command reproduction cannot drift apart. `reproduce --only channel`
picks a group: every shipped channel_* spec.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from deputy_tools.spec import SpecError, load_spec


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


def select_specs(names: list[str] | tuple[str, ...]) -> list[Path]:
    """Specs for `reproduce --only`: each name is a spec (as resolve_spec), or a group of
    shipped specs: those whose name starts with `<name>_` (`channel` -> channel_size,
    channel_count, ...) or whose benchmark is `<name>`. In the order given, no repeats."""
    chosen: list[Path] = []
    for name in names:
        try:
            found = [resolve_spec(name)]
        except SpecError:
            found = [p for p in shipped_specs() if p.stem.startswith(f"{name}_")
                     or _bench_of(p) == name]
            if not found:
                shipped = ", ".join(p.stem for p in shipped_specs()) or "none"
                raise SpecError(f"--only {name}: no such spec file, shipped spec, nor group of "
                                f"shipped specs (shipped: {shipped})") from None
        chosen += [p for p in found if p not in chosen]
    return chosen


def _bench_of(path: Path) -> str | None:
    try:
        return load_spec(path).bench[0]
    except SpecError:
        return None
