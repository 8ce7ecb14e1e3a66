"""Figures from the checked-in results: files written, labels, units and series counts.

The figures are inspected as matplotlib objects (labels, bar containers,
lines, legend entries), never as pixels.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matplotlib.axes import Axes

from deputy_tools.cli import main
from deputy_tools.plot import PlotError, Plotted, plot_results
from deputy_tools.results import load_results


def plot(paths: list[Path], out: Path,
         names: tuple[str, ...] = ()) -> tuple[dict[str, Plotted], list[str]]:
    docs, notes = load_results(paths)
    assert docs and not notes
    plotted, notes = plot_results(docs, out, names)
    return {f"{p.kind}:{p.name}": p for p in plotted}, notes


def axes(p: Plotted) -> Axes:
    return p.figure.axes[0]


def legend_texts(ax: Axes) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def ticks(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels()]


def test_files_are_png_and_svg(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([data / "mover" / "sizes"], tmp_path)
    assert plotted
    for p in plotted.values():
        png, svg = p.paths
        assert png == tmp_path / f"{p.kind}_{p.name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in svg.read_text()[:500]


def test_sizes_draw_the_figure_2_set(data: Path, tmp_path: Path) -> None:
    plotted, notes = plot([data / "mover" / "sizes"], tmp_path)
    assert set(plotted) == {"mover:throughput_vs_size", "mover:improvement_vs_size",
                            "mover:latency_vs_size"}
    # What was not drawn is said, with the reason.
    assert any("throughput_vs_batch not drawn: needs two or more values of batch" in n
               for n in notes)

    ax = axes(plotted["mover:throughput_vs_size"])
    assert ax.get_title().startswith("Mover throughput vs transfer size\n")
    assert ax.get_xlabel() == "Transfer size (bytes)"
    assert ax.get_ylabel() == "Throughput (GB/s)"
    assert ticks(ax) == ["4K", "64K"]
    assert len(ax.containers) == 3
    assert legend_texts(ax) == ["CPU", "sync (spin)", "async (block)"]

    ax = axes(plotted["mover:improvement_vs_size"])
    assert ax.get_ylabel() == "Improvement over CPU (%)"
    assert legend_texts(ax) == ["sync (spin)", "async (block)"]
    heights = [bar.get_height() for bar in ax.containers[0]]
    assert heights[1] == pytest.approx(100 * (75.78234085055087 / 97.62913857956873 - 1))


def test_latency_figure_has_bars_and_log_latency_lines(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([data / "mover" / "sizes"], tmp_path, ("latency_vs_size",))
    p = plotted["mover:latency_vs_size"]
    bars, latency = p.figure.axes
    assert len(bars.containers) == 3 and bars.get_ylabel() == "Throughput (GB/s)"
    assert len(latency.get_lines()) == 3 and latency.get_yscale() == "log"
    assert latency.get_ylabel() == "Median latency (µs, log scale)"
    assert legend_texts(bars)[-1] == "async (block) latency"
    cpu_line = latency.get_lines()[0]
    assert list(cpu_line.get_ydata()) == pytest.approx([30.945 / 1000, 671.275 / 1000])


def test_batch_figure(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([data / "mover" / "batch"], tmp_path, ("throughput_vs_batch",))
    ax = axes(plotted["mover:throughput_vs_batch"])
    assert ax.get_xlabel() == "Batch size (descriptors per batch)"
    assert ticks(ax) == ["1", "4", "16"]
    assert len(ax.containers) == 1 and ax.get_legend() is None  # one series, named in the subtitle
    assert "sync (spin)" in ax.get_title() and "TS 4K" in ax.get_title()


def test_queue_size_figure_names_what_follows_the_queue_size(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([data / "mover" / "wq"], tmp_path)
    ax = axes(plotted["mover:throughput_vs_wq_size"])
    assert ax.get_xlabel() == "Work queue size (entries)" and ticks(ax) == ["8", "32"]
    assert legend_texts(ax) == ["TS 4K", "TS 64K"]
    assert ax.get_title().endswith("auto stores; QD = buffers = WQS")
    ax = axes(plotted["mover:throughput_vs_size"])
    assert legend_texts(ax) == ["WQS 8", "WQS 32"]  # not "WQS 8, QD 8, 8 buffers"


def test_engines_figure_flags_contention(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([data / "mover" / "engines"], tmp_path)
    ax = axes(plotted["mover:throughput_vs_engines"])
    assert ax.get_xlabel() == "Engines (worker threads)"
    assert ticks(ax) == ["1 engine", "3 engines"]
    assert "note: 1 of 2 points ran more busy threads than CPUs" in ax.get_title()


def test_rail_figures(data: Path, tmp_path: Path) -> None:
    plotted, notes = plot([data / "rail"], tmp_path)
    assert set(plotted) == {"rail:gbps_over_time", "rail:per_rail", "rail:bandwidth_vs_rails"}
    ax = axes(plotted["rail:gbps_over_time"])
    assert ax.get_xlabel() == "Time since the writers started, warm-up included (s)"
    assert ax.get_ylabel() == "Bandwidth (Gbit/s)"
    assert len(ax.get_lines()) == 2
    assert [t.split(",")[0] for t in legend_texts(ax)] == ["1 rail", "2 rails"]
    ax = axes(plotted["rail:per_rail"])
    assert ticks(ax) == ["rail 0", "rail 1"] and len(ax.containers) == 2
    ax = axes(plotted["rail:bandwidth_vs_rails"])
    assert ticks(ax) == ["1 rail", "2 rails"] and len(ax.containers) == 1
    assert any("bandwidth_vs_page_size not drawn" in n for n in notes)
    assert any("warmup_effect not drawn: needs runs with and without the warm-up" in n
               for n in notes)


def test_rail_warmup_effect(data: Path, tmp_path: Path) -> None:
    """Two runs of one rail setup, one with --no-warmup: first writes per rail, log scale,
    one bar per run; the Gbit/s series beside them."""
    runs = tmp_path / "runs"
    runs.mkdir()
    doc = json.loads((data / "rail" / "rails-2.json").read_text())
    (runs / "on.json").write_text(json.dumps(doc))
    doc["config"]["warmup"] = False
    for rail in doc["rails"]:
        rail["first_completion_ms"] = 40.0 + rail["rail"]
    (runs / "off.json").write_text(json.dumps(doc))
    plotted, _ = plot([runs], tmp_path, ("rail:warmup_effect",))
    first, over_time = plotted["rail:warmup_effect"].figure.axes[:2]
    assert ticks(first) == ["rail 0", "rail 1"] and len(first.containers) == 2
    assert first.get_yscale() == "log"
    assert sorted(legend_texts(first)) == ["no warm-up", "warm-up"]
    heights = {c.get_label(): [b.get_height() for b in c] for c in first.containers}
    assert heights["no warm-up"] == [40.0, 41.0]
    assert len(over_time.get_lines()) == 2
    assert over_time.get_xlabel() == "Time since the writers started, warm-up included (s)"


def test_unknown_figure_name_lists_the_available_ones(data: Path, tmp_path: Path) -> None:
    docs, _ = load_results([data / "mover" / "sizes"])
    with pytest.raises(PlotError, match="--figure fig9: no such figure .*mover:throughput_vs_size"):
        plot_results(docs, tmp_path, ["fig9"])


def test_kind_prefix_selects_one_kind(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([data / "rail", data / "mover" / "sizes"], tmp_path, ("rail:per_rail",))
    assert set(plotted) == {"rail:per_rail"}


def test_cli_plot_prints_the_pngs(data: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture) -> None:
    assert main(["plot", str(data / "mover" / "batch"), "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out.split()
    assert out == [str(tmp_path / "mover_throughput_vs_batch.png")]


def test_cli_plot_without_results_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "spec.json").write_text('{"name": "x"}')
    assert main(["plot", str(tmp_path), "-o", str(tmp_path / "f")]) == 1
    err = capsys.readouterr().err
    assert "not a deputy bench result" in err and "no deputy bench results" in err


def test_latency_figure_takes_bars_at_full_depth_and_lines_at_depth_one(
        tmp_path: Path) -> None:
    """As the published figure 6: with runs at both depths, the bars are the
    deep runs' throughput and the lines the -q1 runs' latency."""
    import json
    src = tmp_path / "runs"
    src.mkdir()
    for depth, gbps, latency in ((128, 20.0, 9000.0), (1, 2.0, 700.0)):
        for size in (4096, 65536):
            doc = {"benchmark": "mover", "schema": 1,
                   "config": {"op": "memmove", "wait": "spin", "queue_depth": depth, "batch": 1,
                              "wq_size": 128, "wq_mode": "dedicated", "engines": 1,
                              "buffers": 128, "stores": "auto"},
                   "host": {"cpus": 2}, "busy_threads": 2,
                   "results": [{"mode": "mover", "transfer_size": size, "gbps": gbps * size / 4096,
                                "latency_ns_median": latency, "latency_ns_p99": latency,
                                "verified": True}]}
            (src / f"q{depth}-{size}.json").write_text(json.dumps(doc))
    plotted, _ = plot([src], tmp_path / "out", ("latency_vs_size",))
    bars, latency_axis = plotted["mover:latency_vs_size"].figure.axes
    heights = [b.get_height() for c in bars.containers for b in c]
    assert heights == pytest.approx([20.0, 320.0])
    (line,) = latency_axis.get_lines()
    assert list(line.get_ydata()) == pytest.approx([0.7, 0.7])
