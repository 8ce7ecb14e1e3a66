"""The `reproduce` command: every shipped spec, swept, plotted and tabulated.

One command for the whole set of reproduced experiments, so a fresh machine
regenerates all figures with `deputy-tools reproduce --small -o results/`
(a few minutes on 2 cores) and the full-size run is the same command
without --small. Being made of sweeps, it resumes where it stopped.
Layout: <out>/<spec>[.small]/ holds the results and logs,
<out>/figures/<spec>[.small]/ the PNG/SVG, <out>/tables.md every table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from deputy_tools.catalog import select_specs, shipped_specs
from deputy_tools.plot import plot_results
from deputy_tools.report import collect_tables
from deputy_tools.results import load_results
from deputy_tools.spec import load_spec
from deputy_tools.sweep import default_out_dir, run_sweep, summary
from deputy_tools.tables import render_markdown

SMALL = "small"


def reproduce(out_root: Path, deputy: str, *, small: bool = False, only: Sequence[str] = (),
              dry_run: bool = False, fail_fast: bool = False, timeout_s: float | None = None,
              live: bool | None = None, echo: Callable[[str], None] = print,
              warn: Callable[[str], None] = print) -> int:
    """Returns 0 when every point of every spec is done, 1 otherwise."""
    paths = select_specs(list(only)) if only else shipped_specs()
    profile = SMALL if small else None
    status = 0
    sections: list[str] = []
    for path in paths:
        spec = load_spec(path, profile)
        out_dir = default_out_dir(out_root, spec)
        report = run_sweep(spec, out_dir, deputy, dry_run=dry_run, fail_fast=fail_fast,
                           timeout_s=timeout_s, live=live, echo=echo)
        if dry_run:
            continue
        warn(summary(spec, report, out_dir))
        if not report.ok:
            status = 1
            if fail_fast:
                break
        docs, notes = load_results([out_dir])
        if not docs:
            continue
        plotted, plot_notes = plot_results(docs, out_root / "figures" / out_dir.name, spec.figures)
        for note in notes + plot_notes:
            warn(f"{spec.name}: {note}")
        for item in plotted:
            echo(str(item.paths[0]))
        tables, _ = collect_tables(docs)
        sections.append(f"## {spec.name}\n\n{spec.description}\n\n{render_markdown(tables)}")
    if sections:
        tables_md = out_root / "tables.md"
        tables_md.write_text("\n".join(sections), encoding="utf-8")
        echo(str(tables_md))
    return status
