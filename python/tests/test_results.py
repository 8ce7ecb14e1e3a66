"""Recognising result documents, and adding a benchmark kind as one module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from deputy_tools import registry
from deputy_tools.kinds import mover
from deputy_tools.plot import plot_results
from deputy_tools.report import collect_tables
from deputy_tools.results import ResultError, kind_of, load_results
from deputy_tools.tables import Column, Table


@pytest.mark.parametrize("doc, kind", [
    ({"benchmark": "mover"}, "mover"),
    ({"tool": "deputy bench rail"}, "rail"),
    ({"benchmark": "coll", "tool": "deputy bench rail"}, "coll"),
    ({"tool": "osu_latency"}, None),
    ({"name": "a spec"}, None),
    ([1, 2], None),
])
def test_kind_of(doc: object, kind: str | None) -> None:
    assert kind_of(doc) == kind


def test_directories_skip_partial_failed_and_foreign_files(tmp_path: Path, data: Path) -> None:
    doc = (data / "mover" / "sizes" / "cpu.json").read_text()
    (tmp_path / "a.json").write_text(doc)
    (tmp_path / "b.json.partial").write_text(doc)
    (tmp_path / "c.json.failed").write_text(doc)
    (tmp_path / "c.log").write_text("log")
    (tmp_path / "spec.json").write_text('{"name": "x"}')
    (tmp_path / "broken.json").write_text("{")
    docs, notes = load_results([tmp_path])
    assert [d.path.name for d in docs] == ["a.json"]
    assert len(notes) == 2 and any("broken.json: not JSON" in n for n in notes)


def test_missing_field_names_file_and_field(tmp_path: Path, data: Path) -> None:
    doc = json.loads((data / "mover" / "sizes" / "cpu.json").read_text())
    del doc["results"][1]["gbps"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    docs, _ = load_results([path])
    with pytest.raises(ResultError,
                       match=r"bad.json: mover result without field 'results\[1\].gbps'"):
        mover.records(docs)


def test_unknown_benchmark_is_reported_not_fatal(tmp_path: Path, data: Path) -> None:
    (tmp_path / "gossip.json").write_text('{"benchmark": "gossip", "results": []}')
    docs, _ = load_results([tmp_path, data / "mover" / "batch"])
    plotted, notes = plot_results(docs, tmp_path / "figs")
    assert {p.kind for p in plotted} == {"mover"}
    assert any("'gossip' result(s): no figures for this benchmark yet" in n for n in notes)
    tables, notes = collect_tables(docs)
    assert [t.title for t in tables] == ["mover"]
    assert any("no table for this benchmark yet" in n for n in notes)


def test_a_new_kind_is_one_registration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What kinds/channel.py will do: register figures and tables for its "benchmark"."""
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))

    def figure(docs) -> Figure:
        fig = Figure()
        fig.add_subplot().set_title(f"{len(docs)} channel runs")
        return fig

    def tables(docs) -> list[Table]:
        return [Table("channel", [Column("n", "n", numeric=True)], [[len(docs)]])]

    registry.register(registry.BenchKind(
        "channel", (registry.FigureDef("runs", "test", figure),), tables))
    (tmp_path / "c.json").write_text('{"benchmark": "channel"}')
    docs, _ = load_results([tmp_path])
    plotted, notes = plot_results(docs, tmp_path / "figs")
    assert [(p.kind, p.name) for p in plotted] == [("channel", "runs")] and not notes
    assert (tmp_path / "figs" / "channel_runs.png").exists()
    assert collect_tables(docs)[0][0].rows == [[1]]
