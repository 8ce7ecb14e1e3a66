"""libdeputy loaded through ctypes, with the prototypes of the calls the
package makes. ctypes (not a compiled extension) keeps the package pure
Python: it builds with nothing but the C library, works on any Python 3
the project supports, and a foreign call releases the GIL, so a wait in
one thread never stops the others. Its cost per call is measured in
python/deputy/README.md.

Which library: $DEPUTY_LIB when set, else the build tree's next to this
source tree (build/libdeputy.so), else the system's (libdeputy.so.0, as
`cmake --install` puts it)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

c_size_p = ctypes.POINTER(ctypes.c_size_t)


class Config(ctypes.Structure):
    """dp_config_t (include/deputy/context.h), field for field."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("agent", ctypes.c_char_p),
        ("token", ctypes.c_char_p),
        ("pool_bytes", ctypes.c_uint64),
        ("ring_size", ctypes.c_uint32),
        ("memory_mode", ctypes.c_uint32),
        ("wq_mode", ctypes.c_uint32),
        ("wait_mode", ctypes.c_uint32),
        ("lost_timeout_ms", ctypes.c_uint32),
        ("connect_timeout_ms", ctypes.c_uint32),
        ("job_secret", ctypes.c_char_p),
        ("key_file", ctypes.c_char_p),
        ("fabric_provider", ctypes.c_char_p),
        ("cpu_shared", ctypes.c_uint32),
    ]


def _candidates() -> list[str]:
    if os.environ.get("DEPUTY_LIB"):
        return [os.environ["DEPUTY_LIB"]]
    root = Path(__file__).resolve().parent.parent.parent
    # build/ first: the sanitizer builds' libraries (build-asan/) need their
    # runtime preloaded.
    found = [str(p) for p in [root / "build" / "libdeputy.so"] if p.exists()]
    system = ctypes.util.find_library("deputy")
    found += [system] if system else []
    return found + ["libdeputy.so.0"]


def _load() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError("deputy: libdeputy not found (set DEPUTY_LIB to build/libdeputy.so, or "
                      "install the project); tried " + "; ".join(tried))


lib = _load()
_vp = ctypes.c_void_p
_int = ctypes.c_int
_st = ctypes.c_int  # dp_status_t


def _proto(name: str, restype, *argtypes) -> None:
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_proto("dp_init", _st, ctypes.POINTER(Config), ctypes.POINTER(_vp))
_proto("dp_finalize", _st, _vp)
_proto("dp_malloc", _vp, _vp, ctypes.c_size_t)
_proto("dp_free", None, _vp, _vp)
_proto("dp_mem_register", _st, _vp, _vp, ctypes.c_size_t)
_proto("dp_mem_deregister", _st, _vp, _vp)
_proto("dp_mem_mapped", _int, _vp, _vp, ctypes.c_size_t)
_proto("dp_memory_mode", _int, _vp)
_proto("dp_heap_alloc", _vp, ctypes.c_size_t, ctypes.c_size_t, _int)
_proto("dp_heap_free", _int, _vp)
_proto("dp_heap_contains", _int, _vp, ctypes.c_size_t)
_proto("dp_strerror", ctypes.c_char_p, _st)
_proto("dp_status_name", ctypes.c_char_p, _st)
_proto("dp_dtype_name", ctypes.c_char_p, _int)
_proto("dp_op_name", ctypes.c_char_p, _int)
_proto("dp_dtype_size", ctypes.c_size_t, _int)
_proto("dp_op_applies", _int, _int, _int)
_proto("dp_team_create_timeout", _st, _vp, ctypes.c_char_p, _int, _int, ctypes.c_uint,
       ctypes.POINTER(_vp))
_proto("dp_team_destroy", _st, _vp)
_proto("dp_team_rank", _int, _vp)
_proto("dp_team_size", _int, _vp)
_proto("dp_test", _st, _vp, ctypes.POINTER(_int))
_proto("dp_wait", _st, _vp)
_proto("dp_request_free", None, _vp)
_req = ctypes.POINTER(_vp)
# (src, dst, count, dtype, op, team, req)
for _name in ("dp_iallreduce", "dp_ireduce_scatter", "dp_iscan", "dp_iexscan"):
    _proto(_name, _st, _vp, _vp, ctypes.c_size_t, _int, _int, _vp, _req)
# (src, dst, count, dtype, team, req)
for _name in ("dp_iallgather", "dp_ialltoall"):
    _proto(_name, _st, _vp, _vp, ctypes.c_size_t, _int, _vp, _req)
_proto("dp_ibcast", _st, _vp, ctypes.c_size_t, _int, _int, _vp, _req)
_proto("dp_ibarrier", _st, _vp, _req)
_proto("dp_ireduce", _st, _vp, _vp, ctypes.c_size_t, _int, _int, _int, _vp, _req)
for _name in ("dp_igather", "dp_iscatter"):
    _proto(_name, _st, _vp, _vp, ctypes.c_size_t, _int, _int, _vp, _req)
_proto("dp_ialltoallv", _st, _vp, c_size_p, c_size_p, _vp, c_size_p, c_size_p, _int, _vp, _req)
_proto("dp_iallgatherv", _st, _vp, ctypes.c_size_t, _vp, c_size_p, c_size_p, _int, _vp, _req)
_proto("dp_igatherv", _st, _vp, ctypes.c_size_t, _vp, c_size_p, c_size_p, _int, _int, _vp, _req)
_proto("dp_iscatterv", _st, _vp, c_size_p, c_size_p, _vp, ctypes.c_size_t, _int, _int, _vp, _req)
_proto("dp_ireduce_scatterv", _st, _vp, _vp, c_size_p, _int, _int, _vp, _req)


class MsgStatus(ctypes.Structure):
    """dp_msg_status_t (include/deputy/p2p.h)."""

    _fields_ = [("source", ctypes.c_int), ("tag", ctypes.c_int), ("bytes", ctypes.c_size_t)]


# Point-to-point: (buf, bytes, peer, tag, team, req)
for _name in ("dp_isend", "dp_issend", "dp_irecv"):
    _proto(_name, _st, _vp, ctypes.c_size_t, _int, _int, _vp, _req)
_proto("dp_request_status", _st, _vp, ctypes.POINTER(MsgStatus))
_proto("dp_iprobe", _st, _int, _int, _vp, ctypes.POINTER(_int), ctypes.POINTER(MsgStatus))
_proto("dp_coll_bus_factor", ctypes.c_double, ctypes.c_char_p, _int)


def heap_preload() -> "str | None":
    """libdeputy-heap.so (src/preload): preloaded into a process, it puts the
    process's large allocations (a torch tensor's storage among them) in
    deputy's shared heap, which the agent reaches in place. $DEPUTY_HEAP_PRELOAD
    when set, else next to the libdeputy loaded here (the build tree's
    src/preload/, or the same directory once installed); None if absent."""
    if os.environ.get("DEPUTY_HEAP_PRELOAD"):
        return os.environ["DEPUTY_HEAP_PRELOAD"]
    here = Path(lib._name).resolve().parent if os.path.sep in lib._name else None
    for p in ([here / "src" / "preload" / "libdeputy-heap.so", here / "libdeputy-heap.so"]
              if here else []):
        if p.exists():
            return str(p)
    return None
