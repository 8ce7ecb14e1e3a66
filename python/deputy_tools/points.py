"""Sweep points: one combination of grid values, its command line and its file.

Resumption rests on one rule: a point's result file name is a pure function
of what the point runs (flags, launcher, environment, agent). The name starts
with the readable coordinates (``size-4k_mode-sync``) so a directory listing
explains itself, and ends with a short hash of the benchmark's full argument
list, so changing any fixed flag of a spec (or a profile) yields new names
instead of silently reusing results measured under other settings.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from deputy_tools.spec import Axis, AxisValue, FlagValue, SweepSpec

_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")


@dataclass(frozen=True)
class Point:
    """Coordinates (axis, label) in grid order, the merged flags they imply, and how the
    point is run: its launcher and its private agent (None: none), the spec's unless a
    setting axis value changes them. `agent_setting` names the values that did
    (``placement=own-core``; "" for the spec's own agent)."""

    coords: tuple[tuple[str, str], ...]
    flags: Mapping[str, FlagValue]
    launcher: tuple[str, ...] = ()
    agent: Mapping[str, Any] | None = None
    agent_setting: str = ""

    def label(self) -> str:
        """`size=4k mode=sync`: how messages and progress name the point."""
        return " ".join(f"{axis}={value}" for axis, value in self.coords) or "(single point)"


def _merged_agent(base: Mapping[str, Any] | None,
                  change: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's agent with a setting's: args appended, config replaced."""
    agent = dict(base or {})
    if "args" in change:
        agent["args"] = [*agent.get("args", []), *change["args"]]
    if "config" in change:
        agent["config"] = change["config"]
    return agent


def _run_settings(spec: SweepSpec, combo: tuple[AxisValue, ...], axes: tuple[Axis, ...],
                  ) -> tuple[tuple[str, ...], Mapping[str, Any] | None, str]:
    launcher, agent = spec.launcher, spec.agent
    changed = []
    for axis, value in zip(axes, combo):
        if value.launcher is not None:
            launcher = value.launcher
        if value.agent is not None:
            agent = _merged_agent(agent, value.agent)
            changed.append(f"{axis.name}={value.label}")
    return launcher, agent, " ".join(changed)


def expand(spec: SweepSpec) -> list[Point]:
    """Every combination of the axes, the first axis varying slowest."""
    points = []
    for combo in itertools.product(*(axis.values for axis in spec.axes)):
        flags: dict[str, FlagValue] = dict(spec.flags)
        for value in combo:
            flags.update(value.flags)
        coords = tuple((axis.name, value.label) for axis, value in zip(spec.axes, combo))
        launcher, agent, setting = _run_settings(spec, combo, spec.axes)
        points.append(Point(coords=coords, flags=flags, launcher=launcher, agent=agent,
                            agent_setting=setting))
    return points


def flag_args(flags: Mapping[str, FlagValue]) -> list[str]:
    """Command-line words for flags: `s` -> -s, `queue_depth` -> --queue-depth."""
    args: list[str] = []
    for name, value in flags.items():
        if value is None or value is False:
            continue
        option = f"-{name}" if len(name) == 1 else "--" + name.replace("_", "-")
        if value is True:
            args.append(option)
        elif isinstance(value, list):
            args += [option, ",".join(str(v) for v in value)]
        else:
            args += [option, str(value)]
    return args


def bench_args(spec: SweepSpec, point: Point, out_dir: Path | None = None) -> list[str]:
    """What follows the binary: `bench mover --size 4k ...` (no --out); `{out}` in a
    string flag value becomes `out_dir` when given."""
    flags = point.flags
    if out_dir is not None:
        flags = {k: with_out_dir(v, out_dir) if isinstance(v, str) else v
                 for k, v in flags.items()}
    return ["bench", *spec.bench, *flag_args(flags)]


def with_out_dir(word: str, out_dir: Path) -> str:
    """`{out}` -> the result directory (plain replace: other braces stay as written)."""
    return word.replace("{out}", str(out_dir))


def safe_name(text: str) -> str:
    """`text` with anything but letters, digits, '.', '+' and '-' made '_' (file names)."""
    return _UNSAFE.sub("_", text)


def point_key(spec: SweepSpec, point: Point) -> str:
    """The stable file stem of a point (see the module docstring)."""
    readable = "_".join(f"{axis}-{safe_name(value)}" for axis, value in point.coords)
    # The flags as a mapping: the order they are written in a spec is not a setting.
    what = {"bench": list(spec.bench), "flags": dict(point.flags),
            "launcher": list(point.launcher)}
    if spec.env:  # only when given: the names of existing results stay as they were
        what["env"] = dict(spec.env)
    if point.agent is not None:
        what["agent"] = dict(point.agent)
    identity = json.dumps(what, sort_keys=True)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:10]
    readable = readable[:120] or "point"
    return f"{readable}.{digest}"


AGENT_FACTS = ("rank_cpus", "agent_cpus")


def needs_agent_facts(point: Point) -> bool:
    """Whether the point's launcher names what its agent reports ({rank_cpus}, ...)."""
    return any("{" + fact + "}" in word for word in point.launcher for fact in AGENT_FACTS)


def command(spec: SweepSpec, point: Point, deputy: str, out: Path,
            facts: Mapping[str, str] | None = None) -> list[str]:
    """The full argv of a point, launcher first, writing its JSON to `out`. `facts`:
    what the point's private agent reported (AGENT_FACTS), for the launcher."""
    values = {axis: value for axis, value in point.coords}
    values.update({k: str(v) for k, v in point.flags.items() if not isinstance(v, (list, bool))})
    values.update(facts or {})
    values["out"] = str(out.parent)
    values["deputy"] = deputy
    try:
        launcher = [word.format(**values) for word in point.launcher]
    except KeyError as e:
        hint = (" (it comes from the point's private agent: give the spec or the setting "
                "an agent)" if e.args[0] in AGENT_FACTS else "")
        raise ValueError(f"launcher of {spec.name}: no axis or flag named {e}{hint}") from e
    return [*launcher, deputy, *bench_args(spec, point, out.parent), "--out", str(out)]


def result_path(out_dir: Path, spec: SweepSpec, point: Point) -> Path:
    return out_dir / f"{point_key(spec, point)}.json"
