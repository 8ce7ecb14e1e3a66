"""Rewriting the generated part of a hand-written document, and nothing else.

docs/PERFORMANCE.md is prose written by people with sections generated
from results in between. A generated section lives between two HTML
comments (invisible in rendered Markdown)::

    <!-- deputy-tools perf-doc: begin -->
    ...generated...
    <!-- deputy-tools perf-doc: end -->

and a rewrite replaces exactly the bytes between the end of the begin
marker and the start of the end marker: every byte outside them, line
endings included, stays as it was, so a regenerated document's diff is
the measurement and nothing else. A document without the markers gets
them, with the section, appended at its end (under a heading of its own);
markers out of order or repeated are an error naming the line, because
guessing which pair was meant could overwrite prose.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

BEGIN = "<!-- deputy-tools perf-doc: begin -->"
END = "<!-- deputy-tools perf-doc: end -->"


class MarkerError(ValueError):
    """Markers that cannot be paired; names the document and the line."""


@dataclass(frozen=True)
class Rewrite:
    text: str
    appended: bool  # the markers were missing: the section went to the end


def _line(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _find_once(text: str, marker: str, where: str) -> int:
    first = text.find(marker)
    if first >= 0:
        second = text.find(marker, first + len(marker))
        if second >= 0:
            raise MarkerError(f"{where}:{_line(text, second)}: a second `{marker}` (the first "
                              f"is on line {_line(text, first)}); keep one pair")
    return first


def replace_section(text: str, body: str, heading: str, where: str = "the document",
                    ) -> Rewrite:
    """`text` with `body` between the markers (body ends with a newline); without markers,
    `heading`, the markers and `body` appended at the end."""
    if body and not body.endswith("\n"):
        body += "\n"
    begin = _find_once(text, BEGIN, where)
    end = _find_once(text, END, where)
    if begin < 0 and end < 0:
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n")
                                                             else "\n\n")
        return Rewrite(f"{text}{sep}{heading}\n\n{BEGIN}\n{body}{END}\n", appended=True)
    if begin < 0 or end < 0:
        present, missing = (BEGIN, END) if begin >= 0 else (END, BEGIN)
        raise MarkerError(f"{where}:{_line(text, max(begin, end))}: `{present}` without "
                          f"`{missing}`; add it, or remove both to have the section appended")
    if end < begin:
        raise MarkerError(f"{where}:{_line(text, end)}: `{END}` comes before `{BEGIN}` "
                          f"(line {_line(text, begin)})")
    start = begin + len(BEGIN)
    return Rewrite(text[:start] + "\n" + body + text[end:], appended=False)


def rewrite_file(path: Path, body: str, heading: str) -> Rewrite:
    """replace_section on a file, byte-exact (no newline translation), written atomically."""
    text = path.read_bytes().decode("utf-8")
    done = replace_section(text, body, heading, where=str(path))
    if done.text != text:
        partial = path.with_name(f".{path.name}.perf-doc")
        partial.write_bytes(done.text.encode("utf-8"))
        shutil.copymode(path, partial)
        os.replace(partial, path)
    return done
