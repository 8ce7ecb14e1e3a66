"""Sweep specifications: which `deputy bench` to run, over which grid.

A spec is a small JSON (or YAML) document rather than a shell loop so that
an experiment can be reviewed, versioned next to the figures it produces,
and re-run or resumed exactly. Shape::

    {
      "name": "mover_fig2",                    # names the output directory
      "description": "what it reproduces",
      "reproduces": "a DSA sweep, figure 2",   # where the experiment comes from
      "bench": "mover",                        # -> deputy bench mover
      "flags": {"op": "memmove", "reps": 3},   # fixed flags of every point
      "grid": {                                # one point per combination
        "size": ["256", "4k", "64k"],          # scalar axis: --size 256 ...
        "mode": {                              # variant axis: label -> flags
          "cpu":  {"cpu": true},
          "sync": {"wait": "spin"}
        },
        "placement": [                         # setting axis: how a point is run
          {"label": "shared", "agent": {"args": ["--agent-cores", "shared"]}},
          {"label": "own-core", "agent": {"args": ["--agent-cores", "last"]},
           "launcher": ["{deputy}", "mpirun", "--baseline", "--agent-cores", "last",
                        "--", "-np", "2"]}
        ]
      },
      "figures": ["throughput_vs_size"],       # what `reproduce` plots
      "timeout_s": 120,                        # per point
      "launcher": ["mpirun", "-np", "{ranks}"],# optional command prefix
      "setup": [{"creates": "channel.key",     # optional, once per result directory
                 "run": ["{deputy}", "bench", "channel", "--keygen", "{out}/channel.key"]}],
      "env": {"OMPI_ALLOW_RUN_AS_ROOT": "1"},  # optional, added to every command's environment
      "agent": {"config": {...},               # optional: a private agent for the sweep
                "args": ["--engines", "2"]},
      "profiles": {"small": {"flags": {...}, "grid": {...}}}
    }

Flag names are the benchmark's own (long names, or one letter for a short
flag); `true` passes a bare flag, `false`/`null` leaves it out, a list is
comma-joined. Later sources win: fixed flags, then each axis in order.
A profile overrides flags (null removes one), replaces or adds axes, and
may change the timeout, so one spec serves the full and the small run.

`{out}` in a string flag value (or a launcher word) is the result
directory, and `{deputy}` in a launcher word the binary being swept,
substituted when the command is built, so a point's identity
(points.point_key) does not depend on where results go. `setup` steps make
files the points need and cannot ship in git, such as a 0600 key file for
`--secure --key`: each runs once, before the first pending point, unless
`<out>/<creates>` already exists; `{deputy}` is the binary being swept.

`agent` makes the sweep start its own `deputy agent --daemon` (on a socket
in a fresh 0700 directory, with `config` as its --config file when given)
before the first pending point, pass it to every point as DEPUTY_AGENT and
stop it when the sweep ends (agent.py); `env` is for what a launcher needs
(Open MPI refuses to run as root without OMPI_ALLOW_RUN_AS_ROOT=1 and
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1). Both are part of a point's identity.
`args` are added to the agent's command line (`--agent-cores last`); the
sweep's own words (--daemon, --socket, --pidfile, --log-file, --config) are
refused there.

A setting axis is a list of objects, for what is not a benchmark flag: how
the point is run. Each value has a `label` and any of `flags` (as a variant
axis value), `agent` (`args` added after the spec's, `config` replacing the
spec's; a private agent even when the spec has none) and `launcher` (the
whole launcher for this value's points). The agent's placement is such a
setting: `--agent-cores last` needs its own agent, so the sweep starts one
private agent per distinct agent setting and runs each one's points in
turn. `{rank_cpus}` and `{agent_cpus}` in a launcher word are the CPU lists
that agent reports (`deputy info --format json`, "placement"): the ranks go
on the CPUs the agent leaves them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Union

Scalar = Union[str, int, float, bool, None]
FlagValue = Union[Scalar, list]

_SPEC_KEYS = {"name", "description", "bench", "flags", "grid", "figures", "timeout_s",
              "launcher", "profiles", "reproduces", "setup", "env", "agent"}
_PROFILE_KEYS = {"description", "flags", "grid", "timeout_s"}
_SETUP_KEYS = {"creates", "run"}
_AGENT_KEYS = {"config", "args"}
_SETTING_KEYS = {"label", "flags", "agent", "launcher"}
# The private agent's command line words the sweep writes itself (agent.py).
_SWEEP_AGENT_WORDS = ("--daemon", "--socket", "--pidfile", "--log-file", "--config")
DEFAULT_TIMEOUT_S = 600.0


class SpecError(ValueError):
    """A spec that cannot be run; the message names the file and the key."""


@dataclass(frozen=True)
class AxisValue:
    """One value of an axis: the label used in point names, the flags it sets and, for a
    setting axis, how its points are run (None: as the spec says)."""

    label: str
    flags: Mapping[str, FlagValue]
    agent: Mapping[str, Any] | None = None      # {"args": [...], "config": {...}}
    launcher: tuple[str, ...] | None = None     # replaces the spec's launcher


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[AxisValue, ...]


@dataclass(frozen=True)
class SetupStep:
    """A command run once per result directory unless <out>/<creates> exists."""

    creates: str
    run: tuple[str, ...]


@dataclass(frozen=True)
class SweepSpec:
    name: str
    bench: tuple[str, ...]
    flags: Mapping[str, FlagValue]
    axes: tuple[Axis, ...]
    description: str = ""
    figures: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    launcher: tuple[str, ...] = ()
    setup: tuple[SetupStep, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    agent: Mapping[str, Any] | None = None  # {"config": {...}, "args": [...]}: a private agent
    profile: str | None = None
    profiles: tuple[str, ...] = ()
    source: Path | None = field(default=None, compare=False)


def load_spec(path: Path, profile: str | None = None) -> SweepSpec:
    """Reads a .json, .yaml or .yml spec and applies `profile` if given."""
    raw = _read(path)
    return parse_spec(raw, where=str(path), profile=profile, source=path)


def parse_spec(raw: Any, where: str, profile: str | None = None,
               source: Path | None = None) -> SweepSpec:
    """Validates a decoded spec; every error names `where` and the offending key."""
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: a spec is an object with keys {sorted(_SPEC_KEYS)}")
    _reject_unknown(raw, _SPEC_KEYS, where)
    profiles = raw.get("profiles", {}) or {}
    if not isinstance(profiles, dict):
        raise SpecError(f"{where}: 'profiles' must be an object of name -> overrides")
    if profile is not None:
        if profile not in profiles:
            known = ", ".join(sorted(profiles)) or "none"
            raise SpecError(f"{where}: no profile '{profile}' (profiles: {known})")
        raw = _apply_profile(raw, profiles[profile], f"{where}: profiles.{profile}")

    name = raw.get("name")
    if not isinstance(name, str) or not name or "/" in name:
        raise SpecError(f"{where}: 'name' must be a non-empty string without '/'")
    bench = raw.get("bench")
    if isinstance(bench, str):
        bench_words = tuple(bench.split())
    elif isinstance(bench, list) and bench and all(isinstance(w, str) for w in bench):
        bench_words = tuple(bench)
    else:
        raise SpecError(f"{where}: 'bench' must name the benchmark, e.g. \"mover\"")
    flags = _flags(raw.get("flags", {}), f"{where}: flags")
    axes = _axes(raw.get("grid", {}), f"{where}: grid")
    figures = raw.get("figures", [])
    if not isinstance(figures, list) or not all(isinstance(f, str) for f in figures):
        raise SpecError(f"{where}: 'figures' must be a list of figure names")
    timeout = raw.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise SpecError(f"{where}: 'timeout_s' must be a positive number of seconds")
    launcher = _launcher(raw.get("launcher", []), f"{where}: 'launcher'")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise SpecError(f"{where}: 'description' must be a string")
    setup = _setup(raw.get("setup", []), f"{where}: setup")
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and k and "=" not in k
                                            and isinstance(v, str) for k, v in env.items()):
        raise SpecError(f"{where}: 'env' must be an object of VARIABLE -> string value")
    agent = _agent(raw.get("agent"), f"{where}: agent")
    return SweepSpec(name=name, bench=bench_words, flags=flags, axes=axes,
                     description=description, figures=tuple(figures),
                     timeout_s=float(timeout), launcher=tuple(launcher), setup=setup,
                     env=dict(env), agent=agent,
                     profile=profile, profiles=tuple(sorted(profiles)), source=source)


def _agent(raw: Any, where: str) -> dict[str, Any] | None:
    """None or false: no agent; true or {}: a default private agent; {"config": {...}}:
    one with that agent config (e.g. {"agent": {"max_pool_bytes": 4294967296}}), and
    {"args": [...]}: more `deputy agent` words (e.g. ["--agent-cores", "last"])."""
    if raw is None or raw is False:
        return None
    if raw is True:
        return {}
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: must be true or an object with keys {sorted(_AGENT_KEYS)}")
    _reject_unknown(raw, _AGENT_KEYS, where)
    if "config" in raw and not isinstance(raw["config"], dict):
        raise SpecError(f"{where}.config: must be an object (the agent's --config JSON)")
    if "args" in raw:
        args = raw["args"]
        if not isinstance(args, list) or not all(isinstance(w, str) and w for w in args):
            raise SpecError(f"{where}.args: must be a list of `deputy agent` words, "
                            "e.g. [\"--agent-cores\", \"last\"]")
        for word in args:
            if word.split("=")[0] in _SWEEP_AGENT_WORDS:
                raise SpecError(f"{where}.args: {word} is the sweep's own (it starts the agent "
                                "on a private socket, with the spec's config)")
    return dict(raw)


def _launcher(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(w, str) for w in raw):
        raise SpecError(f"{where}: must be a list of strings")
    return tuple(raw)


def _setup(raw: Any, where: str) -> tuple[SetupStep, ...]:
    if not isinstance(raw, list):
        raise SpecError(f"{where}: must be a list of {{\"creates\": FILE, \"run\": [WORDS]}}")
    steps = []
    for i, step in enumerate(raw):
        here = f"{where}[{i}]"
        if not isinstance(step, dict):
            raise SpecError(f"{here}: a setup step is an object with keys {sorted(_SETUP_KEYS)}")
        _reject_unknown(step, _SETUP_KEYS, here)
        creates, run = step.get("creates"), step.get("run")
        if (not isinstance(creates, str) or not creates or creates.startswith("/")
                or ".." in Path(creates).parts):
            raise SpecError(f"{here}: 'creates' must name a file inside the result directory")
        if (not isinstance(run, list) or not run
                or not all(isinstance(w, str) and w for w in run)):
            raise SpecError(f"{here}: 'run' must be a non-empty list of strings")
        steps.append(SetupStep(creates=creates, run=tuple(run)))
    return tuple(steps)


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"{path}: cannot read the spec: {e.strerror}") from e
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml  # optional: Debian's python3-yaml
        except ImportError as e:
            raise SpecError(f"{path}: YAML specs need PyYAML (Debian: python3-yaml); "
                            "or write the spec as JSON") from e
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise SpecError(f"{path}: not valid YAML: {e}") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(f"{path}: not valid JSON: {e}") from e


def _reject_unknown(raw: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in raw:
        if key not in allowed:
            raise SpecError(f"{where}: unknown key '{key}' (allowed: {', '.join(sorted(allowed))})")


def _apply_profile(raw: dict, overrides: Any, where: str) -> dict:
    if not isinstance(overrides, dict):
        raise SpecError(f"{where}: a profile is an object with keys {sorted(_PROFILE_KEYS)}")
    _reject_unknown(overrides, _PROFILE_KEYS, where)
    merged = dict(raw)
    flags = dict(raw.get("flags", {}) or {})
    for key, value in (overrides.get("flags") or {}).items():
        if value is None:
            flags.pop(key, None)
        else:
            flags[key] = value
    merged["flags"] = flags
    grid = dict(raw.get("grid", {}) or {})
    grid.update(overrides.get("grid") or {})  # replaced axes keep their position
    merged["grid"] = grid
    if "timeout_s" in overrides:
        merged["timeout_s"] = overrides["timeout_s"]
    return merged


def _flag_value(value: Any, where: str) -> FlagValue:
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                       for v in value):
        return list(value)
    raise SpecError(f"{where}: a flag value is a string, number, true/false, null "
                    f"or a list of strings/numbers, got {json.dumps(value)[:60]}")


def _flags(raw: Any, where: str) -> dict[str, FlagValue]:
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: must be an object of flag-name -> value")
    out: dict[str, FlagValue] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key or key.startswith("-"):
            raise SpecError(f"{where}: flag name '{key}' must be given without dashes")
        out[key] = _flag_value(value, f"{where}.{key}")
    return out


def _axes(raw: Any, where: str) -> tuple[Axis, ...]:
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: must be an object of axis-name -> values")
    axes = []
    for name, values in raw.items():
        here = f"{where}.{name}"
        if isinstance(values, list) and values and all(isinstance(v, dict) for v in values):
            axes.append(Axis(name=name, values=tuple(
                _setting(v, f"{here}[{i}]") for i, v in enumerate(values))))
        elif isinstance(values, list):
            if not values:
                raise SpecError(f"{here}: an axis needs at least one value")
            if name.startswith("-"):
                raise SpecError(f"{here}: axis (flag) names are given without dashes")
            items = []
            for v in values:
                value = _flag_value(v, here)
                if isinstance(value, list) or value is None:
                    raise SpecError(f"{here}: scalar axis values are strings, numbers or booleans")
                items.append(AxisValue(label=_label(value), flags={name: value}))
            axes.append(Axis(name=name, values=tuple(items)))
        elif isinstance(values, dict):
            if not values:
                raise SpecError(f"{here}: an axis needs at least one value")
            items = [AxisValue(label=str(label), flags=_flags(flags, f"{here}.{label}"))
                     for label, flags in values.items()]
            axes.append(Axis(name=name, values=tuple(items)))
        else:
            raise SpecError(f"{here}: an axis is a list of values or an object of label -> flags")
        labels = [v.label for v in axes[-1].values]
        if len(set(labels)) != len(labels):
            raise SpecError(f"{here}: repeated value")
    return tuple(axes)


def _setting(raw: dict, where: str) -> AxisValue:
    """One value of a setting axis: {"label", "flags", "agent", "launcher"}."""
    _reject_unknown(raw, _SETTING_KEYS, where)
    label = raw.get("label")
    if isinstance(label, bool) or not isinstance(label, (str, int, float)) or label == "":
        raise SpecError(f"{where}.label: a setting value needs a label (a string), "
                        "which names its points")
    agent = None
    if "agent" in raw:
        agent = _agent(raw["agent"], f"{where}.agent")
        if agent is None:
            raise SpecError(f"{where}.agent: an object with keys {sorted(_AGENT_KEYS)}")
    launcher = _launcher(raw["launcher"], f"{where}.launcher") if "launcher" in raw else None
    return AxisValue(label=str(label), flags=_flags(raw.get("flags", {}), f"{where}.flags"),
                     agent=agent, launcher=launcher)


def _label(value: Scalar) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)
