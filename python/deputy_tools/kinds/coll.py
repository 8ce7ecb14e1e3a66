"""`deputy bench coll` results: deputy's collectives against MPI's and a ring allreduce.

The published BlueField offload results measure non-blocking collectives
the OSU way (Overall, Compute, Pure Comm., Overlap(%)); a published RoCEv2
AllReduce article tabulates MPI's allreduce against a ring allreduce on MPI
point-to-point from 128 B to 2 GiB; nccl-tests adds algbw / busbw, and the
host CPU time per operation is what offload is for. The same questions are
asked of deputy here, from `--out` documents only (schema:
tools/bench/coll/report.cc and allreduce_table.cc, docs/coll-bench.md):
every result row becomes a flat record, each figure puts the message size
on x and draws one line per implementation (deputy, MPI, ring); anything
else that varies among the documents (op, memory mode, compute, wait
mode, ...) joins the label. The agent's placement is no benchmark flag: it
comes from the sweep's "sweep" object (a `placement` axis, as in the
coll_offload spec), so shared and own-core runs are never averaged together.

Times are as the benchmark measured them: mean over iterations, then over
ranks. For non-blocking ops "time" is OSU's Pure Comm. (post + wait, no
compute). Allreduce-table rows (`--allreduce-table`: barrier, 3 x
(allreduce; barrier), elapsed / 3 on rank 0) are another measurement and
only appear in the allreduce table and its figure.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from deputy_tools.figures import colour, decorate, new_axes
from deputy_tools.registry import BenchKind, FigureDef, NotApplicable, register
from deputy_tools.results import ResultDoc, ResultError, need
from deputy_tools.series import Grouping, Param, group
from deputy_tools.tables import Column, Table
from deputy_tools.units import format_size

IMPL_ORDER = ("deputy", "mpi", "ring")
IMPL_NAMES = {"deputy": "deputy", "mpi": "MPI", "ring": "ring"}
_IMPL_COLOURS = {"deputy": "tab:blue", "mpi": "tab:orange", "ring": "tab:green"}
OP_ORDER = ("allreduce", "iallreduce", "reduce_scatter", "ireduce_scatter", "allgather",
            "iallgather", "alltoall", "ialltoall", "alltoallv", "ialltoallv", "bcast", "ibcast",
            "barrier", "ibarrier", "reduce", "ireduce", "gather", "igather", "scatter",
            "iscatter", "scan", "iscan", "exscan", "iexscan")
MEMORY_ORDER = ("mapped", "direct", "staged")
# The agent on the ranks' CPUs first, then on a core of its own (docs/coll-bench.md).
PLACEMENT_ORDER = ("shared", "own-core")
TABLE_MODE = "allreduce-table"
TABLE_ORDER = ("mpi", "ring", "deputy")
# Line styles for series that share an implementation (memory mapped vs direct, ...).
_DASHES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P")


def _index(order: Sequence[str]) -> Callable[[Any], tuple[int, str]]:
    return lambda v: (order.index(v) if v in order else len(order), str(v))


def impl_name(impl: str) -> str:
    return IMPL_NAMES.get(impl, impl)


def _wait_name(wait: str) -> str:
    return f"wait {wait}" if wait else "wait default"


def _plural(word: str) -> Callable[[Any], str]:
    return lambda n: f"{n} {word}{'' if n == 1 else 's'}"


# Series parameters, in label order. The implementation is always a series
# (it is what the figures compare); the rest join the label only when they vary.
IMPL = Param("impl", fmt=impl_name, order=_index(IMPL_ORDER), may_follow_x=False)
OP = Param("op", order=_index(OP_ORDER), may_follow_x=False)
PLACEMENT = Param("placement", "placement", order=_index(PLACEMENT_ORDER), may_follow_x=False)
DTYPE = Param("dtype", may_follow_x=False)
REDOP = Param("redop", may_follow_x=False)
MEMORY = Param("memory", "memory", order=_index(MEMORY_ORDER), may_follow_x=False)
COMPUTE = Param("compute", "compute", may_follow_x=False)
TESTS = Param("test_calls", fmt=_plural("test call"), may_follow_x=False)
WAIT = Param("wait", fmt=_wait_name, may_follow_x=False)
RANKS = Param("ranks", fmt=_plural("rank"), may_follow_x=False)
SIZE = Param("size", fmt=format_size)
PARAMS = [IMPL, OP, PLACEMENT, DTYPE, REDOP, MEMORY, COMPUTE, TESTS, WAIT, RANKS]

SIZE_LABEL = "Message size (bytes, per rank, log)"

_METRICS = ("time_us", "time_max_us", "time_p50_us", "time_p99_us", "algbw_gbps", "busbw_gbps", "wrong", "overall_us",
            "compute_us", "coll_init_us", "test_us", "wait_us", "pure_comm_us", "overlap_pct",
            "host_cpu_us", "poll_cpu_us", "polls_per_op", "wait_cpu_us", "time_vs_mpi",
            "overall_vs_mpi")


def placement_of(doc: ResultDoc) -> str | None:
    """The `placement` coordinate the sweep wrote into the document, else the placement the
    benchmark found (config.placement: its agent's engines against the ranks' CPUs), or None."""
    sweep = doc.doc.get("sweep")
    point = sweep.get("point") if isinstance(sweep, dict) else None
    value = point.get("placement") if isinstance(point, dict) else None
    if value is None and isinstance(doc.doc.get("config"), dict):
        value = doc.doc["config"].get("placement")
    return value if isinstance(value, str) else None


def records(docs: Sequence[ResultDoc]) -> list[dict[str, Any]]:
    """One flat record per result row (skipped rows included, their metrics None).

    Settings that do not apply to a row are None, so they neither split nor
    label its series: compute and test calls for blocking ops, the reduction
    for ops that move data only."""
    out = []
    for d in docs:
        config = need(d.doc, "config", d)
        host = d.doc.get("host") if isinstance(d.doc.get("host"), dict) else {}
        cpus, local = host.get("cpus"), config.get("local_ranks")
        impls = config.get("implementations") or []
        # The banner's note: ranks and the agent's engine on fewer cores.
        busy = (local + (1 if "deputy" in impls else 0)) if isinstance(local, int) else None
        rows = need(d.doc, "results", d)
        if not isinstance(rows, list):
            raise ResultError(f"{d.path}: coll result whose 'results' is not a list")
        for i, row in enumerate(rows):
            where = f"results[{i}]"
            nonblocking = bool(row.get("nonblocking", False))
            skipped = row.get("skipped")
            rec = {
                "impl": need(row, "impl", d, where),
                "op": need(row, "op", d, where),
                "mode": row.get("mode") or "osu",
                "nonblocking": nonblocking,
                "size": need(row, "size", d, where),
                "count": need(row, "count", d, where),
                "dtype": need(row, "dtype", d, where),
                "redop": row.get("redop") or None,
                "memory": need(config, "memory", d, "config"),
                "placement": placement_of(d),
                "compute": need(config, "compute", d, "config") if nonblocking else None,
                "test_calls": (need(config, "num_test_calls", d, "config") if nonblocking
                               else None),
                "wait": config.get("wait") or "",
                "ranks": need(config, "ranks", d, "config"),
                "iterations": row.get("iterations"),
                "warmup": row.get("warmup"),
                "skipped": skipped or None,
                "contended": (isinstance(busy, int) and isinstance(cpus, int) and busy > cpus
                              and row.get("impl") == "deputy"),
                "busy": busy,
                "cpus": cpus,
                "file": d.path.name,
            }
            for key in _METRICS:
                rec[key] = None if skipped else row.get(key)
            if not skipped:
                need(row, "time_us", d, where)
            out.append(rec)
    return out


def _measured(docs: Sequence[ResultDoc], table: bool = False) -> list[dict[str, Any]]:
    return [r for r in records(docs)
            if r["skipped"] is None and (r["mode"] == TABLE_MODE) == table]


def _contention_note(recs: Sequence[dict[str, Any]]) -> str:
    hit = [r for r in recs if r["contended"]]
    if not hit:
        return ""
    return (f"note: {hit[0]['busy']} busy processes (ranks + the agent's engine) on "
            f"{hit[0]['cpus']} CPUs: deputy's figures are contention-bound")


def _subtitle(grouping: Grouping, recs: Sequence[dict[str, Any]], extra: str = "") -> str:
    parts = [grouping.subtitle(), extra, _contention_note(recs)]
    return "\n".join(p for p in parts if p)


def _variant(grouping: Grouping, r: dict[str, Any]) -> str:
    """The series label without the implementation: "memory direct", or ""."""
    return ", ".join(p.show(r[p.key]) for p in grouping.series
                     if p is not IMPL and r.get(p.key) is not None)


def _styles(grouping: Grouping, recs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Colour by implementation; the n-th series of one implementation gets the n-th dash
    and marker, so memory mapped vs direct (say) reads the same for deputy and MPI."""
    first: dict[str, dict[str, Any]] = {}
    for r in recs:
        first.setdefault(grouping.label(r), r)
    styles: dict[str, dict[str, Any]] = {}
    variants: dict[str, int] = {}
    for label in grouping.labels(recs):
        r = first[label]
        k = variants.setdefault(_variant(grouping, r), len(variants))
        c = _IMPL_COLOURS.get(r["impl"], colour(len(styles), 10))
        styles[label] = {"color": c, "linestyle": _DASHES[k % len(_DASHES)],
                         "marker": _MARKERS[k % len(_MARKERS)]}
    return styles


def size_ticks(xs: Sequence[int], most: int = 14) -> list[int]:
    """The measured sizes to label: at most about `most`, and no two closer than a factor
    of 2.5 on the log axis (runs of 8:16m by 4 and 1m:64m by 4 together: 512K and 1M)."""
    xs = sorted(x for x in xs if x > 0)
    if not xs:
        return []
    ratio = max(2.5, (xs[-1] / xs[0]) ** (1.0 / most))
    shown = [xs[0]]
    for x in xs[1:]:
        if x >= shown[-1] * ratio:
            shown.append(x)
    return shown


def _size_axis(ax: Axes, xs: Sequence[int]) -> None:
    """Log-2 x axis ticked at measured sizes (see size_ticks)."""
    ax.set_xscale("log", base=2)
    shown = size_ticks(xs)
    ax.set_xticks(shown, [format_size(x) for x in shown])
    ax.minorticks_off()


def _draw(ax: Axes, xs: Sequence[int], series: dict[str, list[float]],
          styles: dict[str, dict[str, Any]], log_y: bool) -> None:
    for label, values in series.items():
        # Log axes cannot show zero; NaN where this series has no point at that size.
        points = [(x, v) for x, v in zip(xs, values)
                  if v == v and (v > 0 or not log_y)]
        ax.plot([x for x, _ in points], [v for _, v in points], label=label or "_nolegend_",
                **{"markersize": 5, "linewidth": 1.5, **styles[label]})
    if log_y:
        ax.set_yscale("log")
        ax.grid(axis="y", which="minor", linestyle=":", linewidth=0.3, alpha=0.5)
    ax.grid(axis="x", which="major", linestyle=":", linewidth=0.5, alpha=0.7)


def _legend(ax: Axes, count: int) -> None:
    if count > 4:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    elif count:
        ax.legend(fontsize="small")


def _vs_size(metric: str, title: str, ylabel: str, *, nonblocking: bool = False,
             log_y: bool = True, extra: str = "", ylim: tuple[float, float] | None = None,
             ) -> Callable[[Sequence[ResultDoc]], Figure]:
    """`metric` against message size, one line per implementation (x other settings)."""
    def build(docs: Sequence[ResultDoc]) -> Figure:
        recs = [r for r in _measured(docs) if r[metric] is not None
                and (r["nonblocking"] or not nonblocking)]
        if not recs:
            raise NotApplicable("no non-blocking results (--op iallreduce, ialltoall, ...)"
                                if nonblocking else "no measured rows (every row was skipped)")
        grouping = group(recs, SIZE, PARAMS)
        if len(grouping.xs) < 2:
            raise NotApplicable(f"needs two or more message sizes (found {len(grouping.xs)})")
        values = grouping.values(recs, lambda r: r[metric])
        styles = _styles(grouping, recs)
        fig, ax = new_axes(10.5, 5.8)
        _draw(ax, grouping.xs, values, styles, log_y)
        _size_axis(ax, grouping.xs)
        if ylim is not None:
            ax.set_ylim(*ylim)
        decorate(ax, title, _subtitle(grouping, recs, extra), SIZE_LABEL, ylabel)
        _legend(ax, len(values))
        return fig
    return build


_TIME_NOTE = ("time: mean over iterations, then ranks, of one call (OSU); "
              "non-blocking ops: Pure Comm. = post + wait, nothing in between")
_OVERLAP_NOTE = "Overlap = max(0, 100 - 100 x (Overall - Compute) / Pure Comm.) (OSU)"
_CPU_NOTE = ("the calling thread's CPU time inside post, test and wait "
             "(CLOCK_THREAD_CPUTIME_ID, clock cost subtracted)")


def allreduce_table_figure(docs: Sequence[ResultDoc]) -> Figure:
    """The allreduce table as grouped bars: MPI's allreduce, the ring, deputy, per size."""
    recs = _measured(docs, table=True)
    if not recs:
        raise NotApplicable("no allreduce-table rows (--allreduce-table)")
    grouping = group(recs, SIZE, PARAMS)
    first: dict[str, dict[str, Any]] = {}
    for r in recs:
        first.setdefault(grouping.label(r), r)
    # The table's column order: Native, Ring, then deputy.
    series = dict(sorted(grouping.values(recs, lambda r: r["time_us"]).items(),
                         key=lambda item: _index(TABLE_ORDER)(first[item[0]]["impl"])))
    styles = _styles(grouping, recs)
    names = {"mpi": "Native Allreduce (MPI)", "ring": "Ring Allreduce",
             "deputy": "deputy Allreduce"}
    fig, ax = new_axes(max(10.0, 0.9 * len(grouping.xs) + 4), 5.8)
    count = max(len(series), 1)
    width = 0.8 / count
    for i, (label, values) in enumerate(series.items()):
        r = first[label]
        shown = ", ".join(t for t in (names.get(r["impl"], r["impl"]),
                                      _variant(grouping, r)) if t)
        offsets = [c - 0.4 + width * (i + 0.5) for c in range(len(grouping.xs))]
        kept = [(o, v) for o, v in zip(offsets, values) if v == v and v > 0]
        ax.bar([o for o, _ in kept], [v for _, v in kept], width=width * 0.9, label=shown,
               color=styles[label]["color"],
               hatch=None if styles[label]["linestyle"] == "-" else "//",
               edgecolor="white")
    ax.set_xticks(range(len(grouping.xs)), [format_size(x) for x in grouping.xs])
    ax.set_yscale("log")
    decorate(ax, "Allreduce table: Native (MPI) vs Ring vs deputy",
             _subtitle(grouping, recs, "barrier, then 3 x (allreduce; barrier), elapsed / 3 "
                                       "on rank 0"),
             "Data size (bytes, float32, log steps of 4)", "Time per allreduce (µs, log)")
    ax.grid(axis="y", which="minor", linestyle=":", linewidth=0.3, alpha=0.5)
    _legend(ax, len(series))
    return fig


FIGURES = (
    FigureDef("time_vs_size", "time per operation (µs) per size: deputy vs MPI vs ring, log-log",
              _vs_size("time_us", "Collective time vs message size",
                       "Time per operation (µs, log)", extra=_TIME_NOTE)),
    FigureDef("busbw_vs_size", "bus bandwidth (GB/s, nccl-tests) per size",
              _vs_size("busbw_gbps", "Bus bandwidth vs message size",
                       "busbw (GB/s = 1e9 B/s, log)",
                       extra="busbw = size / time x bus factor (nccl-tests; allreduce "
                             "2(n-1)/n)")),
    FigureDef("overlap_vs_size", "OSU overlap (%) per size, non-blocking ops: deputy vs MPI",
              _vs_size("overlap_pct", "Communication/computation overlap vs message size",
                       "Overlap (%)", nonblocking=True, log_y=False, extra=_OVERLAP_NOTE,
                       ylim=(-3.0, 103.0))),
    FigureDef("overall_vs_size", "OSU Overall time (µs) per size, non-blocking ops",
              _vs_size("overall_us", "Post + compute + wait (OSU Overall) vs message size",
                       "Overall (µs, log)", nonblocking=True,
                       extra="compute lasts one Pure Comm. time of the same implementation")),
    FigureDef("host_cpu_vs_size", "host CPU time per operation (µs) per size, non-blocking ops",
              _vs_size("host_cpu_us", "Host CPU time per operation vs message size",
                       "Host CPU per operation (µs, log)", nonblocking=True, extra=_CPU_NOTE)),
    FigureDef("allreduce_table", "the Native/Ring(/deputy) allreduce table as grouped bars",
              allreduce_table_figure),
)


# Tables


def _f(spec: str) -> Callable[[Any], str]:
    return lambda v: format(v, spec)


def _ratio(v: float) -> str:
    return f"{v:.2f}x"


_SETTINGS = [
    Column("op", "op", collapsible=True),
    Column("dtype", "dtype", collapsible=True),
    Column("redop", "redop", collapsible=True),
    Column("memory", "memory", collapsible=True),
    Column("placement", "placement", collapsible=True),
]
_SETTINGS_TAIL = [
    Column("wait", "wait", lambda v: v or "default", collapsible=True),
    Column("ranks", "ranks", numeric=True, collapsible=True),
    Column("size", "size (B)", numeric=True),
    Column("count", "count", numeric=True),
    Column("impl", "impl"),
]

BLOCKING_COLUMNS = [
    *_SETTINGS, *_SETTINGS_TAIL,
    Column("time_us", "time (µs)", _f(".2f"), numeric=True),
    Column("time_max_us", "slowest rank (µs)", _f(".2f"), numeric=True),
    Column("algbw_gbps", "algbw (GB/s)", _f(".3f"), numeric=True),
    Column("busbw_gbps", "busbw (GB/s)", _f(".3f"), numeric=True),
    Column("wrong", "#wrong", numeric=True),
    Column("time_vs_mpi", "vs MPI", _ratio, numeric=True),
    Column("skipped", "skipped", optional=True),
]

NONBLOCKING_COLUMNS = [
    *_SETTINGS,
    Column("compute", "compute", collapsible=True),
    Column("num_test_calls", "test calls", numeric=True, collapsible=True),
    *_SETTINGS_TAIL,
    Column("overall_us", "Overall (µs)", _f(".2f"), numeric=True),
    Column("compute_us", "Compute (µs)", _f(".2f"), numeric=True),
    Column("coll_init_us", "Coll. Init (µs)", _f(".2f"), numeric=True),
    Column("test_us", "Test (µs)", _f(".2f"), numeric=True),
    Column("wait_us", "Wait (µs)", _f(".2f"), numeric=True),
    Column("pure_comm_us", "Pure Comm. (µs)", _f(".2f"), numeric=True),
    Column("overlap_pct", "Overlap (%)", _f(".2f"), numeric=True),
    Column("host_cpu_us", "Host CPU (µs)", _f(".2f"), numeric=True),
    # Results written before the Poll and Wait CPU columns existed have none.
    Column("poll_cpu_us", "Poll CPU (µs)", _f(".2f"), numeric=True, optional=True),
    Column("wait_cpu_us", "Wait CPU (µs)", _f(".2f"), numeric=True, optional=True),
    Column("algbw_gbps", "algbw (GB/s)", _f(".3f"), numeric=True),
    Column("busbw_gbps", "busbw (GB/s)", _f(".3f"), numeric=True),
    Column("wrong", "#wrong", numeric=True),
    Column("overall_vs_mpi", "Overall vs MPI", _ratio, numeric=True),
    Column("skipped", "skipped", optional=True),
]

# The allreduce table's five columns, as the published ring-allreduce
# program printed them ("%20.1fus").
TABLE_COLUMNS = [
    Column("data_size_bytes", "DataSize(Bytes)", numeric=True),
    Column("num_of_float", "Num of float", numeric=True),
    Column("native_allreduce_us", "Native Allreduce", lambda v: f"{v:.1f}us", numeric=True),
    Column("ring_allreduce_us", "Ring Allreduce", lambda v: f"{v:.1f}us", numeric=True),
    Column("deputy_allreduce_us", "deputy Allreduce", lambda v: f"{v:.1f}us", numeric=True),
]

_BLOCKING_NOTE = ("time: mean over iterations, then over ranks, of one call, a barrier between "
                  "calls (OSU); algbw = size / time; busbw = algbw x bus factor (nccl-tests); "
                  "vs MPI: time / MPI's time (below 1: faster).")
_NONBLOCKING_NOTE = ("OSU's method: Pure Comm. = post + wait; Overall = post + compute (as long "
                     "as Pure Comm.) + wait; Overlap(%) = max(0, 100 - 100 x (Overall - Compute) "
                     "/ Pure Comm.); Host CPU: the caller's CPU time inside the post and the "
                     "test that completes, per operation; Poll CPU: per test that found it not "
                     "done; Wait CPU: inside the wait of the Overall loop; "
                     "algbw/busbw from Pure Comm.; Overall vs MPI: Overall / MPI's.")
_TABLE_NOTE = ("Allreduce table: barrier, then 3 x (allreduce; barrier), elapsed / 3 on rank 0; "
               "Native = MPI_Allreduce, Ring = a ring allreduce on MPI point-to-point.")


def _row_order(r: dict[str, Any]) -> tuple:
    keyed = [OP, PLACEMENT, DTYPE, REDOP, MEMORY, COMPUTE, TESTS, WAIT, RANKS, SIZE, IMPL]
    return (*((0,) if r[p.key] is None else (1, p.order(r[p.key])) for p in keyed), r["file"])


def _note(base: str, recs: Sequence[dict[str, Any]]) -> str:
    hit = [r for r in recs if r["contended"]]
    if hit:
        base += (f"\n\nThe {len(hit)} deputy rows of {len(recs)} ran {hit[0]['busy']} busy "
                 f"processes (ranks + the agent's engine) on {hit[0]['cpus']} CPUs "
                 "(contention-bound).")
    return base


def _settings(r: dict[str, Any]) -> list[Any]:
    return [r["op"], r["dtype"], r["redop"], r["memory"], r["placement"]]


def _tail(r: dict[str, Any]) -> list[Any]:
    return [r["wait"], r["ranks"], r["size"], r["count"], r["impl"]]


def _allreduce_tables(recs: Sequence[dict[str, Any]]) -> list[Table]:
    """One five-column table per configuration (ranks, memory, wait, file set)."""
    configs: dict[tuple, dict[int, dict[str, Any]]] = {}
    for r in sorted(recs, key=_row_order):
        key = (r["ranks"], r["memory"], r["wait"], r["dtype"])
        row = configs.setdefault(key, {}).setdefault(r["size"], {"count": r["count"]})
        row[r["impl"]] = r["time_us"]
    tables = []
    for (ranks, memory, wait, dtype), rows in configs.items():
        title = (f"coll: allreduce table ({ranks} ranks, {dtype}, memory {memory}, "
                 f"{_wait_name(wait)})")
        body = [[size, row["count"], row.get("mpi"), row.get("ring"), row.get("deputy")]
                for size, row in sorted(rows.items())]
        tables.append(Table(title=title, columns=TABLE_COLUMNS, rows=body, note=_TABLE_NOTE))
    return tables


def tables(docs: Sequence[ResultDoc]) -> list[Table]:
    """Blocking rows (nccl-tests columns), non-blocking rows (OSU's), the allreduce table."""
    recs = sorted(records(docs), key=_row_order)
    blocking = [r for r in recs if r["mode"] != TABLE_MODE and not r["nonblocking"]]
    nonblocking = [r for r in recs if r["mode"] != TABLE_MODE and r["nonblocking"]]
    table = [r for r in recs if r["mode"] == TABLE_MODE and r["skipped"] is None]
    out = []
    if blocking:
        rows = [[*_settings(r), *_tail(r), r["time_us"], r["time_max_us"], r["algbw_gbps"],
                 r["busbw_gbps"], r["wrong"], r["time_vs_mpi"], r["skipped"]] for r in blocking]
        out.append(Table(title="coll: blocking collectives", columns=BLOCKING_COLUMNS, rows=rows,
                         note=_note(_BLOCKING_NOTE, blocking)))
    if nonblocking:
        rows = [[*_settings(r), r["compute"], r["test_calls"], *_tail(r), r["overall_us"],
                 r["compute_us"], r["coll_init_us"], r["test_us"], r["wait_us"],
                 r["pure_comm_us"], r["overlap_pct"], r["host_cpu_us"], r["poll_cpu_us"],
                 r["wait_cpu_us"],
                 r["algbw_gbps"], r["busbw_gbps"], r["wrong"], r["overall_vs_mpi"], r["skipped"]]
                for r in nonblocking]
        out.append(Table(title="coll: non-blocking collectives (OSU overlap)",
                         columns=NONBLOCKING_COLUMNS, rows=rows,
                         note=_note(_NONBLOCKING_NOTE, nonblocking)))
    out += _allreduce_tables(table)
    return out


KIND = register(BenchKind(name="coll", figures=FIGURES, tables=tables))
