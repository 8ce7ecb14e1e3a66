"""The `table` command: every benchmark kind's tables, as Markdown or CSV."""

from __future__ import annotations

from typing import Sequence

from deputy_tools import registry
from deputy_tools.plot import by_kind
from deputy_tools.results import ResultDoc
from deputy_tools.tables import Table, render_csv, render_markdown

FORMATS = ("markdown", "csv")


def collect_tables(docs: Sequence[ResultDoc]) -> tuple[list[Table], list[str]]:
    tables: list[Table] = []
    notes: list[str] = []
    for kind_name, kind_docs in by_kind(docs).items():
        kind = registry.get(kind_name)
        if kind is None:
            notes.append(f"{len(kind_docs)} '{kind_name}' result(s): no table for this benchmark "
                         f"yet (known: {', '.join(registry.known())})")
            continue
        tables += kind.tables(kind_docs)
    return tables, notes


def render(tables: Sequence[Table], fmt: str) -> str:
    if fmt == "markdown":
        return render_markdown(tables)
    if fmt == "csv":
        return render_csv(tables)
    raise ValueError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
