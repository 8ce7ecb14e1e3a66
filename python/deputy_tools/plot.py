"""The `plot` command: every applicable figure of every benchmark kind in the results.

Without --figure, each kind draws what its documents support (a figure
against batch size only when batch sizes vary) and says what it skipped
and why; with --figure, the named figures are drawn or a reason is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure

from deputy_tools import registry
from deputy_tools.figures import save
from deputy_tools.results import ResultDoc


class PlotError(ValueError):
    pass


@dataclass(frozen=True)
class Plotted:
    kind: str
    name: str
    figure: Figure
    paths: tuple[Path, ...]


def by_kind(docs: Sequence[ResultDoc]) -> dict[str, list[ResultDoc]]:
    groups: dict[str, list[ResultDoc]] = {}
    for d in docs:
        groups.setdefault(d.kind, []).append(d)
    return dict(sorted(groups.items()))


def _wanted(kind: registry.BenchKind, names: Sequence[str]) -> list[registry.FigureDef]:
    if not names:
        return list(kind.figures)
    chosen = []
    for name in names:
        owner, _, short = name.rpartition(":")
        if owner and owner != kind.name:
            continue
        figure = kind.figure(short)
        if figure is not None:
            chosen.append(figure)
    return chosen


def check_names(docs: Sequence[ResultDoc], names: Sequence[str]) -> None:
    """Rejects a --figure that no kind in the results has, listing the ones that exist."""
    kinds = [k for k in (registry.get(name) for name in by_kind(docs)) if k is not None]
    available = [f"{k.name}:{f.name}" for k in kinds for f in k.figures]
    for name in names:
        if not any(_wanted(k, [name]) for k in kinds):
            raise PlotError(f"--figure {name}: no such figure for these results "
                            f"(available: {', '.join(available) or 'none'})")


def plot_results(docs: Sequence[ResultDoc], out_dir: Path, names: Sequence[str] = (),
                 ) -> tuple[list[Plotted], list[str]]:
    """Draws and saves figures as <kind>_<figure>.png/.svg; returns them and notes."""
    check_names(docs, names)
    plotted: list[Plotted] = []
    notes: list[str] = []
    for kind_name, kind_docs in by_kind(docs).items():
        kind = registry.get(kind_name)
        if kind is None:
            notes.append(f"{len(kind_docs)} '{kind_name}' result(s): no figures for this benchmark "
                         f"yet (known: {', '.join(registry.known())})")
            continue
        for figure_def in _wanted(kind, names):
            try:
                figure = figure_def.build(kind_docs)
            except registry.NotApplicable as e:
                notes.append(f"{kind_name}:{figure_def.name} not drawn: {e}")
                continue
            paths = save(figure, out_dir, f"{kind_name}_{figure_def.name}")
            plotted.append(Plotted(kind_name, figure_def.name, figure, tuple(paths)))
    return plotted, notes
