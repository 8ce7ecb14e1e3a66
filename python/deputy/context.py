"""A process's attachment to the node's agent (dp_init), and memory the
agent reaches in place."""

from __future__ import annotations

import ctypes
import os
import threading
import weakref
from typing import Optional

import numpy as np

from deputy._lib import Config, lib
from deputy.constants import MemoryMode, Status, WaitMode
from deputy.errors import DeputyError, check


class Context:
    """Attaches to the node's agent (`deputy agent`) over its socket.

    Keyword arguments are dp_config_t's fields: `agent` (socket path;
    default $DEPUTY_AGENT), `token` (default $DEPUTY_TOKEN), `pool_bytes`,
    `ring_size`, `memory_mode` ("direct", "staged", or "rdma" with an agent
    on another host), `wait_mode` ("spin",
    "pause", "yield", "block", "default"), `lost_timeout_ms`,
    `connect_timeout_ms`, `job_secret` (the job's secret: only contexts
    holding the same one form a team; default from the environment),
    `key_file` (the secure session's key for an agent at "tcp://HOST:PORT",
    another host's; default $DEPUTY_KEY), `fabric_provider` (memory mode
    rdma: the libfabric provider; default $DEPUTY_FABRIC_PROVIDER, else "tcp"),
    `cpu_shared` (True where more of the processes this one waits for share
    its CPUs than there are CPUs, e.g. two ranks on one core: waits then
    yield the CPU at once instead of polling 2 µs first).
    `start_agent=True`: where no agent answers, start the node's agent
    (deputy/agent_start.py; it stops by itself once unused).
    Use it as a context manager, or call close(); teams and requests made
    from it must be closed first."""

    def __init__(self, *, agent: Optional[str] = None, token: Optional[str] = None,
                 pool_bytes: int = 0, ring_size: int = 0, memory_mode: str = "direct",
                 wait_mode: str = "default", lost_timeout_ms: int = 0,
                 connect_timeout_ms: int = 0, job_secret: Optional[str] = None,
                 start_agent: bool = False, key_file: Optional[str] = None,
                 fabric_provider: Optional[str] = None, cpu_shared: bool = False):
        self._strings = [s.encode() if s is not None else None
                         for s in (agent, token, job_secret, key_file, fabric_provider)]
        try:
            mode = MemoryMode[memory_mode.upper()]
            wait = WaitMode[wait_mode.upper()]
        except KeyError as e:
            raise ValueError(f"deputy.Context: {e.args[0]!r} is not a memory_mode (direct, "
                             "staged, rdma) or wait_mode (spin, pause, yield, block, default)") from None
        cfg = Config(ctypes.sizeof(Config), self._strings[0], self._strings[1], pool_bytes,
                     ring_size, mode, 0, wait, lost_timeout_ms, connect_timeout_ms,
                     self._strings[2], self._strings[3], self._strings[4], int(cpu_shared))
        self._ptr = ctypes.c_void_p()

        def attach() -> None:
            check("dp_init", lib.dp_init(ctypes.byref(cfg), ctypes.byref(self._ptr)),
                  f"agent {agent or '$DEPUTY_AGENT'}")
        address = agent or os.environ.get("DEPUTY_AGENT") or None
        # (A socket that is not there needs no attempt, nor its error line.)
        missing = start_agent and address is not None and not os.path.exists(address)
        try:
            if missing:
                raise DeputyError("dp_init", Status.ERR_NO_AGENT)
            attach()
        except DeputyError as e:
            if not start_agent or e.name != "DP_ERR_NO_AGENT":
                raise
            from deputy import agent_start
            agent_start.start_agent(address)
            agent_start.wait_until(attach)
        # Ordinary memory registered with the agent: (address, bytes) ->
        # operations using it now, least recently used first.
        self._registered: dict[tuple[int, int], int] = {}
        # Ranges found in the shared heap or the mapped pool: both stay
        # where they are for the context's life, so the answer never changes.
        self._mapped: set[tuple[int, int]] = set()
        self._lock = threading.Lock()
        # Staged or rdma (memory_mode="staged", or an agent on another
        # host): the library copies or exposes every buffer itself, nothing
        # is registered.
        self._staged = lib.dp_memory_mode(self.handle) != int(MemoryMode.DIRECT)

    @property
    def memory_mode(self) -> str:
        """The memory mode dp_init settled on: "direct", "staged" or "rdma"
        (an agent on another host is staged unless rdma was asked for)."""
        return MemoryMode(lib.dp_memory_mode(self.handle)).name.lower()

    @property
    def handle(self) -> int:
        if not self._ptr:
            raise DeputyError("deputy.Context", -1, "the context is closed")
        return self._ptr.value  # type: ignore[return-value]

    def close(self) -> None:
        """Detaches (dp_finalize). Idempotent."""
        if self._ptr:
            ptr, self._ptr = self._ptr, ctypes.c_void_p()
            check("dp_finalize", lib.dp_finalize(ptr))

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # Reaching memory: the shared heap and the mapped pool need nothing;
    # ordinary memory is registered (a round trip to the agent, ~150 us
    # here) the first time an operation uses it and stays registered for
    # the next ones: up to KEEP_REGISTERED ranges, the least recently used
    # not in use deregistered first. (A registration lets the agent read and
    # write the range only for operations this process posts on it.)

    KEEP_REGISTERED = 64

    def reach(self, address: int, nbytes: int) -> Optional[tuple[int, int]]:
        """Makes [address, address + nbytes) reachable by the agent; the key
        to give release() when the operation is done, or None if nothing was
        needed."""
        key = (address, nbytes)
        if nbytes == 0 or self._staged or key in self._mapped:
            return None
        with self._lock:
            users = self._registered.pop(key, None)
            if users is not None:  # (re-inserted: the most recently used)
                self._registered[key] = users + 1
                return key
        if lib.dp_heap_contains(address, nbytes) or lib.dp_mem_mapped(self.handle, address, nbytes):
            if len(self._mapped) > 4096:
                self._mapped.clear()
            self._mapped.add(key)
            return None
        with self._lock:
            if len(self._registered) >= self.KEEP_REGISTERED:
                for old in [k for k, n in self._registered.items() if n == 0]:
                    del self._registered[old]
                    lib.dp_mem_deregister(self.handle, old[0])
                    if len(self._registered) < self.KEEP_REGISTERED:
                        break
            check("dp_mem_register", lib.dp_mem_register(self.handle, address, nbytes),
                  f"{nbytes} bytes at {address:#x}; deputy.empty() arrays need no registration")
            self._registered[key] = 1
            return key

    def release(self, key: Optional[tuple[int, int]]) -> None:
        """The operation that reached `key` is done (the range stays registered)."""
        if key is None:
            return
        with self._lock:
            if key in self._registered:
                self._registered[key] -= 1


def _heap_free(address: int) -> None:
    lib.dp_heap_free(address)


def empty(shape, dtype=np.float32) -> np.ndarray:
    """A NumPy array in deputy's shared heap: the agent reads and writes it
    in place (no registration, no copy). Freed when the array is."""
    dt = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64)) if np.ndim(shape) else int(shape)
    nbytes = max(count * dt.itemsize, 1)
    address = lib.dp_heap_alloc(nbytes, 64, 0)
    if not address:
        raise MemoryError(f"deputy.empty: no {nbytes} bytes in the shared heap "
                          "(its size: $DEPUTY_HEAP_BYTES)")
    raw = (ctypes.c_char * nbytes).from_address(address)
    array = np.frombuffer(raw, dtype=np.uint8, count=count * dt.itemsize).view(dt).reshape(shape)
    weakref.finalize(raw, _heap_free, address)
    return array


def zeros(shape, dtype=np.float32) -> np.ndarray:
    """empty(), filled with zeros."""
    a = empty(shape, dtype)
    a.fill(0)
    return a
