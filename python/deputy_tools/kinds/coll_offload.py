"""deputy against MPI in each placement of the agent: the coll_offload figures and tables.

The question of the issue "No spare core, no loss": does offloading a
non-blocking collective pay both where the agent has a core of its own
(own-core) and where it shares the ranks' cores (shared), with the ranks
asleep (compute idle) or busy (compute cpu) while the operation runs?
Two numbers answer it per operation and size, both OSU's: the overlap
deputy reaches (MPI's beside it for reference), and deputy's Overall time
(post + compute + wait) over MPI's: below 1, the application's iteration
got shorter.

MPI is measured in the same `deputy bench coll` process, on the same
buffers, so the ratio is taken within one result document first and the
median over runs only afterwards: a run on a noisy machine is never
divided by another run's baseline. Every number here is a median over the
documents (runs) of one placement, op and compute.

This module adds its figures to the coll kind (`deputy-tools plot`,
`reproduce`); `deputy-tools perf-doc` (perf_doc.py) draws them and prints
the tables into docs/PERFORMANCE.md.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullLocator

from deputy_tools.figures import colour
from deputy_tools.kinds.coll import (OP_ORDER, PLACEMENT_ORDER, SIZE_LABEL, records,
                                     size_ticks)
from deputy_tools.registry import FigureDef, NotApplicable, add_figures
from deputy_tools.results import ResultDoc
from deputy_tools.tables import Column, Table
from deputy_tools.units import format_size

COMPUTE_ORDER = ("idle", "cpu")
# What each placement means, for row titles and table headings (docs/coll-bench.md).
PLACEMENT_MEANING = {
    "shared": "the agent on the ranks' CPUs, nothing pinned",
    "own-core": "the agent alone on the last core, the ranks on the others",
}
COMPUTE_MEANING = {
    "idle": "the ranks sleep during the operation",
    "cpu": "the ranks run OSU's compute loop during the operation",
}


@dataclass(frozen=True)
class Cell:
    """One placement, compute, op and size: medians over the runs that measured it."""

    placement: str
    compute: str
    op: str
    size: int
    overlap_deputy: float | None   # OSU Overlap (%)
    overlap_mpi: float | None
    overall_ratio: float | None    # deputy's Overall / MPI's, within each run
    runs: int                      # result documents behind the medians


def _order(values: Sequence[str], order: Sequence[str]) -> list[str]:
    return sorted(set(values), key=lambda v: (order.index(v) if v in order else len(order), v))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _samples(doc: ResultDoc) -> list[tuple[tuple[str, str, str, int], dict[str, float | None]]]:
    """One document (one run): per (placement, compute, op, size), deputy's and MPI's
    overlap and the ratio of their Overall times."""
    rows: dict[tuple[str, str, str, int], dict[str, dict[str, Any]]] = {}
    for r in records([doc]):
        if r["placement"] is None or not r["nonblocking"] or r["skipped"] is not None:
            continue
        key = (r["placement"], r["compute"], r["op"], r["size"])
        rows.setdefault(key, {})[r["impl"]] = r
    out = []
    for key, impls in rows.items():
        deputy, mpi = impls.get("deputy"), impls.get("mpi")
        ratio = None
        if deputy and mpi and deputy["overall_us"] is not None and mpi["overall_us"]:
            ratio = deputy["overall_us"] / mpi["overall_us"]
        out.append((key, {"overlap_deputy": deputy["overlap_pct"] if deputy else None,
                          "overlap_mpi": mpi["overlap_pct"] if mpi else None,
                          "overall_ratio": ratio}))
    return out


def cells(docs: Sequence[ResultDoc]) -> list[Cell]:
    """Medians over runs, in placement, compute, op and size order. Documents without a
    placement (not from a sweep with a placement axis) are left out."""
    gathered: dict[tuple[str, str, str, int], list[dict[str, float | None]]] = {}
    for doc in docs:
        for key, sample in _samples(doc):
            gathered.setdefault(key, []).append(sample)

    def median_of(samples: list[dict[str, float | None]], metric: str) -> float | None:
        return _median([s[metric] for s in samples if s[metric] is not None])

    out = [Cell(placement=p, compute=c, op=op, size=size,
                overlap_deputy=median_of(s, "overlap_deputy"),
                overlap_mpi=median_of(s, "overlap_mpi"),
                overall_ratio=median_of(s, "overall_ratio"), runs=len(s))
           for (p, c, op, size), s in gathered.items()]
    return sorted(out, key=lambda c: (_rank(c.placement, PLACEMENT_ORDER),
                                      _rank(c.compute, COMPUTE_ORDER), _rank(c.op, OP_ORDER),
                                      c.size))


def _rank(value: str, order: Sequence[str]) -> tuple[int, str]:
    return (order.index(value) if value in order else len(order), value)


def placements(found: Sequence[Cell]) -> list[str]:
    return _order([c.placement for c in found], PLACEMENT_ORDER)


def computes(found: Sequence[Cell]) -> list[str]:
    return _order([c.compute for c in found], COMPUTE_ORDER)


# The figure: one row per placement; overlap on the left, the Overall ratio on the right;
# one colour per operation, deputy solid, MPI dotted.


def _series(found: Sequence[Cell], op: str, metric: str) -> tuple[list[int], list[float]]:
    points = [(c.size, getattr(c, metric)) for c in found
              if c.op == op and getattr(c, metric) is not None]
    return [x for x, _ in points], [y for _, y in points]


def _size_axis(ax: Axes, sizes: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    shown = size_ticks(sizes)
    ax.set_xticks(shown, [format_size(x) for x in shown])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.grid(axis="both", which="major", linestyle=":", linewidth=0.5, alpha=0.7)
    ax.set_axisbelow(True)


def _ratio_axis(ax: Axes, values: Sequence[float]) -> None:
    """Log-2 y axis that always shows 1 (MPI), labelled as ratios (0.25x, 1x, 2x)."""
    ax.set_yscale("log", base=2)
    low, high = min([1.0, *values]), max([1.0, *values])
    ax.set_ylim(low / 1.4, high * 1.4)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.axhline(1.0, color="0.35", linestyle="--", linewidth=1.0)


def placement_figure(found: Sequence[Cell], compute: str, note: str = "") -> Figure:
    """The figure of one compute mode: rows = placements, columns = overlap / Overall ratio."""
    mine = [c for c in found if c.compute == compute]
    if not mine:
        raise NotApplicable(f"no compute {compute} results with a placement (a sweep with a "
                            "placement axis, e.g. the coll_offload spec)")
    rows = placements(mine)
    ops = _order([c.op for c in mine], OP_ORDER)
    sizes = sorted({c.size for c in mine})
    if len(sizes) < 2:
        raise NotApplicable(f"needs two or more message sizes (found {len(sizes)})")
    fig = Figure(figsize=(12.5, 3.4 * len(rows) + 1.2), layout="constrained")
    grid = fig.subplots(len(rows), 2, squeeze=False, sharex=True)
    colours = {op: colour(i, len(ops)) for i, op in enumerate(ops)}
    for row, placement in zip(grid, rows):
        here = [c for c in mine if c.placement == placement]
        overlap, ratio = row
        for op in ops:
            xs, ys = _series(here, op, "overlap_deputy")
            overlap.plot(xs, ys, color=colours[op], marker="o", markersize=5, linewidth=1.6)
            xs, ys = _series(here, op, "overlap_mpi")
            overlap.plot(xs, ys, color=colours[op], marker="x", markersize=5, linewidth=1.0,
                         linestyle=":")
            xs, ys = _series(here, op, "overall_ratio")
            ratio.plot(xs, ys, color=colours[op], marker="o", markersize=5, linewidth=1.6)
        meaning = PLACEMENT_MEANING.get(placement, "")
        overlap.set_title(f"{placement}: overlap" + (f"\n({meaning})" if meaning else ""),
                          fontsize=10)
        overlap.set_ylabel("Overlap (%)")
        overlap.set_ylim(-3.0, 103.0)
        ratio.set_title(f"{placement}: Overall, deputy / MPI (below 1: deputy faster)",
                        fontsize=10)
        ratio.set_ylabel("Overall deputy / MPI (log)")
        _ratio_axis(ratio, [c.overall_ratio for c in here if c.overall_ratio is not None])
        for ax in row:
            _size_axis(ax, sizes)
    for ax in grid[-1]:
        ax.set_xlabel(SIZE_LABEL)
    handles = [Line2D([], [], color=colours[op], marker="o", linewidth=1.6, label=op)
               for op in ops]
    handles += [Line2D([], [], color="black", marker="o", linewidth=1.6, label="deputy"),
                Line2D([], [], color="black", marker="x", linestyle=":", linewidth=1.0,
                       label="MPI (overlap)"),
                Line2D([], [], color="0.35", linestyle="--", linewidth=1.0,
                       label="MPI (Overall = 1)")]
    grid[0][1].legend(handles=handles, fontsize="small", loc="upper left",
                      bbox_to_anchor=(1.02, 1.0))
    title = (f"Non-blocking collectives, deputy vs MPI, compute {compute}"
             + (f": {COMPUTE_MEANING[compute]}" if compute in COMPUTE_MEANING else ""))
    fig.suptitle(title + (f"\n{note}" if note else ""), fontsize=11)
    return fig


def _figure(compute: str) -> Callable[[Sequence[ResultDoc]], Figure]:
    def build(docs: Sequence[ResultDoc]) -> Figure:
        found = cells(docs)
        if not found:
            raise NotApplicable("no non-blocking results with a placement (a sweep with a "
                                "placement axis, e.g. the coll_offload spec)")
        runs = max(c.runs for c in found)
        note = ("Overlap = max(0, 100 - 100 x (Overall - Compute) / Pure Comm.) (OSU); "
                "Overall ratio taken within each run"
                + (f", medians of {runs} runs" if runs > 1 else ""))
        return placement_figure(found, compute, note)
    return build


FIGURES = tuple(
    FigureDef(f"by_placement_{compute}",
              f"compute {compute}: overlap (%) and Overall deputy/MPI per size, one row per "
              "placement of the agent, one line per op",
              _figure(compute))
    for compute in COMPUTE_ORDER)


# The tables: one per placement, op x size, each compute's three numbers side by side.


def _pct(v: float) -> str:
    return f"{v:.1f}"


def _ratio(v: float) -> str:
    return f"{v:.2f}x"


def placement_tables(found: Sequence[Cell]) -> list[Table]:
    """Per placement: op, size, then per compute: overlap deputy, overlap MPI, Overall
    deputy/MPI (medians; '-' where no run measured it)."""
    modes = computes(found)
    columns = [Column("op", "op"), Column("size", "size", format_size, numeric=True)]
    for c in modes:
        columns += [
            Column(f"{c}_overlap_deputy_pct", f"{c}: overlap deputy (%)", _pct, numeric=True),
            Column(f"{c}_overlap_mpi_pct", f"{c}: overlap MPI (%)", _pct, numeric=True),
            Column(f"{c}_overall_deputy_over_mpi", f"{c}: Overall deputy/MPI", _ratio,
                   numeric=True),
        ]
    tables = []
    for placement in placements(found):
        here = {(c.op, c.size, c.compute): c for c in found if c.placement == placement}
        keys = sorted({(op, size) for op, size, _ in here},
                      key=lambda k: (_rank(k[0], OP_ORDER), k[1]))
        rows = []
        for op, size in keys:
            row: list[Any] = [op, size]
            for c in modes:
                cell = here.get((op, size, c))
                row += ([cell.overlap_deputy, cell.overlap_mpi, cell.overall_ratio] if cell
                        else [None, None, None])
            rows.append(row)
        meaning = PLACEMENT_MEANING.get(placement, "")
        tables.append(Table(title=f"Placement {placement}" + (f": {meaning}" if meaning else ""),
                            columns=columns, rows=rows))
    return tables


add_figures("coll", FIGURES)
