"""The coll kind: records, tables (exact text) and figures from real `deputy bench coll` runs,
and sweeps of the shipped coll specs (fake benchmark, fake mpirun, fake agent).

The documents in data/coll/ were written by the real `mpirun -np 2 deputy bench coll --out`
on the 2-core development VM (see data/README.md); figures are inspected as matplotlib
objects.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import pytest
from matplotlib.axes import Axes

from deputy_tools import points
from deputy_tools.catalog import select_specs
from deputy_tools.cli import main
from deputy_tools.kinds.coll import records, size_ticks
from deputy_tools.plot import Plotted, plot_results
from deputy_tools.report import collect_tables, render
from deputy_tools.results import ResultError, load_results
from deputy_tools.spec import SpecError, load_spec, parse_spec
from deputy_tools.sweep import run_sweep
from process_check import alive

MEMORY_MD = """\
### coll: blocking collectives

time: mean over iterations, then over ranks, of one call, a barrier between calls (OSU); algbw = size / time; busbw = algbw x bus factor (nccl-tests); vs MPI: time / MPI's time (below 1: faster).

The 6 deputy rows of 18 ran 3 busy processes (ranks + the agent's engine) on 2 CPUs (contention-bound).

Same in every row: op allreduce, dtype float32, redop sum, wait default, ranks 2.

| memory | size (B) |   count | impl   | time (µs) | slowest rank (µs) | algbw (GB/s) | busbw (GB/s) | #wrong | vs MPI |
|:-------|---------:|--------:|:-------|----------:|------------------:|-------------:|-------------:|-------:|-------:|
| mapped |  1048576 |  262144 | deputy |     93.45 |             95.83 |       11.220 |       11.220 |      0 |  0.93x |
| mapped |  1048576 |  262144 | mpi    |    101.02 |            101.03 |       10.380 |       10.380 |      0 |      - |
| mapped |  1048576 |  262144 | ring   |     86.55 |             86.57 |       12.115 |       12.115 |      0 |  0.86x |
| mapped |  4194304 | 1048576 | deputy |    256.49 |            256.71 |       16.353 |       16.353 |      0 |  0.60x |
| mapped |  4194304 | 1048576 | mpi    |    428.19 |            428.41 |        9.796 |        9.796 |      0 |      - |
| mapped |  4194304 | 1048576 | ring   |    386.25 |            386.25 |       10.859 |       10.859 |      0 |  0.90x |
| mapped | 16777216 | 4194304 | deputy |   1970.66 |           1980.67 |        8.514 |        8.514 |      0 |  0.52x |
| mapped | 16777216 | 4194304 | mpi    |   3758.34 |           3758.36 |        4.464 |        4.464 |      0 |      - |
| mapped | 16777216 | 4194304 | ring   |   3130.14 |           3130.22 |        5.360 |        5.360 |      0 |  0.83x |
| direct |  1048576 |  262144 | deputy |   1180.86 |           1181.52 |        0.888 |        0.888 |      0 | 11.45x |
| direct |  1048576 |  262144 | mpi    |    103.17 |            103.25 |       10.164 |       10.164 |      0 |      - |
| direct |  1048576 |  262144 | ring   |     86.75 |             86.77 |       12.088 |       12.088 |      0 |  0.84x |
| direct |  4194304 | 1048576 | deputy |   2313.43 |           2317.12 |        1.813 |        1.813 |      0 |  5.41x |
| direct |  4194304 | 1048576 | mpi    |    427.50 |            427.62 |        9.811 |        9.811 |      0 |      - |
| direct |  4194304 | 1048576 | ring   |    373.10 |            373.24 |       11.242 |       11.242 |      0 |  0.87x |
| direct | 16777216 | 4194304 | deputy |   8964.86 |           8975.50 |        1.871 |        1.871 |      0 |  2.14x |
| direct | 16777216 | 4194304 | mpi    |   4186.49 |           4186.80 |        4.007 |        4.007 |      0 |      - |
| direct | 16777216 | 4194304 | ring   |   3124.67 |           3125.03 |        5.369 |        5.369 |      0 |  0.75x |
"""

TABLE_MD = """\
### coll: allreduce table (2 ranks, float32, memory mapped, wait default)

Allreduce table: barrier, then 3 x (allreduce; barrier), elapsed / 3 on rank 0; Native = MPI_Allreduce, Ring = a ring allreduce on MPI point-to-point.

| DataSize(Bytes) | Num of float | Native Allreduce | Ring Allreduce | deputy Allreduce |
|----------------:|-------------:|-----------------:|---------------:|-----------------:|
|             128 |           32 |           11.7us |          0.5us |           65.5us |
|             512 |          128 |            0.6us |          0.5us |           71.9us |
|            2048 |          512 |            0.7us |          0.7us |           75.4us |
|            8192 |         2048 |            3.9us |          4.7us |           69.3us |
|           32768 |         8192 |            7.1us |          6.8us |           62.7us |
|          131072 |        32768 |           15.4us |         15.1us |           75.2us |
|          524288 |       131072 |          120.7us |         58.1us |          111.5us |
|         2097152 |       524288 |          348.9us |        169.4us |          222.9us |
|         8388608 |      2097152 |         1976.7us |       1166.9us |         1216.6us |
"""

FLOAT16_CSV = """\
op,dtype,redop,memory,placement,wait,ranks,size,count,impl,time_us,time_max_us,algbw_gbps,busbw_gbps,wrong,time_vs_mpi,skipped
allreduce,float16,sum,mapped,,,2,64,32,deputy,89.98935,119.3488,0.0007111952692179685,0.0007111952692179685,0,,
allreduce,float16,sum,mapped,,,2,64,32,mpi,,,,,,,MPI has no float16 datatype
allreduce,float16,sum,mapped,,,2,64,32,ring,0.39185000000000003,0.44315,0.16332780400663519,0.16332780400663519,0,,
allreduce,float16,sum,mapped,,,2,256,128,deputy,83.40705,104.7774,0.003069284910568111,0.003069284910568111,0,,
allreduce,float16,sum,mapped,,,2,256,128,mpi,,,,,,,MPI has no float16 datatype
allreduce,float16,sum,mapped,,,2,256,128,ring,0.5149999999999999,0.5237999999999999,0.4970873786407768,0.4970873786407768,0,,
allreduce,float16,sum,mapped,,,2,1024,512,deputy,34.192750000000004,60.1428,0.029947869065810727,0.029947869065810727,0,,
allreduce,float16,sum,mapped,,,2,1024,512,mpi,,,,,,,MPI has no float16 datatype
allreduce,float16,sum,mapped,,,2,1024,512,ring,0.583075,0.5872999999999999,1.7562063199416884,1.7562063199416884,0,,
"""


def coll_dir(data: Path, name: str) -> Path:
    return data / "coll" / name


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


def line_data(ax: Axes) -> dict[str, tuple[list[float], list[float]]]:
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
            for line in ax.get_lines()}


# Records


def test_records_flatten_rows_and_drop_settings_that_do_not_apply(data: Path) -> None:
    docs, _ = load_results([coll_dir(data, "allreduce"), coll_dir(data, "iallreduce")])
    recs = records(docs)
    blocking = [r for r in recs if r["op"] == "allreduce"]
    assert {r["impl"] for r in blocking} == {"deputy", "mpi", "ring"}
    assert len(blocking) == 3 * 10  # 8 B .. 2 MiB in x4 steps
    assert all(r["compute"] is None and r["test_calls"] is None for r in blocking)
    nonblocking = [r for r in recs if r["op"] == "iallreduce"]
    assert {r["compute"] for r in nonblocking} == {"idle", "cpu"}
    assert {r["impl"] for r in nonblocking} == {"deputy", "mpi"}
    assert all(r["test_calls"] == 0 and r["overlap_pct"] is not None for r in nonblocking)
    # Contention is the deputy rows': 2 ranks + the agent's engine on 2 CPUs.
    assert {r["impl"] for r in recs if r["contended"]} == {"deputy"}
    row = docs[0].doc["results"][0]
    first = next(r for r in recs if r["file"] == docs[0].path.name)
    assert (first["impl"], first["size"], first["time_us"]) == (row["impl"], row["size"],
                                                                row["time_us"])


def test_skipped_rows_keep_their_reason_and_no_numbers(data: Path) -> None:
    docs, _ = load_results([coll_dir(data, "float16")])
    mpi = [r for r in records(docs) if r["impl"] == "mpi"]
    assert len(mpi) == 3
    assert all(r["skipped"] == "MPI has no float16 datatype" and r["time_us"] is None
               for r in mpi)


def test_missing_field_names_file_and_field(data: Path, tmp_path: Path) -> None:
    doc = json.loads((coll_dir(data, "allreduce-table") / "max-16m.json").read_text())
    del doc["config"]["memory"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    docs, _ = load_results([path])
    with pytest.raises(ResultError, match=r"bad.json: coll result without field 'config.memory'"):
        records(docs)


# Tables: exact


def test_memory_and_allreduce_tables_markdown_exact(data: Path) -> None:
    text = table_text([coll_dir(data, "memory"), coll_dir(data, "allreduce-table")])
    assert text == MEMORY_MD + "\n" + TABLE_MD


def test_allreduce_table_has_the_published_five_columns(data: Path) -> None:
    lines = table_text([coll_dir(data, "allreduce-table")]).splitlines()
    header = next(line for line in lines if line.startswith("| DataSize"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "DataSize(Bytes)", "Num of float", "Native Allreduce", "Ring Allreduce",
        "deputy Allreduce"]
    rows = [line for line in lines if line.startswith("|") and line.endswith("us |")]
    assert [int(r.split("|")[1]) for r in rows] == [128 << (2 * k) for k in range(9)]


def test_csv_keeps_raw_values_and_skipped_reasons(data: Path) -> None:
    assert table_text([coll_dir(data, "float16")], "csv") == FLOAT16_CSV


def test_nonblocking_table_has_the_osu_columns(data: Path) -> None:
    lines = table_text([coll_dir(data, "iallreduce")]).splitlines()
    assert lines[0] == "### coll: non-blocking collectives (OSU overlap)"
    assert ("Same in every row: op iallreduce, dtype float32, redop sum, memory mapped, "
            "test calls 0, wait default, ranks 2.") in lines
    header = next(line for line in lines if line.startswith("| compute"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "compute", "size (B)", "count", "impl", "Overall (µs)", "Compute (µs)",
        "Coll. Init (µs)", "Test (µs)", "Wait (µs)", "Pure Comm. (µs)", "Overlap (%)",
        "Host CPU (µs)", "algbw (GB/s)", "busbw (GB/s)", "#wrong", "Overall vs MPI"]
    assert ("| idle    |  2097152 | 524288 | deputy |       194.98 |       190.08 |"
            "            4.74 |      0.00 |      0.16 |          172.27 |       97.15 |"
            "          3.02 |       12.174 |       12.174 |      0 |          0.21x |") in lines
    assert len([line for line in lines if line.startswith(("| cpu ", "| idle "))]) == 40


def test_poll_and_wait_cpu_columns_appear_when_results_carry_them(data: Path,
                                                                  tmp_path: Path) -> None:
    src = coll_dir(data, "iallreduce")
    dst = tmp_path / "iallreduce"
    dst.mkdir()
    for f in src.glob("*.json"):
        doc = json.loads(f.read_text())
        for row in doc["results"]:
            if row.get("nonblocking") and not row.get("skipped"):
                row["poll_cpu_us"] = 0.75
                row["wait_cpu_us"] = 12.5
        (dst / f.name).write_text(json.dumps(doc))
    lines = table_text([dst]).splitlines()
    header = next(line for line in lines if line.startswith("| compute"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    host = columns.index("Host CPU (µs)")
    assert columns[host + 1:host + 3] == ["Poll CPU (µs)", "Wait CPU (µs)"]
    row = next(line for line in lines if line.startswith(("| cpu ", "| idle ")))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[host + 1:host + 3] == ["0.75", "12.50"]


def test_results_without_poll_or_wait_cpu_have_neither_column(data: Path) -> None:
    header = next(line for line in table_text([coll_dir(data, "iallreduce")]).splitlines()
                  if line.startswith("| compute"))
    assert "Poll CPU" not in header and "Wait CPU" not in header


def test_cli_table_csv_to_file(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    assert main(["table", str(coll_dir(data, "float16")), "--format", "csv",
                 "-o", str(out)]) == 0
    assert out.read_text() == FLOAT16_CSV


# Figures


def test_size_ticks_skip_crowded_sizes() -> None:
    assert size_ticks([8 << (2 * k) for k in range(12)]) == [8 << (2 * k) for k in range(12)]
    assert size_ticks([512 << 10, 1 << 20, 2 << 20, 4 << 20]) == [512 << 10, 2 << 20]
    assert len(size_ticks([1 << k for k in range(31)])) <= 15


def test_time_figure_deputy_mpi_ring_log_log(data: Path, tmp_path: Path) -> None:
    plotted, notes = plot([coll_dir(data, "allreduce")], tmp_path)
    assert set(plotted) == {"time_vs_size", "busbw_vs_size"}
    assert sorted(notes) == [
        "coll:allreduce_table not drawn: no allreduce-table rows (--allreduce-table)",
        "coll:by_placement_cpu not drawn: no non-blocking results with a placement (a sweep "
        "with a placement axis, e.g. the coll_offload spec)",
        "coll:by_placement_idle not drawn: no non-blocking results with a placement (a sweep "
        "with a placement axis, e.g. the coll_offload spec)",
        "coll:host_cpu_vs_size not drawn: no non-blocking results (--op iallreduce, "
        "ialltoall, ...)",
        "coll:overall_vs_size not drawn: no non-blocking results (--op iallreduce, "
        "ialltoall, ...)",
        "coll:overlap_vs_size not drawn: no non-blocking results (--op iallreduce, "
        "ialltoall, ...)"]
    p = plotted["time_vs_size"]
    png, svg = p.paths
    assert png == tmp_path / "coll_time_vs_size.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "<svg" in svg.read_text()[:500]
    ax = p.figure.axes[0]
    assert ax.get_title().startswith("Collective time vs message size\nallreduce, float32, "
                                     "sum, memory mapped, wait default, 2 ranks")
    assert "contention-bound" in ax.get_title()
    assert ax.get_xlabel() == "Message size (bytes, per rank, log)"
    assert ax.get_ylabel() == "Time per operation (µs, log)"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert legend_texts(ax) == ["deputy", "MPI", "ring"]
    assert ticks(ax) == ["8", "32", "128", "512", "2K", "8K", "32K", "128K", "512K", "2M"]
    lines = line_data(ax)
    assert len(lines) == 3
    docs, _ = load_results([coll_dir(data, "allreduce")])
    mpi = [r["time_us"] for r in docs[0].doc["results"] if r["impl"] == "mpi"]
    assert lines["MPI"][1] == pytest.approx(mpi)
    colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
    assert colours == {"deputy": "tab:blue", "MPI": "tab:orange", "ring": "tab:green"}

    bw = plotted["busbw_vs_size"].figure.axes[0]
    assert bw.get_ylabel() == "busbw (GB/s = 1e9 B/s, log)" and len(bw.get_lines()) == 3


def test_overlap_host_cpu_and_overall_figures_for_nonblocking(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([coll_dir(data, "iallreduce")], tmp_path)
    assert set(plotted) == {"time_vs_size", "busbw_vs_size", "overlap_vs_size",
                            "overall_vs_size", "host_cpu_vs_size"}
    overlap = plotted["overlap_vs_size"].figure.axes[0]
    assert overlap.get_ylabel() == "Overlap (%)" and overlap.get_yscale() == "linear"
    assert overlap.get_xscale() == "log"
    assert legend_texts(overlap) == ["deputy, compute cpu", "deputy, compute idle",
                                     "MPI, compute cpu", "MPI, compute idle"]
    lines = line_data(overlap)
    docs, _ = load_results([coll_dir(data, "iallreduce") / "idle.json"])
    deputy_idle = [r["overlap_pct"] for r in docs[0].doc["results"] if r["impl"] == "deputy"]
    assert lines["deputy, compute idle"][1] == pytest.approx(deputy_idle)
    assert "Overlap = max(0, 100 - 100 x (Overall - Compute) / Pure Comm.) (OSU)" in \
        overlap.get_title()
    styles = {line.get_label(): (line.get_color(), line.get_linestyle())
              for line in overlap.get_lines()}
    assert styles["deputy, compute idle"] == ("tab:blue", "--")
    assert styles["MPI, compute idle"] == ("tab:orange", "--")
    cpu = plotted["host_cpu_vs_size"].figure.axes[0]
    assert cpu.get_ylabel() == "Host CPU per operation (µs, log)" and len(cpu.get_lines()) == 4
    assert cpu.get_yscale() == "log"
    overall = plotted["overall_vs_size"].figure.axes[0]
    assert overall.get_ylabel() == "Overall (µs, log)" and len(overall.get_lines()) == 4


def test_skipped_rows_draw_no_line(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([coll_dir(data, "float16")], tmp_path, ("time_vs_size",))
    ax = plotted["time_vs_size"].figure.axes[0]
    assert legend_texts(ax) == ["deputy", "ring"]


def test_memory_modes_split_every_implementation(data: Path, tmp_path: Path) -> None:
    plotted, _ = plot([coll_dir(data, "memory")], tmp_path, ("time_vs_size",))
    ax = plotted["time_vs_size"].figure.axes[0]
    assert legend_texts(ax) == ["deputy, memory mapped", "deputy, memory direct",
                                "MPI, memory mapped", "MPI, memory direct",
                                "ring, memory mapped", "ring, memory direct"]
    styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines()}
    assert {styles[label] for label in styles if "direct" in label} == {"--"}
    assert ticks(ax) == ["1M", "4M", "16M"]


def test_allreduce_table_figure_bars_in_column_order(data: Path, tmp_path: Path) -> None:
    plotted, notes = plot([coll_dir(data, "allreduce-table")], tmp_path)
    assert set(plotted) == {"allreduce_table"}  # the table's runs are not OSU rows
    p = plotted["allreduce_table"]
    assert all(path.exists() for path in p.paths)
    ax = p.figure.axes[0]
    assert legend_texts(ax) == ["Native Allreduce (MPI)", "Ring Allreduce",
                                "deputy Allreduce"]
    assert len(ax.patches) == 3 * 9
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "Time per allreduce (µs, log)"
    assert ax.get_xlabel() == "Data size (bytes, float32, log steps of 4)"
    assert ticks(ax) == ["128", "512", "2K", "8K", "32K", "128K", "512K", "2M", "8M"]
    assert ax.get_title().startswith("Allreduce table: Native (MPI) vs Ring vs deputy")
    docs, _ = load_results([coll_dir(data, "allreduce-table")])
    native = [r["time_us"] for r in docs[0].doc["results"] if r["impl"] == "mpi"]
    heights = [bar.get_height() for bar in ax.containers[0]]
    assert heights == pytest.approx(native)


def test_cli_plot_writes_png_and_svg(data: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture) -> None:
    assert main(["plot", str(coll_dir(data, "iallreduce")), "-o", str(tmp_path),
                 "--figure", "coll:overlap_vs_size"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "coll_overlap_vs_size.png")]
    assert (tmp_path / "coll_overlap_vs_size.svg").exists()


# Specs and sweeps (fake benchmark, fake mpirun, fake agent)


def test_shipped_coll_specs() -> None:
    specs = {s.name: s for s in (load_spec(p) for p in select_specs(["coll"]))}
    assert set(specs) == {"coll_allreduce", "coll_iallreduce_overlap", "coll_memory",
                          "coll_allreduce_table", "coll_offload"}
    for spec in specs.values():
        assert spec.bench == ("coll",) and spec.launcher == ("mpirun", "-np", "2")
        assert spec.env == {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        assert spec.agent is not None and "small" in spec.profiles
    overlap = specs["coll_iallreduce_overlap"]
    assert [p.flags["compute"] for p in points.expand(overlap)] == ["idle", "cpu"]
    assert overlap.flags["compare"] == "mpi" and overlap.flags["op"] == "iallreduce"
    memory = specs["coll_memory"]
    assert [p.flags["memory"] for p in points.expand(memory)] == ["mapped", "direct"]
    assert memory.flags["message-size"] == "1m:64m"
    table = specs["coll_allreduce_table"]
    assert table.agent == {"config": {"agent": {"max_pool_bytes": 4294967296}}}
    assert load_spec(table.source, "small").axes[0].values[0].flags == {"max": "8m"}


def test_coll_offload_spec_sweeps_ops_computes_and_placements() -> None:
    """Issue item 4: five operations x both placements x compute idle/cpu, deputy beside
    MPI, 64 KiB to 16 MiB by 4; one agent per placement, own-core ranks where it says."""
    spec = load_spec(select_specs(["coll_offload"])[0])
    expanded = points.expand(spec)
    assert len(expanded) == 2 * 5 * 2
    assert {dict(p.coords)["op"] for p in expanded} == {
        "iallreduce", "ialltoall", "iallgather", "ibcast", "ireduce_scatter"}
    assert {p.flags["compute"] for p in expanded} == {"idle", "cpu"}
    assert spec.flags["compare"] == "mpi" and spec.flags["message-size"] == "64k:16m"
    assert spec.flags["factor"] == 4
    agents = {dict(p.coords)["placement"]: (p.agent, p.launcher) for p in expanded}
    assert agents == {
        "shared": ({"args": ["--agent-cores", "shared"]}, ("mpirun", "-np", "2")),
        "own-core": ({"args": ["--agent-cores", "last"]},
                     ("{deputy}", "mpirun", "--baseline", "--agent-cores", "last", "--",
                      "-np", "2"))}
    small = load_spec(spec.source, "small")
    assert len(points.expand(small)) == len(expanded)
    assert small.flags["iterations"] < spec.flags["iterations"] and small.flags["factor"] == 16
    assert spec.figures == ("by_placement_idle", "by_placement_cpu")


@pytest.mark.parametrize("change,message", [
    ({"env": {"A": 1}}, r"'env' must be an object of VARIABLE -> string value"),
    ({"env": ["A=1"]}, r"'env' must be an object"),
    ({"agent": "yes"}, r"agent: must be true or an object"),
    ({"agent": {"engines": 2}}, r"agent: unknown key 'engines'"),
    ({"agent": {"config": [1]}}, r"agent.config: must be an object"),
])
def test_env_and_agent_errors(change: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_spec({"name": "x", "bench": "coll", **change}, where="t")


def test_agent_and_env_are_part_of_a_points_identity() -> None:
    base = {"name": "x", "bench": "coll", "grid": {"op": ["allreduce"]}}
    keys = []
    for extra in ({}, {"env": {"A": "1"}}, {"agent": True},
                  {"agent": {"config": {"agent": {"max_pool_bytes": 1}}}}):
        spec = parse_spec({**base, **extra}, where="t")
        keys.append(points.point_key(spec, points.expand(spec)[0]))
    assert len(set(keys)) == 4
    assert parse_spec({**base, "agent": False}, where="t").agent is None


def test_reproduce_small_only_coll(tmp_path: Path, fake_deputy: Path,
                                   calls: Callable[[], list[str]],
                                   capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "results"
    argv = ["reproduce", "--small", "--only", "coll", "-o", str(out),
            "--deputy", str(fake_deputy)]
    assert main(argv) == 0
    printed = capsys.readouterr().out.split()
    specs = [load_spec(p, "small") for p in select_specs(["coll"])]
    agents = [c for c in calls() if c.startswith("agent:")]
    runs = [c for c in calls() if c.startswith("coll:")]
    # One private agent per spec and placement, each stopped afterwards.
    assert len(agents) == len(specs) + 1  # coll_offload: shared and own-core
    assert sum(a.split(":")[2:3] == ["cores=last"] for a in agents) == 1
    assert not any(alive(int(a.split(":")[1])) for a in agents)
    assert sum(a.endswith(":config") for a in agents) == 1  # the allreduce table's big pool
    assert len(runs) == sum(len(points.expand(spec)) for spec in specs)
    assert (tmp_path / "mpirun.txt").read_text().split() == ["mpirun"] * len(runs)
    for spec in specs:
        for figure in spec.figures:
            png = out / "figures" / f"{spec.name}.small" / f"coll_{figure}.png"
            assert png.exists() and str(png) in printed, png
        log = next((out / f"{spec.name}.small").glob("*.log")).read_text()
        assert log.startswith("$ DEPUTY_AGENT=/tmp/") or "DEPUTY_AGENT=" in log.splitlines()[0]
        assert "OMPI_ALLOW_RUN_AS_ROOT=1" in log.splitlines()[0]
    tables = (out / "tables.md").read_text()
    assert [line for line in tables.splitlines() if line.startswith("## ")] == [
        "## coll_allreduce", "## coll_allreduce_table", "## coll_iallreduce_overlap",
        "## coll_memory", "## coll_offload"]
    assert "| DataSize(Bytes) | Num of float | Native Allreduce | Ring Allreduce | " \
           "deputy Allreduce |" in tables

    ran = len(calls())
    assert main(argv) == 0
    assert len(calls()) == ran  # resumed: no point and no agent


def test_agent_that_does_not_start_runs_no_point(tmp_path: Path, fake_deputy: Path,
                                                 calls: Callable[[], list[str]],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DEPUTY_AGENT_FAIL", "1")
    spec = load_spec(select_specs(["coll_allreduce"])[0], "small")
    report = run_sweep(spec, tmp_path / "out", str(fake_deputy), live=False, echo=lambda _: None)
    assert not report.ok and report.ran == 0 and calls() == []
    assert "the agent did not start (exit 1: [app] [error] deputy agent --daemon: the agent " \
           "did not start: bind: Address in use" in report.setup_error
    assert "no point was run" in report.setup_error


def test_a_failing_point_still_stops_the_agent(tmp_path: Path, fake_deputy: Path,
                                               calls: Callable[[], list[str]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_spec({"name": "x", "bench": "coll", "agent": True, "timeout_s": 30,
                       "grid": {"op": ["allreduce", "iallreduce"]}}, where="t")
    monkeypatch.setenv("FAKE_DEPUTY_FAIL", "coll:allreduce::1m:mapped:cpu")
    env_before = dict(os.environ)
    report = run_sweep(spec, tmp_path / "out", str(fake_deputy), live=False, echo=lambda _: None)
    assert report.ran == 2 and len(report.failed) == 1  # the fake found DEPUTY_AGENT's socket
    assert report.failed[0].point.label() == "op=allreduce"
    [agent] = [c for c in calls() if c.startswith("agent:")]
    assert not alive(int(agent.split(":")[1]))
    assert dict(os.environ) == env_before  # DEPUTY_AGENT went to the points only


def test_points_need_the_agent(tmp_path: Path, fake_deputy: Path) -> None:
    """Without `agent` in the spec the points get no DEPUTY_AGENT (the fake then fails as the
    real benchmark does), so the shipped specs' private agent is what makes them run."""
    spec = parse_spec({"name": "x", "bench": "coll", "timeout_s": 30,
                       "grid": {"op": ["allreduce"]}}, where="t")
    report = run_sweep(spec, tmp_path / "out", str(fake_deputy), live=False, echo=lambda _: None)
    assert len(report.failed) == 1 and "DP_ERR_AGENT_LOST" in report.failed[0].outcome.message


def test_dry_run_names_the_agent_and_environment(tmp_path: Path, fake_deputy: Path,
                                                 calls: Callable[[], list[str]],
                                                 capsys: pytest.CaptureFixture) -> None:
    assert main(["sweep", "coll_allreduce_table", "--small", "--dry-run", "-o", str(tmp_path / "o"),
                 "--deputy", str(fake_deputy)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("# environment: OMPI_ALLOW_RUN_AS_ROOT=1 "
                        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
    assert lines[1].startswith("# a private agent for the sweep (AGENT_DIR: a new 0700 "
                               "directory; DEPUTY_AGENT=$AGENT_DIR/agent.sock): ")
    assert "agent --daemon --socket '$AGENT_DIR/agent.sock'" in lines[1]
    assert "--config '$AGENT_DIR/agent.json'" in lines[1]
    assert lines[2].startswith(f"mpirun -np 2 {fake_deputy.resolve()} bench coll --allreduce-table "
                               "--max 8m --out ")
    assert len(lines) == 3 and calls() == [] and not (tmp_path / "o").exists()


def test_placement_comes_from_the_sweep_else_from_the_run(data: Path, tmp_path: Path) -> None:
    """A run outside a sweep says its placement itself (config.placement, from its agent and
    its ranks' CPUs); a sweep's placement coordinate wins where both are present."""
    doc = json.loads((data / "coll" / "iallreduce" / "idle.json").read_text())
    doc["config"]["placement"] = "own-core"
    (tmp_path / "run.json").write_text(json.dumps(doc))
    doc["sweep"] = {"point": {"placement": "shared"}}
    (tmp_path / "swept.json").write_text(json.dumps(doc))
    docs, notes = load_results([tmp_path])
    assert not notes
    by_file = {d.path.name: {r["placement"] for r in records([d])} for d in docs}
    assert by_file == {"run.json": {"own-core"}, "swept.json": {"shared"}}
