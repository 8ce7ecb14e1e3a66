"""Loading benchmark result documents and telling which benchmark wrote each.

Every `deputy bench X --out` document names its benchmark ("benchmark":
"mover"; the rail benchmark currently says "tool": "deputy bench rail"),
so plots and tables never need to be told what a file is, and a directory
of mixed results can be handed over whole. Files that are not results
(specs, logs, a `.json.partial` of a running sweep) are skipped with a
note instead of stopping the command.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping


class ResultError(ValueError):
    """A result document without a field a plot or table needs; names file and field."""


@dataclass(frozen=True)
class ResultDoc:
    path: Path
    kind: str
    doc: Mapping[str, Any]


def kind_of(doc: Any) -> str | None:
    """The benchmark that wrote `doc`: "benchmark", else the last word of "tool"."""
    if not isinstance(doc, dict):
        return None
    bench = doc.get("benchmark")
    if isinstance(bench, str) and bench:
        return bench
    tool = doc.get("tool")
    if isinstance(tool, str) and tool.startswith("deputy bench "):
        return tool.split()[-1]
    return None


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files as given; directories become their *.json files, recursively, sorted."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.json") if p.is_file())
        else:
            files.append(path)
    return files


def load_results(paths: Iterable[Path]) -> tuple[list[ResultDoc], list[str]]:
    """The result documents among `paths`, and one note per file skipped."""
    docs: list[ResultDoc] = []
    notes: list[str] = []
    for path in expand_paths(paths):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            notes.append(f"{path}: cannot read: {e.strerror}")
            continue
        except ValueError as e:
            notes.append(f"{path}: not JSON ({e}); skipped")
            continue
        kind = kind_of(doc)
        if kind is None:
            notes.append(f"{path}: not a deputy bench result (no \"benchmark\" field); skipped")
            continue
        docs.append(ResultDoc(path=path, kind=kind, doc=doc))
    return docs, notes


def need(mapping: Any, key: str, doc: ResultDoc, where: str = "") -> Any:
    """mapping[key], or a ResultError naming the file and the dotted field."""
    if not isinstance(mapping, dict) or key not in mapping:
        field = f"{where}.{key}" if where else key
        raise ResultError(f"{doc.path}: {doc.kind} result without field '{field}'")
    return mapping[key]
