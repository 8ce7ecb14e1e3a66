"""Shared by the Python suites under tests/ (scripts/test.sh runs them with
pytest-xdist, two workers).

The suites that start MPI jobs of agents (tests/launch: `deputy mpirun
--nodes`, hostfiles; tests/multinode: agents in network namespaces, whose
timing bounds assume one job at a time) run their tests one after another,
each suite on one worker (`--dist loadgroup`), beside the other suites. The
processes left behind that they look for are their own (their temporary
directory or namespaces in the pattern), never "any deputy-agent-mpi".
"""

from __future__ import annotations

import pytest

SERIAL_SUITES = ("launch", "multinode")


# First: pytest-xdist's worker reads the marks in its own hook of this name.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.parts
        suite = parts[parts.index("tests") + 1] if "tests" in parts else None
        if suite in SERIAL_SUITES:
            item.add_marker(pytest.mark.xdist_group(suite))
