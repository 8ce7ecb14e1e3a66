"""The channel kind: records, the DOCA report's tables (exact text) and figures, from real results.

The documents in data/channel/ were written by the real `deputy bench channel
--out` (see data/README.md); figures are inspected as matplotlib objects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest
from matplotlib.axes import Axes

from deputy_tools import points
from deputy_tools.catalog import select_specs
from deputy_tools.cli import main
from deputy_tools.kinds.channel import records, significant
from deputy_tools.plot import Plotted, plot_results
from deputy_tools.report import collect_tables, render
from deputy_tools.results import ResultError, load_results
from deputy_tools.spec import load_spec

CHANNELS = ["shm", "shm + secure", "uds", "uds + secure", "tcp", "tcp + secure"]

COUNT_MD = """\
### channel

total time: the sender's first send to the receiver's last message (pingpong: the round trips); avg per message, MsgRate and BW are per total time.

Same in every row: mode stream one-way, direction connect -> listen, message size 256, buffer default.

| transport | secure | count | buffer granted |  sent | received | send time (µs) | receive time (µs) | total time (µs) | avg per message (µs) | MsgRate (Mpps) | BW (MB/s) | verdict |
|:----------|:-------|------:|---------------:|------:|---------:|---------------:|------------------:|----------------:|---------------------:|---------------:|----------:|:--------|
| shm       | no     |    10 |             1M |    10 |       10 |            0.8 |               1.1 |            20.1 |                2.010 |         0.4974 |     127.3 | OK      |
| shm       | no     | 1,000 |             1M | 1,000 |    1,000 |           13.1 |              18.0 |            34.2 |              0.03418 |          29.26 |      7491 | OK      |
| tcp       | yes    |    10 |             4M |    10 |       10 |          107.4 |              13.9 |           589.4 |                58.94 |        0.01697 |     4.343 | OK      |
| tcp       | yes    | 1,000 |             4M | 1,000 |    1,000 |         2480.0 |            3171.1 |          3710.0 |                3.710 |         0.2695 |     69.00 | OK      |
"""

COUNT_CSV = """\
transport,secure,mode,direction,msg_size,num_msgs,buffer_bytes,buffer_bytes_granted,sent,received,send_s,recv_s,total_ns,avg_us,msg_rate_mpps,mb_per_s,latency_ns_p50,latency_ns_p99,verdict
shm,false,stream one-way,connect -> listen,256,10,0,1048576,10,10,7.61e-07,1.092e-06,20105,2.0105,0.4973887092762994,127.33150957473265,,,OK
shm,false,stream one-way,connect -> listen,256,1000,0,1048576,1000,1000,1.312e-05,1.7967e-05,34176,0.034176000000000005,29.260299625468164,7490.63670411985,,,OK
tcp,true,stream one-way,connect -> listen,256,10,0,4194304,10,10,0.00010743,1.3861e-05,589405,58.9405,0.016966262586846057,4.343363222232591,,,OK
tcp,true,stream one-way,connect -> listen,256,1000,0,4194304,1000,1000,0.002480013,0.003171115,3709984,3.709984,0.26954294142508434,69.00299300482159,,,OK
"""

PINGPONG_MD = """\
### channel

total time: the sender's first send to the receiver's last message (pingpong: the round trips); avg per message, MsgRate and BW are per total time.

Same in every row: mode pingpong, direction round trip, count 300, buffer default.

| transport | secure | message size | buffer granted | sent | received | send time (µs) | receive time (µs) | total time (µs) | avg per message (µs) | MsgRate (Mpps) | BW (MB/s) | one-way p50 (µs) | one-way p99 (µs) | verdict |
|:----------|:-------|-------------:|---------------:|-----:|---------:|---------------:|------------------:|----------------:|---------------------:|---------------:|----------:|-----------------:|-----------------:|:--------|
| shm       | no     |           64 |             1M |  300 |      300 |          606.4 |             606.4 |           606.4 |                2.021 |         0.4948 |     31.66 |            0.080 |            0.115 | OK      |
| shm       | no     |           1K |             1M |  300 |      300 |          667.4 |             667.4 |           667.4 |                2.225 |         0.4495 |     460.3 |            0.145 |            0.185 | OK      |
| tcp       | yes    |           64 |             4M |  300 |      300 |        15345.9 |           15345.9 |         15345.9 |                51.15 |        0.01955 |     1.251 |           23.345 |           37.365 | OK      |
| tcp       | yes    |           1K |             4M |  300 |      300 |        19136.0 |           19136.0 |         19136.0 |                63.79 |        0.01568 |     16.05 |           23.530 |           36.835 | OK      |
"""

BOTH_MD = """\
### channel

total time: the sender's first send to the receiver's last message (pingpong: the round trips); avg per message, MsgRate and BW are per total time.

2 of 4 rows ran more busy threads than CPUs (contention-bound).

Same in every row: secure no, message size 64, count 100, buffer default.

| transport | mode             | direction         | buffer granted | sent | received | send time (µs) | receive time (µs) | total time (µs) | avg per message (µs) | MsgRate (Mpps) | BW (MB/s) | verdict |
|:----------|:-----------------|:------------------|---------------:|-----:|---------:|---------------:|------------------:|----------------:|---------------------:|---------------:|----------:|:--------|
| shm       | stream one-way   | connect -> listen |             1M |  100 |      100 |            1.5 |               2.6 |           423.0 |                4.230 |         0.2364 |     15.13 | OK      |
| shm       | stream both ways | connect -> listen |             1M |  100 |      100 |            1.2 |               2.1 |          1511.6 |                15.12 |        0.06616 |     4.234 | OK      |
| shm       | stream both ways | listen -> connect |             1M |  100 |      100 |            1.4 |               2.5 |           182.1 |                1.821 |         0.5491 |     35.14 | OK      |
| uds       | stream one-way   | connect -> listen |           208K |  100 |      100 |          517.4 |             566.5 |           519.1 |                5.191 |         0.1926 |     12.33 | OK      |
"""


def channel_dir(data: Path, name: str) -> Path:
    return data / "channel" / name


def table_text(paths: list[Path], fmt: str = "markdown") -> str:
    docs, notes = load_results(paths)
    assert docs and not notes
    tables, notes = collect_tables(docs)
    assert not notes
    return render(tables, fmt)


def plot(paths: list[Path], out: Path,
         names: tuple[str, ...] = ()) -> tuple[dict[str, Plotted], list[str]]:
    docs, notes = load_results(paths)
    assert docs and not notes
    plotted, notes = plot_results(docs, out, names)
    return {p.name: p for p in plotted}, notes


def legend_texts(ax: Axes) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def ticks(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels()]


# Records: what each kind of run becomes


def test_one_way_stream_is_one_direction_timed_end_to_end(data: Path) -> None:
    docs, _ = load_results([channel_dir(data, "count") / "shm-10.json"])
    [r] = records(docs)
    sides = {s["role"]: s for s in docs[0].doc["results"]}
    assert r["direction"] == "connect -> listen" and r["mode"] == "stream one-way"
    assert r["channel"] == ("shm", False) and (r["size"], r["count"], r["buffer"]) == (256, 10, 0)
    assert r["total_ns"] == sides["listen"]["recv_end_ns"] - sides["connect"]["send_start_ns"]
    assert r["send_s"] == sides["connect"]["send"]["seconds"]
    assert r["recv_s"] == sides["listen"]["recv"]["seconds"]
    assert r["mpps"] == pytest.approx(10 / r["total_ns"] * 1e3)
    assert r["mb_per_s"] == pytest.approx(10 * 256 / r["total_ns"] * 1e3)
    assert r["p50_ns"] is None and r["verdict"] == "OK"


def test_both_ways_and_compare_baseline(data: Path) -> None:
    docs, _ = load_results([channel_dir(data, "both")])
    recs = records(docs)
    both = [r for r in recs if r["mode"] == "stream both ways"]
    assert sorted(r["direction"] for r in both) == ["connect -> listen", "listen -> connect"]
    assert all(r["contended"] for r in both)  # 4 busy threads on 2 CPUs
    compare = [r for r in recs if r["file"] == "shm-compare-uds.json"]
    assert [r["transport"] for r in compare] == ["shm", "uds"]


def test_pingpong_is_round_trips_with_latency(data: Path) -> None:
    docs, _ = load_results([channel_dir(data, "pingpong") / "tcp-secure-64.json"])
    [r] = records(docs)
    assert r["direction"] == "round trip" and r["channel"] == ("tcp", True)
    assert (r["p50_ns"], r["p99_ns"]) == (23345.0, 37365.5)
    assert r["received"] == 300


def test_one_side_only_falls_back_to_its_own_time(data: Path, tmp_path: Path) -> None:
    doc = json.loads((channel_dir(data, "count") / "shm-1000.json").read_text())
    doc["results"] = [s for s in doc["results"] if s["role"] == "listen"]  # --peer listen
    path = tmp_path / "listen.json"
    path.write_text(json.dumps(doc))
    docs, _ = load_results([path])
    [r] = records(docs)
    assert r["received"] == 1000 and r["sent"] == 1000  # the peer's END count
    assert r["total_ns"] == round(doc["results"][0]["recv"]["seconds"] * 1e9)


def test_missing_field_names_file_and_field(data: Path, tmp_path: Path) -> None:
    doc = json.loads((channel_dir(data, "count") / "shm-10.json").read_text())
    del doc["config"]["num_msgs"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    docs, _ = load_results([path])
    with pytest.raises(ResultError, match=r"bad.json: channel result without field "
                                          r"'config.num_msgs'"):
        records(docs)


def test_significant_digits() -> None:
    assert [significant(v) for v in (12762.94, 29.260299, 0.4973887, 1.053e-05, 0.0)] == [
        "12763", "29.26", "0.4974", "0.00001053", "0"]


# Tables: the DOCA report's columns, exact


def test_count_table_markdown_exact(data: Path) -> None:
    assert table_text([channel_dir(data, "count")]) == COUNT_MD


def test_count_table_csv_keeps_raw_values(data: Path) -> None:
    assert table_text([channel_dir(data, "count")], "csv") == COUNT_CSV


def test_pingpong_table_has_latency_columns(data: Path) -> None:
    assert table_text([channel_dir(data, "pingpong")]) == PINGPONG_MD


def test_both_ways_table(data: Path) -> None:
    assert table_text([channel_dir(data, "both")]) == BOTH_MD


def test_size_table_rows_in_channel_then_size_order(data: Path) -> None:
    files = sorted(channel_dir(data, "size").glob("*.json"), reverse=True)
    lines = table_text(files).splitlines()
    rows = [line.split("|")[1:4] for line in lines
            if line.startswith("| ") and "transport" not in line]
    assert [(t.strip(), s.strip(), z.strip()) for t, s, z in rows] == [
        (t, sec, z) for t in ("shm", "uds", "tcp") for sec in ("no", "yes") for z in ("256", "4K")]
    assert "Same in every row: mode stream one-way, direction connect -> listen, count 2,000, " \
           "buffer default." in lines


def test_cli_table_csv_to_file(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    assert main(["table", str(channel_dir(data, "count")), "--format", "csv",
                 "-o", str(out)]) == 0
    assert out.read_text() == COUNT_CSV


# Figures


def test_size_figure_two_panels_six_channels(data: Path, tmp_path: Path) -> None:
    plotted, notes = plot([channel_dir(data, "size")], tmp_path)
    assert set(plotted) == {"rate_bandwidth_vs_size"}
    assert any("rate_bandwidth_vs_count not drawn: needs two or more values of count" in n
               for n in notes)
    p = plotted["rate_bandwidth_vs_size"]
    png, svg = p.paths
    assert png == tmp_path / "channel_rate_bandwidth_vs_size.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "<svg" in svg.read_text()[:500]
    rate, bw = p.figure.axes
    assert p.figure._suptitle.get_text().startswith(
        "Channel rate and bandwidth vs message size\nstream one-way, connect -> listen, "
        "2,000 messages, buffer default, CPUs 0,1")
    assert rate.get_ylabel() == "Message rate (million messages/s, log)"
    assert bw.get_ylabel() == "Bandwidth (MB/s = 10^6 bytes/s, log)"
    for ax in (rate, bw):
        assert ax.get_xlabel() == "Message size (bytes)"
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        assert ticks(ax) == ["256", "4K"]
        assert len(ax.get_lines()) == 6
    assert legend_texts(bw) == CHANNELS
    styles = {line.get_label(): (line.get_color(), line.get_linestyle())
              for line in rate.get_lines()}
    assert styles["tcp"][0] == styles["tcp + secure"][0]  # a colour per transport
    assert (styles["tcp"][1], styles["tcp + secure"][1]) == ("-", "--")
    docs, _ = load_results([channel_dir(data, "size") / "uds-secure-4k.json"])
    [r] = records(docs)
    uds_secure = next(line for line in bw.get_lines() if line.get_label() == "uds + secure")
    assert list(uds_secure.get_ydata())[1] == pytest.approx(r["mb_per_s"])


def test_count_figure(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([channel_dir(data, "count")], tmp_path, ("rate_bandwidth_vs_count",))
    rate, bw = plotted["rate_bandwidth_vs_count"].figure.axes
    assert rate.get_xlabel() == "Messages sent (log)"
    assert [list(line.get_xdata()) for line in rate.get_lines()] == [[10, 1000], [10, 1000]]
    assert legend_texts(bw) == ["shm", "tcp + secure"]


def test_buffer_figure_leaves_out_the_default(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([channel_dir(data, "buffer")], tmp_path)
    assert set(plotted) == {"rate_bandwidth_vs_buffer"}
    p = plotted["rate_bandwidth_vs_buffer"]
    rate, bw = p.figure.axes
    assert ticks(rate) == ["64", "4K"] and legend_texts(bw) == ["shm", "uds"]
    assert rate.get_xlabel() == "Buffer size (bytes, as requested)"
    assert "SO_SNDBUF/SO_RCVBUF request" in p.figure._suptitle.get_text()

    plotted, notes = plot([channel_dir(data, "size")], tmp_path, ("rate_bandwidth_vs_buffer",))
    assert not plotted
    assert notes == ["channel:rate_bandwidth_vs_buffer not drawn: needs two or more values of "
                     "buffer (found 0, buffer 0 = default is left out)"]


def test_latency_figure_from_pingpong(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([channel_dir(data, "pingpong")], tmp_path)
    assert set(plotted) == {"rate_bandwidth_vs_size", "latency_vs_size"}
    ax = plotted["latency_vs_size"].figure.axes[0]
    assert ax.get_ylabel() == "One-way latency (µs, log)" and ticks(ax) == ["64", "1K"]
    assert legend_texts(ax) == ["shm p50", "tcp + secure p50", "shm p99", "tcp + secure p99"]
    assert list(ax.get_lines()[1].get_ydata()) == pytest.approx([23.345, 23.530])


def test_extra_parameters_split_the_series(data: Path, tmp_path: Path) -> None:
    """Runs of two modes are never merged into one line: the mode joins the label."""
    plotted, _ = plot([channel_dir(data, "size"), channel_dir(data, "pingpong")], tmp_path,
                      ("rate_bandwidth_vs_size",))
    rate, bw = plotted["rate_bandwidth_vs_size"].figure.axes
    labels = legend_texts(bw)
    assert labels[:2] == ["shm, stream one-way", "shm, pingpong"]
    assert len(labels) == len(set(labels)) == 8
    shm_stream = rate.get_lines()[0]
    assert list(shm_stream.get_xdata()) == [256, 4096]  # not through the pingpong sizes
    assert "direction = mode" in plotted["rate_bandwidth_vs_size"].figure._suptitle.get_text()


# Sweeps of the shipped channel specs (fake benchmark)


def test_reproduce_small_only_channel(tmp_path: Path, fake_deputy: Path,
                                      calls: Callable[[], list[str]],
                                      capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "results"
    argv = ["reproduce", "--small", "--only", "channel", "-o", str(out),
            "--deputy", str(fake_deputy)]
    assert main(argv) == 0
    printed = capsys.readouterr().out.split()
    specs = [load_spec(p, "small") for p in select_specs(["channel"])]
    assert len(calls()) == sum(len(points.expand(spec)) for spec in specs)
    for spec in specs:
        assert (out / f"{spec.name}.small" / "channel.key").exists()
        [figure] = spec.figures
        png = out / "figures" / f"{spec.name}.small" / f"channel_{figure}.png"
        assert png.exists() and str(png) in printed
    tables = (out / "tables.md").read_text()
    assert [line for line in tables.splitlines() if line.startswith("## ")] == [
        "## channel_buffer", "## channel_buffer_doca", "## channel_count", "## channel_size"]
    assert "| tcp       | yes    |" in tables
    assert not any("mover" in c for c in calls())


def test_cli_sweep_channel_size_spec_file(tmp_path: Path, fake_deputy: Path,
                                          calls: Callable[[], list[str]],
                                          capsys: pytest.CaptureFixture) -> None:
    spec = Path(__file__).resolve().parents[1] / "deputy_tools" / "specs" / "channel_size.json"
    out = tmp_path / "size"
    assert main(["sweep", str(spec), "--small", "-o", str(out),
                 "--deputy", str(fake_deputy)]) == 0
    err = capsys.readouterr().err
    assert "channel_size (small) [24/24] ok transport=tcp secure=on msg-size=64k" in err
    assert "channel_size: 24/24 points done (24 run now, 0 already done), 0 failed" in err
    assert calls()[:2] == ["shm:128:10000:0", "shm:1024:10000:0"]
    assert calls()[-1] == "secure+tcp:65536:10000:0"


def test_misspelt_only_is_reported_before_the_binary(capsys: pytest.CaptureFixture) -> None:
    assert main(["reproduce", "--small", "--only", "chanel"]) == 2
    assert "--only chanel: no such spec file, shipped spec, nor group" in capsys.readouterr().err
