"""`deputy bench rail` results: bandwidth over time and per rail, and two tables.

Schema as written by tools/bench/rail/summary.cc (results_document) and
documented in docs/rail.md ("JSON (--out FILE)"): the
document says "tool": "deputy bench rail" (no "benchmark" field yet);
"results" holds the run's totals and `samples_gbps`, the whole run's
Gbit/s per `sample_interval_s` interval; "rails" holds each rail's totals.
The time series is therefore drawn for the run as a whole, and rails are
compared by their totals (bars), until the benchmark saves per-rail
samples.
"""

from __future__ import annotations

from typing import Any, Sequence

from matplotlib.figure import Figure

from deputy_tools.figures import colour, decorate, grouped_bars, legend, new_axes
from deputy_tools.registry import BenchKind, FigureDef, NotApplicable, register
from deputy_tools.results import ResultDoc, need
from deputy_tools.series import Grouping, Param, group
from deputy_tools.tables import Column, Table
from deputy_tools.units import format_size

GBITS = "Bandwidth (Gbit/s)"

PROVIDER = Param("provider")
RAILS = Param("rails", fmt=lambda n: f"{n} rail{'' if n == 1 else 's'}")
DEVICES = Param("devices", fmt=lambda n: f"{n} device{'' if n == 1 else 's'}")
PAGE_SIZE = Param("page_size", fmt=lambda v: f"{format_size(v)} pages")
BATCH = Param("batch", "batch")
TX_DEPTH = Param("tx_depth", "tx-depth")
WARMUP = Param("warmup", fmt=lambda on: "warm-up" if on else "no warm-up")
BUFFERS = Param("buffers", fmt=lambda n: f"{n} buffer{'' if n == 1 else 's'} per device")
PARAMS = [PROVIDER, RAILS, DEVICES, BUFFERS, PAGE_SIZE, BATCH, TX_DEPTH, WARMUP]


def runs(docs: Sequence[ResultDoc]) -> list[dict[str, Any]]:
    """One record per document (a rail run is one measurement)."""
    out = []
    for d in docs:
        config = need(d.doc, "config", d)
        res = need(d.doc, "results", d)
        versions = d.doc.get("versions") if isinstance(d.doc.get("versions"), dict) else {}
        verify = d.doc.get("verify") if isinstance(d.doc.get("verify"), dict) else {}
        seconds = need(res, "seconds", d, "results")
        rails = []
        for i, rail in enumerate(need(d.doc, "rails", d)):
            where = f"rails[{i}]"
            gbps = need(rail, "bytes", d, where) * 8 / seconds / 1e9 if seconds else 0.0
            rails.append({"rail": need(rail, "rail", d, where), "device": rail.get("device"),
                          "domain": rail.get("domain"), "peer_domain": rail.get("peer_domain"),
                          "writes": rail.get("writes"),
                          "gbps": rail.get("gbps", gbps),
                          "share": rail.get("share"), "eagain": rail.get("eagain"),
                          "first_completion_ms": rail.get("first_completion_ms")})
        out.append({
            "run": d.path.stem,
            "provider": versions.get("provider") or need(config, "provider", d, "config"),
            "rails": need(config, "rails", d, "config"),
            "devices": config.get("devices"),
            "buffers": config.get("buffers", 1),
            "page_size": need(res, "bytes_per_write", d, "results"),
            "batch": config.get("batch"),
            "tx_depth": config.get("tx_depth"),
            "warmup": config.get("warmup"),
            "seconds": seconds,
            "writes": res.get("iterations"),
            "bw_peak": res.get("bw_peak_gbps"),
            "bw_avg": need(res, "bw_average_gbps", d, "results"),
            "mpps": res.get("msg_rate_mpps"),
            "pct_of_link": res.get("pct_of_link"),
            "samples": list(res.get("samples_gbps") or []),
            "interval": res.get("sample_interval_s") or 0.25,
            "rail_rows": rails,
            "verify": _verify_text(verify),
        })
    return out


def _verify_text(verify: dict[str, Any]) -> str:
    if not verify:
        return "?"
    if not verify.get("enabled", False):
        return "off"
    bad = verify.get("bad_bytes", 0)
    return "yes" if bad == 0 else f"NO ({bad} bad bytes)"


def _run_labels(recs: Sequence[dict[str, Any]]) -> tuple[Grouping, list[str]]:
    """A label per run from what differs between runs; the file name when nothing does."""
    grouping = group(recs, None, PARAMS)
    labels = [grouping.label(r) or r["run"] for r in recs]
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({r['run']})" if grouping.series else r["run"]
                  for label, r in zip(labels, recs)]
    return grouping, labels


def gbps_over_time(docs: Sequence[ResultDoc]) -> Figure:
    recs = [r for r in runs(docs) if r["samples"]]
    if not recs:
        raise NotApplicable("no run has samples_gbps (runs shorter than one sample interval)")
    grouping, labels = _run_labels(recs)
    fig, ax = new_axes()
    _draw_samples(ax, recs, labels, markersize=4)
    decorate(ax, "Rail bandwidth over time (whole run, per sample interval)",
             grouping.subtitle(), TIME_SINCE_START, GBITS)
    legend(ax)
    return fig


TIME_SINCE_START = "Time since the writers started, warm-up included (s)"


def _draw_samples(ax: Any, recs: Sequence[dict[str, Any]], labels: Sequence[str],
                  markersize: int) -> None:
    """Each run's Gbit/s per sample interval, one line per run."""
    for i, (r, label) in enumerate(zip(recs, labels)):
        times = [(k + 1) * r["interval"] for k in range(len(r["samples"]))]
        ax.plot(times, r["samples"], "-o", markersize=markersize, color=colour(i, len(recs)),
                label=f"{label}, average {r['bw_avg']:.2f} Gbit/s")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)


def _per_rail(recs: Sequence[dict[str, Any]], labels: Sequence[str],
              key: str) -> tuple[list[int], dict[str, list[float]]]:
    """Every rail id of the runs, and per run label the rails' `key` (NaN where missing)."""
    rail_ids = sorted({row["rail"] for r in recs for row in r["rail_rows"]})
    series = {}
    for r, label in zip(recs, labels):
        by_rail = {row["rail"]: row[key] for row in r["rail_rows"]}
        series[label] = [float("nan") if by_rail.get(k) is None else by_rail[k]
                         for k in rail_ids]
    return rail_ids, series


def warmup_effect(docs: Sequence[ResultDoc]) -> Figure:
    """The multi-rail article's warm-up chapter: each rail's first timed write (left), slow
    where the rail connects on its first write, and Gbit/s over time (right), ramping up
    without the warm-up."""
    recs = [r for r in runs(docs) if r["warmup"] is not None]
    if len({r["warmup"] for r in recs}) < 2:
        raise NotApplicable("needs runs with and without the warm-up (--no-warmup)")
    grouping, labels = _run_labels(recs)
    rail_ids, firsts = _per_rail(recs, labels, "first_completion_ms")
    fig = Figure(figsize=(13.0, 5.5), layout="constrained")
    first_ax, time_ax = fig.subplots(1, 2)
    grouped_bars(first_ax, [f"rail {k}" for k in rail_ids], firsts)
    first_ax.set_yscale("log")
    decorate(first_ax, "First write of each rail", "", "Rail",
             "Completion after the timed start (ms, log)")
    legend(first_ax)
    _draw_samples(time_ax, recs, labels, markersize=3)
    decorate(time_ax, "Bandwidth per sample interval", "", TIME_SINCE_START, GBITS)
    legend(time_ax)
    fig.suptitle("\n".join(t for t in ("Rail warm-up: first writes and ramp, with and without",
                                        grouping.subtitle()) if t), fontsize=11)
    return fig


def per_rail(docs: Sequence[ResultDoc]) -> Figure:
    recs = runs(docs)
    if not recs or not any(r["rail_rows"] for r in recs):
        raise NotApplicable("no per-rail results")
    grouping, labels = _run_labels(recs)
    rail_ids, series = _per_rail(recs, labels, "gbps")
    fig, ax = new_axes()
    grouped_bars(ax, [f"rail {k}" for k in rail_ids], series)
    decorate(ax, "Rail bandwidth per rail (run totals)", grouping.subtitle(), "Rail", GBITS)
    legend(ax)
    return fig


def _vs(x: Param, xlabel: str, title: str):
    def build(docs: Sequence[ResultDoc]) -> Figure:
        recs = runs(docs)
        grouping = group(recs, x, PARAMS)
        if len(grouping.xs) < 2:
            raise NotApplicable(f"needs two or more values of {x.key} (found {len(grouping.xs)})")
        fig, ax = new_axes()
        grouped_bars(ax, [x.fmt(v) for v in grouping.xs],
                     grouping.values(recs, lambda r: r["bw_avg"]))
        decorate(ax, title, grouping.subtitle(), xlabel, "Average bandwidth (Gbit/s)")
        legend(ax)
        return fig
    return build


FIGURES = (
    FigureDef("gbps_over_time", "Gbit/s per sample interval, one line per run", gbps_over_time),
    FigureDef("per_rail", "Gbit/s of each rail, one bar per run", per_rail),
    FigureDef("warmup_effect", "first write per rail and Gbit/s over time, with and without "
              "the warm-up (the multi-rail article's warm-up chapter)", warmup_effect),
    FigureDef("bandwidth_vs_rails", "average Gbit/s per number of rails",
              _vs(RAILS, "Rails (endpoints)", "Rail bandwidth vs number of rails")),
    FigureDef("bandwidth_vs_page_size", "average Gbit/s per write size",
              _vs(PAGE_SIZE, "Bytes per write", "Rail bandwidth vs write size")),
)


def _f(spec: str):
    return lambda v: format(v, spec)


RUN_COLUMNS = [
    Column("run", "run", collapsible=True),
    Column("provider", "provider", collapsible=True),
    Column("rails", "rails", numeric=True, collapsible=True),
    Column("devices", "devices", numeric=True, collapsible=True),
    Column("bytes_per_write", "bytes per write", format_size, numeric=True, collapsible=True),
    Column("batch", "batch", numeric=True, collapsible=True),
    Column("tx_depth", "tx-depth", numeric=True, collapsible=True),
    Column("iterations", "writes", numeric=True),
    Column("seconds", "seconds", _f(".3f"), numeric=True),
    Column("bw_peak_gbps", "BW peak (Gb/s)", _f(".2f"), numeric=True),
    Column("bw_average_gbps", "BW average (Gb/s)", _f(".2f"), numeric=True),
    Column("msg_rate_mpps", "MsgRate (Mpps)", _f(".4f"), numeric=True),
    Column("pct_of_link", "% of link", _f(".1f"), numeric=True),
    Column("verified", "verified"),
]

RAIL_COLUMNS = [
    Column("run", "run", collapsible=True),
    Column("rail", "rail", numeric=True),
    Column("device", "device", numeric=True, collapsible=True),
    Column("domain", "domain", collapsible=True),
    Column("peer_domain", "peer domain", collapsible=True),
    Column("writes", "writes", numeric=True),
    Column("gbps", "Gb/s", _f(".2f"), numeric=True),
    Column("share", "share (%)", lambda v: f"{100.0 * v:.1f}", numeric=True),
    Column("eagain", "EAGAIN", numeric=True),
    Column("first_completion_ms", "first completion (ms)", _f(".3f"), numeric=True),
]


def tables(docs: Sequence[ResultDoc]) -> list[Table]:
    recs = runs(docs)
    run_rows = [[r["run"], r["provider"], r["rails"], r["devices"], r["page_size"], r["batch"],
                 r["tx_depth"], r["writes"], r["seconds"], r["bw_peak"], r["bw_avg"], r["mpps"],
                 r["pct_of_link"], r["verify"]] for r in recs]
    rail_rows = [[r["run"], row["rail"], row["device"], row["domain"], row["peer_domain"],
                  row["writes"], row["gbps"], row["share"], row["eagain"],
                  row["first_completion_ms"]]
                 for r in recs for row in r["rail_rows"]]
    return [Table("rail", RUN_COLUMNS, run_rows),
            Table("rail: per rail", RAIL_COLUMNS, rail_rows)]


KIND = register(BenchKind(name="rail", figures=FIGURES, tables=tables))
