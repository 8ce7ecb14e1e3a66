"""`deputy-tools perf-doc`: the coll_offload results into docs/PERFORMANCE.md's marked section.

Results are synthetic `deputy bench coll --out` documents (the schema of
tools/bench/coll/report.cc, as in data/coll/) written where a sweep of the
shipped spec would file them, with numbers chosen so that a wrong median, a
ratio of medians instead of a median of ratios, or a lost placement shows;
the measuring path runs the fake benchmark, fake mpirun, taskset and agent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import pytest

from deputy_tools import points
from deputy_tools.catalog import resolve_spec
from deputy_tools.cli import main
from deputy_tools.doc_markers import BEGIN, END, MarkerError, replace_section
from deputy_tools.kinds.coll_offload import cells, placement_figure
from deputy_tools.perf_doc import gather, run_dirs
from deputy_tools.results import ResultDoc
from deputy_tools.spec import load_spec

SPEC = load_spec(resolve_spec("coll_offload"), "small")
SIZES = (64 << 10, 1 << 20, 16 << 20)  # the small profile's
PROSE_BEFORE = ("# Performance\r\n\r\nHand-written prose, CRLF line ends, ünïcode, trailing "
                "spaces   \r\n\r\nSome text before the markers on their line: ")
PROSE_AFTER = "\r\nMore prose after the end marker.\r\n\r\n## Next section\r\n\tTabbed.\r\n"


def coll_doc(op: str, compute: str, values: dict[tuple[str, int], tuple[float, float]],
             day: str = "2026-11-30") -> dict:
    """A `deputy bench coll --out` document: per (impl, size), (overall_us, overlap_pct);
    sizes and implementations not in `values` get neutral numbers."""
    rows = []
    for size in SIZES:
        for impl in ("deputy", "mpi"):
            overall, overlap = values.get((impl, size), (100.0, 50.0))
            rows.append({"impl": impl, "op": op, "nonblocking": True, "size": size,
                         "count": size // 4, "dtype": "float32", "redop": "sum",
                         "iterations": 10, "warmup": 2, "time_us": overall / 2,
                         "time_max_us": overall / 2, "algbw_gbps": 1.0, "busbw_gbps": 1.0,
                         "wrong": 0, "overall_us": overall, "compute_us": overall / 2,
                         "coll_init_us": 0.2, "test_us": 0.0, "wait_us": 1.0,
                         "pure_comm_us": overall / 2, "overlap_pct": overlap,
                         "host_cpu_us": 0.4})
    config = {"op": op, "message_size": "64k:16m", "sizes": list(SIZES), "factor": 16,
              "iterations": 10, "warmup": 2, "dtype": "float32", "redop": "sum",
              "memory": "mapped", "compute": compute, "num_test_calls": 0, "wait": "",
              "compare": "mpi", "implementations": ["deputy", "mpi"], "ranks": 2,
              "local_ranks": 2}
    return {"benchmark": "coll", "schema": 1, "config": config,
            "versions": {"deputy": "0.1.0", "mpi": "Open MPI v4.1.4"},
            "host": {"cpu_model": "AMD EPYC", "cpus": 2, "kernel": "Linux 6.1",
                     "timestamp": f"{day}T10:00:00Z"},
            "results": rows}


def write_run(root: Path, run: int, changes: dict | None = None, skip: tuple = (),
              day: str = "2026-11-30") -> None:
    """Every point of the small spec into <root>/run-<run>, as the sweep files them;
    `changes[(placement, op, compute)]` gives a point's values; `skip` leaves points out."""
    out = root / f"run-{run}"
    out.mkdir(parents=True, exist_ok=True)
    for point in points.expand(SPEC):
        coords = dict(point.coords)
        key = (coords["placement"], coords["op"], coords["compute"])
        if key in skip:
            continue
        doc = coll_doc(coords["op"], coords["compute"], (changes or {}).get(key, {}), day)
        doc["sweep"] = {"spec": SPEC.name, "profile": "small", "point": coords}
        points.result_path(out, SPEC, point).write_text(json.dumps(doc))


def perf_doc(tmp_path: Path, *extra: str) -> list[str]:
    return ["perf-doc", "--small", "--doc", str(tmp_path / "docs" / "PERFORMANCE.md"),
            "--figures", str(tmp_path / "docs" / "figures"), *extra]


@pytest.fixture
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "docs" / "PERFORMANCE.md"
    path.parent.mkdir()
    path.write_bytes((PROSE_BEFORE + BEGIN + "\nnot generated yet\n" + END
                      + PROSE_AFTER).encode("utf-8"))
    return path


def section(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)]


def table_row(text: str, placement: str, op: str, size: str) -> list[str]:
    """The cells of one row of the placement's table."""
    part = text[text.index(f"#### Placement {placement}"):]
    part = part.split("\n#### ")[0]  # up to the next placement's table
    row = next(line for line in part.splitlines()
               if re.match(rf"\|\s*{op}\s*\|\s*{size}\s*\|", line))
    return [c.strip() for c in row.strip("|").split("|")]


# The markers


def test_only_the_section_between_the_markers_changes(tmp_path: Path, doc: Path) -> None:
    write_run(tmp_path / "res", 1)
    before = doc.read_bytes()
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 0
    after = doc.read_bytes()
    head = (PROSE_BEFORE + BEGIN).encode("utf-8")
    tail = (END + PROSE_AFTER).encode("utf-8")
    assert after.startswith(head) and after.endswith(tail)  # byte for byte, CRLF and all
    assert after != before and b"not generated yet" not in after
    assert "#### Placement shared" in section(doc) and "#### Placement own-core" in section(doc)
    # Rendering again from the same results changes nothing.
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 0
    assert doc.read_bytes() == after


def test_the_measured_cost_of_a_sleep_is_reported_per_placement(tmp_path: Path,
                                                               doc: Path) -> None:
    write_run(tmp_path / "res", 1)
    write_run(tmp_path / "res", 2)
    costs = {("shared", 1): (23.9, 23.8), ("shared", 2): (26.2, 21.1),
             ("own-core", 1): (38.2, 19.1), ("own-core", 2): (38.4, 19.3)}
    for path in (tmp_path / "res").rglob("*.json"):
        d = json.loads(path.read_text())
        placement = d["sweep"]["point"]["placement"]
        if d["config"]["compute"] == "idle":
            wall, cpu = costs[(placement, int(path.relative_to(tmp_path / "res").parts[0][4:]))]
            d["config"]["sleep"] = {"asked_us": 5.0, "wall_us": wall, "cpu_us": cpu}
            path.write_text(json.dumps(d))
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 0
    text = " ".join(section(doc).split())
    assert ("a 5 µs sleep at the start of each idle point (slowest rank): shared: lasted 24–26 "
            "µs and cost 21–24 µs of CPU time; own-core: lasted 38 µs and cost 19 µs of CPU "
            "time.") in text


def test_no_sleep_figures_no_sleep_line(tmp_path: Path, doc: Path) -> None:
    write_run(tmp_path / "res", 1)
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 0
    assert "sleep at the start" not in section(doc)


def test_missing_markers_append_the_section_and_say_so(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "docs" / "PERFORMANCE.md"
    path.parent.mkdir()
    path.write_text("# Performance\n\nNo markers here.\n")
    write_run(tmp_path / "res", 1)
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 0
    text = path.read_text()
    assert text.startswith("# Performance\n\nNo markers here.\n\n## Non-blocking collectives, "
                           "deputy vs MPI, both placements (generated)\n\n" + BEGIN + "\n")
    assert text.endswith(END + "\n") and text.count(BEGIN) == 1
    assert "had no perf-doc markers: the section and its markers were appended at its end" \
        in capsys.readouterr().err
    # The next run finds the markers it appended and appends nothing more.
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 0
    assert path.read_text() == text


@pytest.mark.parametrize("text,message", [
    (f"a\n{BEGIN}\nb\n{BEGIN}\n{END}\n", r"doc.md:4: a second `<!-- deputy-tools perf-doc: "
                                         r"begin -->` \(the first is on line 2\)"),
    (f"a\n{END}\n{BEGIN}\n", r"doc.md:2: `<!-- deputy-tools perf-doc: end -->` comes before"),
    (f"a\n\n{BEGIN}\nb\n", r"doc.md:3: `<!-- deputy-tools perf-doc: begin -->` without "
                           r"`<!-- deputy-tools perf-doc: end -->`"),
])
def test_unpaired_markers_are_refused_and_the_doc_kept(text: str, message: str) -> None:
    with pytest.raises(MarkerError, match=message):
        replace_section(text, "body\n", "## H", where="doc.md")


def test_unpaired_markers_leave_the_file_as_it_was(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "docs" / "PERFORMANCE.md"
    path.parent.mkdir()
    path.write_text(f"x\n{END}\n{BEGIN}\n")
    write_run(tmp_path / "res", 1)
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 2
    assert path.read_text() == f"x\n{END}\n{BEGIN}\n"
    assert "comes before" in capsys.readouterr().err


# Medians over runs


def test_cells_are_medians_over_runs_of_ratios_taken_within_each_run(tmp_path: Path) -> None:
    big = 16 << 20
    key = ("own-core", "ibcast", "cpu")
    # Overall (deputy, MPI) per run: ratios 0.5, 3.0, 0.9 -> median 0.9; the ratio of the
    # medians would be 100 / 100 = 1.0. Overlaps: deputy 10, 50, 20 -> 20; MPI 1, 2, 3 -> 2.
    runs = [{("deputy", big): (100.0, 10.0), ("mpi", big): (200.0, 1.0)},
            {("deputy", big): (300.0, 50.0), ("mpi", big): (100.0, 2.0)},
            {("deputy", big): (90.0, 20.0), ("mpi", big): (100.0, 3.0)}]
    for k, values in enumerate(runs, start=1):
        write_run(tmp_path / "res", k, {key: values})
    found = gather(SPEC, run_dirs(tmp_path / "res", 3))
    assert not found.missing and len(found.docs) == 3 * 20
    [cell] = [c for c in cells(found.docs) if (c.placement, c.op, c.compute, c.size)
              == ("own-core", "ibcast", "cpu", big)]
    assert (cell.overlap_deputy, cell.overlap_mpi, cell.runs) == (20.0, 2.0, 3)
    assert cell.overall_ratio == pytest.approx(0.9)
    # The same point in the other placement kept the neutral numbers: not mixed in.
    [other] = [c for c in cells(found.docs) if (c.placement, c.op, c.compute, c.size)
               == ("shared", "ibcast", "cpu", big)]
    assert (other.overlap_deputy, other.overall_ratio) == (50.0, 1.0)


def test_tables_show_the_medians_and_an_even_count_averages_the_middle_two(
        tmp_path: Path, doc: Path) -> None:
    key = ("shared", "ialltoall", "idle")
    small = 64 << 10
    # Two runs: overlaps 40 and 61 -> 50.5; ratios 0.5 and 0.7 -> 0.60.
    write_run(tmp_path / "res", 1, {key: {("deputy", small): (50.0, 40.0),
                                          ("mpi", small): (100.0, 5.0)}})
    write_run(tmp_path / "res", 2, {key: {("deputy", small): (70.0, 61.0),
                                          ("mpi", small): (100.0, 7.0)}})
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 0
    text = section(doc)
    header = table_row(text.replace("| op ", "| op_ ", 1), "shared", "op_", "size")
    assert header == ["op_", "size", "idle: overlap deputy (%)", "idle: overlap MPI (%)",
                      "idle: Overall deputy/MPI", "cpu: overlap deputy (%)",
                      "cpu: overlap MPI (%)", "cpu: Overall deputy/MPI"]
    assert table_row(text, "shared", "ialltoall", "64K") == [
        "ialltoall", "64K", "50.5", "6.0", "0.60x", "50.0", "50.0", "1.00x"]
    assert table_row(text, "own-core", "ialltoall", "64K") == [
        "ialltoall", "64K", "50.0", "50.0", "1.00x", "50.0", "50.0", "1.00x"]
    assert "2 runs of the `coll_offload` spec (profile `small`), measured on 2026-11-30" \
        in " ".join(text.split())
    assert "Every number is the median over the runs." in " ".join(text.split())
    # Five ops x three sizes per placement.
    assert len([l for l in text.splitlines() if re.match(r"\| i\w+ +\| +\d+[KM] ", l)]) == 30


def test_from_uses_the_first_runs_asked_for(tmp_path: Path, doc: Path) -> None:
    key = ("shared", "ibcast", "idle")
    for k, overlap in enumerate((10.0, 20.0, 90.0), start=1):
        write_run(tmp_path / "res", k, {key: {("deputy", 64 << 10): (100.0, overlap)}})
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"), "--runs", "2")) == 0
    assert table_row(section(doc), "shared", "ibcast", "64K")[2] == "15.0"
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 0
    assert table_row(section(doc), "shared", "ibcast", "64K")[2] == "20.0"


def test_missing_points_are_named_and_fail_the_command(tmp_path: Path, doc: Path) -> None:
    write_run(tmp_path / "res", 1)
    write_run(tmp_path / "res", 2, skip=(("own-core", "ibcast", "cpu"),))
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 1
    text = section(doc)
    assert "- run-2: placement=own-core op=ibcast compute=cpu" in text
    assert "Missing: 1 point(s) without a result" in " ".join(text.split())
    assert table_row(text, "own-core", "ibcast", "16M")[5:8] == ["50.0", "50.0", "1.00x"]


def test_from_a_directory_without_runs_is_an_error(tmp_path: Path, doc: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    before = doc.read_bytes()
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "nothing"))) == 2
    assert "--from" in capsys.readouterr().err and doc.read_bytes() == before
    assert not (tmp_path / "docs" / "figures").exists()


@pytest.mark.parametrize("argv,message", [
    (["--runs", "0"], "--runs 0: must be at least 1"),
    (["--from", "x", "-o", "y"], "give one of them"),
    (["--spec", "coll_memory"], "perf-doc needs a `coll` spec with the grid axes placement, "
                                "op, compute"),
])
def test_usage_errors_name_the_option(tmp_path: Path, doc: Path, argv: list[str],
                                      message: str, capsys: pytest.CaptureFixture) -> None:
    assert main(perf_doc(tmp_path, *argv, "--deputy", "/bin/true")) == 2
    assert message in capsys.readouterr().err


def test_a_missing_doc_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_run(tmp_path / "res", 1)
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 2
    assert f"--doc {tmp_path}/docs/PERFORMANCE.md: no such file" in capsys.readouterr().err


# Figures


def test_figures_are_written_and_embedded_relative_to_the_doc(tmp_path: Path, doc: Path,
                                                              capsys: pytest.CaptureFixture,
                                                              ) -> None:
    key = ("own-core", "iallreduce", "cpu")
    write_run(tmp_path / "res", 1, {key: {("deputy", 1 << 20): (30.0, 97.0)}})
    assert main(perf_doc(tmp_path, "--from", str(tmp_path / "res"))) == 0
    figures = tmp_path / "docs" / "figures"
    for compute in ("idle", "cpu"):
        png, svg = figures / f"coll_offload_{compute}.png", figures / f"coll_offload_{compute}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in svg.read_text()[:500]
        assert f"](figures/coll_offload_{compute}.svg)" in section(doc)
    printed = capsys.readouterr().out.split()
    assert str(figures / "coll_offload_cpu.png") in printed and printed[-1] == str(doc)


def test_the_figure_has_a_row_per_placement_and_a_line_per_op() -> None:
    docs = []
    for placement, overlap in (("shared", 5.0), ("own-core", 97.0)):
        for op in ("iallreduce", "ibcast"):
            doc = coll_doc(op, "cpu", {("deputy", s): (50.0, overlap) for s in SIZES})
            doc["sweep"] = {"point": {"placement": placement, "op": op, "compute": "cpu"}}
            docs.append(ResultDoc(Path(f"{placement}-{op}.json"), "coll", doc))
    fig = placement_figure(cells(docs), "cpu")
    axes = fig.axes
    assert len(axes) == 4
    assert [ax.get_title().split("\n")[0] for ax in axes] == [
        "shared: overlap", "shared: Overall, deputy / MPI (below 1: deputy faster)",
        "own-core: overlap", "own-core: Overall, deputy / MPI (below 1: deputy faster)"]
    overlap_own = axes[2]
    # Per op: deputy solid, MPI dotted, same colour.
    lines = overlap_own.get_lines()
    assert len(lines) == 4
    assert [list(l.get_ydata()) for l in lines] == [[97.0] * 3, [50.0] * 3] * 2
    assert [l.get_linestyle() for l in lines] == ["-", ":", "-", ":"]
    assert lines[0].get_color() == lines[1].get_color() != lines[2].get_color()
    ratio_shared = axes[1]
    assert [list(l.get_ydata()) for l in ratio_shared.get_lines()[:2]] == [[0.5] * 3] * 2
    assert ratio_shared.get_yscale() == "log"
    legend = [t.get_text() for t in axes[1].get_legend().get_texts()]
    assert legend == ["iallreduce", "ibcast", "deputy", "MPI (overlap)", "MPI (Overall = 1)"]
    assert [t.get_text() for t in axes[2].get_xticklabels()] == ["64K", "1M", "16M"]


# Measuring (fake benchmark)


def test_measures_each_run_resumably_then_renders(tmp_path: Path, doc: Path, fake_deputy: Path,
                                                  calls: Callable[[], list[str]]) -> None:
    res = tmp_path / "res"
    argv = perf_doc(tmp_path, "--runs", "2", "-o", str(res), "--deputy", str(fake_deputy))
    assert main(argv) == 0
    benches = [c for c in calls() if c.startswith("coll:")]
    agents = [c for c in calls() if c.startswith("agent:")]
    assert len(benches) == 2 * 20
    # Each run: the shared agent, then the own-core one with --agent-cores last.
    assert [a.split(":", 2)[2] for a in agents] == ["cores=shared", "cores=last"] * 2
    # The own-core ranks go through deputy mpirun's own placement (--baseline).
    assert [c for c in calls() if c.startswith("mpirun")] == \
        ["mpirun:baseline:cores=last"] * 20
    assert sorted(p.name for p in res.iterdir()) == ["run-1", "run-2"]
    text = section(doc)
    assert "```sh\ndeputy-tools " + " ".join(argv) + "\n```" in text
    assert "agent `deputy agent --agent-cores last` (agent CPUs 1, ranks' CPUs 0)" in \
        " ".join(text.split())
    assert "LAUNCHER `{deputy} mpirun --baseline --agent-cores last -- -np 2`" in \
        " ".join(text.split())
    assert "Machine: 2 CPUs; fake MPI; deputy fake." in " ".join(text.split())

    ran = len(calls())
    assert main(argv) == 0
    assert len(calls()) == ran  # resumed: nothing measured again
    more = perf_doc(tmp_path, "--runs", "3", "-o", str(res), "--deputy", str(fake_deputy))
    assert main(more) == 0
    assert len([c for c in calls()[ran:] if c.startswith("coll:")]) == 20  # run 3 only
    assert "3 runs of the `coll_offload` spec" in " ".join(section(doc).split())


def test_a_failed_point_is_missing_from_the_section(tmp_path: Path, doc: Path,
                                                    fake_deputy: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DEPUTY_FAIL", "coll:ibcast:64k:16m:mapped:cpu")
    argv = perf_doc(tmp_path, "-o", str(tmp_path / "res"), "--deputy", str(fake_deputy))
    assert main(argv) == 1
    text = section(doc)
    assert "- run-1: placement=shared op=ibcast compute=cpu" in text
    assert "- run-1: placement=own-core op=ibcast compute=cpu" in text
    assert table_row(text, "shared", "ibcast", "16M")[5:8] == ["-", "-", "-"]


def test_dry_run_prints_every_runs_commands_and_writes_nothing(
        tmp_path: Path, doc: Path, fake_deputy: Path, calls: Callable[[], list[str]],
        capsys: pytest.CaptureFixture) -> None:
    before = doc.read_bytes()
    argv = perf_doc(tmp_path, "--runs", "2", "-o", str(tmp_path / "res"), "--dry-run",
                    "--deputy", str(fake_deputy))
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len([l for l in lines if " bench coll " in l and not l.startswith("#")]) == 40
    assert len([l for l in lines if "/res/run-2/" in l and " bench coll " in l]) == 20
    assert calls() == [] and doc.read_bytes() == before and not (tmp_path / "res").exists()
