"""A sweep: every point of a spec, skipping those already measured.

Points whose result file exists are done (see points.py for why the name
identifies the settings); the others run one at a time — benchmarks must
not share this machine's two cores with each other. A failing point is
reported with its coordinates and log and the sweep goes on, because one
bad size should not cost an hour of other measurements; --fail-fast stops
instead. The caller turns `failed` into a non-zero exit status.

Points that need a private agent run in groups, one agent per distinct
agent setting (a placement axis: `--agent-cores last` is another agent),
each started before its group's first point and stopped after its last.
Each result gets a "sweep" object (spec, coordinates, agent): the only
record of settings that are not benchmark flags.
"""

from __future__ import annotations

import json
import os
import shlex
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from deputy_tools import points as pts
from deputy_tools.agent import AgentError, agent_command, agent_facts, private_agent
from deputy_tools.progress import SweepProgress, make_progress
from deputy_tools.runner import Outcome, partial_path, run_point, run_setup
from deputy_tools.spec import SetupStep, SweepSpec


@dataclass
class Failure:
    point: pts.Point
    outcome: Outcome

    def describe(self, spec: SweepSpec) -> str:
        return (f"point {spec.name} [{self.point.label()}] failed: {self.outcome.message} "
                f"(log: {self.outcome.log})")


@dataclass
class SweepReport:
    total: int = 0
    skipped: int = 0          # already done before this run
    ran: int = 0
    failed: list[Failure] = field(default_factory=list)
    stopped_early: bool = False
    stray: list[Path] = field(default_factory=list)  # results from other settings
    setup_error: str = ""     # a setup step failed: no point was run

    @property
    def ok(self) -> bool:
        return not self.failed and not self.stopped_early and not self.setup_error


def default_out_dir(root: Path, spec: SweepSpec) -> Path:
    """results/<name>, or results/<name>.<profile>: profiles never mix in one directory."""
    return root / (spec.name if spec.profile is None else f"{spec.name}.{spec.profile}")


@dataclass
class _AgentGroup:
    """The pending points that share one private agent (or none: agent None)."""

    agent: Mapping[str, Any] | None
    setting: str                  # "placement=own-core", "" for the spec's own agent
    points: list[tuple[pts.Point, Path]] = field(default_factory=list)

    def log_name(self) -> str:
        """agent.log, or agent-placement-own-core.log for a setting's agent."""
        return "agent.log" if not self.setting else \
            "agent-" + pts.safe_name(self.setting.replace("=", "-").replace(" ", "_")) + ".log"


def _agent_groups(pending: list[tuple[pts.Point, Path]]) -> list[_AgentGroup]:
    """Points grouped by their agent, in the order each agent is first needed: one agent
    start per placement even when the placement axis is not the first."""
    groups: dict[str, _AgentGroup] = {}
    for point, result in pending:
        key = json.dumps(point.agent, sort_keys=True)
        groups.setdefault(key, _AgentGroup(point.agent, point.agent_setting)
                          ).points.append((point, result))
    return list(groups.values())


def run_sweep(spec: SweepSpec, out_dir: Path, deputy: str, *, dry_run: bool = False,
              fail_fast: bool = False, timeout_s: float | None = None,
              live: bool | None = None, echo: Callable[[str], None] = print,
              progress: SweepProgress | None = None) -> SweepReport:
    """Runs the pending points of `spec` into `out_dir` (see the module docstring)."""
    all_points = pts.expand(spec)
    report = SweepReport(total=len(all_points))
    pending = []
    expected: set[str] = set()
    for point in all_points:
        result = pts.result_path(out_dir, spec, point)
        expected.add(result.name)
        if result.exists():
            report.skipped += 1
        else:
            pending.append((point, result))
    if out_dir.is_dir():
        report.stray = sorted(p for p in out_dir.glob("*.json") if p.name not in expected)
    groups = _agent_groups(pending)

    steps = [step for step in spec.setup if pending and not (out_dir / step.creates).exists()]
    if dry_run:
        if report.skipped:
            echo(f"# {spec.name}: {report.skipped} of {report.total} points already done "
                 f"in {out_dir}")
        if pending and spec.env:
            echo("# environment: " + " ".join(f"{k}={shlex.quote(v)}"
                                               for k, v in spec.env.items()))
        for step in steps:
            echo(shlex.join(setup_command(step, deputy, out_dir)))
        for group in groups:
            if group.agent is not None:
                agent = agent_command(deputy, Path("$AGENT_DIR"), group.agent.get("config"),
                                      out_dir / group.log_name(), group.agent.get("args", ()))
                whom = f"the points of {group.setting}" if group.setting else "the sweep"
                echo(f"# a private agent for {whom} (AGENT_DIR: a new 0700 directory; "
                     f"DEPUTY_AGENT=$AGENT_DIR/agent.sock): {shlex.join(agent)}")
            facts = {fact: "$" + fact.upper() for fact in pts.AGENT_FACTS}
            if any(pts.needs_agent_facts(point) for point, _ in group.points):
                echo("# RANK_CPUS, AGENT_CPUS: the agent's placement.rank_cpus and agent_cpus "
                     "(deputy info --format json)")
            for point, result in group.points:
                echo(shlex.join(pts.command(spec, point, deputy, partial_path(result), facts)))
        return report

    out_dir.mkdir(parents=True, exist_ok=True)
    limit = timeout_s if timeout_s is not None else spec.timeout_s
    env = ({**os.environ, **spec.env}
           if spec.env or any(g.agent is not None for g in groups) else None)
    for i, step in enumerate(steps):
        problem = run_setup(setup_command(step, deputy, out_dir), out_dir / step.creates,
                            out_dir / f"setup-{i}.log", limit, env)
        if problem:
            report.setup_error = (f"setup of {spec.name} failed: {problem} "
                                  f"(log: {out_dir / f'setup-{i}.log'}); no point was run")
            echo(f"error: {report.setup_error}")
            return report
    title = spec.name if spec.profile is None else f"{spec.name} ({spec.profile})"
    bar = progress or make_progress(title, len(pending), live)
    with bar:
        if report.skipped:
            bar.note(f"{title}: {report.skipped} of {report.total} points already done "
                     f"in {out_dir}")
        for group in groups:
            with ExitStack() as stack:
                group_env, facts = env, {}
                if group.agent is not None:
                    try:
                        group_env, facts = _start_agent(stack, spec, group, deputy, out_dir, env)
                    except AgentError as e:
                        left = sum(len(g.points) for g in groups[groups.index(group):])
                        where = f" [{group.setting}]" if group.setting else ""
                        report.setup_error = (f"{spec.name}{where}: {e}; "
                                              + ("no point was run" if not report.ran
                                                 else f"{left} point(s) not run"))
                        echo(f"error: {report.setup_error}")
                        return report
                _run_points(spec, group.points, deputy, limit, group_env, facts, fail_fast,
                            report, bar)
            if report.stopped_early:
                break
    return report


def _start_agent(stack: ExitStack, spec: SweepSpec, group: _AgentGroup, deputy: str,
                 out_dir: Path, env: dict[str, str] | None,
                 ) -> tuple[dict[str, str], dict[str, str]]:
    """Starts the group's private agent (stopped when `stack` closes); returns the points'
    environment and the agent's placement facts (each result records them; a launcher may
    need them)."""
    assert group.agent is not None
    socket = stack.enter_context(private_agent(
        deputy, group.agent.get("config"), out_dir / group.log_name(), env,
        args=group.agent.get("args", ())))
    group_env = {**(env or os.environ), "DEPUTY_AGENT": str(socket)}
    facts = agent_facts(deputy, socket, group_env)
    if any(pts.needs_agent_facts(point) for point, _ in group.points):
        empty = [f for f in pts.AGENT_FACTS if not facts.get(f)]
        if empty:
            args = shlex.join(group.agent.get("args", ())) or "no arguments"
            raise AgentError(f"a launcher needs {{{empty[0]}}}, but the agent started with "
                             f"{args} pins nothing (placement {facts.get('layout', '?')}); "
                             "give it --agent-cores")
    return group_env, facts


def _run_points(spec: SweepSpec, pending: list[tuple[pts.Point, Path]], deputy: str,
                limit: float, env: dict[str, str] | None, facts: Mapping[str, str],
                fail_fast: bool, report: SweepReport, bar: SweepProgress) -> None:
    for point, result in pending:
        bar.start_point(point.label())
        argv = pts.command(spec, point, deputy, partial_path(result), facts)
        outcome = run_point(argv, result, limit, env, annotation(spec, point, facts))
        report.ran += 1
        bar.finish_point(point.label(), outcome.ok, outcome.seconds)
        if outcome.ok:
            continue
        failure = Failure(point, outcome)
        report.failed.append(failure)
        bar.note("error: " + failure.describe(spec))
        if fail_fast:
            report.stopped_early = report.ran < report.total - report.skipped
            break


def annotation(spec: SweepSpec, point: pts.Point, facts: Mapping[str, str]) -> dict[str, Any]:
    """What the sweep adds to a result as "sweep": the spec, the point's coordinates and
    how it was run. Settings that are no benchmark flag (the agent's placement) appear
    nowhere else in the document, and figures must not mix points that differ in them."""
    note: dict[str, Any] = {"spec": spec.name, "profile": spec.profile,
                            "point": dict(point.coords)}
    if point.agent is not None:
        note["agent"] = dict(point.agent)
    if facts:
        note["agent_placement"] = dict(facts)
    return note


def setup_command(step: SetupStep, deputy: str, out_dir: Path) -> list[str]:
    return [pts.with_out_dir(word.replace("{deputy}", deputy), out_dir) for word in step.run]


def summary(spec: SweepSpec, report: SweepReport, out_dir: Path) -> str:
    """One line for the end of a sweep, plus the failed points again (they may have scrolled)."""
    if report.setup_error:
        return report.setup_error
    done = report.skipped + report.ran - len(report.failed)
    line = (f"{spec.name}: {done}/{report.total} points done ({report.ran} run now, "
            f"{report.skipped} already done), {len(report.failed)} failed -> {out_dir}")
    if report.stopped_early:
        not_run = report.total - report.skipped - report.ran
        line += f"; stopped at the first failure (--fail-fast), {not_run} not run"
    lines = [line]
    lines += ["  " + f.describe(spec) for f in report.failed]
    if report.stray:
        lines.append(f"  note: {len(report.stray)} other result file(s) in {out_dir} come from "
                     "other settings; plots of this directory include them")
    return "\n".join(lines)
