"""Tables as exact Markdown or CSV text.

docs/PERFORMANCE.md is regenerated from results, so rendering must be
deterministic. Rows hold raw values; each column says how a person reads
it (Markdown: "4K", "19.011", "102.5") while CSV keeps the full value for
programs (4096, 19.011371547922952, 1.025). In Markdown, columns that hold
one value in every row move to a "Same in every row" note above the table
and columns are padded, so the Markdown source reads as a table too.
Optional columns (pingpong latency among stream rows) are left out of the
Markdown when no row has a value.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)  # repr-exact for floats


@dataclass(frozen=True)
class Column:
    key: str                 # CSV header: snake_case, unit in the name (gbps, latency_ns_median)
    title: str               # Markdown header: words and unit ("GB/s")
    fmt: Callable[[Any], str] = str  # Markdown cell of a non-None value
    numeric: bool = False    # right-aligned in Markdown
    collapsible: bool = False  # may move to the note when constant
    optional: bool = False   # left out of Markdown when no row has a value (CSV keeps it)

    def cell(self, value: Any) -> str:
        return "-" if value is None else self.fmt(value)


@dataclass
class Table:
    title: str
    columns: list[Column]
    rows: list[list[Any]] = field(default_factory=list)
    note: str = ""  # printed under the title, before "Same in every row"


def render_markdown(tables: Sequence[Table], heading: str = "###") -> str:
    """Each table under `heading` + its title (a document's generated section may need a
    deeper level than the `table` command's)."""
    return "\n".join(_markdown(t, heading) for t in tables)


def render_csv(tables: Sequence[Table]) -> str:
    """One CSV block per table (header row first), blocks separated by an empty line."""
    return "\n".join(_csv(t) for t in tables)


def _markdown(table: Table, heading: str = "###") -> str:
    keep, same = [], []
    for i, column in enumerate(table.columns):
        values = {repr(row[i]): row[i] for row in table.rows if row[i] is not None}
        if column.optional and not values:
            continue
        if column.collapsible and len(values) <= 1 and table.rows:
            if values:
                same.append(f"{column.title} {column.cell(next(iter(values.values())))}")
            continue
        keep.append(i)
    columns = [table.columns[i] for i in keep]
    rows = [[table.columns[i].cell(row[i]) for i in keep] for row in table.rows]
    widths = [max([3, len(c.title)] + [len(r[j]) for r in rows]) for j, c in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        padded = [cell.rjust(w) if c.numeric else cell.ljust(w)
                  for cell, w, c in zip(cells, widths, columns)]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if c.numeric else (":" + "-" * (w + 1))
                          for w, c in zip(widths, columns)) + "|"
    out = [f"{heading} {table.title}", ""]
    if table.note:
        out += [table.note, ""]
    if same:
        out += ["Same in every row: " + ", ".join(same) + ".", ""]
    out += [line([c.title for c in columns]), rule] + [line(r) for r in rows]
    return "\n".join(out) + "\n"


def _csv(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([c.key for c in table.columns])
    writer.writerows([[_csv_cell(v) for v in row] for row in table.rows])
    return buffer.getvalue()
