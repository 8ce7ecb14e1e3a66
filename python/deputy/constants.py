"""The C API's enumerations (include/deputy/status.h, mover.h), as Python
enums, and the NumPy dtype of each element type. tests: the ABI test
compares every value with the headers."""

from __future__ import annotations

import enum

import numpy as np


class Status(enum.IntEnum):
    """dp_status_t."""

    OK = 0
    INPROGRESS = 1
    ERR_INVALID = -1
    ERR_TOO_LARGE = -2
    ERR_UNSUPPORTED = -3
    ERR_MISMATCH = -4
    ERR_NO_AGENT = -5
    ERR_AGENT_LOST = -6
    ERR_TIMEOUT = -7
    ERR_DENIED = -8
    ERR_NOMEM = -9
    ERR_RETRY = -10
    ERR_INTERNAL = -11
    ERR_IO = -12
    ERR_TRUNCATED = -13


# include/deputy/p2p.h: a receive's or probe's wildcards.
ANY_SOURCE = -1
ANY_TAG = -1


class DType(enum.IntEnum):
    """dp_dtype_t: the element types; the pairs are MPI's (value, index)
    types laid out as C's struct { value; index; } with its padding."""

    INT8 = 0
    INT16 = 1
    INT32 = 2
    INT64 = 3
    UINT8 = 4
    UINT16 = 5
    UINT32 = 6
    UINT64 = 7
    FLOAT16 = 8
    BFLOAT16 = 9
    FLOAT32 = 10
    FLOAT64 = 11
    FLOAT32_INT32 = 12
    FLOAT64_INT32 = 13
    INT64_INT32 = 14
    INT32_INT32 = 15
    INT16_INT32 = 16
    FLOAT32_FLOAT32 = 17
    FLOAT64_FLOAT64 = 18


class Op(enum.IntEnum):
    """dp_op_t: the reductions. LAND..BXOR take integer types only, MINLOC
    and MAXLOC the pair types only (MPI's tie rule: the lower index)."""

    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    LAND = 4
    LOR = 5
    LXOR = 6
    BAND = 7
    BOR = 8
    BXOR = 9
    MINLOC = 10
    MAXLOC = 11


class MemoryMode(enum.IntEnum):
    """dp_memory_mode_t."""

    DIRECT = 0
    STAGED = 1
    RDMA = 2


class WaitMode(enum.IntEnum):
    """dp_wait_mode_t."""

    SPIN = 0
    PAUSE = 1
    YIELD = 2
    BLOCK = 3
    DEFAULT = 255


def _pair(value: str, index: str) -> np.dtype:
    # C's struct { value; index; }: aligned, so NumPy pads it as C does.
    return np.dtype([("value", value), ("index", index)], align=True)


# The NumPy dtype of each deputy type (bfloat16 has none in NumPy).
NUMPY: dict[DType, np.dtype] = {
    DType.INT8: np.dtype(np.int8),
    DType.INT16: np.dtype(np.int16),
    DType.INT32: np.dtype(np.int32),
    DType.INT64: np.dtype(np.int64),
    DType.UINT8: np.dtype(np.uint8),
    DType.UINT16: np.dtype(np.uint16),
    DType.UINT32: np.dtype(np.uint32),
    DType.UINT64: np.dtype(np.uint64),
    DType.FLOAT16: np.dtype(np.float16),
    DType.FLOAT32: np.dtype(np.float32),
    DType.FLOAT64: np.dtype(np.float64),
    DType.FLOAT32_INT32: _pair("<f4", "<i4"),
    DType.FLOAT64_INT32: _pair("<f8", "<i4"),
    DType.INT64_INT32: _pair("<i8", "<i4"),
    DType.INT32_INT32: _pair("<i4", "<i4"),
    DType.INT16_INT32: _pair("<i2", "<i4"),
    DType.FLOAT32_FLOAT32: _pair("<f4", "<f4"),
    DType.FLOAT64_FLOAT64: _pair("<f8", "<f8"),
}
_FROM_NUMPY = {v: k for k, v in NUMPY.items()}
# bool arrays reduce as bytes (LAND/LOR give 1 or 0).
_FROM_NUMPY[np.dtype(np.bool_)] = DType.UINT8


def dtype_of(dt: np.dtype) -> DType:
    """The deputy type of a NumPy dtype; ValueError naming it if none."""
    d = _FROM_NUMPY.get(np.dtype(dt))  # (a non-native byte order matches none)
    if d is None:
        raise ValueError(f"deputy: no deputy element type for NumPy dtype {dt} (types: "
                         + ", ".join(str(v) for v in NUMPY.values()) + ", bool)")
    return d


_OPS: dict = {**{o: o for o in Op}, **{o.name.lower(): o for o in Op}}


def op_of(op: "Op | str | int") -> Op:
    """Op from an Op, its name ('sum', 'maxloc') or its value."""
    known = _OPS.get(op)
    if known is not None:
        return known
    if isinstance(op, str):
        try:
            return Op[op.upper()]
        except KeyError:
            raise ValueError(f"deputy: no reduction {op!r} (ops: "
                             + ", ".join(o.name.lower() for o in Op) + ")") from None
    return Op(op)
