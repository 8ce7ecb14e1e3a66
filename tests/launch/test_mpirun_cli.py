"""End-to-end tests of `deputy mpirun` (DEPUTY_BIN) with real mpiruns.

The MPI program is tests/launch/mpi_env_probe.c, built here with mpicc: each
rank prints what `deputy mpirun` gave it (its agent, LD_PRELOAD and whether
that library is mapped, whether its parent has it too, and that no job
secret is in its environment). The ranks preload the PMPI
library (src/mpi) when it is built beside DEPUTY_BIN, as deputy mpirun
finds it; otherwise a stand-in built here (stub_preload.c) through
--mpi-lib, and the tests that need the real one (collectives offloaded to
each rank's agent) skip.

Every test points TMPDIR at a fresh directory, so that the private agent
directories (deputy-mpirun-*) and every process of the job (whose command
lines name that directory) can be looked for afterwards: none may be left,
after a normal end, a failing program, SIGINT, or an agent that does not
start. Every command is bounded by a timeout.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

DEPUTY = os.environ.get("DEPUTY_BIN")
MPIRUN = shutil.which("mpirun")
MPICC = shutil.which("mpicc")
CC = shutil.which("cc") or shutil.which("gcc")
MPICC_MPICH = shutil.which("mpicc.mpich")
MPIRUN_MPICH = shutil.which("mpirun.mpich")
HERE = Path(__file__).resolve().parent
TIMEOUT_S = 120

pytestmark = [
    pytest.mark.skipif(not DEPUTY, reason="DEPUTY_BIN is not set: point it at a built deputy "
                                          "binary (e.g. DEPUTY_BIN=build/tools/deputy)"),
    pytest.mark.skipif(MPIRUN is None or MPICC is None or CC is None,
                       reason="mpirun, mpicc or cc not found (Debian: openmpi-bin "
                              "libopenmpi-dev gcc; scripts/deps.sh installs them)"),
]

# Open MPI refuses root without these; oversubscribe lets 4 ranks and 2
# agents share 2 cores.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}

LINE = re.compile(r"rank (\d+) size (\d+) pid (\d+) agent (\S+) listening ([01]) preload (\S+) "
                  r"loaded ([01]) parent-preload ([01]) secret ([01]) same-secret ([01]) "
                  r"report (\S+)")


def compile_c(compiler: str, out: Path, source: Path, *flags: str) -> None:
    r = subprocess.run([compiler, "-O1", "-Wall", "-Wextra", "-Werror", *flags, "-o", str(out),
                        str(source)], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, f"{compiler} {source.name}:\n{r.stderr}"


class Built:
    """The probe, the stand-in libraries, and the library the ranks preload."""

    def __init__(self, root: Path):
        self.root = root
        self.probe = root / "mpi_env_probe"
        compile_c(MPICC, self.probe, HERE / "mpi_env_probe.c")
        self.stub = root / "libdeputy-mpi-stub.so"
        compile_c(CC, self.stub, HERE / "stub_preload.c", "-shared", "-fPIC")
        # A second library: one the caller preloads already.
        self.other = root / "libcaller-preload.so"
        compile_c(CC, self.other, HERE / "stub_preload.c", "-shared", "-fPIC")
        self.real = Path(DEPUTY).resolve().parent.parent / "src/mpi/libdeputy-mpi-openmpi.so"

    def library(self, flavor: str = "openmpi") -> tuple[list[str], str]:
        """(the --mpi-lib arguments, the path the ranks must preload)."""
        real = self.real.with_name(f"libdeputy-mpi-{flavor}.so")
        if real.exists():
            return [], str(real)
        return ["--mpi-lib", str(self.stub)], str(self.stub)


@pytest.fixture(scope="module")
def built():
    root = Path(tempfile.mkdtemp(prefix="deputy-mpirun-probe-"))
    yield Built(root)
    shutil.rmtree(root, ignore_errors=True)


class Env:
    def __init__(self, root: Path, built: Built):
        self.root = root
        self.built = built
        self.vars = {**MPI_ENV, "TMPDIR": str(root), "DEPUTY_AGENT": str(root / "nobody.sock")}

    def environ(self, extra: dict | None = None) -> dict:
        env = {k: v for k, v in os.environ.items()
               if k not in ("DEPUTY_TOKEN", "LD_PRELOAD") and not k.startswith("DEPUTY_MPI_")}
        return {**env, **self.vars, **(extra or {})}

    def command(self, *args: str, lib: bool = True, flavor: str = "openmpi") -> list[str]:
        lib_args = self.built.library(flavor)[0] if lib else []
        return [DEPUTY, "mpirun", *lib_args, *args]

    def run(self, *args: str, extra: dict | None = None, lib: bool = True,
            flavor: str = "openmpi", timeout: float = TIMEOUT_S):
        return subprocess.run(self.command(*args, lib=lib, flavor=flavor), capture_output=True,
                              text=True, timeout=timeout, env=self.environ(extra))

    def private_dirs(self) -> list[Path]:
        return sorted(self.root.glob("deputy-mpirun-*"))


@pytest.fixture
def env(built):
    root = Path(tempfile.mkdtemp(prefix="deputy-mpirun-test-"))
    yield Env(root, built)
    shutil.rmtree(root, ignore_errors=True)


def running(pattern: str) -> list[str]:
    r = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
    return r.stdout.splitlines()


def assert_clean(env: Env, pids: list[int] = ()) -> None:
    """No private directory, no process naming this test's TMPDIR (agents,
    their mpirun, the ranks' mpirun), no rank process left."""
    assert env.private_dirs() == [], "the private agent directory was left behind"
    assert running(str(env.root)) == [], "processes of the job were left behind"
    assert running(str(env.built.probe)) == [], "rank processes were left behind"
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"rank pid {pid} was left behind"


def ranks(stdout: str) -> dict[int, re.Match]:
    rows = {}
    for line in stdout.splitlines():
        m = LINE.fullmatch(line.strip())
        if m:
            rows[int(m[1])] = m
    return rows


def check_ranks(r, n: int, lib: str) -> dict[int, re.Match]:
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    rows = ranks(r.stdout)
    assert sorted(rows) == list(range(n)), r.stdout + r.stderr
    for rank, m in rows.items():
        assert m[2] == str(n)
        assert m[5] == "1", f"rank {rank}: DEPUTY_AGENT {m[4]} is not a listening socket"
        assert m[6].split(":")[0] == lib, f"rank {rank}: LD_PRELOAD {m[6]} does not start with {lib}"
        assert m[7] == "1", f"rank {rank}: {lib} is not mapped into the rank"
        assert m[8] == "0", f"rank {rank}: the rank's parent has LD_PRELOAD={lib} too"
        # No secret in any rank's environment, which any process of the user
        # can read: the library's rank 0 draws one and broadcasts it.
        assert m[9] == "0", f"rank {rank}: DEPUTY_JOB_SECRET is in its environment"
    return rows


@pytest.mark.parametrize("n", [1, 3])
def test_ranks_share_a_private_agent(env, n):
    lib = env.built.library()[1]
    r = env.run("-np", str(n), str(env.built.probe))
    rows = check_ranks(r, n, lib)
    agents = {m[4] for m in rows.values()}
    assert len(agents) == 1, agents
    agent = agents.pop()
    assert re.fullmatch(re.escape(str(env.root)) + r"/deputy-mpirun-\w{6}/agent\.sock", agent)
    assert_clean(env, [int(m[3]) for m in rows.values()])


def test_caller_preload_and_deputy_mpi_variables_reach_the_ranks(env):
    lib = env.built.library()[1]
    other = str(env.built.other)
    r = env.run("-np", "2", str(env.built.probe),
                extra={"LD_PRELOAD": other, "DEPUTY_MPI_REPORT": "json:/x/y"})
    rows = check_ranks(r, 2, lib)
    for m in rows.values():
        assert m[6] == f"{lib}:{other}", m[6]
        assert m[11] == "json:/x/y"
    assert_clean(env)


def test_no_rank_gets_a_secret_in_its_environment(env):
    r = env.run("-np", "1", "sh", "-c", 'echo "secret=${DEPUTY_JOB_SECRET:-unset}"')
    assert r.returncode == 0, r.stderr
    assert re.search(r"^secret=unset$", r.stdout, re.M), r.stdout
    assert_clean(env)


@pytest.mark.parametrize("n,expected", [(4, [0, 0, 1, 1]), (3, [0, 0, 1])])
def test_simulated_nodes_attach_each_rank_to_its_block(env, n, expected):
    lib = env.built.library()[1]
    r = env.run("-v", "--nodes", "2", "-np", str(n), str(env.built.probe))
    rows = check_ranks(r, n, lib)
    # Asked with SIGUSR1, which mpirun passes on, the agents leave MPI_Finalize
    # together and their mpirun exits 0 (SIGTERM to it: exit 1, two seconds).
    assert "the agents' mpirun (2 nodes) stopped on SIGUSR1 (exit code 0)" in r.stderr, r.stderr
    dirs = {str(Path(m[4]).parent) for m in rows.values()}
    assert len(dirs) == 1, dirs
    d = dirs.pop()
    assert re.fullmatch(re.escape(str(env.root)) + r"/deputy-mpirun-\w{6}", d)
    for rank, m in rows.items():
        assert m[4] == f"{d}/agent-node{expected[rank]}.sock", (rank, m[4])
    assert_clean(env, [int(m[3]) for m in rows.values()])


def test_one_agent_per_host_of_a_hostfile(env):
    lib = env.built.library()[1]
    hosts = env.root / "hosts"
    hosts.write_text("localhost slots=4\n")
    r = env.run("-v", "--hostfile", str(hosts), "-np", "2", str(env.built.probe))
    rows = check_ranks(r, 2, lib)
    agents = {m[4] for m in rows.values()}
    assert len(agents) == 1
    assert re.fullmatch(re.escape(str(env.root)) + r"/deputy-mpirun-\w{6}/agent\.sock", agents.pop())
    assert "agents: one per host of --hostfile" in r.stderr
    assert "--map-by ppr:1:node --hostfile" in r.stderr
    assert "--await-agent" in r.stderr and "--remove-agent-dir" in r.stderr
    assert "the agents' mpirun (one agent per host) stopped on SIGUSR1 (exit code 0)" in r.stderr
    assert_clean(env)


@pytest.mark.parametrize("flavor,nodes", [("openmpi", []), ("openmpi", ["--nodes", "2"]),
                                          ("mpich", [])], ids=["private", "nodes", "mpich"])
def test_the_library_offloads_to_each_ranks_agent(env, flavor, nodes):
    """With the real PMPI library: the probe's MPI_Bcast and MPI_Allreduce
    run on the agents (thresholds 0), each rank on the agent deputy mpirun
    gave it, and their results are right (the ranks' teams formed under the
    secret the library's rank 0 broadcast)."""
    if not env.built.real.with_name(f"libdeputy-mpi-{flavor}.so").exists():
        pytest.skip(f"libdeputy-mpi-{flavor}.so is not built beside DEPUTY_BIN (src/mpi)")
    probe = env.built.probe
    args = []
    if flavor == "mpich":
        if MPICC_MPICH is None or MPIRUN_MPICH is None:
            pytest.skip("MPICH is not installed (Debian: mpich libmpich-dev)")
        probe = env.root / "mpi_env_probe_mpich"
        compile_c(MPICC_MPICH, probe, HERE / "mpi_env_probe.c")
        args = ["--mpirun", MPIRUN_MPICH]
    n = 4 if nodes else 2
    reports = env.root / "reports"
    reports.mkdir()
    r = env.run(*args, *nodes, "-np", str(n), str(probe), flavor=flavor,
                extra={"DEPUTY_MPI_THRESHOLDS": "allreduce=0,bcast=0",
                       "DEPUTY_MPI_REPORT": f"json:{reports}"})
    rows = check_ranks(r, n, env.built.library(flavor)[1])
    for rank, m in rows.items():
        doc = json.loads((reports / f"deputy-mpi-rank{rank}.json").read_text())
        assert doc["rank"] == rank and doc["size"] == n
        assert doc["agent"] == m[4], (rank, doc["agent"], m[4])
        for op in ("MPI_Bcast", "MPI_Allreduce"):
            assert doc["operations"][op] == {"offloaded": 1, "passed": {}}, (rank, op, doc)
    assert_clean(env, [int(m[3]) for m in rows.values()])


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_key(env: Env) -> Path:
    key = env.root / "dpu.key"
    r = subprocess.run([DEPUTY, "bench", "channel", "--keygen", str(key)], capture_output=True,
                       text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    return key


@pytest.mark.parametrize("flavor,memory", [("openmpi", "staged"), ("openmpi", "rdma"),
                                           ("mpich", "rdma")])
def test_agents_on_dpus_serve_the_ranks_over_tcp(env, flavor, memory):
    """--dpu-hostfile with this machine as the one host and its DPU: the
    agents' mpirun starts the agent there listening on TCP with the key, each
    rank's shim finds its host among the mpirun arguments' hosts (here by
    its loopback address) and attaches to that host's DPU over TCP in the
    secure session; the probe's MPI_Bcast and MPI_Allreduce run on it
    (through team proxies), right, in either memory mode, and nothing is
    left. Several hosts and DPUs: tests/multinode/test_mpirun_dpus_netns.py."""
    if not env.built.real.with_name(f"libdeputy-mpi-{flavor}.so").exists():
        pytest.skip(f"libdeputy-mpi-{flavor}.so is not built beside DEPUTY_BIN (src/mpi)")
    probe, args, hosts = env.built.probe, [], ["--host", "localhost:4"]
    if flavor == "mpich":
        if MPICC_MPICH is None or MPIRUN_MPICH is None:
            pytest.skip("MPICH is not installed (Debian: mpich libmpich-dev)")
        probe = env.root / "mpi_env_probe_mpich"
        compile_c(MPICC_MPICH, probe, HERE / "mpi_env_probe.c")
        args, hosts = ["--mpirun", MPIRUN_MPICH], ["-hosts", "localhost"]
    key, port = make_key(env), free_port()
    dpus = env.root / "dpus"
    dpus.write_text("localhost\n")
    reports = env.root / "reports"
    reports.mkdir()
    dpu_args = ["--dpu-hostfile", str(dpus), "--key", str(key), "--dpu-port", str(port),
                "--memory", memory]
    r = env.run(*args, *dpu_args, "--", *hosts, "-np", "2", str(probe), flavor=flavor,
                extra={"DEPUTY_MPI_THRESHOLDS": "allreduce=0,bcast=0",
                       "DEPUTY_MPI_REPORT": f"json:{reports}"})
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    rows = ranks(r.stdout)
    assert sorted(rows) == [0, 1], r.stdout + r.stderr
    address = f"tcp://localhost:{port}"
    for rank, m in rows.items():
        assert m[4] == address, (rank, m[4])
        assert m[6].split(":")[0] == env.built.library(flavor)[1] and m[7] == "1", m[0]
        assert m[9] == "0", f"rank {rank}: DEPUTY_JOB_SECRET is in its environment"
        doc = json.loads((reports / f"deputy-mpi-rank{rank}.json").read_text())
        assert doc["agent"] == address, doc["agent"]
        for op in ("MPI_Bcast", "MPI_Allreduce"):
            assert doc["operations"][op] == {"offloaded": 1, "passed": {}}, (rank, op, doc)
    assert_clean(env, [int(m[3]) for m in rows.values()])
    # What a rank's environment holds: the DPU's address, the key, the mode.
    r = env.run(*args, *dpu_args, "--", *hosts, "-np", "1", "sh", "-c",
                'echo "agent=$DEPUTY_AGENT key=$DEPUTY_KEY memory=$DEPUTY_MEMORY"', flavor=flavor)
    assert r.returncode == 0, r.stderr
    assert f"agent={address} key={key} memory={memory}" in r.stdout, r.stdout
    assert_clean(env)


def test_dpu_hostfile_dry_run_and_its_errors(env):
    key = make_key(env)
    hosts, dpus = env.root / "hosts", env.root / "dpus"
    hosts.write_text("h1 slots=2\nh2 slots=2\n")
    dpus.write_text("d1\nd2\n")
    r = env.run("--dry-run", "--dpu-hostfile", str(dpus), "--key", str(key), "--memory", "rdma",
                "--", "--hostfile", str(hosts), "-np", "4", str(env.built.probe))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "host -> DPU: h1 -> d1, h2 -> d2" in out and "memory rdma" in out, out
    assert (f"--map-by ppr:1:node --hostfile {dpus} -x DEPUTY_TOKEN {Path(DEPUTY).resolve()} "
            f"agent --socket '<dir>/agent-dpu{{node}}.sock' --listen tcp://0.0.0.0:7790 "
            f"--key {key}") in out, out
    assert "--await-agent '<dir>/agent-dpu{node}.sock'" in out, out
    program = re.search(r"^program: (.*)$", out, re.M)[1]
    for part in ("-x DEPUTY_MPIRUN_HOSTS=h1,h2 -x DEPUTY_MPIRUN_DPUS=d1,d2",
                 "-x 'DEPUTY_MPIRUN_AGENT=tcp://{dpu}:7790'", f"-x DEPUTY_KEY={key}",
                 "-x DEPUTY_MEMORY=rdma",
                 f"{Path(DEPUTY).resolve()} mpirun --rank-shim {env.built.probe}"):
        assert part in program, (part, program)
    assert "--cpu-set" not in program and "warning" not in r.stderr, r.stderr
    one = env.root / "one-dpu"
    one.write_text("d1\n")
    cases = [
        (["--dpu-hostfile", str(dpus), "--key", str(key), "-np", "1", "true"],
         "--dpu-hostfile pairs each DPU with a host of the mpirun arguments' hostfile or host "
         "list"),
        (["--dpu-hostfile", str(one), "--key", str(key), "-H", "h1,h2", "-np", "1", "true"],
         f"--dpu-hostfile {one} names 1 DPU(s) and the mpirun arguments (-H h1,h2) 2 host(s)"),
        (["--dpu-hostfile", str(dpus), "--hostfile", str(hosts), "-np", "1", "true"],
         "needs a key file: --key FILE or DEPUTY_KEY"),
        (["--dpu-hostfile", str(dpus), "--key", str(hosts), "--hostfile", str(hosts), "-np", "1",
          "true"], f"--key {hosts}: group or others may access it (chmod 600)"),
        (["--dpu-hostfile", str(env.root / "nope"), "--key", str(key), "--hostfile", str(hosts),
          "-np", "1", "true"], f"cannot read the hostfile {env.root / 'nope'}"),
        (["--memory", "rdma", "-np", "1", "true"],
         "--memory is for ranks whose agent runs on a DPU (--dpu-hostfile)"),
        (["--nodes", "2", "--dpu-hostfile", str(dpus), "-np", "1", "true"],
         "it does not go with --dpu-hostfile"),
    ]
    os.chmod(hosts, 0o644)
    for args, message in cases:
        r = env.run("--dry-run", *args)
        assert r.returncode == 1 and message in r.stderr, (args, r.stderr)
    r = env.run("--dry-run", "--memory", "disk", "-np", "1", "true")
    assert r.returncode != 0 and "--memory" in r.stderr, r.stderr
    assert env.private_dirs() == []


def test_deputys_own_benchmark_runs_under_it(env):
    """`deputy bench coll` carries deputy's client linked in, and under
    deputy mpirun the preloaded PMPI library brings libdeputy.so too: both
    in one process must work (they once registered one spdlog logger name
    twice, and every rank aborted at its first log line)."""
    if not env.built.real.exists():
        pytest.skip("libdeputy-mpi-openmpi.so is not built beside DEPUTY_BIN (src/mpi)")
    reports = env.root / "reports"
    reports.mkdir()
    r = env.run("-np", "2", DEPUTY, "bench", "coll", "--op", "iallreduce", "-m", "64k:64k",
                "-i", "2", "-x", "1", "--compare", "mpi",
                extra={"DEPUTY_MPI_THRESHOLDS": "iallreduce=0",
                       "DEPUTY_MPI_REPORT": f"json:{reports}"})
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "every checked result is correct" in r.stdout, r.stdout + r.stderr
    # Its MPI baseline is MPI itself (PMPI_*), not the preloaded library,
    # which would have offloaded it (threshold 0) and compared deputy with
    # deputy.
    for rank in (0, 1):
        doc = json.loads((reports / f"deputy-mpi-rank{rank}.json").read_text())
        calls = doc["operations"].get("MPI_Iallreduce", {"offloaded": 0, "passed": {}})
        assert calls["offloaded"] == 0 and not calls["passed"], (rank, doc["operations"])
    assert_clean(env)


def test_the_exit_code_of_a_failing_program_passes_through(env):
    r = env.run("-np", "2", str(env.built.probe), "exit", "3", "1")
    assert r.returncode == 3, r.stdout + r.stderr
    assert re.search(r"mpirun \(pid \d+\) exited with code 3", r.stderr), r.stderr
    assert_clean(env)
    r = env.run("--nodes", "2", "-np", "2", str(env.built.probe), "exit", "5", "0")
    assert r.returncode == 5, r.stdout + r.stderr
    assert_clean(env)


def read_lines(p: subprocess.Popen, count: int, timeout: float) -> str:
    """stdout of `p` until it holds `count` lines (or `timeout` passes)."""
    text = b""
    fd = p.stdout.fileno()
    while text.count(b"\n") < count:
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"no output for {timeout} s; so far: {text!r}"
        chunk = os.read(fd, 65536)
        assert chunk, f"stdout closed early: {text!r}"
        text += chunk
    return text.decode()


@pytest.mark.parametrize("nodes", [[], ["--nodes", "2"]], ids=["private", "nodes"])
def test_sigint_stops_everything_and_leaves_nothing(env, nodes):
    n = 4 if nodes else 2
    p = subprocess.Popen(env.command(*nodes, "-np", str(n), str(env.built.probe), "sleep", "300"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.environ())
    try:
        rows = ranks(read_lines(p, n, TIMEOUT_S))
        assert sorted(rows) == list(range(n))
        p.send_signal(signal.SIGINT)
        # Well before the ranks' 300 s sleep ends.
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = p.stderr.read().decode()
    assert p.returncode == 128 + signal.SIGINT, err
    assert "got SIGINT; passing it to mpirun" in err
    assert_clean(env, [int(m[3]) for m in rows.values()])


def test_sigint_as_soon_as_the_agents_start_leaves_nothing(env):
    """Whether it lands while the agents start or once the program runs,
    a SIGINT ends everything: 130, nothing left."""
    p = subprocess.Popen(env.command("--nodes", "2", "-np", "2", str(env.built.probe), "sleep",
                                     "300"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.environ())
    try:
        # The private directory exists only once signals are being caught.
        fd = p.stderr.fileno()
        while not env.private_dirs():
            select.select([fd], [], [], 0.01)
            assert p.poll() is None, p.stderr.read().decode()
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = p.stderr.read().decode()
    assert p.returncode == 128 + signal.SIGINT, err
    assert ("got SIGINT while starting the agents; nothing was run" in err or
            "got SIGINT; passing it to mpirun" in err), err
    assert_clean(env)


def test_a_missing_library_is_a_clear_error_and_nothing_starts(env):
    r = env.run("--mpi-lib", str(env.root / "nope.so"), "-np", "1", str(env.built.probe), lib=False)
    assert r.returncode == 1
    assert f"--mpi-lib {env.root}/nope.so: no such file" in r.stderr
    assert_clean(env)
    # Without --mpi-lib, a deputy with no library beside it names every
    # place it looked.
    bindir = env.root / "bin"
    bindir.mkdir()
    shutil.copy2(DEPUTY, bindir / "deputy")
    r = subprocess.run([str(bindir / "deputy"), "mpirun", "-np", "1", str(env.built.probe)],
                       capture_output=True, text=True, timeout=TIMEOUT_S, env=env.environ())
    if r.returncode == 0:
        pytest.skip("a libdeputy-mpi-openmpi.so is installed in the libdir: nothing is missing")
    assert r.returncode == 1, r.stderr
    assert "no PMPI library for Open MPI (libdeputy-mpi-openmpi.so); looked at:" in r.stderr
    assert f"  {env.root}/src/mpi/libdeputy-mpi-openmpi.so\n" in r.stderr
    assert "--mpi-lib PATH" in r.stderr
    assert_clean(env)


@pytest.mark.parametrize("nodes", [[], ["--nodes", "2"]], ids=["private", "nodes"])
def test_an_agent_that_does_not_start_is_reported_and_nothing_is_left(env, nodes):
    config = env.root / "bad.json"
    config.write_text('{"agent": {"engines": "many"}}')
    r = env.run(*nodes, "--agent-config", str(config), "-np", "2", str(env.built.probe))
    assert r.returncode == 1, r.stdout + r.stderr
    awaited = "every agent listened" if nodes else "it listened"
    assert f"exited before {awaited}" in r.stderr, r.stderr
    assert "agent.engines: expected a non-negative integer, got string" in r.stderr
    assert ranks(r.stdout) == {}, "the program ran"
    assert_clean(env)


def test_dry_run_prints_the_commands_and_starts_nothing(env):
    lib = env.built.library()[1]
    r = env.run("--dry-run", "--", "-v", "-np", "2", str(env.built.probe), "a b")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"^agents:  \S+/deputy agent --socket <dir>/agent\.sock --token-file "
                     r"<dir>/token$", out, re.M), out
    program = re.search(r"^program: (.*)$", out, re.M)[1]
    assert program.startswith(f"{MPIRUN} -x LD_PRELOAD={lib} -x DEPUTY_AGENT=<dir>/agent.sock "
                              "-x DEPUTY_TOKEN=<token> "), program
    # After `--` everything is mpirun's, -v included; "a b" stays one argument.
    assert program.endswith(f" -v -np 2 {env.built.probe} 'a b'"), program
    r = env.run("--dry-run", "--nodes", "3", "-np", "4", str(env.built.probe))
    assert r.returncode == 0, r.stderr
    assert "--oversubscribe -np 3 " in r.stdout
    assert "agent --socket '<dir>/agent-node{node}.sock' --token-file <dir>/token" in r.stdout
    assert f"-np 4 {Path(DEPUTY).resolve()} mpirun --rank-shim {env.built.probe}" in r.stdout
    assert "-x DEPUTY_MPIRUN_NODES=3 " in r.stdout
    assert env.private_dirs() == []


def test_usage_errors_name_the_problem(env):
    r = env.run("-np", "2")
    assert r.returncode == 1 and "no program among the mpirun arguments" in r.stderr, r.stderr
    r = env.run("--mpirun", "no-such-mpirun-for-deputy", "-np", "1", "true")
    assert r.returncode == 127
    assert "cannot find the MPI launcher 'no-such-mpirun-for-deputy' in PATH" in r.stderr
    r = env.run("--mpirun", "true", "-np", "1", "true")
    assert r.returncode == 1 and "cannot tell which MPI" in r.stderr, r.stderr
    hosts = env.root / "hosts"
    hosts.write_text("localhost\n")
    r = env.run("--nodes", "2", "--hostfile", str(hosts), "-np", "1", "true")
    assert r.returncode == 1
    assert "--nodes simulates nodes on this machine; it does not go with the host options" in r.stderr
    r = env.run("--nodes", "0", "-np", "1", "true")
    assert r.returncode != 0 and "--nodes" in r.stderr
    assert_clean(env)


def test_help_explains_it_with_an_example():
    r = subprocess.run([DEPUTY, "mpirun", "--help"], capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    assert r.returncode == 0
    for text in ("deputy mpirun [deputy options] [--] [mpirun arguments] program [args]",
                 "--nodes", "--mpi-lib", "--dry-run", "block mapping",
                 "deputy mpirun -np 4 ./app"):
        assert text in r.stdout, text


@pytest.mark.skipif(MPICC_MPICH is None or MPIRUN_MPICH is None,
                    reason="MPICH is not installed (Debian: mpich libmpich-dev)")
@pytest.mark.parametrize("nodes", [[], ["--nodes", "2"]], ids=["private", "nodes"])
def test_mpich_hydra(env, nodes):
    probe = env.root / "mpi_env_probe_mpich"
    compile_c(MPICC_MPICH, probe, HERE / "mpi_env_probe.c")
    lib = env.built.library("mpich")[1]
    r = env.run("-v", "--mpirun", MPIRUN_MPICH, *nodes, "-np", "3", str(probe), flavor="mpich")
    assert "MPI: MPICH Hydra" in r.stderr, r.stderr
    assert "DEPUTY_JOB_SECRET" not in r.stderr
    rows = check_ranks(r, 3, lib)
    agents = [rows[k][4] for k in range(3)]
    if nodes:
        d = str(Path(agents[0]).parent)
        assert agents == [f"{d}/agent-node0.sock", f"{d}/agent-node0.sock",
                          f"{d}/agent-node1.sock"]
    else:
        assert len(set(agents)) == 1 and agents[0].endswith("/agent.sock")
    assert_clean(env, [int(m[3]) for m in rows.values()])


# --agent-cores: layouts computed on synthetic topologies (DEPUTY_TOPOLOGY),
# so the MPI binding options are exact whatever this machine is.
TWO_SOCKETS_SMT = "package:2 core:4 pu:2(indexes=2*8:1*2)"  # core c: CPUs c and c+8
TWO_SOCKETS_SUMMARY = "2 packages, 8 cores, 16 CPUs, SMT: 2 per core"
VM = "package:1 core:2 pu:1"
VM_SUMMARY = "1 package, 2 cores, 2 CPUs, no SMT"


def program_line(out: str) -> str:
    return re.search(r"^program: (.*)$", out, re.M)[1]


def test_agent_cores_last_binds_the_ranks_with_open_mpis_options(env):
    r = env.run("--dry-run", "--agent-cores", "last", "-np", "6", "./app",
                extra={"DEPUTY_TOPOLOGY": TWO_SOCKETS_SMT})
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # placed: nothing to warn about
    assert (f"\nplacement last ({TWO_SOCKETS_SUMMARY}): the agent on CPUs 3,7,11,15, the ranks "
            "on CPUs 0-2,4-6,8-10,12-14\n") in r.stdout
    assert re.search(r"^agents:  \S+/deputy agent --socket <dir>/agent\.sock --token-file "
                     r"<dir>/token --agent-cores last$", r.stdout, re.M), r.stdout
    # Open MPI counts hwloc logical cores: the reserved ones are 3 and 7.
    assert program_line(r.stdout).endswith(
        " -x DEPUTY_TOKEN=<token> --cpu-set 0-2,4-6 --bind-to core:overload-allowed -np 6 ./app")


def test_agent_cores_smt_binds_each_rank_to_a_hardware_thread(env):
    r = env.run("--dry-run", "--agent-cores", "smt", "-np", "8", "./app",
                extra={"DEPUTY_TOPOLOGY": TWO_SOCKETS_SMT})
    assert r.returncode == 0, r.stderr
    assert (f"placement smt ({TWO_SOCKETS_SUMMARY}): the agent on CPUs 8-15, the ranks on CPUs "
            "0-7\n") in r.stdout
    # Each core's first CPU, as hwloc logical PU numbers (core c's are 2c, 2c+1).
    assert (" --use-hwthread-cpus --cpu-set 0,2,4,6,8,10,12,14 --bind-to "
            "hwthread:overload-allowed -np 8 ./app") in program_line(r.stdout)


def test_agent_cores_with_simulated_nodes_lets_the_agents_pin_themselves(env):
    r = env.run("--dry-run", "--nodes", "2", "--agent-cores", "last", "-np", "4", "./app",
                extra={"DEPUTY_TOPOLOGY": VM})
    assert r.returncode == 0, r.stderr
    assert re.search(r"^agents:  \S+ --oversubscribe -np 2 --bind-to none \S+/deputy agent "
                     r"--socket '<dir>/agent-node\{node\}\.sock' --token-file <dir>/token "
                     r"--agent-cores last$", r.stdout, re.M), r.stdout
    assert (" --cpu-set 0 --bind-to core:overload-allowed --mca mpi_yield_when_idle 1 -np 4 "
            in program_line(r.stdout))
    assert (f"placement last ({VM_SUMMARY}): the agent on CPU 1, the ranks on CPU 0 (4 ranks on "
            "1 core: they share it)") in r.stdout


def test_agent_cores_refuses_binding_options_of_the_user(env):
    r = env.run("--dry-run", "--agent-cores", "last", "--", "--bind-to", "socket", "-np", "2",
                "./app", extra={"DEPUTY_TOPOLOGY": VM})
    assert r.returncode == 1
    assert r.stderr == ("deputy mpirun: --agent-cores last binds the ranks (--cpu-set 0 --bind-to "
                        "core:overload-allowed); the mpirun arguments bind them too (--bind-to "
                        "socket): leave one of the two out\n")
    r = env.run("--dry-run", "--agent-cores", "2", "-np", "2", "./app", extra={"DEPUTY_TOPOLOGY": VM})
    assert r.returncode == 1
    assert r.stderr == ("deputy mpirun: --agent-cores 2: reserving 2 cores leaves none for the "
                        f"ranks: this machine has 2 ({VM_SUMMARY}); at most 1\n")


def test_no_layout_warns_that_ranks_and_engines_share_cpus(env):
    r = env.run("--dry-run", "-np", "1", "./app", extra={"DEPUTY_TOPOLOGY": VM})
    assert r.returncode == 0, r.stderr
    assert r.stderr == ("deputy mpirun: warning: the ranks and the agent's engines share CPUs 0-1 "
                        "(placement shared): a busy rank delays the engines; --agent-cores last "
                        "gives the engines CPU 1 and the ranks CPU 0\n")
    assert "--cpu-set" not in r.stdout and "\nplacement " not in r.stdout
    r = env.run("--dry-run", "--agent-cores", "shared", "-np", "1", "./app",
                extra={"DEPUTY_TOPOLOGY": VM})
    assert r.returncode == 0 and r.stderr == ""


@pytest.mark.skipif(not {0, 1} <= os.sched_getaffinity(0), reason="binds to CPUs 0 and 1")
def test_agent_cores_last_really_binds_the_ranks(env):
    r = env.run("--agent-cores", "last", "-np", "2", "sh", "-c",
                "grep Cpus_allowed_list /proc/self/status", extra={"DEPUTY_TOPOLOGY": VM})
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["Cpus_allowed_list:\t0", "Cpus_allowed_list:\t0"]
    assert_clean(env)


def test_ranks_on_one_cpu_yield_at_once_in_their_waits(env):
    """Two ranks bound to CPU 0 (--agent-cores last) crowd it: the library
    has their waits yield at once (dp_config_t.cpu_shared); two unbound
    ranks on this machine's CPUs do not. The library's report says which."""
    if not env.built.real.exists():
        pytest.skip("libdeputy-mpi-openmpi.so is not built beside DEPUTY_BIN (src/mpi)")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs: unbound ranks on one CPU crowd it too")
    for layout, crowded in ((["--agent-cores", "last"], True), ([], False)):
        reports = env.root / f"reports-{crowded}"
        reports.mkdir()
        r = env.run(*layout, "-np", "2", str(env.built.probe),
                    extra={"DEPUTY_TOPOLOGY": VM, "DEPUTY_MPI_REPORT": f"json:{reports}"})
        assert r.returncode == 0, r.stdout + r.stderr
        for rank in (0, 1):
            doc = json.loads((reports / f"deputy-mpi-rank{rank}.json").read_text())
            assert doc["waits_yield_at_once"] is crowded, (layout, rank, doc)
    assert_clean(env)


def test_baseline_is_plain_mpi_bound_as_the_placement_binds_it(env):
    """--baseline: the same placement's ranks with nothing of deputy, the
    baseline every own-core comparison needs, from the one definition of
    the placement (no script writes its own taskset line)."""
    r = env.run("--dry-run", "--baseline", "--agent-cores", "last", "-np", "2", "./app",
                lib=False, extra={"DEPUTY_TOPOLOGY": VM, "DEPUTY_MPI_REPORT": "json:/x"})
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "preloaded library: none" in r.stdout
    assert "\nagents:" not in r.stdout, r.stdout
    assert f"placement last ({VM_SUMMARY}): the agent on CPU 1, the ranks on CPU 0" in r.stdout
    line = program_line(r.stdout)
    assert line.endswith(" --cpu-set 0 --bind-to core:overload-allowed --mca mpi_yield_when_idle 1 "
                         "-np 2 ./app"), line
    assert "DEPUTY_" not in line and "LD_PRELOAD" not in line, line


@pytest.mark.skipif(not {0, 1} <= os.sched_getaffinity(0), reason="binds to CPUs 0 and 1")
def test_baseline_runs_the_ranks_there_and_starts_no_agent(env):
    r = env.run("--baseline", "--agent-cores", "last", "-np", "2", "sh", "-c",
                'grep Cpus_allowed_list /proc/self/status; echo "preload=${LD_PRELOAD:-none}"',
                lib=False, extra={"DEPUTY_TOPOLOGY": VM})
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(r.stdout.splitlines()) == ["Cpus_allowed_list:\t0", "Cpus_allowed_list:\t0",
                                             "preload=none", "preload=none"], r.stdout
    assert_clean(env)  # (no private agent directory was made)


def test_no_preload_gives_the_ranks_the_agent_and_no_library(env):
    """--no-preload: the agent and the placement, for programs that call
    deputy's C API themselves (`deputy bench coll`), without the PMPI
    library in their processes."""
    r = env.run("--dry-run", "--no-preload", "--agent-cores", "last", "-np", "2", "./app",
                lib=False, extra={"DEPUTY_TOPOLOGY": VM})
    assert r.returncode == 0, r.stderr
    line = program_line(r.stdout)
    assert "LD_PRELOAD" not in line and "-x DEPUTY_AGENT=<dir>/agent.sock" in line, line
    assert line.endswith(" --cpu-set 0 --bind-to core:overload-allowed --mca mpi_yield_when_idle 1 "
                         "-np 2 ./app"), line
    r = env.run("--no-preload", "-np", "2", DEPUTY, "bench", "coll", "--op", "iallreduce", "-m",
                "64k:64k", "-i", "2", "-x", "1", "--compare", "mpi", lib=False)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "every checked result is correct" in r.stdout, r.stdout + r.stderr
    assert_clean(env)


@pytest.mark.parametrize("args,message", [
    (["--baseline", "--p2p"], "--baseline runs plain MPI (no agent, no library): --p2p does not "
                              "go with it"),
    (["--baseline", "--no-preload"], "--baseline runs plain MPI (no agent, no library): "
                                     "--no-preload does not go with it"),
    (["--baseline", "--nodes", "2"], "--baseline runs plain MPI (no agent, no library): --nodes "
                                     "does not go with it"),
    (["--no-preload", "--mpi-lib", "/x.so"], "--no-preload preloads no library: --mpi-lib does "
                                             "not go with it"),
])
def test_baseline_and_no_preload_refuse_what_they_leave_out(env, args, message):
    r = env.run("--dry-run", *args, "-np", "2", "./app", lib=False)
    assert r.returncode == 1
    assert r.stderr == f"deputy mpirun: {message}\n"


@pytest.mark.skipif(MPIRUN_MPICH is None, reason="MPICH is not installed (Debian: mpich)")
def test_agent_cores_under_hydra(env):
    r = env.run("--dry-run", "--mpirun", MPIRUN_MPICH, "--agent-cores", "last", "-n", "8", "./app",
                flavor="mpich", extra={"DEPUTY_TOPOLOGY": TWO_SOCKETS_SMT})
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    # OS CPU numbers, a rank's joined by '+'; repeated up to 8 ranks (Hydra does not wrap).
    assert (" -bind-to user:0+8,1+9,2+10,4+12,5+13,6+14,0+8,1+9 -n 8 ./app"
            in program_line(r.stdout)), r.stdout
    r = env.run("--dry-run", "--mpirun", MPIRUN_MPICH, "--agent-cores", "last", "./app",
                flavor="mpich", extra={"DEPUTY_TOPOLOGY": TWO_SOCKETS_SMT})
    assert r.returncode == 0, r.stderr
    assert r.stderr == ("deputy mpirun: warning: Hydra binds only the first 6 rank(s) of each host "
                        "to --agent-cores last (one per entry of -bind-to user:, which does not "
                        "wrap around); give -n so that every rank is bound\n")
    if {0, 1} <= os.sched_getaffinity(0):
        r = env.run("--mpirun", MPIRUN_MPICH, "--agent-cores", "last", "-n", "2", "sh", "-c",
                    "grep Cpus_allowed_list /proc/self/status", flavor="mpich",
                    extra={"DEPUTY_TOPOLOGY": VM})
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.splitlines() == ["Cpus_allowed_list:\t0", "Cpus_allowed_list:\t0"]
    assert_clean(env)


def test_operations_lists_the_librarys_table_and_runs_nothing(env):
    """`deputy mpirun --operations`: every operation the library intercepts,
    one per line (MPI name, DEPUTY_MPI_THRESHOLDS key, form, the two default
    thresholds), each a name the library accepts; no agent, no mpirun."""
    r = subprocess.run([DEPUTY, "mpirun", "--operations"], capture_output=True, text=True,
                       timeout=TIMEOUT_S, env=env.environ())
    assert r.returncode == 0, r.stderr
    lines = [l.split() for l in r.stdout.splitlines() if l.strip() and not l.startswith("#")]
    names = [l[0] for l in lines]
    assert len(names) == len(set(names)) and len(names) >= 32, r.stdout
    for name, key, form, shared, own in lines:
        assert name.startswith("MPI_") and key == name[4:].lower(), (name, key)
        assert form == ("nonblocking" if key.startswith("i") else "blocking"), (name, form)
        for t in (shared, own):
            assert re.fullmatch(r"\d+[KM]?|never|tune", t), (name, t)
    for expected in ("MPI_Iallreduce", "MPI_Alltoallv", "MPI_Iscatterv", "MPI_Reduce_scatter"):
        assert expected in names
    assert_clean(env)
