"""Objects that offer their memory through DLPack (`__dlpack__` and
`__dlpack_device__`: JAX, CuPy, TensorFlow and other frameworks' CPU
arrays) as the C API sees them: address, element count and type, with no
copy. NumPy's own from_dlpack gives read-only arrays (DLPack carries no
writability), which would refuse a destination, so the capsule is read
here, by ctypes, as the DLPack header (dlpack.h, v0.x ABI) lays it out.

The producer's memory stays alive while the view does: the view owns the
managed tensor and calls its deleter when it is collected (after the
operation that used it, which holds it)."""

from __future__ import annotations

import ctypes
from typing import Any

from deputy.constants import DType

_CPU = 1  # kDLCPU
# DLDataTypeCode -> {bits: deputy type}
_TYPES = {
    0: {8: DType.INT8, 16: DType.INT16, 32: DType.INT32, 64: DType.INT64},      # kDLInt
    1: {8: DType.UINT8, 16: DType.UINT16, 32: DType.UINT32, 64: DType.UINT64},  # kDLUInt
    2: {16: DType.FLOAT16, 32: DType.FLOAT32, 64: DType.FLOAT64},              # kDLFloat
    4: {16: DType.BFLOAT16},                                                    # kDLBfloat
    6: {8: DType.UINT8},                                                        # kDLBool
}


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                     ("deleter", _Deleter)]

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


def offers_dlpack(obj: Any) -> bool:
    return hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")


class View:
    """An object's memory through DLPack: .address, .count, .nbytes, .dtype."""

    __slots__ = ("address", "count", "nbytes", "dtype", "_managed")

    def __init__(self, obj: Any, what: str):
        self._managed = None
        device = obj.__dlpack_device__()
        if int(device[0]) != _CPU:
            raise ValueError(f"deputy: {what} is on DLPack device {tuple(device)}; deputy "
                             "moves CPU memory (kDLCPU)")
        capsule = obj.__dlpack__()
        if not _api.PyCapsule_IsValid(capsule, b"dltensor"):
            raise ValueError(f"deputy: {what}'s __dlpack__ gave no unused DLPack capsule")
        managed = ctypes.cast(_api.PyCapsule_GetPointer(capsule, b"dltensor"),
                              ctypes.POINTER(_Managed))
        # Consumed: the capsule's own destructor must not delete it now.
        _api.PyCapsule_SetName(capsule, b"used_dltensor")
        self._managed = managed
        t = managed.contents.dl_tensor
        shape = [t.shape[i] for i in range(t.ndim)]
        count = 1
        for n in shape:
            count *= n
        dt = t.dtype
        dtype = _TYPES.get(dt.code, {}).get(dt.bits) if dt.lanes == 1 else None
        if dtype is None:
            raise ValueError(f"deputy: {what} has DLPack type code {dt.code}, {dt.bits} bits, "
                             f"{dt.lanes} lane(s): no deputy element type")
        if t.strides and count > 1:
            expected = 1
            for i in reversed(range(t.ndim)):
                if shape[i] != 1 and t.strides[i] != expected:
                    raise ValueError(f"deputy: {what} is not contiguous (DLPack strides "
                                     f"{[t.strides[k] for k in range(t.ndim)]}, shape {shape})")
                expected *= shape[i]
        self.address = (t.data or 0) + t.byte_offset
        self.count = count
        self.nbytes = count * dt.bits // 8
        self.dtype = dtype

    def __del__(self) -> None:
        m = self._managed
        if m is not None and m.contents.deleter:
            self._managed = None
            m.contents.deleter(m)
