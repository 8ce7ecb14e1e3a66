"""`deputy bench channel` results: rate and bandwidth vs size, count and buffer; DOCA's tables.

A BlueField DOCA secure-channel report times the channel for message sizes
128..1024 B, message counts 1..1000 and buffer sizes 64..1024 B, and
tabulates total time and average time per message (and send / receive
time for the buffer runs). The same questions are asked of deputy's
channel here, over each transport (shm, uds, tcp) plain and secure, from
`--out` documents only (schema: tools/bench/channel/report.cc, docs/channel.md).

One record per direction that carried messages: a one-way stream has one
(connect -> listen), a stream both ways two, a pingpong one (round trips,
timed by the connecting side). Times, as the DOCA report's tables use them:

- send time: the sender's thread, first send to last send returning;
- receive time: the receiver's thread, its start to the peer's END;
- total time: the sender's first send to the receiver's last message
  (both CLOCK_MONOTONIC on one host; a pingpong: the connecting side's
  round trips). Average per message, rate and bandwidth are per total
  time, so a receiver that starts late is counted, not hidden. A document
  holding one side only (`--peer`) falls back to that side's own time.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from deputy_tools.figures import colour, decorate
from deputy_tools.registry import BenchKind, FigureDef, NotApplicable, register
from deputy_tools.results import ResultDoc, ResultError, need
from deputy_tools.series import Grouping, Param, group
from deputy_tools.tables import Column, Table
from deputy_tools.units import format_size

TRANSPORTS = ("shm", "uds", "tcp")
_COLOURS = {"shm": "tab:blue", "uds": "tab:orange", "tcp": "tab:green"}
MODE_ORDER = ("stream one-way", "stream both ways", "pingpong")
DIRECTION_ORDER = ("connect -> listen", "listen -> connect", "round trip")


def _index(order: Sequence[str]) -> Callable[[Any], tuple[int, str]]:
    return lambda v: (order.index(v) if v in order else len(order), str(v))


def channel_name(value: tuple[str, bool]) -> str:
    transport, secure = value
    return f"{transport} + secure" if secure else transport


def _channel_order(value: tuple[str, bool]) -> tuple:
    transport, secure = value
    return (*_index(TRANSPORTS)(transport), secure)


def format_buffer(size: int) -> str:
    return "default" if size == 0 else format_size(size)


def format_count(count: int) -> str:
    return f"{count:,}"


# The series of every figure is the channel (transport x secure); anything
# else that varies among the documents joins the label, constants go to the
# subtitle (series.group).
CHANNEL = Param("channel", fmt=channel_name, order=_channel_order, may_follow_x=False)
MODE = Param("mode", order=_index(MODE_ORDER), may_follow_x=False)
DIRECTION = Param("direction", order=_index(DIRECTION_ORDER), may_follow_x=False)
SIZE = Param("size", fmt=lambda v: f"{format_size(v)}-byte messages")
COUNT = Param("count", fmt=lambda v: f"{format_count(v)} messages")
BUFFER = Param("buffer", "buffer", fmt=format_buffer)
CPUS = Param("cpus", "CPUs", fmt=lambda v: v or "not pinned")
PARAMS = [CHANNEL, MODE, DIRECTION, SIZE, COUNT, BUFFER, CPUS]

RATE = "Message rate (million messages/s, log)"
BANDWIDTH = "Bandwidth (MB/s = 10^6 bytes/s, log)"


def _sides(results: Any, d: ResultDoc, where: str) -> dict[str, Mapping[str, Any]]:
    if not isinstance(results, list):
        raise ResultError(f"{d.path}: channel result whose '{where}' is not a list")
    sides = {}
    for i, side in enumerate(results):
        sides[need(side, "role", d, f"{where}[{i}]")] = side
    return sides


def _seconds(side: Mapping[str, Any], key: str, d: ResultDoc, where: str) -> float:
    """The thread time of side["send"] or side["recv"]."""
    return need(need(side, key, d, where), "seconds", d, f"{where}.{key}")


def _verdict(sides: Sequence[Mapping[str, Any]]) -> str:
    verdicts = [str(s.get("verdict", "?")) for s in sides]
    bad = [v for v in verdicts if v != "OK"]
    return bad[0] if bad else "OK"


def _experiments(d: ResultDoc) -> list[tuple[str, bool, Any, str]]:
    """(transport, secure, results, where) of the run and of its --compare baseline."""
    config = need(d.doc, "config", d)
    secure = bool(need(config, "secure", d, "config"))
    out = [(need(config, "transport", d, "config"), secure, need(d.doc, "results", d),
            "results")]
    compare = d.doc.get("compare")
    if isinstance(compare, dict) and compare.get("results"):
        # The baseline runs the same experiment; its sides name their transport
        # ("secure+uds") should it ever differ in security.
        names = [str(s.get("transport", "")) for s in compare["results"] if isinstance(s, dict)]
        out.append((need(compare, "transport", d, "compare"),
                    any(n.startswith("secure+") for n in names) if names else secure,
                    compare["results"], "compare.results"))
    return out


def records(docs: Sequence[ResultDoc]) -> list[dict[str, Any]]:
    """One flat record per direction of each run (see the module docstring)."""
    out = []
    for d in docs:
        config = need(d.doc, "config", d)
        host = d.doc.get("host") if isinstance(d.doc.get("host"), dict) else {}
        busy, cpus = d.doc.get("busy_threads"), host.get("cpus")
        mode = need(config, "mode", d, "config")
        one_way = bool(config.get("one_way", False))
        mode_name = ("pingpong" if mode == "pingpong"
                     else "stream one-way" if one_way else "stream both ways")
        base = {
            "mode": mode_name,
            "count": need(config, "num_msgs", d, "config"),
            "buffer": need(config, "buffer_bytes", d, "config"),
            "cpus": config.get("cpus") or "",
            "contended": isinstance(busy, int) and isinstance(cpus, int) and busy > cpus,
            "file": d.path.name,
        }
        for transport, secure, results, where in _experiments(d):
            sides = _sides(results, d, where)
            here = dict(base, transport=transport, secure=secure, channel=(transport, secure))
            if mode == "pingpong":
                out += _pingpong(here, sides, d, where)
            else:
                out += _stream(here, sides, d, where)
    return out


def _stream(base: dict[str, Any], sides: dict[str, Mapping[str, Any]], d: ResultDoc,
            where: str) -> list[dict[str, Any]]:
    recs = []
    for sender_role, receiver_role in (("connect", "listen"), ("listen", "connect")):
        sender, receiver = sides.get(sender_role), sides.get(receiver_role)
        # A direction that carried nothing by plan (the quiet side of --one-way).
        planned = (sender.get("planned_send") if sender is not None
                   else receiver.get("peer_planned") if receiver is not None else 0)
        if not planned:
            continue
        w_s, w_r = f"{where}({sender_role})", f"{where}({receiver_role})"
        send_s = _seconds(sender, "send", d, w_s) if sender is not None else None
        recv_s = _seconds(receiver, "recv", d, w_r) if receiver is not None else None
        if sender is not None and receiver is not None:
            total_ns = (need(receiver, "recv_end_ns", d, w_r)
                        - need(sender, "send_start_ns", d, w_s))
        else:
            total_ns = round(1e9 * (recv_s if recv_s is not None else send_s))
        if sender is not None:
            size, count = need(sender, "msg_size", d, w_s), sender["planned_send"]
            sent = need(sender, "sent", d, w_s)
        else:  # what the receiver learnt from the peer's HELLO and END
            size, count = need(receiver, "peer_msg_size", d, w_r), receiver["peer_planned"]
            sent = need(receiver, "peer_sent", d, w_r)
        recs.append(_finish(dict(
            base,
            direction=f"{sender_role} -> {receiver_role}",
            size=size,
            count=count,
            buffer_granted=(receiver if receiver is not None else sender).get("buffer_bytes"),
            sent=sent,
            received=need(receiver, "received", d, w_r) if receiver is not None else None,
            send_s=send_s, recv_s=recv_s, total_ns=total_ns,
            p50_ns=None, p99_ns=None,
            verdict=_verdict([s for s in (sender, receiver) if s is not None]),
        )))
    return recs


def _pingpong(base: dict[str, Any], sides: dict[str, Mapping[str, Any]], d: ResultDoc,
              where: str) -> list[dict[str, Any]]:
    ping = sides.get("connect")
    if ping is None:  # the echoing side alone (--peer listen): no latency of its own
        return []
    w = f"{where}(connect)"
    latency = need(ping, "latency_ns", d, w)
    samples = latency.get("samples", 0) if isinstance(latency, dict) else 0
    send_s = _seconds(ping, "send", d, w)
    return [_finish(dict(
        base,
        direction="round trip",
        size=need(ping, "msg_size", d, w),
        count=ping.get("planned_send", base["count"]),
        buffer_granted=ping.get("buffer_bytes"),
        sent=need(ping, "sent", d, w),
        received=need(ping, "received", d, w),
        send_s=send_s, recv_s=_seconds(ping, "recv", d, w),
        total_ns=need(ping, "recv_end_ns", d, w) - need(ping, "send_start_ns", d, w),
        p50_ns=latency.get("p50") if samples else None,
        p99_ns=latency.get("p99") if samples else None,
        verdict=_verdict(list(sides.values())),
    ))]


def _finish(r: dict[str, Any]) -> dict[str, Any]:
    """Average, rate and bandwidth per total time (None where nothing was timed)."""
    n, ns = r["received"], r["total_ns"]
    ok = bool(n) and ns is not None and ns > 0
    r["avg_us"] = ns / 1000.0 / n if ok else None
    r["mpps"] = n * 1000.0 / ns if ok else None
    r["mb_per_s"] = n * r["size"] * 1000.0 / ns if ok else None
    return r


def _subtitle(grouping: Grouping, recs: Sequence[dict[str, Any]]) -> str:
    text = grouping.subtitle()
    contended = sum(1 for r in recs if r["contended"])
    if contended:
        text += (f"\nnote: {contended} of {len(recs)} points ran more busy threads than CPUs "
                 "(contention-bound)")
    return text


def _styles(grouping: Grouping, recs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Colour by transport, dashed and hollow markers for secure; the label's first record
    decides (every record of a label has one channel unless the channel is a constant)."""
    styles: dict[str, dict[str, Any]] = {}
    for r in recs:
        label = grouping.label(r)
        if label in styles:
            continue
        transport, secure = r["channel"]
        styles[label] = {"color": _COLOURS.get(transport, "tab:gray"),
                         "linestyle": "--" if secure else "-",
                         "marker": "s" if secure else "o",
                         "markerfacecolor": "white" if secure else _COLOURS.get(transport)}
    if len(styles) > len({(s["color"], s["linestyle"]) for s in styles.values()}):
        # Other parameters split a channel into several series: colours by series instead.
        for i, label in enumerate(grouping.labels(recs)):
            hollow = styles[label]["markerfacecolor"] == "white"
            styles[label] = dict(styles[label], color=colour(i, len(styles)),
                                 markerfacecolor="white" if hollow else colour(i, len(styles)))
    return styles


def _line(ax: Axes, xs: Sequence[float], values: Sequence[float], label: str,
          style: dict[str, Any], **overrides: Any) -> None:
    """A line through the x values this series has (no gap where another series has a
    point and this one none); zero cannot be drawn on a log axis and is left out."""
    points = [(x, v) for x, v in zip(xs, values) if v == v and v > 0]
    ax.plot([x for x, _ in points], [v for _, v in points], label=label or "_nolegend_",
            **{"markersize": 5, "linewidth": 1.5, **style, **overrides})


def _draw(ax: Axes, xs: Sequence[float], series: dict[str, list[float]],
          styles: dict[str, dict[str, Any]]) -> None:
    for label, values in series.items():
        _line(ax, xs, values, label, styles[label])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(axis="x", which="major", linestyle=":", linewidth=0.5, alpha=0.7)


def _size_ticks(ax: Axes, xs: Sequence[int], fmt: Callable[[int], str]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(xs), [fmt(x) for x in xs])
    ax.minorticks_off()


def _vs(x: Param, xlabel: str, title: str, ticks: Callable[[int], str] | None,
        note: str = ""):
    """Two panels against `x`: message rate (left) and bandwidth (right), one line per series."""
    def build(docs: Sequence[ResultDoc]) -> Figure:
        recs = [r for r in records(docs) if r[x.key] is not None and r[x.key] > 0
                and r["mpps"] is not None]
        grouping = group(recs, x, PARAMS)
        if len(grouping.xs) < 2:
            raise NotApplicable(f"needs two or more values of {x.key} (found {len(grouping.xs)}"
                                + (", buffer 0 = default is left out" if x is BUFFER else "")
                                + ")")
        rates = grouping.values(recs, lambda r: r["mpps"])
        if not any(sum(v == v for v in values) >= 2 for values in rates.values()):
            raise NotApplicable(f"no series has two or more values of {x.key} ({x.key} "
                                "differs only between series)")
        styles = _styles(grouping, recs)
        fig = Figure(figsize=(13.0, 5.5), layout="constrained")
        rate_ax, bw_ax = fig.subplots(1, 2)
        for ax, metric, ylabel in ((rate_ax, "mpps", RATE), (bw_ax, "mb_per_s", BANDWIDTH)):
            _draw(ax, grouping.xs, grouping.values(recs, lambda r, m=metric: r[m]), styles)
            if ticks is not None:
                _size_ticks(ax, grouping.xs, ticks)
            decorate(ax, "Message rate" if metric == "mpps" else "Bandwidth", "", xlabel, ylabel)
            ax.grid(axis="y", which="minor", linestyle=":", linewidth=0.3, alpha=0.5)
        fig.suptitle("\n".join(t for t in (title, _subtitle(grouping, recs), note) if t),
                     fontsize=11)
        handles, labels = rate_ax.get_legend_handles_labels()
        if handles:  # one legend for both panels, right of the bandwidth panel
            bw_ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                         fontsize="small")
        return fig
    return build


def latency_vs_size(docs: Sequence[ResultDoc]) -> Figure:
    """Pingpong one-way latency p50 (solid) and p99 (dotted) per message size."""
    recs = [r for r in records(docs) if r["p50_ns"] is not None]
    if not recs:
        raise NotApplicable("no pingpong results (--mode pingpong)")
    grouping = group(recs, SIZE, PARAMS)
    if len(grouping.xs) < 2:
        raise NotApplicable(f"needs two or more message sizes (found {len(grouping.xs)})")
    styles = _styles(grouping, recs)
    fig = Figure(figsize=(10.0, 5.5), layout="constrained")
    ax = fig.add_subplot()
    p50 = grouping.values(recs, lambda r: r["p50_ns"] / 1000.0)
    p99 = grouping.values(recs, lambda r: r["p99_ns"] / 1000.0)
    _draw(ax, grouping.xs, {}, styles)  # the axes' scales
    for label, values in p50.items():
        _line(ax, grouping.xs, values, f"{label} p50".strip(), styles[label])
    for label, values in p99.items():
        _line(ax, grouping.xs, values, f"{label} p99".strip(), styles[label], linestyle=":",
              marker="", linewidth=1.0)
    _size_ticks(ax, grouping.xs, format_size)
    decorate(ax, "Channel one-way latency (pingpong round trip / 2) vs message size",
             _subtitle(grouping, recs), "Message size (bytes)", "One-way latency (µs, log)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


FIGURES = (
    FigureDef("rate_bandwidth_vs_size",
              "messages/s and MB/s per message size, per transport x secure (DOCA table 1)",
              _vs(SIZE, "Message size (bytes)", "Channel rate and bandwidth vs message size",
                  format_size)),
    FigureDef("rate_bandwidth_vs_count",
              "messages/s and MB/s per message count, per transport x secure (DOCA table 2)",
              _vs(COUNT, "Messages sent (log)", "Channel rate and bandwidth vs message count",
                  None)),
    FigureDef("rate_bandwidth_vs_buffer",
              "messages/s and MB/s per buffer size, per transport x secure (DOCA tables 3-4)",
              _vs(BUFFER, "Buffer size (bytes, as requested)",
                  "Channel rate and bandwidth vs buffer size", format_size,
                  "buffer: the shm ring per direction; for uds and tcp the SO_SNDBUF/SO_RCVBUF "
                  "request, which the kernel doubles (at least 4608 B)")),
    FigureDef("latency_vs_size", "pingpong one-way latency p50/p99 per message size",
              latency_vs_size),
)


def significant(value: float, digits: int = 4) -> str:
    """`digits` significant digits, never an exponent: rates span 10^-5 to 10^2 Mpps."""
    if value == 0 or value != value:
        return format(value, "g")
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return format(value, f".{decimals}f")


def _us(spec: str, scale: float) -> Callable[[Any], str]:
    return lambda v: format(v * scale, spec)


COLUMNS = [
    Column("transport", "transport", collapsible=True),
    Column("secure", "secure", lambda v: "yes" if v else "no", collapsible=True),
    Column("mode", "mode", collapsible=True),
    Column("direction", "direction", collapsible=True),
    Column("msg_size", "message size", format_size, numeric=True, collapsible=True),
    Column("num_msgs", "count", format_count, numeric=True, collapsible=True),
    Column("buffer_bytes", "buffer", format_buffer, numeric=True, collapsible=True),
    Column("buffer_bytes_granted", "buffer granted", format_size, numeric=True,
           collapsible=True),
    Column("sent", "sent", format_count, numeric=True),
    Column("received", "received", format_count, numeric=True),
    Column("send_s", "send time (µs)", _us(".1f", 1e6), numeric=True),
    Column("recv_s", "receive time (µs)", _us(".1f", 1e6), numeric=True),
    Column("total_ns", "total time (µs)", _us(".1f", 1e-3), numeric=True),
    Column("avg_us", "avg per message (µs)", significant, numeric=True),
    Column("msg_rate_mpps", "MsgRate (Mpps)", significant, numeric=True),
    Column("mb_per_s", "BW (MB/s)", significant, numeric=True),
    Column("latency_ns_p50", "one-way p50 (µs)", _us(".3f", 1e-3), numeric=True, optional=True),
    Column("latency_ns_p99", "one-way p99 (µs)", _us(".3f", 1e-3), numeric=True, optional=True),
    Column("verdict", "verdict"),
]

NOTE = ("total time: the sender's first send to the receiver's last message (pingpong: the "
        "round trips); avg per message, MsgRate and BW are per total time.")


def _row_order(r: dict[str, Any]) -> tuple:
    return (*((0,) if r[p.key] is None else (1, p.order(r[p.key])) for p in PARAMS), r["file"])


def tables(docs: Sequence[ResultDoc]) -> list[Table]:
    """Every direction of every run: the DOCA report's tables 1-4 columns and more."""
    recs = sorted(records(docs), key=_row_order)  # stable: file order never matters
    rows = [[r["transport"], r["secure"], r["mode"], r["direction"], r["size"], r["count"],
             r["buffer"], r["buffer_granted"], r["sent"], r["received"], r["send_s"],
             r["recv_s"], r["total_ns"], r["avg_us"], r["mpps"], r["mb_per_s"], r["p50_ns"],
             r["p99_ns"], r["verdict"]] for r in recs]
    note = NOTE
    contended = sum(1 for r in recs if r["contended"])
    if contended:
        note += (f"\n\n{contended} of {len(recs)} rows ran more busy threads than CPUs "
                 "(contention-bound).")
    return [Table(title="channel", columns=COLUMNS, rows=rows, note=note)]


KIND = register(BenchKind(name="channel", figures=FIGURES, tables=tables))
