"""`deputy doctor` as a user runs it: on this machine (its JSON schema, its
exit code, each area's findings); on a fake idxd sysfs tree mounted on
/sys/bus in a mount namespace of its own (libaccel-config reads the real
/sys, not --root) that shows a DSA device with dedicated, shared, disabled,
unopenable and kernel queues, and a device without SVA; on fake /sys and
/proc trees (--root) that show an RDMA port in RoCE v2 mode on a PCIe link
below its slot, a NIC whose link runs below its generation, and a Yama
scope that closes cross-memory attach; with no agent (and a socket
directory an agent would refuse: exit 1) and with one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

DEPUTY = os.environ.get("DEPUTY_BIN")

pytestmark = pytest.mark.skipif(
    not DEPUTY, reason="DEPUTY_BIN is not set: point it at a built deputy binary")

STATUSES = {"ok", "info", "warn", "fail"}


def doctor(*args: str) -> tuple[int, dict]:
    r = subprocess.run([DEPUTY, "doctor", "--json", "--timeout", "0.5", *args],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, json.loads(r.stdout)


def find_all(doc: dict, area: str, check: str | None = None) -> list[dict]:
    return [f for f in doc["findings"] if f["area"] == area and check in (None, f["check"])]


def find(doc: dict, area: str, check: str) -> dict:
    got = [f for f in doc["findings"] if f["area"] == area and f["check"] == check]
    assert len(got) == 1, (area, check, [(f["area"], f["check"]) for f in doc["findings"]])
    return got[0]


def write(root: Path, path: str, text: str) -> None:
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


@pytest.fixture
def private_dir():
    d = Path(tempfile.mkdtemp(prefix="deputy-doctor-"))  # mode 0700
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=False)


def test_this_machine_schema_exit_code_and_areas(private_dir):
    rc, doc = doctor("--socket", str(private_dir / "none.sock"))
    assert rc == 0 and doc["ok"] is True, doc
    assert set(doc) == {"version", "ok", "findings", "counts"}
    for f in doc["findings"]:
        assert set(f) == {"area", "check", "status", "found", "fix"} and f["status"] in STATUSES, f
        assert f["found"], f
    assert sum(doc["counts"].values()) == len(doc["findings"])
    assert {f["area"] for f in doc["findings"]} == {"cpu", "memory", "dsa", "fabric", "mpi",
                                                   "agent"}
    assert find(doc, "memory", "memfd")["status"] == "ok"
    assert find(doc, "memory", "cross_memory_attach")["status"] == "ok"
    assert find(doc, "cpu", "simd")["found"].split(":")[0] in ("AVX-512 (F, BW, VL, DQ)", "avx2",
                                                             "scalar")
    # This machine has no DSA, and says how one gets it.
    if not Path("/sys/bus/dsa").exists():
        dsa = find(doc, "dsa", "devices")
        assert "idxd" in dsa["found"] and "intel_iommu=on,sm_on" in dsa["fix"], dsa
    assert "tcp" in find(doc, "fabric", "providers")["found"]
    agent = find(doc, "agent", "reachable")
    assert agent["status"] == "warn" and str(private_dir / "none.sock") in agent["found"], agent
    assert "deputy agent --daemon" in agent["fix"]
    assert find(doc, "agent", "socket directory")["status"] == "ok"
    # The same as a table for people.
    r = subprocess.run([DEPUTY, "doctor", "--timeout", "0.5", "--socket",
                        str(private_dir / "none.sock")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "0 fail: everything deputy needs is here" in r.stdout, r.stdout


def test_a_running_agent_is_found_with_its_placement(private_dir):
    sock = private_dir / "a.sock"
    subprocess.run([DEPUTY, "agent", "--daemon", "--socket", str(sock), "--log-file",
                    str(private_dir / "log")], check=True, capture_output=True, timeout=30)
    pid = int((private_dir / "agent.pid").read_text().split()[0])
    try:
        rc, doc = doctor("--socket", str(sock))
        assert rc == 0
        agent = find(doc, "agent", "reachable")
        assert agent["status"] == "ok" and f"pid {pid}" in agent["found"], agent
        assert find(doc, "agent", "placement")["found"].startswith("layout ")
    finally:
        os.kill(pid, 15)


def test_a_socket_directory_an_agent_refuses_fails_with_exit_1(private_dir):
    open_dir = private_dir / "open"
    open_dir.mkdir(mode=0o755)
    os.chmod(open_dir, 0o755)
    rc, doc = doctor("--socket", str(open_dir / "a.sock"))
    assert rc == 1 and doc["ok"] is False and doc["counts"]["fail"] == 1, doc
    f = find(doc, "agent", "socket directory")
    assert f["status"] == "fail" and "mode 0755" in f["found"] and "chmod 700" in f["found"], f


def dsa_tree(top: Path) -> None:
    """The idxd driver's sysfs as libaccel-config reads it, under top/bus (to
    be mounted on /sys/bus), and its device files under top/dev/dsa: dsa0
    with SVA and dedicated, shared, disabled, unopenable and kernel queues,
    and dsa2 without SVA. libaccel-config lists the dsa* entries of
    /sys/bus/dsa/devices and each device's wq* subdirectories, and refuses a
    device without a cmd_status attribute."""
    dev = top / "bus/dsa/devices"
    (top / "bus/dsa/drivers/idxd").mkdir(parents=True)
    for name, state, pasid in [("dsa0", "enabled", "1"), ("dsa2", "disabled", "0")]:
        for attr, value in [("state", state), ("pasid_enabled", pasid), ("cmd_status", "0"),
                            ("max_batch_size", "1024"), ("max_transfer_size", "2147483648"),
                            ("numa_node", "0")]:
            write(dev, f"{name}/{attr}", value)
    queues = {"wq0.0": ("enabled", "dedicated", "user"), "wq0.1": ("enabled", "shared", "user"),
              "wq0.2": ("disabled", "dedicated", "user"), "wq0.3": ("enabled", "dedicated", "user"),
              "wq0.4": ("enabled", "dedicated", "kernel")}
    for wq, (state, mode, kind) in queues.items():
        for name, value in [("state", state), ("mode", mode), ("size", "16"), ("priority", "10"),
                            ("threshold", "15" if mode == "shared" else "0"),
                            ("max_batch_size", "32"), ("max_transfer_size", "2097152"),
                            ("block_on_fault", "1"), ("type", kind), ("group_id", "0")]:
            write(dev, f"dsa0/{wq}/{name}", value)
    # The device files as a udev rule leaves them (wq0.0, wq0.1) and as the
    # driver makes them (wq0.3: root's only; the doctor runs as another user).
    for wq, mode in [("wq0.0", 0o666), ("wq0.1", 0o666), ("wq0.3", 0o600)]:
        write(top, f"dev/dsa/{wq}", "")
        os.chmod(top / "dev/dsa" / wq, mode)
    for d in [top, *top.rglob("*")]:
        if d.is_dir():
            os.chmod(d, 0o755)


# Inside its own mount namespace: the fake tree on /sys/bus, a /dev of its
# own holding dsa/ and the machine's null, zero and random devices, then the
# doctor as uid 65534 (root would open wq0.3 whatever its mode).
IN_NAMESPACE = r"""
set -e
top=$1; shift
mount --bind "$top/bus" /sys/bus
mkdir "$top/machine-dev"
mount --bind /dev "$top/machine-dev"
mount -t tmpfs -o mode=0755 deputy-fake-dev /dev
for f in null zero random urandom; do
  touch /dev/$f
  mount --bind "$top/machine-dev/$f" /dev/$f
done
cp -a "$top/dev/dsa" /dev/dsa
exec setpriv --reuid 65534 --regid 65534 --clear-groups "$@"
"""


def test_fake_dsa_devices_and_queues_in_a_mount_namespace(private_dir):
    # libaccel-config reads the real /sys/bus/dsa: the fake tree is mounted
    # there, in a namespace of the doctor's own.
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here (unshare --mount: {probe.stderr.strip()})")
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) not found: the doctor must run as another user")
    top = private_dir / "dsa"
    dsa_tree(top)
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        IN_NAMESPACE, "sh", str(top), os.path.abspath(DEPUTY), "doctor", "--json",
                        "--timeout", "0.5", "--socket", "/nonexistent/none.sock"],
                       capture_output=True, text=True, timeout=120)
    assert r.stdout, r.stderr
    doc = json.loads(r.stdout)
    assert not find_all(doc, "dsa", "devices"), doc
    d0 = find(doc, "dsa", "dsa0")
    assert d0["status"] == "ok" and "SVA (PASID) on" in d0["found"], d0
    w = find(doc, "dsa", "dsa0/wq0.0")
    assert w["status"] == "ok" and w["found"].startswith("dedicated queue, size 16, priority 10"), w
    assert "/dev/dsa/wq0.0 opens" in w["found"]
    s = find(doc, "dsa", "dsa0/wq0.1")
    assert s["status"] == "ok" and "shared queue" in s["found"] and "threshold 15" in s["found"], s
    off = find(doc, "dsa", "dsa0/wq0.2")
    assert off["status"] == "warn" and "accel-config enable-wq dsa0/wq0.2" in off["fix"], off
    shut = find(doc, "dsa", "dsa0/wq0.3")
    assert shut["status"] == "warn" and "does not open: Permission denied" in shut["found"], shut
    assert "chown" in shut["fix"]
    kernel = find(doc, "dsa", "dsa0/wq0.4")
    assert kernel["status"] == "warn" and "a kernel queue" in kernel["found"], kernel
    assert "config-wq dsa0/wq0.4 --type=user" in kernel["fix"]
    d2 = find(doc, "dsa", "dsa2")
    assert d2["status"] == "warn" and "SVA (PASID) off" in d2["found"], d2
    assert "sm_on" in d2["fix"]
    backend = find(doc, "dsa", "backend")
    assert backend["status"] == "ok" and "would use dsa0/wq0.0" in backend["found"], backend
    assert '"backend": "idxd"' in backend["found"] and "--wq dsa0/wq0.0" in backend["found"]
    # libaccel-config prints nothing of its own.
    assert "libaccfg" not in r.stderr, r.stderr


def test_fake_sysfs_rdma_and_yama(private_dir):
    root = private_dir / "root"
    def pcie(device: str, width: str, max_width: str, speed: str, max_speed: str) -> None:
        for name, value in [("current_link_width", width), ("max_link_width", max_width),
                            ("current_link_speed", speed), ("max_link_speed", max_speed)]:
            write(root, f"{device}/{name}", value)

    ib = "/sys/class/infiniband/mlx5_0"
    write(root, f"{ib}/ports/1/state", "4: ACTIVE")
    write(root, f"{ib}/ports/1/rate", "100 Gb/sec (4X EDR)")
    write(root, f"{ib}/ports/1/link_layer", "Ethernet")
    write(root, f"{ib}/ports/1/gid_attrs/types/0", "RoCE v2")
    pcie(f"{ib}/device", "8", "16", "16.0 GT/s PCIe", "16.0 GT/s PCIe")
    nic = "/sys/class/net/ens1f0"
    write(root, f"{nic}/operstate", "up")
    write(root, f"{nic}/speed", "100000")
    pcie(f"{nic}/device", "16", "16", "8.0 GT/s PCIe", "16.0 GT/s PCIe")
    write(root, "/sys/class/net/lo/operstate", "unknown")  # virtual: no device
    write(root, "/proc/sys/kernel/yama/ptrace_scope", "3")
    write(root, "/proc/cpuinfo", "processor\t: 0\nmodel name\t: Fake Xeon 9999")

    rc, doc = doctor("--root", str(root), "--socket", str(private_dir / "none.sock"))
    assert rc == 0, doc  # all of it optional
    assert find(doc, "cpu", "model")["found"] == "Fake Xeon 9999"
    port = find(doc, "fabric", "mlx5_0")
    assert port["status"] == "ok" and "RoCE v2" in port["found"] and "ACTIVE" in port["found"]
    link = find(doc, "fabric", "mlx5_0 pcie")
    assert link["status"] == "warn" and "x8" in link["found"] and "x16" in link["found"], link
    assert find(doc, "fabric", "ens1f0")["found"] == "up, 100000 Mb/s"
    slow = find(doc, "fabric", "ens1f0 pcie")
    assert slow["status"] == "warn" and "8.0 GT/s" in slow["found"], slow
    assert not [f for f in doc["findings"] if f["check"] == "lo"]
    yama = find(doc, "memory", "ptrace_scope")
    assert yama["status"] == "warn" and "ptrace_scope 3" in yama["found"], yama
    assert "kernel.yama.ptrace_scope=1" in yama["fix"]


def test_an_empty_tree_has_no_rdma_and_dsa_reads_the_real_sys(private_dir):
    root = private_dir / "empty"
    root.mkdir()
    rc, doc = doctor("--root", str(root), "--socket", str(private_dir / "none.sock"))
    assert rc == 0
    # libaccel-config reads the machine's /sys whatever --root says.
    _, real = doctor("--socket", str(private_dir / "none.sock"))
    assert find_all(doc, "dsa") == find_all(real, "dsa") != [], doc
    assert find(doc, "fabric", "rdma")["status"] == "info"
    assert find(doc, "cpu", "model")["found"] == "not named in /proc/cpuinfo"
    assert find(doc, "memory", "ptrace_scope")["found"].startswith("no Yama")
