"""Grouping flat result records into an x axis and labelled series.

A figure fixes its x parameter (transfer size, batch size, engines...);
everything else that varies among the records becomes part of the series
label, so no two different configurations are ever averaged into one bar
whatever files the user passes. Parameters that are the same everywhere go
to the subtitle instead, and parameters that merely follow another one
(a sweep that sets queue depth = buffers = work-queue size) are named once
rather than repeated in every label.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

Record = Mapping[str, Any]


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Param:
    key: str
    prefix: str = ""                       # "BS" -> "BS 4"; "" -> the value alone
    fmt: Callable[[Any], str] = str
    order: Callable[[Any], Any] = _identity  # sort key of the values
    # False: never folded into the x axis as a follower, even when each x has one value
    # (channel runs of two modes at disjoint sizes are two lines, not one zigzag).
    may_follow_x: bool = True

    def show(self, value: Any) -> str:
        text = self.fmt(value)
        return f"{self.prefix} {text}" if self.prefix else text


def distinct(records: Sequence[Record], param: Param) -> list[Any]:
    """The non-None values of `param`, in its order."""
    seen = {r.get(param.key) for r in records} - {None}
    return sorted(seen, key=param.order)


def follows(records: Sequence[Record], dependent: Param, leader: Param) -> bool:
    """True when each value of `leader` comes with at most one value of `dependent`."""
    seen: dict[Any, Any] = {}
    for r in records:
        lead, dep = r.get(leader.key), r.get(dependent.key)
        if lead is None or dep is None:
            continue
        if seen.setdefault(lead, dep) != dep:
            return False
    return True


@dataclass
class Grouping:
    x: Param | None  # None: only series (one record per run, e.g. rail runs)
    xs: list[Any]
    series: list[Param]
    constants: list[tuple[Param, Any]]
    followers: list[tuple[Param, Param]] = field(default_factory=list)  # (follower, leader)

    def label(self, record: Record) -> str:
        parts = [p.show(record[p.key]) for p in self.series if record.get(p.key) is not None]
        return ", ".join(parts)

    def labels(self, records: Sequence[Record]) -> list[str]:
        """Series labels in a stable order: by the parameters' own orders."""
        keyed = {}
        for r in records:
            key = tuple((0,) if r.get(p.key) is None else (1, p.order(r[p.key]))
                        for p in self.series)
            keyed.setdefault(self.label(r), key)
        return sorted(keyed, key=lambda label: keyed[label])

    def values(self, records: Sequence[Record], metric: Callable[[Record], float | None],
               ) -> dict[str, list[float]]:
        """label -> one value per x (the median of duplicates; NaN where none)."""
        assert self.x is not None, "values() needs an x parameter"
        cells: dict[tuple[str, Any], list[float]] = {}
        for r in records:
            value = metric(r)
            if value is None or r.get(self.x.key) is None:
                continue
            cells.setdefault((self.label(r), r[self.x.key]), []).append(value)
        out = {}
        for label in self.labels(records):
            out[label] = [statistics.median(cells[(label, x)]) if (label, x) in cells else math.nan
                          for x in self.xs]
        return out

    def subtitle(self) -> str:
        """Constants, then what follows what: the context a reader needs under the title."""
        text = ", ".join(p.show(v) for p, v in self.constants)
        leaders: dict[str, list[str]] = {}
        for follower, leader in self.followers:
            name = follower.prefix or follower.key
            leaders.setdefault(leader.prefix or leader.key, []).append(name)
        tied = [" = ".join([*followers, lead]) for lead, followers in leaders.items()]
        return "; ".join(([text] if text else []) + tied)


def group(records: Sequence[Record], x: Param | None, params: Sequence[Param]) -> Grouping:
    """Splits `params` into series, constants and followers for plotting against `x`."""
    grouping = Grouping(x=x, xs=distinct(records, x) if x else [], series=[], constants=[])
    for p in params:
        if x is not None and p.key == x.key:
            continue
        values = distinct(records, p)
        if len(values) == 1:
            grouping.constants.append((p, values[0]))
        elif len(values) > 1:
            # Following x only means something when x itself varies.
            leaders = ([x] if x is not None and len(grouping.xs) > 1 and p.may_follow_x
                       else []) + grouping.series
            leader = next((q for q in leaders
                           if follows(records, p, q) and (q is x or follows(records, q, p))), None)
            if leader is None:
                grouping.series.append(p)
            else:
                grouping.followers.append((p, leader))
    return grouping
