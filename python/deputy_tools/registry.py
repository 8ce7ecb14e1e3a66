"""The benchmark kinds deputy_tools knows how to plot and tabulate.

Keyed by the "benchmark" field of a result document. Adding a benchmark
(channel, coll, ...) is one new module in deputy_tools/kinds/ that builds
its figures and tables from its own documents and calls register(); the
sweep, plot, table and reproduce commands need no change.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, Sequence

from matplotlib.figure import Figure

from deputy_tools.results import ResultDoc
from deputy_tools.tables import Table


class NotApplicable(Exception):
    """The documents given cannot make this figure (e.g. only one batch size); says why."""


@dataclass(frozen=True)
class FigureDef:
    name: str
    summary: str
    build: Callable[[Sequence[ResultDoc]], Figure]  # raises NotApplicable


@dataclass(frozen=True)
class BenchKind:
    name: str
    figures: tuple[FigureDef, ...]
    tables: Callable[[Sequence[ResultDoc]], list[Table]]

    def figure(self, name: str) -> FigureDef | None:
        return next((f for f in self.figures if f.name == name), None)


_KINDS: dict[str, BenchKind] = {}


def register(kind: BenchKind) -> BenchKind:
    _KINDS[kind.name] = kind
    return kind


def add_figures(name: str, figures: Sequence[FigureDef]) -> BenchKind:
    """More figures for a registered kind, from a module of their own (kinds/coll_offload.py
    adds the per-placement figures to coll's); a name already there is kept as it is."""
    kind = _KINDS[name]
    new = tuple(f for f in figures if kind.figure(f.name) is None)
    _KINDS[name] = dataclasses.replace(kind, figures=kind.figures + new)
    return _KINDS[name]


def get(name: str) -> BenchKind | None:
    _load_builtin()
    return _KINDS.get(name)


def known() -> list[str]:
    _load_builtin()
    return sorted(_KINDS)


def _load_builtin() -> None:
    """Imports every module of deputy_tools.kinds once; each registers itself."""
    from deputy_tools import kinds

    for module in pkgutil.iter_modules(kinds.__path__):
        importlib.import_module(f"{kinds.__name__}.{module.name}")
