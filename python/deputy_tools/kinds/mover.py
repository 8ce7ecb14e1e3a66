"""`deputy bench mover` results: a published DSA sweep's figures 2, 3, 4, 6 and 7, and a table.

A published Intel DSA configuration-and-test article sweeps dsa_perf_micros
and plots throughput vs transfer size for the CPU and for synchronous /
asynchronous offload with the improvement over the CPU (fig. 2), vs batch
size (3), vs work-queue size (4), with latency (6) and vs the number of
engines (7). The same questions are asked of deputy's mover here, from
`--out` documents only: every row becomes a flat record, and each figure
puts one parameter on x and lets series.group() turn whatever else varies
into labelled series.

Wait modes are named as that article names DSA modes: spin is synchronous
offload, pause/yield/block are asynchronous (dsa_perf_micros' -x 0x100,
umwait, maps to block).
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Sequence

from matplotlib.figure import Figure

from deputy_tools.figures import decorate, grouped_bars, legend, lines, new_axes
from deputy_tools.registry import BenchKind, FigureDef, NotApplicable, register
from deputy_tools.results import ResultDoc, need
from deputy_tools.series import Grouping, Param, group
from deputy_tools.tables import Column, Table
from deputy_tools.units import format_size

CPU = "CPU"
MODE_BY_WAIT = {"spin": "sync (spin)", "pause": "async (pause)", "yield": "async (yield)",
                "block": "async (block)"}
_MODE_ORDER = [CPU, *MODE_BY_WAIT.values()]


def _mode_order(mode: str) -> tuple[int, str]:
    return (_MODE_ORDER.index(mode) if mode in _MODE_ORDER else len(_MODE_ORDER), mode)


def _plural(word: str) -> Callable[[Any], str]:
    return lambda n: f"{n} {word}{'' if n == 1 else 's'}"


OP = Param("op")
MODE = Param("mode", order=_mode_order)
BATCH = Param("batch", "BS")
QUEUE_DEPTH = Param("queue_depth", "QD")
WQ_SIZE = Param("wq_size", "WQS")
WQ_MODE = Param("wq_mode", fmt=lambda v: f"{v} WQ")
ENGINES = Param("engines", fmt=_plural("engine"))
BUFFERS = Param("buffers", fmt=_plural("buffer"))
STORES = Param("stores", fmt=lambda v: f"{v} stores")
SIZE = Param("size", "TS", fmt=format_size)
NODES = Param("nodes", fmt=lambda v: f"[{v}]")  # -S: NUMA nodes of source, destination
# Order matters: series labels list parameters in this order, and of two
# parameters that move together (fig. 4 sets QD = buffers = WQS) the first leads.
PARAMS = [OP, MODE, NODES, BATCH, WQ_SIZE, QUEUE_DEPTH, WQ_MODE, ENGINES, BUFFERS, STORES, SIZE]

GBPS = "Throughput (GB/s)"
SIZE_LABEL = "Transfer size (bytes)"


def records(docs: Sequence[ResultDoc]) -> list[dict[str, Any]]:
    """One flat record per result row. CPU rows carry no queue/engine settings:
    those do not apply to the calling core, and leaving them out lets CPU rows
    from different runs form one "CPU" series."""
    out = []
    for d in docs:
        config = need(d.doc, "config", d)
        host = d.doc.get("host") if isinstance(d.doc.get("host"), dict) else {}
        busy, cpus = d.doc.get("busy_threads"), host.get("cpus")
        op = need(config, "op", d, "config")
        if op == "reduce":
            op = f"reduce {config.get('dtype', '?')} {config.get('redop', '?')}"
        for i, row in enumerate(need(d.doc, "results", d)):
            where = f"results[{i}]"
            on_cpu = need(row, "mode", d, where) == "cpu"
            mover_only = (lambda key: None if on_cpu else need(config, key, d, "config"))
            out.append({
                "op": op,
                "mode": CPU if on_cpu else MODE_BY_WAIT.get(need(config, "wait", d, "config"),
                                                            str(config["wait"])),
                "size": need(row, "transfer_size", d, where),
                "batch": mover_only("batch"),
                "queue_depth": mover_only("queue_depth"),
                "wq_size": mover_only("wq_size"),
                "wq_mode": mover_only("wq_mode"),
                "engines": mover_only("engines"),
                "buffers": need(config, "buffers", d, "config"),
                "stores": config.get("stores"),
                "nodes": config.get("numa_nodes") or None,
                "run_depth": config.get("queue_depth"),  # also for CPU rows (not a series key)
                "gbps": need(row, "gbps", d, where),
                "latency_ns": need(row, "latency_ns_median", d, where),
                "latency_p99_ns": row.get("latency_ns_p99"),
                "cpu_share": row.get("cpu_share"),
                "kops": row.get("kops"),
                "verified": bool(row.get("verified", False)),
                "contended": (not on_cpu and isinstance(busy, int) and isinstance(cpus, int)
                              and busy > cpus),
                "file": d.path.name,
            })
    return out


def cpu_baselines(recs: Sequence[dict[str, Any]]) -> dict[tuple, float]:
    """Median CPU GB/s per (op, size, buffers, stores): what a mover row is compared with."""
    samples: dict[tuple, list[float]] = {}
    for r in recs:
        if r["mode"] == CPU:
            samples.setdefault(_baseline_key(r), []).append(r["gbps"])
    return {k: statistics.median(v) for k, v in samples.items()}


def _baseline_key(r: dict[str, Any]) -> tuple:
    return (r["op"], r["size"], r["buffers"], r["stores"])


def _subtitle(grouping: Grouping, recs: Sequence[dict[str, Any]]) -> str:
    text = grouping.subtitle()
    contended = sum(1 for r in recs if r["contended"])
    if contended:
        text += (f"\nnote: {contended} of {len(recs)} points ran more busy threads than CPUs "
                 "(contention-bound)")
    return text


def _vs(x: Param, xlabel: str, title: str,
        include_cpu: bool) -> Callable[[Sequence[ResultDoc]], Figure]:
    """Throughput as grouped bars against `x` (the DSA sweep's figures 2a/b, 3, 4 and 7)."""
    def build(docs: Sequence[ResultDoc]) -> Figure:
        recs = [r for r in records(docs) if include_cpu or r["mode"] != CPU]
        grouping = group(recs, x, PARAMS)
        if len(grouping.xs) < 2:
            raise NotApplicable(f"needs two or more values of {x.key} (found {len(grouping.xs)})")
        fig, ax = new_axes()
        grouped_bars(ax, [x.fmt(v) for v in grouping.xs],
                     grouping.values(recs, lambda r: r["gbps"]))
        decorate(ax, title, _subtitle(grouping, recs), xlabel, GBPS)
        legend(ax)
        return fig
    return build


def improvement_vs_size(docs: Sequence[ResultDoc]) -> Figure:
    """DSA sweep fig. 2c/d: (mover - CPU) / CPU per size, for each mover configuration."""
    recs = records(docs)
    baselines = cpu_baselines(recs)
    movers = [dict(r, improvement=100.0 * (r["gbps"] / baselines[_baseline_key(r)] - 1.0))
              for r in recs if r["mode"] != CPU and baselines.get(_baseline_key(r))]
    if not movers:
        raise NotApplicable("needs CPU rows (-m or --compare cpu) and mover rows at the same sizes")
    grouping = group(movers, SIZE, PARAMS)
    fig, ax = new_axes()
    grouped_bars(ax, [SIZE.fmt(v) for v in grouping.xs],
                 grouping.values(movers, lambda r: r["improvement"]))
    ax.axhline(0.0, color="black", linewidth=0.8)
    decorate(ax, "Mover throughput improvement over the calling core (CPU)",
             _subtitle(grouping, movers), SIZE_LABEL, "Improvement over CPU (%)")
    legend(ax)
    return fig


def latency_vs_size(docs: Sequence[ResultDoc]) -> Figure:
    """DSA sweep fig. 6 style: throughput bars and median-latency lines on a log axis.

    As published, the bars are throughput at full queue depth and the lines
    latency at queue depth 1 (-q1), when the runs hold both; runs of one
    depth give both from the same rows."""
    recs = records(docs)
    # Runs of both kinds: bars from the deep ones, lines from -q1 (CPU rows
    # too, by the depth their run was given).
    split = {r["run_depth"] == 1 for r in recs} == {True, False}
    params = [p for p in PARAMS if not (split and p is QUEUE_DEPTH)]
    bar_recs = [r for r in recs if r["run_depth"] != 1] if split else recs
    line_recs = [r for r in recs if r["run_depth"] == 1] if split else recs
    bar_grouping = group(bar_recs, SIZE, params)
    line_grouping = group(line_recs, SIZE, params)
    if len(bar_grouping.xs) < 2:
        raise NotApplicable(f"needs two or more transfer sizes (found {len(bar_grouping.xs)})")
    if not set(line_grouping.xs) <= set(bar_grouping.xs):
        raise NotApplicable("the -q1 runs have sizes the throughput runs do not")
    fig, ax = new_axes(11.0, 5.5)
    # A lone series has no label of its own; still say which is which.
    bars = {label or "throughput": v
            for label, v in bar_grouping.values(bar_recs, lambda r: r["gbps"]).items()}
    centres = dict(zip(bar_grouping.xs,
                       grouped_bars(ax, [SIZE.fmt(v) for v in bar_grouping.xs], bars)))
    twin = ax.twinx()
    latency = {label or "median": v
               for label, v in line_grouping.values(line_recs,
                                                    lambda r: r["latency_ns"] / 1000.0).items()}
    lines(twin, [centres[x] for x in line_grouping.xs], latency, style="--o",
          label_suffix=" latency")
    grouping = bar_grouping
    twin.set_yscale("log")
    twin.set_ylabel("Median latency (µs, log scale)")
    decorate(ax, "Mover throughput (bars) and median latency (lines) vs transfer size",
             _subtitle(grouping, recs), SIZE_LABEL, GBPS)
    legend(ax, [twin])
    return fig


FIGURES = (
    FigureDef("throughput_vs_size",
              "GB/s per transfer size, CPU vs sync/async (DSA sweep fig. 2a/b, 3, 4)",
              _vs(SIZE, SIZE_LABEL, "Mover throughput vs transfer size", include_cpu=True)),
    FigureDef("improvement_vs_size", "mover over CPU, % per transfer size (DSA sweep fig. 2c/d)",
              improvement_vs_size),
    FigureDef("throughput_vs_batch", "GB/s per batch size (DSA sweep fig. 3)",
              _vs(BATCH, "Batch size (descriptors per batch)", "Mover throughput vs batch size",
                  include_cpu=False)),
    FigureDef("throughput_vs_wq_size", "GB/s per work-queue size (DSA sweep fig. 4)",
              _vs(WQ_SIZE, "Work queue size (entries)", "Mover throughput vs work queue size",
                  include_cpu=False)),
    FigureDef("throughput_vs_queue_depth", "GB/s per queue depth (outstanding submissions)",
              _vs(QUEUE_DEPTH, "Queue depth (outstanding submissions)",
                  "Mover throughput vs queue depth", include_cpu=False)),
    FigureDef("throughput_vs_engines", "GB/s per number of engines (DSA sweep fig. 7)",
              _vs(ENGINES, "Engines (worker threads)", "Mover throughput vs engines",
                  include_cpu=False)),
    FigureDef("latency_vs_size", "GB/s bars and median latency lines per size (DSA sweep fig. 6)",
              latency_vs_size),
)


def _opt(spec: str) -> Callable[[Any], str]:
    return lambda v: format(v, spec)


COLUMNS = [
    Column("op", "op", collapsible=True),
    Column("mode", "mode"),
    Column("batch", "batch", numeric=True, collapsible=True),
    Column("wq_size", "WQ size", numeric=True, collapsible=True),
    Column("queue_depth", "queue depth", numeric=True, collapsible=True),
    Column("wq_mode", "WQ", collapsible=True),
    Column("engines", "engines", numeric=True, collapsible=True),
    Column("buffers", "buffers", numeric=True, collapsible=True),
    Column("stores", "stores", collapsible=True),
    Column("transfer_size", "size", format_size, numeric=True),
    Column("gbps", "GB/s", _opt(".3f"), numeric=True),
    Column("latency_ns_median", "latency median (ns)", _opt(".0f"), numeric=True),
    Column("latency_ns_p99", "latency p99 (ns)", _opt(".0f"), numeric=True),
    Column("cpu_share", "caller CPU (%)", lambda v: f"{100.0 * v:.1f}", numeric=True),
    Column("kops", "kops/s", _opt(".1f"), numeric=True),
    Column("vs_cpu", "vs CPU", lambda v: f"{v:.2f}x", numeric=True),
    Column("verified", "verified", lambda v: "yes" if v else "NO"),
]


def _row_order(r: dict[str, Any]) -> tuple:
    return tuple((0,) if r[p.key] is None else (1, p.order(r[p.key])) for p in PARAMS)


def tables(docs: Sequence[ResultDoc]) -> list[Table]:
    """Every row, grouped by configuration then size; "vs CPU" against the CPU baseline."""
    recs = records(docs)
    baselines = cpu_baselines(recs)
    rows = []
    for r in sorted(recs, key=_row_order):  # sorted() is stable: files keep their order
        base = baselines.get(_baseline_key(r)) if r["mode"] != CPU else None
        rows.append([r["op"], r["mode"], r["batch"], r["wq_size"], r["queue_depth"], r["wq_mode"],
                     r["engines"], r["buffers"], r["stores"], r["size"], r["gbps"],
                     r["latency_ns"], r["latency_p99_ns"], r["cpu_share"], r["kops"],
                     r["gbps"] / base if base else None, r["verified"]])
    note = ""
    contended = sum(1 for r in recs if r["contended"])
    if contended:
        note = (f"{contended} of {len(recs)} rows ran more busy threads than CPUs "
                "(contention-bound).")
    return [Table(title="mover", columns=COLUMNS, rows=rows, note=note)]


KIND = register(BenchKind(name="mover", figures=FIGURES, tables=tables))
