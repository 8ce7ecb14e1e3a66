"""Progress of a sweep: a rich bar with ETA on a terminal, plain lines elsewhere.

Sweeps run for minutes to hours, so the bar's time-remaining estimate is
the point; in CI logs and pipes a live bar only produces noise, so the
same events become one line per point instead. Failures are printed the
moment they happen (above the bar) so they are not lost in a long run.
"""

from __future__ import annotations

import sys
from typing import Protocol, TextIO

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)


class SweepProgress(Protocol):
    def __enter__(self) -> "SweepProgress": ...
    def __exit__(self, *exc: object) -> None: ...
    def start_point(self, label: str) -> None: ...
    def finish_point(self, label: str, ok: bool, seconds: float) -> None: ...
    def note(self, text: str) -> None: ...


class RichProgress:
    def __init__(self, title: str, total: int, console: Console | None = None) -> None:
        self._console = console or Console(stderr=True)
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("elapsed"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            TextColumn("{task.fields[point]}"), console=self._console)
        self._task = self._progress.add_task(title, total=total, point="")

    def __enter__(self) -> "RichProgress":
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def start_point(self, label: str) -> None:
        self._progress.update(self._task, point=label)

    def finish_point(self, label: str, ok: bool, seconds: float) -> None:
        self._progress.update(self._task, advance=1, point="")

    def note(self, text: str) -> None:
        self._progress.console.print(text, markup=False, highlight=False)


class PlainProgress:
    def __init__(self, title: str, total: int, stream: TextIO | None = None) -> None:
        self._title = title
        self._total = total
        self._done = 0
        self._stream = stream or sys.stderr

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def start_point(self, label: str) -> None:
        pass

    def finish_point(self, label: str, ok: bool, seconds: float) -> None:
        self._done += 1
        status = "ok" if ok else "FAILED"
        print(f"{self._title} [{self._done}/{self._total}] {status} {label} ({seconds:.1f} s)",
              file=self._stream, flush=True)

    def note(self, text: str) -> None:
        print(text, file=self._stream, flush=True)


def make_progress(title: str, total: int, live: bool | None = None) -> SweepProgress:
    """live None: a bar only when stderr is a terminal."""
    if live is None:
        live = sys.stderr.isatty()
    return RichProgress(title, total) if live else PlainProgress(title, total)
