"""Tables from the checked-in results, compared with the exact expected text."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_tools.cli import main
from deputy_tools.report import collect_tables, render
from deputy_tools.results import load_results
from deputy_tools.tables import Column, Table, render_markdown

MOVER_SIZES_MD = """\
### mover

Same in every row: op memmove, batch 1, WQ size 128, queue depth 32, WQ dedicated, engines 1, buffers 8, stores auto.

| mode          | size |    GB/s | latency median (ns) | latency p99 (ns) | caller CPU (%) |  kops/s | vs CPU | verified |
|:--------------|-----:|--------:|--------------------:|-----------------:|---------------:|--------:|-------:|:---------|
| CPU           |   4K | 132.364 |                  31 |               31 |          100.0 | 32315.4 |      - | yes      |
| CPU           |  64K |  97.629 |                 671 |              671 |          100.0 |  1489.7 |      - | yes      |
| sync (spin)   |   4K |   0.068 |                 661 |         15966258 |           33.4 |    16.6 |  0.00x | yes      |
| sync (spin)   |  64K |  75.782 |                6740 |             9464 |          100.0 |  1156.3 |  0.78x | yes      |
| async (block) |   4K |   0.405 |                 661 |          4010397 |            1.3 |    98.8 |  0.00x | yes      |
| async (block) |  64K |   5.241 |               16595 |          4012781 |           18.2 |    80.0 |  0.05x | yes      |
"""

MOVER_SIZES_CSV = """\
op,mode,batch,wq_size,queue_depth,wq_mode,engines,buffers,stores,transfer_size,gbps,latency_ns_median,latency_ns_p99,cpu_share,kops,vs_cpu,verified
memmove,CPU,,,,,,8,auto,4096,132.36387138471483,30.945,30.945,1.0,32315.39828728389,,true
memmove,CPU,,,,,,8,auto,65536,97.62913857956873,671.275,671.275,1.0,1489.70243193922,,true
memmove,sync (spin),1,128,32,dedicated,1,8,auto,4096,0.06811147467162736,661.0,15966258.0,0.33354959059117134,16.628777996002775,0.0005145775350863058,true
memmove,sync (spin),1,128,32,dedicated,1,8,auto,65536,75.78234085055087,6740.0,9464.0,1.0,1156.3467537010324,0.7762266670906606,true
memmove,async (block),1,128,32,dedicated,1,8,auto,4096,0.404575575922617,661.0,4010397.0,0.013334647018675073,98.77333396548266,0.003056540819561861,true
memmove,async (block),1,128,32,dedicated,1,8,auto,65536,5.240649579538948,16595.0,4012781.0,0.18180922199511887,79.96596648466411,0.053679154151992904,true
"""

MOVER_ENGINES_MD = """\
### mover

1 of 2 rows ran more busy threads than CPUs (contention-bound).

Same in every row: op memmove, batch 1, WQ size 128, queue depth 32, WQ dedicated, buffers 16, stores auto.

| mode          | engines | size |   GB/s | latency median (ns) | latency p99 (ns) | caller CPU (%) |  kops/s | vs CPU | verified |
|:--------------|--------:|-----:|-------:|--------------------:|-----------------:|---------------:|--------:|-------:|:---------|
| async (block) |       1 |   1K | 11.329 |                1372 |             2744 |          100.0 | 11063.8 |      - | yes      |
| async (block) |       3 |   1K |  2.756 |                5899 |             6099 |          100.0 |  2691.7 |      - | yes      |
"""

RAIL_MD = """\
### rail

Same in every row: provider tcp;ofi_rxm, devices 1, bytes per write 64K, batch 16, tx-depth 64.

| run     | rails | writes | seconds | BW peak (Gb/s) | BW average (Gb/s) | MsgRate (Mpps) | % of link | verified |
|:--------|------:|-------:|--------:|---------------:|------------------:|---------------:|----------:|:---------|
| rails-1 |     1 |   7936 |   1.020 |           4.42 |              4.08 |         0.0078 |       4.1 | yes      |
| rails-2 |     2 |   1280 |   1.648 |           0.60 |              0.41 |         0.0008 |       0.2 | yes      |

### rail: per rail

Same in every row: device 0, domain lo.

| run     | rail | writes | Gb/s | share (%) | EAGAIN | first completion (ms) |
|:--------|-----:|-------:|-----:|----------:|-------:|----------------------:|
| rails-1 |    0 |   7936 | 4.08 |     100.0 |      0 |                 0.130 |
| rails-2 |    0 |    640 | 0.20 |      50.0 |      0 |                 0.267 |
| rails-2 |    1 |    640 | 0.20 |      50.0 |      0 |                 0.271 |
"""


def table_text(paths: list[Path], fmt: str) -> str:
    docs, notes = load_results(paths)
    assert not notes
    tables, notes = collect_tables(docs)
    assert not notes
    return render(tables, fmt)


def test_mover_markdown_exact(data: Path) -> None:
    assert table_text([data / "mover" / "sizes"], "markdown") == MOVER_SIZES_MD


def test_mover_csv_exact_keeps_full_values(data: Path) -> None:
    assert table_text([data / "mover" / "sizes"], "csv") == MOVER_SIZES_CSV


def test_mover_contention_note_and_varying_column(data: Path) -> None:
    assert table_text([data / "mover" / "engines"], "markdown") == MOVER_ENGINES_MD


def test_rail_markdown_exact(data: Path) -> None:
    assert table_text([data / "rail"], "markdown") == RAIL_MD


def test_file_order_does_not_change_the_table(data: Path) -> None:
    files = sorted((data / "mover" / "sizes").glob("*.json"), reverse=True)
    assert table_text(files, "markdown") == MOVER_SIZES_MD


def test_kinds_follow_each_other(data: Path) -> None:
    both = table_text([data / "rail", data / "mover" / "sizes"], "markdown")
    assert both == MOVER_SIZES_MD + "\n" + RAIL_MD


def test_cli_table_to_stdout_and_file(data: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture) -> None:
    assert main(["table", str(data / "mover" / "sizes")]) == 0
    assert capsys.readouterr().out == MOVER_SIZES_MD
    out = tmp_path / "t.csv"
    assert main(["table", str(data / "mover" / "sizes"), "--format", "csv", "-o", str(out)]) == 0
    assert out.read_text() == MOVER_SIZES_CSV


def test_markdown_rendering_rules() -> None:
    columns = [Column("name", "name"), Column("n", "count", numeric=True),
               Column("unit", "unit", collapsible=True), Column("gone", "gone", collapsible=True)]
    table = Table("t", columns, [["a", 1, "s", None], ["bb", 22, "s", None]], note="why")
    assert render_markdown([table]) == (
        "### t\n\nwhy\n\nSame in every row: unit s.\n\n"
        "| name | count |\n"
        "|:-----|------:|\n"
        "| a    |     1 |\n"
        "| bb   |    22 |\n")
