"""The `perf-doc` command: measure the coll_offload spec and rewrite its part of a document.

The collective figures of docs/PERFORMANCE.md must come from results, not
from numbers typed by hand, and be re-made by one command: this one. It
sweeps the spec (five non-blocking ops x compute idle/cpu x two placements
of the agent) once per run into <results>/run-<k>/ — each run a resumable
sweep, so an interrupted measurement continues where it stopped and
`--runs 5` after `--runs 3` adds two runs — then takes, per placement,
compute, op and size, the median over the runs (kinds/coll_offload.py),
draws one figure per compute mode into the figures directory (PNG and SVG)
and rewrites only the part of the document between the perf-doc markers
(doc_markers.py) with the command, the dates, the machine, the benchmark
command of every point, the figures and one table per placement.
`--from DIR` re-renders from results already measured, running nothing.

Results are found through the spec, not by listing a directory: a point's
file name is a function of its settings (points.py), so results measured
with other settings (another profile, changed flags) are never mixed in,
and a point without a result is named in the section as missing.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from deputy_tools import points as pts
from deputy_tools.doc_markers import rewrite_file
from deputy_tools.figures import save
from deputy_tools.kinds.coll_offload import (COMPUTE_MEANING, PLACEMENT_MEANING, Cell, cells,
                                             computes, placement_figure, placement_tables)
from deputy_tools.results import ResultDoc, kind_of
from deputy_tools.spec import SpecError, SweepSpec
from deputy_tools.sweep import run_sweep, summary
from deputy_tools.tables import render_markdown

SPEC = "coll_offload"
AXES = ("placement", "op", "compute")  # what the figures and tables are indexed by
HEADING = "## Non-blocking collectives, deputy vs MPI, both placements (generated)"
_RUN = re.compile(r"run-([1-9][0-9]*)$")
_PLACEHOLDER = re.compile(r"\{[a-z_]+\}")


class PerfDocError(ValueError):
    """Nothing to render, or a request that cannot work; says what to do."""


@dataclass
class Gathered:
    """The results of every run, found through the spec."""

    docs: list[ResultDoc] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)   # "run-2: placement=... op=..."
    runs: list[Path] = field(default_factory=list)


def check_spec(spec: SweepSpec) -> None:
    names = [axis.name for axis in spec.axes]
    lacking = [axis for axis in AXES if axis not in names]
    if spec.bench[:1] != ("coll",) or lacking:
        where = spec.source or spec.name
        raise SpecError(f"{where}: perf-doc needs a `coll` spec with the grid axes "
                        f"{', '.join(AXES)} (it has bench {' '.join(spec.bench)}, axes "
                        f"{', '.join(names) or 'none'}); e.g. the shipped {SPEC}")


def run_dirs(root: Path, runs: int) -> list[Path]:
    return [root / f"run-{k}" for k in range(1, runs + 1)]


def existing_runs(root: Path) -> list[Path]:
    """<root>/run-<k> directories, in k order."""
    found = [(int(m.group(1)), p) for p in (root.iterdir() if root.is_dir() else [])
             if p.is_dir() and (m := _RUN.match(p.name))]
    return [p for _, p in sorted(found)]


def measure(spec: SweepSpec, root: Path, runs: int, deputy: str, *, dry_run: bool = False,
            fail_fast: bool = False, timeout_s: float | None = None, live: bool | None = None,
            echo: Callable[[str], None] = print, warn: Callable[[str], None] = print) -> bool:
    """Sweeps the spec once per run (each resumable); True when every point is done."""
    ok = True
    for k, out in enumerate(run_dirs(root, runs), start=1):
        if not dry_run:
            warn(f"{spec.name}: run {k} of {runs} -> {out}")
        report = run_sweep(spec, out, deputy, dry_run=dry_run, fail_fast=fail_fast,
                           timeout_s=timeout_s, live=live, echo=echo)
        if dry_run:
            continue
        warn(summary(spec, report, out))
        ok = ok and report.ok
        if not report.ok and fail_fast:
            break
    return ok


def gather(spec: SweepSpec, runs: Sequence[Path]) -> Gathered:
    """Each run's result of each point. The point's coordinates are set as the document's
    "sweep" point, so the placement is known even for a result copied without it."""
    found = Gathered(runs=list(runs))
    for run in runs:
        for point in pts.expand(spec):
            path = pts.result_path(run, spec, point)
            if not path.exists():
                found.missing.append(f"{run.name}: {point.label()}")
                continue
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise PerfDocError(f"{path}: unreadable result: {e}") from e
            if kind_of(doc) != "coll":
                raise PerfDocError(f"{path}: not a `deputy bench coll` result")
            sweep = doc.get("sweep") if isinstance(doc.get("sweep"), dict) else {}
            doc["sweep"] = {**sweep, "point": dict(point.coords)}
            found.docs.append(ResultDoc(path=path, kind="coll", doc=doc))
    return found


# The section


def _dates(docs: Sequence[ResultDoc]) -> str:
    days = sorted({str(d.doc["host"]["timestamp"])[:10] for d in docs
                   if isinstance(d.doc.get("host"), dict) and d.doc["host"].get("timestamp")})
    if not days:
        return "on unrecorded dates"
    return f"on {days[0]}" if len(days) == 1 else f"from {days[0]} to {days[-1]}"


def _one(docs: Sequence[ResultDoc], *keys: str) -> str:
    """The value at doc[keys[0]][keys[1]] over the documents, joined when they differ."""
    seen: list[str] = []
    for d in docs:
        value: Any = d.doc
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value not in (None, "") and str(value) not in seen:
            seen.append(str(value))
    return " / ".join(seen)


def machine(docs: Sequence[ResultDoc]) -> str:
    """What the documents say of the machine and the software, as one sentence."""
    parts = [_one(docs, "host", "cpu_model")]
    cpus = _one(docs, "host", "cpus")
    parts.append(f"{cpus} CPUs" if cpus else "")
    parts.append(_one(docs, "host", "kernel"))
    mpi = _one(docs, "versions", "mpi")
    deputy = _one(docs, "versions", "deputy")
    text = ", ".join(p for p in parts if p) or "not recorded in the results"
    software = "; ".join(p for p in (mpi, f"deputy {deputy}" if deputy else "") if p)
    return text + (f"; {software}" if software else "")


def bench_command(spec: SweepSpec) -> str:
    """`deputy bench coll --op OP --compute COMPUTE <fixed flags>`: one point's command with
    each flag axis as a variable."""
    words = ["deputy", "bench", *spec.bench]
    for axis in spec.axes:
        if all(set(v.flags) == {axis.name} for v in axis.values):
            words += pts.flag_args({axis.name: axis.name.upper()})
    return _words(words + pts.flag_args(spec.flags))


def _axis_values(spec: SweepSpec, name: str) -> list[str]:
    return [v.label for axis in spec.axes if axis.name == name for v in axis.values]


def _placement_lines(spec: SweepSpec, docs: Sequence[ResultDoc]) -> list[str]:
    """How each placement was run: its agent's words, its launcher, and where the agent
    said it put itself and the ranks."""
    lines = []
    reported: dict[str, dict[str, str]] = {}
    for d in docs:
        sweep = d.doc.get("sweep", {})
        if isinstance(sweep.get("agent_placement"), dict):
            reported.setdefault(sweep["point"].get("placement"), sweep["agent_placement"])
    first = {}
    for point in pts.expand(spec):
        first.setdefault(dict(point.coords)["placement"], point)
    for placement, point in first.items():
        agent = ["deputy", "agent", *(point.agent or {}).get("args", [])]
        facts = reported.get(placement)
        where = (f" (agent CPUs {facts['agent_cpus']}, ranks' CPUs {facts['rank_cpus']})"
                 if facts and facts.get("agent_cpus") else "")
        meaning = PLACEMENT_MEANING.get(placement)
        lines.append(f"- **{placement}**" + (f" ({meaning})" if meaning else "")
                     + f": agent `{_words(agent)}`{where}; LAUNCHER "
                     + f"`{_words(point.launcher) or '(none)'}`.")
    return lines


def _sleep_line(docs: Sequence[ResultDoc]) -> str:
    """What the idle runs measured a short sleep to cost (config.sleep, per placement), or
    "" when none did: below that compute time an "idle" phase keeps its core busy."""
    seen: dict[str, list[dict[str, float]]] = {}
    for d in docs:
        sleep = d.doc.get("config", {}).get("sleep")
        placement = d.doc.get("sweep", {}).get("point", {}).get("placement", "")
        if isinstance(sleep, dict) and sleep.get("asked_us"):
            seen.setdefault(str(placement), []).append(sleep)
    if not seen:
        return ""

    def span(values: list[float]) -> str:
        low, high = min(values), max(values)
        return f"{low:.0f}" if round(low) == round(high) else f"{low:.0f}–{high:.0f}"

    parts = [f"{placement or 'every run'}: lasted {span([s['wall_us'] for s in found])} µs "
             f"and cost {span([s['cpu_us'] for s in found])} µs of CPU time"
             for placement, found in seen.items()]
    asked = next(iter(seen.values()))[0]["asked_us"]
    return (f"Idle phases sleep; the benchmark measured a {asked:g} µs sleep at the start of "
            f"each idle point (slowest rank): " + "; ".join(parts) + ". A compute phase "
            "shorter than that is not idle time for its core (see \"Short idle phases are not "
            "idle\").")


def _runs_text(found: Gathered) -> str:
    names = [r.as_posix() for r in found.runs]
    return ", ".join(f"`{n}`" for n in names)


def _words(words: Sequence[str]) -> str:
    """A command line as a shell reads it, `{rank_cpus}`-style placeholders left bare."""
    return " ".join(w if _PLACEHOLDER.fullmatch(w) else shlex.quote(w) for w in words)


def _wrap(text: str, indent: str = "") -> str:
    """Prose wrapped like the hand-written parts of the docs; code spans may wrap (Markdown
    renders the line break as a space)."""
    return textwrap.fill(text, width=76, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def render_section(spec: SweepSpec, found: Gathered, found_cells: Sequence[Cell],
                   figures: dict[str, Path], doc: Path, command: str, today: str,
                   measured: bool) -> str:
    """The Markdown between the markers (ends with a newline)."""
    runs = len(found.runs)
    profile = f" (profile `{spec.profile}`)" if spec.profile else ""
    how = "Measured and rendered" if measured else "Rendered, without measuring,"
    computes_text = "; ".join(f"{c}: {COMPUTE_MEANING[c]}" for c in _axis_values(spec, "compute")
                              if c in COMPUTE_MEANING)
    lines = [
        "<!-- Generated by `deputy-tools perf-doc` (docs/coll-bench.md): edits between the "
        "perf-doc markers are overwritten. -->",
        "",
        "```sh",
        command,
        "```",
        "",
        _wrap(f"{how} on {today}: {runs} run{'s' if runs != 1 else ''} of the "
              f"`{spec.name}` spec{profile}, measured {_dates(found.docs)}; results in "
              f"{_runs_text(found)}. Machine: {machine(found.docs)}."),
        "",
        _wrap(f"Every point: `LAUNCHER {bench_command(spec)}` for OP in "
              f"{', '.join(_axis_values(spec, 'op'))} and COMPUTE in "
              f"{', '.join(_axis_values(spec, 'compute'))}"
              + (f" ({computes_text})" if computes_text else "")
              + ", with each placement's agent and LAUNCHER:"),
        "",
        *(_wrap(line, "  ") for line in _placement_lines(spec, found.docs)),
        "",
        *([_wrap(sleep), ""] if (sleep := _sleep_line(found.docs)) else []),
        _wrap("Overlap is OSU's, max(0, 100 - 100 x (Overall - Compute) / Pure Comm.); "
              "Overall deputy/MPI is deputy's Overall time (post + compute + wait) over MPI's "
              "in the same run (same processes, same buffers; below 1: deputy faster). "
              + ("Every number is the median over the runs." if runs > 1 else "One run.")),
        "",
    ]
    for compute, path in figures.items():
        link = Path(os.path.relpath(path, doc.parent)).as_posix()
        lines += [f"![compute {compute}: overlap and Overall deputy/MPI vs message size, "
                  f"per placement]({link})", ""]
    lines.append(render_markdown(placement_tables(found_cells), heading="####").rstrip("\n"))
    if found.missing:
        lines += ["", _wrap(f"Missing: {len(found.missing)} point(s) without a result (failed "
                            "or not run); their cells hold the other runs' medians, or `-`:"),
                  ""]
        lines += [f"- {m}" for m in found.missing]
    return "\n".join(lines) + "\n"


@dataclass
class PerfDocResult:
    status: int                     # 0, or 1 when a point is missing or failed
    figures: list[Path] = field(default_factory=list)
    appended: bool = False


def perf_doc(spec: SweepSpec, results: Path, doc: Path, figures_dir: Path, command: str,
             deputy: str | None, *, runs: int | None = None, measure_first: bool = True,
             dry_run: bool = False, fail_fast: bool = False, timeout_s: float | None = None,
             live: bool | None = None, today: str | None = None,
             echo: Callable[[str], None] = print,
             warn: Callable[[str], None] = print) -> PerfDocResult:
    """Measures (unless `measure_first` is False), then draws and rewrites `doc`."""
    check_spec(spec)
    if runs is not None and runs < 1:
        raise PerfDocError(f"--runs {runs}: must be at least 1")
    if dry_run and not measure_first:
        raise PerfDocError("--dry-run prints the commands a measurement would run; "
                           "--from measures nothing")
    if not dry_run and not doc.is_file():
        raise PerfDocError(f"--doc {doc}: no such file")
    ok = True
    if measure_first:
        assert deputy is not None
        ok = measure(spec, results, runs or 1, deputy, dry_run=dry_run, fail_fast=fail_fast,
                     timeout_s=timeout_s, live=live, echo=echo, warn=warn)
        if dry_run:
            return PerfDocResult(status=0)
        chosen = run_dirs(results, runs or 1)
    else:
        chosen = existing_runs(results)[:runs] if runs else existing_runs(results)
        if not chosen:
            raise PerfDocError(f"--from {results}: no run-<k> directories of results "
                               "(measure first: the same command without --from)")
        if runs and len(chosen) < runs:
            raise PerfDocError(f"--runs {runs}: {results} has only {len(chosen)} run(s)")
    found = gather(spec, chosen)
    found_cells = cells(found.docs)
    if not found_cells:
        raise PerfDocError(f"no non-blocking deputy/MPI results of {spec.name} in "
                           f"{', '.join(str(r) for r in chosen)}: nothing to render")
    written: dict[str, Path] = {}
    paths: list[Path] = []
    note = ("OSU overlap; Overall ratio within each run"
            + (f"; medians of {len(chosen)} runs" if len(chosen) > 1 else ""))
    for compute in computes(found_cells):
        figure = placement_figure(found_cells, compute, note)
        png, svg = save(figure, figures_dir, f"{spec.name}_{compute}")
        written[compute] = svg
        paths += [png, svg]
    body = render_section(spec, found, found_cells, written, doc, command,
                          today or datetime.date.today().isoformat(), measure_first)
    done = rewrite_file(doc, body, HEADING)
    if done.appended:
        warn(f"note: {doc} had no perf-doc markers: the section and its markers were "
             "appended at its end; move them where they belong, the next run keeps them there")
    if found.missing:
        warn(f"{spec.name}: {len(found.missing)} point(s) without a result, listed in the "
             f"section: {found.missing[0]}" + (" ..." if len(found.missing) > 1 else ""))
    for path in paths:
        echo(str(path))
    echo(str(doc))
    status = 0 if ok and not found.missing else 1
    return PerfDocResult(status=status, figures=paths, appended=done.appended)
