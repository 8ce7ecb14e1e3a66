"""`deputy-tools` / `python -m deputy_tools`: sweep, plot, table, reproduce, perf-doc.

Exit status: 0 success; 1 when a sweep point failed (perf-doc: a point has
no result) or nothing could be plotted or tabulated; 2 for usage, spec and
input errors (as argparse).
Messages for people go to stderr; stdout carries only what a script may
capture (tables, dry-run commands, paths of written files).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Sequence

from deputy_tools import __version__, registry
from deputy_tools.binary import DeputyNotFound, find_deputy
from deputy_tools.catalog import resolve_spec, select_specs, shipped_specs
from deputy_tools.doc_markers import MarkerError
from deputy_tools.perf_doc import SPEC as PERF_DOC_SPEC
from deputy_tools.perf_doc import PerfDocError, perf_doc
from deputy_tools.plot import PlotError, plot_results
from deputy_tools.report import FORMATS, collect_tables, render
from deputy_tools.reproduce import SMALL, reproduce
from deputy_tools.results import ResultError, load_results
from deputy_tools.spec import SpecError, load_spec
from deputy_tools.sweep import default_out_dir, run_sweep, summary


def _warn(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _deputy(args: argparse.Namespace) -> str:
    """The binary; a dry run may go without one (it only prints commands)."""
    try:
        return str(find_deputy(args.deputy))
    except DeputyNotFound:
        if args.dry_run:
            return "deputy"
        raise


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--deputy", metavar="PATH",
                   help="deputy binary (default: $DEPUTY_BIN, then deputy on PATH)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the commands of pending points, run nothing")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failed point")
    p.add_argument("--timeout", type=float, metavar="S",
                   help="seconds per point (default: the spec's timeout_s)")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="live", action="store_const", const=True,
                     help="progress bar even when stderr is not a terminal")
    bar.add_argument("--no-progress", dest="live", action="store_const", const=False,
                     help="one line per point instead of a progress bar")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deputy-tools", description="Sweeps, figures and tables for deputy's benchmarks.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("sweep", help="run a benchmark over a grid of parameters (resumable)",
                       description="Runs `deputy bench ...` once per grid point, one JSON "
                                   "result per point; points already done are skipped.")
    p.add_argument("spec", help="spec file (.json, .yaml) or the name of a shipped spec")
    p.add_argument("-o", "--out", type=Path, metavar="DIR",
                   help="result directory (default: results/<name>[.<profile>])")
    p.add_argument("--profile", help="apply one of the spec's profiles (e.g. small)")
    p.add_argument("--small", dest="profile", action="store_const", const=SMALL,
                   help="same as --profile small")
    _add_run_options(p)

    p = sub.add_parser("plot", help="figures (PNG and SVG) from result JSON files or directories")
    p.add_argument("results", nargs="+", type=Path, metavar="RESULTS")
    p.add_argument("-o", "--out", type=Path, required=True, metavar="DIR")
    p.add_argument("--figure", action="append", default=[], metavar="NAME",
                   help="only this figure ([kind:]name, repeatable; see `deputy-tools figures`)")

    p = sub.add_parser("table", help="Markdown or CSV tables from result JSON files or directories")
    p.add_argument("results", nargs="+", type=Path, metavar="RESULTS")
    p.add_argument("--format", choices=FORMATS, default="markdown")
    p.add_argument("-o", "--out", type=Path, metavar="FILE", help="write here instead of stdout")

    p = sub.add_parser("reproduce", help="run, plot and tabulate every shipped spec")
    p.add_argument("-o", "--out", type=Path, default=Path("results"), metavar="DIR")
    p.add_argument("--small", action="store_true", help="the small profile: minutes on 2 cores")
    p.add_argument("--only", action="append", default=[], metavar="SPEC",
                   help="only this spec, or a group: every shipped <SPEC>_* spec or every spec "
                        "of benchmark SPEC (--only channel; repeatable)")
    _add_run_options(p)

    p = sub.add_parser(
        "perf-doc", help="measure the collective figures and rewrite their section of a doc",
        description="Sweeps the coll_offload spec (resumable) once per run, takes medians over "
                    "the runs, draws the figures (PNG, SVG) and rewrites only the part of "
                    "--doc between `<!-- deputy-tools perf-doc: begin -->` and `<!-- "
                    "deputy-tools perf-doc: end -->` (appended at the end when missing).")
    p.add_argument("--doc", type=Path, required=True, metavar="FILE",
                   help="the Markdown document to rewrite (docs/PERFORMANCE.md)")
    p.add_argument("--figures", type=Path, required=True, metavar="DIR",
                   help="where the figures go (docs/figures); linked relative to --doc")
    p.add_argument("--spec", default=PERF_DOC_SPEC,
                   help=f"spec file or shipped spec name (default {PERF_DOC_SPEC}; it needs "
                        "the axes placement, op and compute)")
    p.add_argument("--small", dest="profile", action="store_const", const=SMALL,
                   help="the spec's small profile (a few minutes)")
    p.add_argument("--runs", type=int, metavar="N",
                   help="measure N runs (default 1; more runs add to those done); with "
                        "--from: use the first N (default: every run found)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--measure", action="store_true",
                      help="measure the pending points, then render (the default)")
    mode.add_argument("--from", dest="from_dir", type=Path, metavar="DIR",
                      help="render from the results in DIR/run-<k>, measure nothing")
    p.add_argument("-o", "--results", type=Path, metavar="DIR",
                   help="where measurements go, DIR/run-<k> (default results/<spec>[.small])")
    _add_run_options(p)

    sub.add_parser("specs", help="list the shipped sweep specs")
    sub.add_parser("figures", help="list the figures each benchmark kind can draw")
    return parser


def _sweep(args: argparse.Namespace) -> int:
    spec = load_spec(resolve_spec(args.spec), args.profile)
    out_dir = args.out or default_out_dir(Path("results"), spec)
    report = run_sweep(spec, out_dir, _deputy(args), dry_run=args.dry_run, fail_fast=args.fail_fast,
                       timeout_s=args.timeout, live=args.live)
    if not args.dry_run:
        _warn(summary(spec, report, out_dir))
    return 0 if report.ok else 1


def _load(paths: Sequence[Path]):
    docs, notes = load_results(paths)
    for note in notes:
        _warn(f"note: {note}")
    if not docs:
        _warn("error: no deputy bench results among the given paths")
    return docs


def _plot(args: argparse.Namespace) -> int:
    docs = _load(args.results)
    if not docs:
        return 1
    plotted, notes = plot_results(docs, args.out, args.figure)
    for note in notes:
        _warn(f"note: {note}")
    for item in plotted:
        print(item.paths[0])
    return 0 if plotted else 1


def _table(args: argparse.Namespace) -> int:
    docs = _load(args.results)
    if not docs:
        return 1
    tables, notes = collect_tables(docs)
    for note in notes:
        _warn(f"note: {note}")
    if not tables:
        return 1
    text = render(tables, args.format)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        print(args.out)
    else:
        sys.stdout.write(text)
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    select_specs(args.only)  # a misspelt --only is the error to report, not a missing binary
    return reproduce(args.out, _deputy(args), small=args.small, only=args.only,
                     dry_run=args.dry_run, fail_fast=args.fail_fast, timeout_s=args.timeout,
                     live=args.live, warn=_warn)


def _perf_doc(args: argparse.Namespace) -> int:
    spec = load_spec(resolve_spec(args.spec), args.profile)
    if args.from_dir is not None and args.results is not None:
        raise PerfDocError("--from DIR renders the results in DIR; -o DIR is where a "
                           "measurement goes: give one of them")
    measuring = args.from_dir is None
    results = args.from_dir or args.results or default_out_dir(Path("results"), spec)
    command = shlex.join(["deputy-tools", *args.argv])
    done = perf_doc(spec, results, args.doc, args.figures, command,
                    _deputy(args) if measuring else None, runs=args.runs,
                    measure_first=measuring, dry_run=args.dry_run, fail_fast=args.fail_fast,
                    timeout_s=args.timeout, live=args.live, warn=_warn)
    return done.status


def _specs(args: argparse.Namespace) -> int:
    for path in shipped_specs():
        spec = load_spec(path)
        profiles = f" (profiles: {', '.join(spec.profiles)})" if spec.profiles else ""
        print(f"{spec.name}: {spec.description}{profiles}")
    return 0


def _figures(args: argparse.Namespace) -> int:
    for name in registry.known():
        for figure in registry.get(name).figures:
            print(f"{name}:{figure.name}  {figure.summary}")
    return 0


COMMANDS = {"sweep": _sweep, "plot": _plot, "table": _table, "reproduce": _reproduce,
            "perf-doc": _perf_doc, "specs": _specs, "figures": _figures}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    args.argv = argv  # perf-doc writes the exact command into the document
    try:
        return COMMANDS[args.command](args)
    except (SpecError, ResultError, PlotError, DeputyNotFound, PerfDocError, MarkerError,
            ValueError) as e:
        _warn(f"error: {e}")
        return 2
    except BrokenPipeError:  # `deputy-tools ... | head`: the reader has all it wanted
        sys.stdout = open(os.devnull, "w")
        return 0
    except KeyboardInterrupt:
        _warn("interrupted; finished points are kept, run the same command to resume")
        return 130
