"""Drawing helpers shared by the benchmark kinds: grouped bars, lines, labels, saving.

Figures are built on matplotlib.figure.Figure objects, never pyplot, so
nothing depends on a display or on global state, and tests can inspect the
returned Figure (labels, series) instead of pixels. Every figure gets a
title, a subtitle with the settings common to all its points, axis labels
with units, a dashed y grid as in the published dsa_perf_micros figures,
and is saved as PNG (for a quick look) and SVG (for documents).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure

# Many series (batch sizes x wait modes) push the legend outside the axes.
_LEGEND_INSIDE_MAX = 8


def new_axes(width: float = 10.0, height: float = 5.5) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def colour(index: int, count: int) -> tuple[float, float, float, float]:
    cmap = colormaps["tab10" if count <= 10 else "tab20"]
    return cmap(index % cmap.N)


def grouped_bars(ax: Axes, categories: Sequence[str],
                 series: dict[str, list[float]]) -> list[float]:
    """One group of bars per category, one bar per series; returns the group centres."""
    count = max(len(series), 1)
    width = 0.8 / count
    for i, (label, values) in enumerate(series.items()):
        offsets = [c - 0.4 + width * (i + 0.5) for c in range(len(categories))]
        ax.bar(offsets, values, width=width * 0.9, label=label or "_nolegend_",
               color=colour(i, count))
    centres = [float(c) for c in range(len(categories))]
    ax.set_xticks(centres, list(categories))
    return centres


def lines(ax: Axes, xs: Sequence[float], series: dict[str, list[float]], style: str = "-o",
          label_suffix: str = "") -> None:
    count = max(len(series), 1)
    for i, (label, values) in enumerate(series.items()):
        ax.plot(xs, values, style, label=(label + label_suffix) if label else "_nolegend_",
                color=colour(i, count),
                markersize=4, linewidth=1.5)


def decorate(ax: Axes, title: str, subtitle: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", linestyle="--", linewidth=0.5, alpha=0.7)
    ax.set_axisbelow(True)


def legend(ax: Axes, extra_axes: Sequence[Axes] = ()) -> None:
    """One legend for `ax` and any twin axes, outside the plot when it is long."""
    handles, labels = ax.get_legend_handles_labels()
    for other in extra_axes:
        h, l = other.get_legend_handles_labels()
        handles += h
        labels += l
    if not handles:
        return
    # Lines on a twin axis cross the whole plot: keep their legend off it.
    if len(handles) <= _LEGEND_INSIDE_MAX and not extra_axes:
        ax.legend(handles, labels, fontsize="small")
    else:
        ax.legend(handles, labels, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  ncol=math.ceil(len(handles) / 24))


def save(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    # "tight" keeps a legend placed outside the axes inside the image.
    fig.savefig(paths[0], dpi=120, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    return paths
