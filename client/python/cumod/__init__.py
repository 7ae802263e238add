# SPDX-License-Identifier: MIT
"""cumod from Python: launch CUDA kernels that cumodd keeps loaded.

    import numpy as np, cumod
    with cumod.Client() as c:                      # $CUMOD_URL, else the default
        a = c.buffer(np.arange(1024, dtype=np.float32))
        b = c.buffer(np.ones(1024, dtype=np.float32))
        out = c.empty_like(a)                      # float32, (1024,)
        c.launch("vadd:vadd", grid=4, block=256,
                 args=[a, b, out, cumod.i32(1024)])
        print(out.to_numpy()[:4])                  # [1. 2. 3. 4.]

Every call goes through libcumod (the C library), whose errors come back as
CumodError (a subclass per cumod error code: cumod.NotFound,
cumod.InvalidArgument, ...) with the code, its name and the detail message.
Timeouts and deadlines are in seconds.
"""
from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import math
import os
import struct
import threading
import warnings
from typing import (Any, Callable, ClassVar, Dict, Generator, List, Literal,
                    Optional, Sequence, Tuple, Type, Union, overload)

import numpy as np

from . import _lib
from ._lib import lib

_launch_v2 = _lib.launch_v2_raw
_launch_post = _lib.launch_post_raw
_gemm_raw = _lib.gemm_raw

__version__ = "0.1.0"

# The error classes' names, one per code of cumod/errors.h.
_ERROR_NAMES = [
    "InvalidArgument", "OutOfMemory", "NotFound", "AlreadyExists", "Busy",
    "TimedOut", "Closed", "ConnectionRefused", "ProtocolError",
    "VersionMismatch", "InputOutputError", "PermissionDenied", "TooBig",
    "NotSupported", "NoDriver", "DriverError", "NoDevice", "ContextLost",
    "OutOfDeviceMemory", "InvalidImage", "ShuttingDown", "InternalError",
    "Quarantined", "LimitExceeded",
]

__all__ = [
    "Client", "Buffer", "Stream", "Ticket", "Batch", "PreparedLaunch",
    "PreparedGemm",
    "CumodError", *_ERROR_NAMES,
    "DeviceInfo", "ModuleInfo", "Event", "i32", "u32", "i64", "u64", "f32",
    "f64", "EVENTS_NOW", "to_bf16", "from_bf16", "__version__",
]


class _EventsNow(int):
    """The events() position "from now on" (UINT64_MAX), named in its
    repr."""

    def __repr__(self) -> str:
        return "cumod.EVENTS_NOW"


EVENTS_NOW = _EventsNow(_lib.EVENTS_NOW)


# --- Errors -------------------------------------------------------------------

def _s(b: bytes) -> str:
    return b.decode(errors="replace")


class CumodError(Exception):
    """A cumod call failed: code is the cumod error number (cumod/errors.h),
    name its name ("CUMOD_EINVAL"), detail what was wrong and where.

    CumodError(code, detail) makes the subclass of that code
    (cumod.NotFound for CUMOD_ENOENT, ...), so `except cumod.NotFound`
    and `except cumod.CumodError` both catch it. failed_index is the
    failed item of a batch (Batch.submit), else None."""

    #: The code of the subclass (None on CumodError itself).
    errcode: ClassVar[Optional[int]] = None
    code: int
    name: str
    detail: str
    failed_index: Optional[int] = None

    def __new__(cls, code: int, detail: str = "") -> "CumodError":
        if cls is CumodError:
            cls = _ERRORS.get(code, CumodError)
        return super().__new__(cls, code, detail)

    def __init__(self, code: int, detail: str = ""):
        self.code = code
        self.name = _s(lib.cumod_errname(code))
        self.detail = detail
        super().__init__(f"{self.name}: {detail}")
        self.args = (f"{self.name}: {detail}",)

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}"

    def __reduce__(self) -> Tuple[Any, ...]:
        return (CumodError, (self.code, self.detail), self.__dict__)


class InvalidArgument(CumodError):
    """CUMOD_EINVAL (1): invalid argument."""
    errcode = 1


class OutOfMemory(CumodError):
    """CUMOD_ENOMEM (2): out of host memory."""
    errcode = 2


class NotFound(CumodError):
    """CUMOD_ENOENT (3): not found."""
    errcode = 3


class AlreadyExists(CumodError):
    """CUMOD_EEXIST (4): already exists."""
    errcode = 4


class Busy(CumodError):
    """CUMOD_EBUSY (5): busy."""
    errcode = 5


class TimedOut(CumodError, TimeoutError):
    """CUMOD_ETIMEDOUT (6): timed out; also a TimeoutError."""
    errcode = 6


class Closed(CumodError):
    """CUMOD_ECLOSED (7): connection closed."""
    errcode = 7


class ConnectionRefused(CumodError, ConnectionRefusedError):
    """CUMOD_ECONNREFUSED (8): connection refused: is cumodd running?;
    also a ConnectionRefusedError."""
    errcode = 8


class ProtocolError(CumodError):
    """CUMOD_EPROTO (9): protocol error."""
    errcode = 9


class VersionMismatch(CumodError):
    """CUMOD_EVERSION (10): protocol version not supported."""
    errcode = 10


class InputOutputError(CumodError):
    """CUMOD_EIO (11): input/output error."""
    errcode = 11


class PermissionDenied(CumodError, PermissionError):
    """CUMOD_EPERM (12): operation not permitted; also a PermissionError."""
    errcode = 12


class TooBig(CumodError):
    """CUMOD_ETOOBIG (13): message or file too large."""
    errcode = 13


class NotSupported(CumodError):
    """CUMOD_ENOTSUP (14): not supported."""
    errcode = 14


class NoDriver(CumodError):
    """CUMOD_ENODRIVER (15): CUDA driver library not found."""
    errcode = 15


class DriverError(CumodError):
    """CUMOD_EDRIVER (16): CUDA driver call failed."""
    errcode = 16


class NoDevice(CumodError):
    """CUMOD_ENODEVICE (17): no such CUDA device."""
    errcode = 17


class ContextLost(CumodError):
    """CUMOD_ECTXLOST (18): CUDA context lost: the executor is restarting."""
    errcode = 18


class OutOfDeviceMemory(CumodError):
    """CUMOD_EDEVMEM (19): out of device memory."""
    errcode = 19


class InvalidImage(CumodError):
    """CUMOD_EIMAGE (20): invalid or incompatible kernel image."""
    errcode = 20


class ShuttingDown(CumodError):
    """CUMOD_ESHUTDOWN (21): daemon shutting down."""
    errcode = 21


class InternalError(CumodError):
    """CUMOD_EINTERNAL (22): internal error."""
    errcode = 22


class Quarantined(CumodError):
    """CUMOD_EQUARANTINED (23): module quarantined after a fault or a hang."""
    errcode = 23


class LimitExceeded(CumodError):
    """CUMOD_ELIMIT (24): over a limit of this connection or of the daemon."""
    errcode = 24


_ERRORS: Dict[int, Type[CumodError]] = {
    c.errcode: c for c in CumodError.__subclasses__()
    if c.errcode is not None}


def _check(rv: int) -> None:
    if rv != 0:
        raise CumodError(rv, _s(lib.cumod_last_detail() or b""))


_MS_MAX = 2**32 - 1


def _ms(what: str, seconds: Optional[float], ms: Optional[int],
        default_ms: int = 0) -> int:
    """A timeout in milliseconds for C from seconds (what Python's own
    calls take), or from the deprecated *_ms parameter; None for both:
    default_ms. A positive time under a millisecond is one."""
    if ms is not None:
        warnings.warn(f"{what}_ms is deprecated: give {what}= in seconds",
                      DeprecationWarning, stacklevel=3)
        if seconds is not None:
            raise TypeError(f"{what} and {what}_ms given: give {what} "
                            "(seconds)")
        return int(ms)
    if seconds is None:
        return default_ms
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or math.isnan(seconds) or seconds < 0:
        raise ValueError(f"{what}: {seconds!r} is not a time in seconds "
                         "(>= 0)")
    v = math.ceil(seconds * 1000)
    return min(v, _MS_MAX)


# --- Kernel arguments --------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Value:
    ctype: str
    value: Union[int, float]


def i32(v: int) -> _Value:
    """A 32-bit signed integer argument."""
    return _Value("i", v)


def u32(v: int) -> _Value:
    """A 32-bit unsigned integer argument."""
    return _Value("I", v)


def i64(v: int) -> _Value:
    """A 64-bit signed integer argument."""
    return _Value("q", v)


def u64(v: int) -> _Value:
    """A 64-bit unsigned integer argument."""
    return _Value("Q", v)


def f32(v: float) -> _Value:
    """A float argument."""
    return _Value("f", v)


def f64(v: float) -> _Value:
    """A double argument."""
    return _Value("d", v)


_NP_TYPES = {np.dtype(np.int32): "i", np.dtype(np.uint32): "I",
             np.dtype(np.int64): "q", np.dtype(np.uint64): "Q",
             np.dtype(np.float32): "f", np.dtype(np.float64): "d",
             np.dtype(np.int16): "h", np.dtype(np.uint16): "H",
             np.dtype(np.int8): "b", np.dtype(np.uint8): "B"}

Arg = Union["Buffer", Tuple["Buffer", int], _Value, np.generic, bytes,
            bytearray, memoryview]
#: A grid, block or cluster shape: n (n, 1, 1), or up to three sizes.
Dim = Union[int, Sequence[int]]


# A NumPy type code's struct format (native order, standard sizes): struct
# packs a scalar in a fraction of NumPy's time; what it refuses or would
# round differently (a float past FLT_MAX, a float for an integer) goes
# through NumPy as before, so the bytes and the errors are NumPy's.
_STRUCTS = {c: struct.Struct("=" + c) for c in "iIqQfdhHbB"}


def _value_bytes(v: "_Value") -> bytes:
    try:
        return _STRUCTS[v.ctype].pack(v.value)
    except (struct.error, OverflowError, TypeError):
        return np.array([v.value], dtype=v.ctype).tobytes()


# A struct code's cumod_arg_type (CUMOD_TYPE_I32 ...): the daemon checks
# it against a C++ kernel's parameter type; bytes go untyped (0).
_TYPE_TAGS = {"i": 1, "I": 2, "q": 3, "Q": 4, "f": 5, "d": 6, "h": 7,
              "H": 8, "b": 9, "B": 10}


def _arg_type(a: Arg) -> int:
    if isinstance(a, _Value):
        return _TYPE_TAGS.get(a.ctype, 0)
    if isinstance(a, np.generic):
        return _TYPE_TAGS.get(_NP_TYPES.get(a.dtype, ""), 0)
    return 0


def _arg_value(i: int, a: Arg) -> bytes:
    """The bytes of argument i (from 0; messages count from 1, as the
    daemon's do) for anything but a Buffer, or the error that says why it
    is not an argument."""
    if isinstance(a, _Value):
        raw = _value_bytes(a)
    elif isinstance(a, np.generic):
        if a.dtype not in _NP_TYPES:
            raise TypeError(f"argument {i + 1}: NumPy {a.dtype} is not a "
                            "kernel argument type")
        raw = a.tobytes()
    elif isinstance(a, (bytes, bytearray, memoryview)):
        raw = bytes(a)  # a struct by value
    elif isinstance(a, bool) or isinstance(a, (int, float)):
        raise TypeError(
            f"argument {i + 1}: a Python {type(a).__name__} has no C type: "
            f"give cumod.i32({a!r}), i64, u32, u64, f32 or f64 (or a "
            "NumPy scalar)")
    else:
        raise TypeError(f"argument {i + 1}: {type(a).__name__} is not a "
                        "kernel argument (a Buffer, (Buffer, offset), "
                        "cumod.i32(...) and kin, a NumPy scalar, bytes)")
    if not raw:
        raise ValueError(f"argument {i + 1}: no bytes")
    return raw


def _arg_buffer(a: Arg) -> Optional[Tuple["Buffer", int]]:
    if isinstance(a, Buffer):
        return a, 0
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], Buffer):
        return a
    return None


# cumod_arg and cumod_launch_params as struct layouts (native alignment, as
# the C compiler lays them out; checked against the ctypes declarations
# below). Arguments and one-off launches are packed with these into bytes:
# building the ctypes structs field by field cost about 1 us a field.
_ARG_BUFFER_S = struct.Struct("@i4xNQQ")
_ARG_VALUE_S = struct.Struct("@iIN16s")  # kind, type, len, bytes
_ARG_RAW_S = struct.Struct("@iINP8x")
_LP_S = struct.Struct("@PQ3I3IIQNPI4x")
_ARG_SIZE = ctypes.sizeof(_lib.Arg)
_VALUE_MAX = ctypes.sizeof(_lib._ArgValue)  # 16: bytes carried in place
assert _ARG_BUFFER_S.size == _ARG_VALUE_S.size == _ARG_RAW_S.size == _ARG_SIZE
assert _lib.Arg.v.offset == 16 and _LP_S.size == ctypes.sizeof(
    _lib.LaunchParams) and _lib.LaunchParams.args.offset == 64


def _arg_packed(i: int, a: Arg) -> Tuple[bytes, int, Any]:
    """Argument i (from 0) as a cumod_arg's bytes, its size, and what it
    borrows (a RAW argument's bytes, to be kept until the launch call
    returns)."""
    bo = _arg_buffer(a)
    if bo is not None:
        try:
            return (_ARG_BUFFER_S.pack(_lib.ARG_BUFFER, 8, bo[0].handle,
                                       bo[1]), 8, None)
        except struct.error:  # an offset out of range: as ctypes takes it
            x = _lib.Arg(kind=_lib.ARG_BUFFER, len=8)
            x.v.buffer.handle = bo[0].handle
            x.v.buffer.offset = bo[1]
            return bytes(x), 8, None
    raw = _arg_value(i, a)
    n = len(raw)
    if n <= _VALUE_MAX:  # carried in the cumod_arg itself
        return (_ARG_VALUE_S.pack(_lib.ARG_VALUE, _arg_type(a), n, raw), n,
                None)
    b = ctypes.create_string_buffer(raw, n)
    return (_ARG_RAW_S.pack(_lib.ARG_RAW, _arg_type(a), n,
                            ctypes.addressof(b)), n, b)


def _pack_args(args: Sequence[Arg], keep: List[Any]) -> Tuple[Any, int]:
    """args as a cumod_arg array; keep gets the list of what each
    argument borrows (None for most), by index."""
    parts = []
    held = []
    for i, a in enumerate(args):
        packed, _, b = _arg_packed(i, a)
        parts.append(packed)
        held.append(b)
    keep.append(held)
    n = len(parts)
    if n == 0:
        return (_lib.Arg * 1)(), 0
    return (_lib.Arg * n).from_buffer_copy(b"".join(parts)), n


def _dim3(v: Union[int, Sequence[int]]) -> _lib.Dim3:
    return _lib.Dim3(*_dim3t(v))


def _dim3t(v: Union[int, Sequence[int]]) -> Tuple[int, int, int]:
    if isinstance(v, int):
        return (v, 1, 1)
    t = tuple(v) + (1, 1)
    return (t[0], t[1], t[2])


# Kernel names as the C strings launches carry, made once each (with
# their address, for _launch_params): a program launches a handful of
# kernels many times. Bounded, since a name may be made up per call.
_KERNEL_NAMES: Dict[str, Tuple[Any, int]] = {}


def _kernel_name(kernel: str) -> Tuple[Any, int]:
    k = _KERNEL_NAMES.get(kernel)
    if k is None:
        b = ctypes.create_string_buffer(kernel.encode())
        k = (b, ctypes.addressof(b))
        if len(_KERNEL_NAMES) >= 1024:
            _KERNEL_NAMES.clear()
        _KERNEL_NAMES[kernel] = k
    return k


def _params(kernel: str, grid: Dim, block: Dim, args: Sequence[Arg],
            shared_mem: int,
            stream: Optional["Stream"], generation: int, deadline_ms: int,
            keep: List[Any]) -> Any:
    """The launch's cumod_launch_params as a ctypes struct, which can be
    changed in place (keep holds what it points to)."""
    arr, n = _pack_args(args, keep)
    k = _kernel_name(kernel)[0]
    keep.append(k)
    keep.append(arr)
    p = _lib.LaunchParams()
    p.kernel = ctypes.cast(k, ctypes.c_char_p)
    p.generation = generation
    p.grid = _dim3(grid)
    p.block = _dim3(block)
    p.shared_mem = shared_mem
    p.stream = stream.handle if stream is not None else 0
    p.nargs = n
    p.args = arr
    p.deadline_ms = deadline_ms
    return p


def _launch_params(kernel: str, grid: Dim, block: Dim, args: Sequence[Arg],
                   shared_mem: int, stream: Optional["Stream"],
                   generation: int, deadline_ms: int,
                   keep: List[Any]) -> bytes:
    """The launch's cumod_launch_params as bytes, which ctypes hands to C
    as a pointer (keep holds what they point to). struct.error where a
    number is out of its C type's range: _params then converts as ctypes
    does (wrapping)."""
    arr, n = _pack_args(args, keep)
    keep.append(arr)
    k = _kernel_name(kernel)
    keep.append(k)
    return _LP_S.pack(k[1], generation, *_dim3t(grid), *_dim3t(block),
                      shared_mem, stream.handle if stream is not None else 0,
                      n, ctypes.addressof(arr), deadline_ms)


def _attrs(cluster: Optional[Dim], cooperative: bool,
           carveout: Optional[int]) -> Any:
    """The launch's cumod_launch_attrs, or None (NULL: none) when it asks
    nothing beyond cumod_launch_params."""
    if cluster is None and not cooperative and carveout is None:
        return None
    a = _lib.LaunchAttrs()
    if cluster is not None:
        a.cluster = _dim3(cluster)
    a.cooperative = 1 if cooperative else 0
    a.carveout = -1 if carveout is None else carveout
    return a


# --- GEMM ---------------------------------------------------------------------

_GEMM_TYPES = {np.dtype(np.float32): _lib.GEMM_FP32,
               np.dtype(np.float64): _lib.GEMM_FP64,
               np.dtype(np.float16): _lib.GEMM_FP16}


# What a dtype argument already resolved to: gemm is called with the same
# few (np.float32, "bf16") over and over, and np.dtype() is a third of
# its conversion.
_GEMM_TYPE_SEEN: Dict[Any, int] = {}


def _gemm_type(dtype: Any, what: str) -> int:
    """float32, float64, float16 (NumPy dtypes, or anything np.dtype takes),
    or bfloat16: "bf16", "bfloat16", or a dtype of that name (ml_dtypes')."""
    try:
        return _GEMM_TYPE_SEEN[dtype]
    except (KeyError, TypeError):  # not seen, or not hashable
        pass
    t = _gemm_type_of(dtype, what)
    try:
        if len(_GEMM_TYPE_SEEN) < 64:
            _GEMM_TYPE_SEEN[dtype] = t
    except TypeError:
        pass
    return t


def _gemm_type_of(dtype: Any, what: str) -> int:
    if isinstance(dtype, str) and dtype.lower() in ("bf16", "bfloat16"):
        return _lib.GEMM_BF16
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is not None and dt.name == "bfloat16":
        return _lib.GEMM_BF16
    if dt is None or dt not in _GEMM_TYPES:
        raise TypeError(f"{what}: {dtype!r} is not a GEMM type (float32, "
                        "float64, float16 or \"bf16\")")
    return _GEMM_TYPES[dt]


def to_bf16(x: Any) -> np.ndarray:
    """x's values as bfloat16 bit patterns (uint16, same shape), rounded to
    the nearest even: what a BF16 GEMM's buffers hold."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def from_bf16(u: Any) -> np.ndarray:
    """bfloat16 bit patterns (uint16) as float32 values, same shape."""
    a = np.ascontiguousarray(u, dtype=np.uint16)
    return (a.astype(np.uint32) << 16).view(np.float32)


def _gemm_operand(x: Any, ld: int, stride: int, what: str) -> Any:
    if type(x) is Buffer:
        return _lib.GemmOperand(x.handle, 0, ld, stride)
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], Buffer):
        buf, off = x
    elif isinstance(x, Buffer):
        buf, off = x, 0
    else:
        raise TypeError(f"gemm: {what} is a Buffer or (Buffer, offset), not "
                        f"{type(x).__name__}")
    return _lib.GemmOperand(buf.handle, off, ld, stride)


_GEMM_ORDERS = {"row": _lib.GEMM_ROW_MAJOR, "C": _lib.GEMM_ROW_MAJOR,
                "col": _lib.GEMM_COL_MAJOR, "F": _lib.GEMM_COL_MAJOR}


def _gemm_desc(a: Any, b: Any, c: Any, m: int, n: int, k: int, dtype: Any,
               c_dtype: Any, order: str, transa: bool, transb: bool,
               alpha: float, beta: float, lda: int, ldb: int, ldc: int,
               batch: int, stride_a: int, stride_b: int,
               stride_c: int) -> Any:
    o = _GEMM_ORDERS.get(order) if isinstance(order, str) else None
    if o is None:
        raise ValueError(f"gemm: order {order!r} is not \"row\" (\"C\") or "
                         "\"col\" (\"F\")")
    if not (type(m) is int and type(n) is int and type(k) is int
            and type(batch) is int and m >= 0 and n >= 0 and k >= 0
            and batch >= 0):
        for name, v in (("m", m), ("n", n), ("k", k), ("batch", batch)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) \
                    or v < 0:
                raise TypeError(f"gemm: {name} is a count, not {v!r}")
    # One constructor call: the fields in their order (a setattr each cost
    # most of gemm's Python time).
    return _lib.GemmDesc(
        _gemm_type(dtype, "gemm: dtype"),
        0 if c_dtype is None else _gemm_type(c_dtype, "gemm: c_dtype"),
        o, 1 if transa else 0, 1 if transb else 0, m, n, k, float(alpha),
        float(beta), _gemm_operand(a, lda, stride_a, "A"),
        _gemm_operand(b, ldb, stride_b, "B"),
        _gemm_operand(c, ldc, stride_c, "C"), batch)


# --- Data ---------------------------------------------------------------------

def _memoryview(obj: Any) -> memoryview:
    """obj's memory: through the buffer protocol, else through
    __array_interface__ (NumPy reads it); TypeError for anything else."""
    try:
        return memoryview(obj)
    except TypeError:
        if not hasattr(obj, "__array_interface__"):
            raise TypeError(f"{type(obj).__name__} has neither the buffer "
                            "protocol nor __array_interface__") from None
        arr: Any = np.asarray(obj)
        return memoryview(arr)


def _as_bytes(obj: Any) -> memoryview:
    m = _memoryview(obj)
    if not m.c_contiguous:
        c: Any = np.ascontiguousarray(m)
        m = memoryview(c)
    return m.cast("B")


def _as_array(obj: Any) -> np.ndarray:
    """obj (anything with the buffer protocol or __array_interface__) as a
    NumPy array sharing its memory, with its element type and shape (bytes
    of a format NumPy does not know: uint8, flat)."""
    if isinstance(obj, np.ndarray):
        return obj
    m = _memoryview(obj)
    try:
        return np.asarray(m)
    except (TypeError, ValueError):
        return np.frombuffer(_as_bytes(m), dtype=np.uint8)


# Guards every Ticket's waiting state (a lock each would cost each
# wait=False launch its making; this one is taken only by tickets waited
# on in a thread).
_TICKET_LOCK = threading.Lock()


class Ticket:
    """Work enqueued on a stream (a launch, GEMM, batch or memset made with
    wait=False). wait() returns when it has completed (raising its error,
    e.g. a kernel's fault); done() says whether it has, without blocking;
    `await ticket` waits without blocking an asyncio event loop.
    generation is the module generation of a launch (else 0)."""

    def __init__(self, client: "Client", value: int, generation: int = 0):
        self.client = client
        self.value = value
        self.generation = generation
        # value 0 is the daemon's ticket of work already complete
        self._finished = value == 0
        self._error: Optional[CumodError] = None
        # Made on the first done(), wait(timeout) or await: the thread
        # that waits, set when it is done, and who to tell.
        self._thread: Optional[threading.Thread] = None
        self._event: Optional[threading.Event] = None
        self._callbacks: List[Callable[[], None]] = []

    def _waiter(self) -> None:
        try:
            # closed meanwhile: the shut-down client says Closed
            rv = lib.cumod_wait(self.client._cl or self.client._shut,
                                self.value)
            if rv != 0:
                self._error = CumodError(
                    rv, _s(lib.cumod_last_detail() or b""))
        finally:
            with _TICKET_LOCK:
                self._finished = True
                callbacks, self._callbacks = self._callbacks, []
            if self._event is not None:
                self._event.set()
            self.client._waiter_ended(self)
            for cb in callbacks:
                cb()

    def _start(self) -> None:
        """Waits in a thread of its own (cumod_wait blocks; ctypes lets
        go of the GIL meanwhile), once."""
        with _TICKET_LOCK:
            if self._thread is not None or self._finished:
                return
            self.client._c()  # closed: raises Closed here
            self._event = threading.Event()
            t = threading.Thread(target=self._waiter, daemon=True,
                                 name=f"cumod-ticket-{self.value}")
            self._thread = t
            self.client._waiter_started(self)
        t.start()

    def _result(self) -> None:
        if self._error is not None:
            raise self._error

    def done(self) -> bool:
        """True once the work has completed (or failed: wait() then raises
        its error). Never blocks."""
        if not self._finished:
            self._start()
        return self._finished

    def wait(self, timeout: Optional[float] = None) -> None:
        """Waits for the work (raises its error, e.g. a kernel's fault).
        timeout: at most that many seconds, then cumod.TimedOut (also a
        TimeoutError) while the work goes on; None: as long as the
        client's own request timeout allows."""
        if self._finished:
            return self._result()
        if timeout is None and self._thread is None:
            rv = lib.cumod_wait(self.client._c(), self.value)
            if rv != 0:
                self._error = CumodError(
                    rv, _s(lib.cumod_last_detail() or b""))
            self._finished = True
            return self._result()
        self._start()
        ev = self._event
        if ev is not None and not ev.wait(timeout):
            raise CumodError(6, f"Ticket.wait: ticket {self.value} not "
                             f"complete after {timeout} s")  # ETIMEDOUT
        return self._result()

    async def wait_async(self) -> None:
        """Waits for the work without blocking the running event loop (a
        thread waits; the loop is woken when it is done). Raises the
        work's error."""
        if not self._finished:
            loop = asyncio.get_running_loop()
            fut: "asyncio.Future[None]" = loop.create_future()

            def settle() -> None:
                if not fut.done():
                    fut.set_result(None)

            def wake() -> None:
                loop.call_soon_threadsafe(settle)

            with _TICKET_LOCK:
                ready = self._finished
                if not ready:
                    self._callbacks.append(wake)
            if not ready:
                self._start()
                await fut
        self._result()

    def __await__(self) -> Generator[Any, None, None]:
        """`await ticket`: wait_async()."""
        return self.wait_async().__await__()

    def __repr__(self) -> str:
        return f"Ticket({self.value})"


class Stream:
    """A stream of the daemon's context: work on it runs in order."""

    def __init__(self, client: "Client", handle: int):
        self.client = client
        self.handle = handle

    def synchronize(self) -> None:
        """Returns when the work enqueued on the stream so far has
        completed."""
        _check(lib.cumod_stream_synchronize(self.client._c(), self.handle))

    def destroy(self) -> None:
        """Destroys the stream (its enqueued work still completes)."""
        if self.handle:
            _check(lib.cumod_stream_destroy(self.client._c(), self.handle))
            self.handle = 0

    def __enter__(self) -> "Stream":
        """The stream itself, for a `with` block."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Leaving the `with` block destroys the stream."""
        self.destroy()


class Buffer:
    """Device memory of the client's session (freed with free(), on
    leaving a `with` block, or when the client closes).

    A buffer made from an array (Client.buffer, Client.empty_like,
    Client.empty) remembers its dtype and shape: to_numpy() gives them
    back. One from Client.alloc(nbytes) is bytes: uint8, (nbytes,).
    size and nbytes are its length in bytes."""

    def __init__(self, client: "Client", handle: int, size: int,
                 dtype: Any = None, shape: Optional[Tuple[int, ...]] = None):
        self.client = client
        self.handle = handle
        self.size = size
        self.dtype: np.dtype = np.dtype(np.uint8 if dtype is None else dtype)
        if shape is None:
            shape = (size // self.dtype.itemsize,)
        self.shape: Tuple[int, ...] = tuple(int(n) for n in shape)

    @property
    def nbytes(self) -> int:
        """The buffer's length in bytes (as size)."""
        return self.size

    def __enter__(self) -> "Buffer":
        """The buffer itself, for a `with` block."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Leaving the `with` block frees the buffer (unless freed, or
        the client closed)."""
        if self.handle and self.client._cl:
            self.free()

    def at(self, offset: int) -> Tuple["Buffer", int]:
        """This buffer offset bytes in, as a kernel argument."""
        return (self, offset)

    def write(self, data: Any, offset: int = 0,
              stream: Optional[Stream] = None) -> None:
        """Copies data (a NumPy array or anything with the buffer protocol)
        to the buffer at offset."""
        m = _as_bytes(data)
        src = (ctypes.c_char * len(m)).from_buffer_copy(m) if m.readonly \
            else (ctypes.c_char * len(m)).from_buffer(m)
        _check(lib.cumod_buffer_write(
            self.client._c(), self.handle, offset, ctypes.addressof(src),
            len(m), stream.handle if stream else 0))

    def read_into(self, out: Any, offset: int = 0,
                  stream: Optional[Stream] = None) -> Any:
        """Fills out (a writable NumPy array or buffer) from the buffer at
        offset; returns out."""
        m = _as_bytes(out)
        if m.readonly:
            raise ValueError("read_into: the destination is read-only")
        dst = (ctypes.c_char * len(m)).from_buffer(m)
        _check(lib.cumod_buffer_read(
            self.client._c(), self.handle, offset, ctypes.addressof(dst),
            len(m), stream.handle if stream else 0))
        return out

    def to_numpy(self, dtype: Any = None, count: int = -1,
                 offset: int = 0) -> np.ndarray:
        """The buffer's contents as a new NumPy array: of the buffer's
        dtype and shape (see Buffer); with dtype, count or offset, a flat
        array of count elements of dtype (default: the buffer's) read
        from offset bytes in (count -1: to the end)."""
        if dtype is None and count < 0 and offset == 0:
            out = np.empty(self.shape, dtype=self.dtype)
            if out.nbytes > self.size:  # a shape given beyond the bytes
                out = np.empty(self.size // self.dtype.itemsize,
                               dtype=self.dtype)
            self.read_into(out)
            return out
        dt = self.dtype if dtype is None else np.dtype(dtype)
        if count < 0:
            count = (self.size - offset) // dt.itemsize
        out = np.empty(count, dtype=dt)
        self.read_into(out, offset)
        return out

    @overload
    def fill(self, value: int = 0, offset: int = 0, length: int = -1,
             stream: Optional[Stream] = None, wait: Literal[True] = True
             ) -> None: ...

    @overload
    def fill(self, value: int, offset: int, length: int,
             stream: Optional[Stream], wait: Literal[False]) -> Ticket: ...

    @overload
    def fill(self, value: int = 0, offset: int = 0, length: int = -1,
             stream: Optional[Stream] = None, *, wait: Literal[False]
             ) -> Ticket: ...

    @overload
    def fill(self, value: int = 0, offset: int = 0, length: int = -1,
             stream: Optional[Stream] = None, wait: bool = True
             ) -> Optional[Ticket]: ...

    def fill(self, value: int = 0, offset: int = 0, length: int = -1,
             stream: Optional[Stream] = None, wait: bool = True
             ) -> Optional[Ticket]:
        """Sets length bytes (default: to the end) to value."""
        n = self.size - offset if length < 0 else length
        tk = _lib.u64(0)
        _check(lib.cumod_buffer_memset(
            self.client._c(), self.handle, offset, n, value,
            stream.handle if stream else 0,
            None if wait else ctypes.byref(tk)))
        return None if wait else Ticket(self.client, tk.value)

    def free(self) -> None:
        """Frees the buffer now (the daemon frees the memory once the work
        already enqueued has completed)."""
        if self.handle:
            _check(lib.cumod_buffer_free(self.client._c(), self.handle))
            self.handle = 0

    def __repr__(self) -> str:
        return (f"Buffer(handle={self.handle:#x}, size={self.size}, "
                f"dtype={self.dtype}, shape={self.shape})")


class PreparedGemm:
    """A GEMM whose C descriptor is built once (Client.prepare_gemm): each
    call is one foreign call, without gemm's argument conversion (about
    8 us of Python a call on the H200's host, most of the gap between a
    waited 4096^3 BF16 c.gemm and torch.matmul). The daemon still checks
    every GEMM against the session's buffers. It holds its three Buffers.

    Not for several threads at once: the ticket comes back through a field
    of the object (prepare one per thread)."""

    __slots__ = ("client", "_d", "_bd", "_tk", "_btk", "_bufs")

    def __init__(self, client: "Client", d: Any, bufs: Tuple[Any, ...]):
        self.client = client
        self._d = d
        self._bufs = bufs
        self._tk = _lib.u64(0)
        self._bd = ctypes.byref(d)
        self._btk = ctypes.byref(self._tk)

    @overload
    def __call__(self, wait: Literal[True] = True) -> None: ...

    @overload
    def __call__(self, wait: Literal[False]) -> Ticket: ...

    @overload
    def __call__(self, wait: bool = True) -> Optional[Ticket]: ...

    def __call__(self, wait: bool = True) -> Optional[Ticket]:
        """Runs the GEMM: with wait (the default) returns once computed,
        else once enqueued, with a Ticket."""
        cl = self.client._cl
        if not cl:
            raise CumodError(7, "the client is closed")  # CUMOD_ECLOSED
        rv = _gemm_raw(cl, self._bd, None if wait else self._btk)
        if rv:
            _check(rv)
        return None if wait else Ticket(self.client, self._tk.value)


class Batch:
    """Launches, writes, memsets and GEMMs run in order on one stream,
    answered once (submit)."""

    def __init__(self, client: "Client"):
        self.client = client
        self._b = ctypes.c_void_p()
        _check(lib.cumod_batch_alloc(ctypes.byref(self._b)))

    def __len__(self) -> int:
        return int(lib.cumod_batch_count(self._b))

    def launch(self, kernel: str, grid: Dim = 1, block: Dim = 1,
               args: Sequence[Arg] = (), shared_mem: int = 0,
               generation: int = 0, cluster: Optional[Dim] = None,
               cooperative: bool = False,
               carveout: Optional[int] = None) -> "Batch":
        """Adds a launch (as Client.launch; the batch's stream runs it,
        the batch's deadline bounds it)."""
        keep: List[Any] = []
        p = _params(kernel, grid, block, args, shared_mem, None, generation, 0,
                    keep)
        a = _attrs(cluster, cooperative, carveout)
        _check(lib.cumod_batch_launch_v2(self._b, ctypes.byref(p), a))
        return self

    def gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int,
             dtype: Any = np.float32, *, c_dtype: Any = None,
             order: str = "row", transa: bool = False, transb: bool = False,
             alpha: float = 1.0, beta: float = 0.0, lda: int = 0,
             ldb: int = 0, ldc: int = 0, batch: int = 1, stride_a: int = 0,
             stride_b: int = 0, stride_c: int = 0) -> "Batch":
        """Adds a GEMM (as Client.gemm; the batch's stream runs it)."""
        d = _gemm_desc(a, b, c, m, n, k, dtype, c_dtype, order, transa,
                       transb, alpha, beta, lda, ldb, ldc, batch, stride_a,
                       stride_b, stride_c)
        _check(lib.cumod_batch_gemm(self._b, ctypes.byref(d)))
        return self

    def write(self, buf: Buffer, data: Any, offset: int = 0) -> "Batch":
        """Adds a copy of data (an array or buffer, copied now) to buf at
        offset bytes."""
        m = bytes(_as_bytes(data))
        _check(lib.cumod_batch_write(self._b, buf.handle, offset, m, len(m)))
        return self

    def memset(self, buf: Buffer, value: int, offset: int = 0,
               length: int = -1) -> "Batch":
        """Adds a memset of length bytes (-1: to the end) of buf to
        value."""
        n = buf.size - offset if length < 0 else length
        _check(lib.cumod_batch_memset(self._b, buf.handle, offset, n, value))
        return self

    @overload
    def submit(self, stream: Optional[Stream] = None,
               wait: Literal[True] = True, deadline_ms: Optional[int] = None,
               *, deadline: Optional[float] = None) -> None: ...

    @overload
    def submit(self, stream: Optional[Stream], wait: Literal[False],
               deadline_ms: Optional[int] = None, *,
               deadline: Optional[float] = None) -> Ticket: ...

    @overload
    def submit(self, stream: Optional[Stream] = None, *,
               wait: Literal[False], deadline_ms: Optional[int] = None,
               deadline: Optional[float] = None) -> Ticket: ...

    @overload
    def submit(self, stream: Optional[Stream] = None, wait: bool = True,
               deadline_ms: Optional[int] = None, *,
               deadline: Optional[float] = None) -> Optional[Ticket]: ...

    def submit(self, stream: Optional[Stream] = None, wait: bool = True,
               deadline_ms: Optional[int] = None, *,
               deadline: Optional[float] = None) -> Optional[Ticket]:
        """Runs the batch; with wait, returns when it has completed (an
        error names the item: CumodError.failed_index), else a Ticket.
        deadline: seconds for the whole batch (None: the daemon's);
        deadline_ms is its deprecated form."""
        lib.cumod_batch_set_deadline(
            self._b, 0 if deadline is None and deadline_ms is None
            else _ms("deadline", deadline, deadline_ms))
        tk = _lib.u64(0)
        failed = ctypes.c_int(-1)
        rv = lib.cumod_batch_submit(
            self.client._c(), self._b, stream.handle if stream else 0,
            None if wait else ctypes.byref(tk), ctypes.byref(failed))
        if rv != 0:
            e = CumodError(rv, _s(lib.cumod_last_detail() or b""))
            e.failed_index = failed.value
            raise e
        return None if wait else Ticket(self.client, tk.value)

    def close(self) -> None:
        """Frees the batch (submitted work goes on)."""
        if self._b:
            lib.cumod_batch_free(self._b)
            self._b = ctypes.c_void_p()

    def __enter__(self) -> "Batch":
        """The batch itself, for a `with` block."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Leaving the `with` block frees the batch."""
        self.close()

    def __del__(self) -> None:
        self.close()


class PreparedLaunch:
    """A launch whose C structures are built once (Client.prepare): each
    call is one foreign call with pointers made beforehand, no argument
    converted again. The daemon still checks every launch, and resolves
    the module's current generation each time (generation=0), so a
    reloaded module's new code runs.

    Not for several threads at once: the generation and ticket come back
    through fields of the object (prepare one per thread)."""

    __slots__ = ("client", "kernel", "_p", "_attrs", "_arr", "_held",
                 "_sizes", "_vals", "_gen", "_tk", "_bp", "_ba", "_bgen",
                 "_btk", "_keep", "_mv")

    def __init__(self, client: "Client", kernel: str, grid: Dim, block: Dim,
                 args: Sequence[Arg], shared_mem: int,
                 stream: Optional[Stream], generation: int, deadline_ms: int,
                 cluster: Optional[Dim], cooperative: bool,
                 carveout: Optional[int]):
        self.client = client
        self.kernel = kernel
        client._c()  # closed: fails now, as launch would
        keep: List[Any] = []
        self._p = _params(kernel, grid, block, args, shared_mem, stream,
                          generation, deadline_ms, keep)
        # keep: what each argument borrows, the kernel name, the arg array
        self._keep = keep
        self._held = keep[0]
        self._arr = keep[-1]
        self._vals = list(args)
        self._sizes = [self._arr[i].len for i in range(len(self._vals))]
        # The arg array's bytes, written through by set_arg (a memoryview
        # slice costs a tenth of ctypes.memmove's foreign call).
        self._mv = memoryview(self._arr).cast("B")
        self._attrs = _attrs(cluster, cooperative, carveout)
        self._gen = _lib.u64(0)
        self._tk = _lib.u64(0)
        byref = ctypes.byref
        self._bp = byref(self._p)
        self._ba = None if self._attrs is None else byref(self._attrs)
        self._bgen = byref(self._gen)
        self._btk = byref(self._tk)

    @overload
    def __call__(self, wait: Literal[True] = True) -> int: ...

    @overload
    def __call__(self, wait: Literal[False]) -> Ticket: ...

    @overload
    def __call__(self, wait: bool = True) -> Union[int, Ticket]: ...

    def __call__(self, wait: bool = True) -> Union[int, Ticket]:
        """Launches: with wait (the default) returns when it has completed,
        with the module generation that ran it; else once enqueued, with a
        Ticket."""
        cl = self.client._cl
        if not cl:
            raise CumodError(7, "the client is closed")  # CUMOD_ECLOSED
        if wait:
            rv = _launch_v2(cl, self._bp, self._ba, None, self._bgen)
            if rv:
                _check(rv)
            return self._gen.value
        rv = _launch_v2(cl, self._bp, self._ba, self._btk, self._bgen)
        if rv:
            _check(rv)
        return Ticket(self.client, self._tk.value, self._gen.value)

    def post(self) -> Ticket:
        """Posts the launch (cumod_launch_post): returns once it is in the
        client's ring, without waiting for cumodd, with a Ticket. Its
        checks run after, so a refusal (a freed buffer, a removed kernel)
        is raised by the Ticket's wait(), as a kernel's fault is. The
        Ticket's generation is 0 (not known when it returns). Without a
        ring it is sent as __call__(wait=False) is."""
        cl = self.client._cl
        if not cl:
            raise CumodError(7, "the client is closed")  # CUMOD_ECLOSED
        rv = _launch_post(cl, self._bp, self._ba, self._btk)
        if rv:
            _check(rv)
        return Ticket(self.client, self._tk.value, 0)

    @property
    def args(self) -> Tuple[Arg, ...]:
        """The arguments the next launch carries."""
        return tuple(self._vals)

    def set_arg(self, i: int, value: Arg) -> None:
        """Argument i becomes value (a Buffer, (Buffer, offset), cumod.i32
        and kin, a NumPy scalar, bytes), written in place. i is an index
        from 0, as Python's are; messages, the daemon's included, number
        arguments from 1 (set_arg(1, ...) is "argument 2"). It must have
        the size the argument was prepared with (ValueError: prepare again
        to change a kernel's argument types); a bad value raises launch's
        error, and the launch is left as it was."""
        n = len(self._vals)
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
            raise IndexError(f"set_arg({i!r}): the launch has {n} "
                             f"arguments, indexes 0 to {n - 1}")
        packed, size, b = _arg_packed(i, value)
        if size != self._sizes[i]:
            given = ("a buffer (8 bytes)" if _arg_buffer(value) is not None
                     else f"{size} bytes")
            raise ValueError(f"argument {i + 1}: {given} where the launch was "
                             f"prepared with {self._sizes[i]} bytes (prepare "
                             "it again to change the argument's type)")
        o = i * _ARG_SIZE
        self._mv[o:o + _ARG_SIZE] = packed
        self._held[i] = b
        self._vals[i] = value

    def set_shape(self, grid: Optional[Union[int, Sequence[int]]] = None,
                  block: Optional[Union[int, Sequence[int]]] = None,
                  shared_mem: Optional[int] = None) -> None:
        """Changes the grid, the block or the dynamic shared memory of the
        next launches (None: as it is)."""
        if grid is not None:
            self._p.grid = _dim3(grid)
        if block is not None:
            self._p.block = _dim3(block)
        if shared_mem is not None:
            self._p.shared_mem = shared_mem

    def __repr__(self) -> str:
        g, b = self._p.grid, self._p.block
        return (f"PreparedLaunch({self.kernel!r}, grid=({g.x}, {g.y}, "
                f"{g.z}), block=({b.x}, {b.y}, {b.z}), "
                f"{len(self._vals)} args)")


# --- What the daemon says -----------------------------------------------------

@dataclasses.dataclass
class DeviceInfo:
    """The daemon's device and state (Client.device())."""

    daemon_version: str
    name: str
    ordinal: int
    sm: Tuple[int, int]
    multiprocessors: int
    driver_version: int
    total_memory: int
    free_memory: int
    kernel_dir: str
    modules: int
    resident_modules: int
    executor_state: str
    executor_restarts: int


@dataclasses.dataclass
class ModuleInfo:
    """A module of the kernel folder as the daemon reports it
    (Client.modules(), load(), ...); note: what a command said of it."""

    name: str
    state: str
    generation: int
    sha256: str
    kind: str
    size: int
    pinned: bool
    kernels: List[str]
    error: Optional[str]
    quarantined: bool
    note: str = ""
    loaded_kind: str = ""  # what the resident generation was loaded as
    jit_options: Optional[str] = None  # the JIT options that built it

    @staticmethod
    def _from(m: _lib.ModuleInfo, note: bytes = b"") -> "ModuleInfo":
        return ModuleInfo(
            name=_s(m.name), state=_s(m.state), generation=m.generation,
            sha256=_s(m.sha256), kind=_s(m.kind), size=m.size,
            pinned=bool(m.pinned),
            kernels=[_s(m.kernels[i]) for i in range(m.nkernels)],
            error=_s(m.error) if m.error else None,
            quarantined=bool(m.quarantined), note=_s(note),
            loaded_kind=_s(m.loaded_kind),
            jit_options=_s(m.jit_options) if m.jit_options else None)


@dataclasses.dataclass
class Event:
    """A change event (Client.events()); kind is its name (loaded,
    reloaded, ...)."""

    seq: int
    kind: str
    module: str
    generation: int
    old_generation: int
    sha256: str
    old_sha256: str
    detail: str
    unix_ms: int


# --- The client ---------------------------------------------------------------

# Client.run: arrays up to this size travel inside its batch.
_RUN_INLINE_MAX = 64 << 10


class Client:
    """A connection to cumodd (a session: its buffers and streams are freed
    when it closes). Use it as a context manager."""

    def __init__(self, url: Optional[str] = None,
                 timeout_ms: Optional[int] = None,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, device: Optional[int] = None,
                 *, timeout: Optional[float] = None):
        """Connects to cumodd at url (None: $CUMOD_URL, else the default
        socket). timeout: seconds that bound the connection and every
        request (None: 10 s); timeout_ms is its deprecated form. The TLS
        files of a tls+tcp:// URL; None: $CUMOD_TLS_CA, $CUMOD_TLS_CERT,
        $CUMOD_TLS_KEY (libcumod reads them). device: the daemon's device
        to run on (set_device), chosen right after connecting; None:
        $CUMOD_DEVICE (libcumod reads it), else 0."""
        self._cl = ctypes.c_void_p()
        # The C client once closed: shut down (every call on it fails),
        # freed only in __del__, when no thread can be in a call on it
        # (a thread in one holds a reference to this object).
        self._shut = ctypes.c_void_p()
        self._waiters: Dict[int, Ticket] = {}
        self._waiters_lock = threading.Lock()
        tms = _ms("timeout", timeout, timeout_ms)
        if timeout is not None and tms == 0 and timeout > 0:
            tms = 1
        if tms > 2**31 - 1:
            tms = 2**31 - 1
        if device is not None and (isinstance(device, bool) or
                                   not isinstance(device, int)):
            raise TypeError("device is a device ordinal (an int) or None")
        files = _lib.TlsFiles(*(os.fsencode(f) if f else None
                                for f in (tls_ca, tls_cert, tls_key)))
        _check(lib.cumod_open_tls(url.encode() if url else None, tms,
                                  ctypes.byref(files),
                                  ctypes.byref(self._cl)))
        if device is not None:
            try:
                self.set_device(device)
            except BaseException:
                self.close()
                raise

    def _c(self) -> ctypes.c_void_p:
        if not self._cl:
            raise CumodError(7, "the client is closed")  # CUMOD_ECLOSED
        return self._cl

    def _waiter_started(self, t: Ticket) -> None:
        with self._waiters_lock:
            self._waiters[id(t)] = t

    def _waiter_ended(self, t: Ticket) -> None:
        with self._waiters_lock:
            self._waiters.pop(id(t), None)

    def close(self) -> None:
        """Ends the session: its buffers and streams are gone. Waits first
        for the threads of tickets being waited on (done(), wait(timeout),
        await), which end by the request timeout at the latest. Safe while
        other threads call on this client: calls already sent to the
        daemon finish (close waits for them), and every later call raises
        Closed."""
        if self._cl:
            with self._waiters_lock:
                threads = [t._thread for t in self._waiters.values()]
            for th in threads:
                if th is not None and th is not threading.current_thread():
                    th.join()
            cl = self._cl
            if cl:  # another thread's close may have taken it meanwhile
                # _shut first: a reader of _cl or _shut sees one of them
                self._shut = cl
                self._cl = ctypes.c_void_p()
                lib.cumod_shutdown(cl)

    def __enter__(self) -> "Client":
        """The client itself, for a `with` block."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Leaving the `with` block closes the client."""
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_cl", None):
            self.close()
        shut = getattr(self, "_shut", None)
        if shut:
            self._shut = ctypes.c_void_p()
            lib.cumod_close(shut)

    @property
    def fast_path(self) -> bool:
        """True while calls go through the shared-memory ring. A ring lost
        with its connection (a dropped connection, a restarted daemon)
        comes back by itself on the first call over the next one."""
        return bool(lib.cumod_fast_path(self._c()))

    @property
    def fast_path_why(self) -> str:
        """Why calls do not go through the shared-memory ring ("" while
        they do): e.g. "CUMOD_NO_RING is set", "cumodd closed this
        client's ring ..."."""
        buf = ctypes.create_string_buffer(512)
        lib.cumod_fast_path_why(self._c(), buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def set_device(self, device: int) -> None:
        """Runs this session's work on the daemon's device `device` (a CUDA
        ordinal of one it serves): only before the session holds anything
        (CUMOD_EBUSY after); CUMOD_EINVAL names the devices served. Kept
        for a connection made again."""
        if isinstance(device, bool) or not isinstance(device, int):
            raise TypeError("device is a device ordinal (an int)")
        if not 0 <= device < 2**31:
            raise CumodError(1, f"set_device: {device} is not a device "
                             "ordinal (0, 1, ...)")  # CUMOD_EINVAL
        _check(lib.cumod_set_device(self._c(), device))

    @property
    def device_ordinal(self) -> int:
        """The device this session's work runs on, as the daemon last said
        (0 unless chosen). device() is the daemon's report of it."""
        return int(lib.cumod_device(self._c()))

    def device(self) -> DeviceInfo:
        """What the daemon says of its device and itself (DeviceInfo)."""
        d = _lib.DeviceInfo()
        _check(lib.cumod_device_info_get(self._c(), ctypes.byref(d)))
        return DeviceInfo(
            daemon_version=_s(d.daemon_version), name=_s(d.name),
            ordinal=d.ordinal, sm=(d.sm_major, d.sm_minor),
            multiprocessors=d.multiprocessors,
            driver_version=d.driver_version, total_memory=d.total_memory,
            free_memory=d.free_memory, kernel_dir=_s(d.kernel_dir),
            modules=d.modules, resident_modules=d.resident_modules,
            executor_state=_s(d.executor_state),
            executor_restarts=d.executor_restarts)

    # Data.
    def alloc(self, size: int) -> Buffer:
        """size bytes of device memory (not zeroed)."""
        h = _lib.u64(0)
        _check(lib.cumod_buffer_alloc(self._c(), size, ctypes.byref(h)))
        return Buffer(self, h.value, size)

    def buffer(self, data: Any) -> Buffer:
        """A new buffer holding data: a NumPy array, or anything with the
        buffer protocol or __array_interface__. The buffer remembers its
        dtype and shape (to_numpy() gives them back)."""
        arr = _as_array(data)
        m = _as_bytes(arr)
        b = self.alloc(max(1, len(m)))
        b.dtype, b.shape = arr.dtype, tuple(arr.shape)
        if len(m):
            b.write(m)
        return b

    def empty(self, shape: Union[int, Sequence[int]],
              dtype: Any = np.float32) -> Buffer:
        """A new buffer for an array of shape and dtype (not zeroed), which
        it remembers."""
        shp = (shape,) if isinstance(shape, int) else tuple(shape)
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shp, dtype=np.int64)) * dt.itemsize
        b = self.alloc(max(1, nbytes))
        b.dtype, b.shape = dt, shp
        return b

    def empty_like(self, a: Any) -> Buffer:
        """A new buffer of the dtype and shape of a (an array, anything
        with the buffer protocol or __array_interface__, or a Buffer); not
        zeroed, nothing copied."""
        if isinstance(a, Buffer):
            return self.empty(a.shape, a.dtype)
        arr = _as_array(a)
        return self.empty(arr.shape, arr.dtype)

    def stream(self) -> Stream:
        """A new stream of the session (a context manager)."""
        h = _lib.u64(0)
        _check(lib.cumod_stream_create(self._c(), ctypes.byref(h)))
        return Stream(self, h.value)

    def synchronize(self, stream: Optional[Stream] = None) -> None:
        """Returns when the work enqueued on stream (None: the default
        stream) so far has completed."""
        _check(lib.cumod_stream_synchronize(
            self._c(), stream.handle if stream else 0))

    def batch(self) -> "Batch":
        """A new, empty Batch."""
        return Batch(self)

    # Launches.
    @overload
    def launch(self, kernel: str, grid: Dim = 1, block: Dim = 1,
               args: Sequence[Arg] = (), shared_mem: int = 0,
               stream: Optional[Stream] = None, wait: Literal[True] = True,
               generation: int = 0, deadline_ms: Optional[int] = None,
               cluster: Optional[Dim] = None, cooperative: bool = False,
               carveout: Optional[int] = None, *,
               deadline: Optional[float] = None) -> int: ...

    @overload
    def launch(self, kernel: str, grid: Dim, block: Dim,
               args: Sequence[Arg], shared_mem: int,
               stream: Optional[Stream], wait: Literal[False],
               generation: int = 0, deadline_ms: Optional[int] = None,
               cluster: Optional[Dim] = None, cooperative: bool = False,
               carveout: Optional[int] = None, *,
               deadline: Optional[float] = None) -> Ticket: ...

    @overload
    def launch(self, kernel: str, grid: Dim = 1, block: Dim = 1,
               args: Sequence[Arg] = (), shared_mem: int = 0,
               stream: Optional[Stream] = None, *, wait: Literal[False],
               generation: int = 0, deadline_ms: Optional[int] = None,
               cluster: Optional[Dim] = None, cooperative: bool = False,
               carveout: Optional[int] = None,
               deadline: Optional[float] = None) -> Ticket: ...

    @overload
    def launch(self, kernel: str, grid: Dim = 1, block: Dim = 1,
               args: Sequence[Arg] = (), shared_mem: int = 0,
               stream: Optional[Stream] = None, wait: bool = True,
               generation: int = 0, deadline_ms: Optional[int] = None,
               cluster: Optional[Dim] = None, cooperative: bool = False,
               carveout: Optional[int] = None, *,
               deadline: Optional[float] = None) -> Union[int, Ticket]: ...

    def launch(self, kernel: str, grid: Dim = 1, block: Dim = 1,
               args: Sequence[Arg] = (), shared_mem: int = 0,
               stream: Optional[Stream] = None, wait: bool = True,
               generation: int = 0, deadline_ms: Optional[int] = None,
               cluster: Optional[Dim] = None, cooperative: bool = False,
               carveout: Optional[int] = None, *,
               deadline: Optional[float] = None) -> Union[int, Ticket]:
        """Launches kernel ("module:function"). With wait (the default)
        returns when it has completed, with the module generation that ran
        it (an int); with wait=False once enqueued, with a Ticket (its
        generation too). deadline: seconds the kernel may run before the
        daemon calls it a hang (None: the daemon's default); deadline_ms
        is its deprecated form."""
        if deadline is None and deadline_ms is None:
            dms = 0
        else:
            dms = _ms("deadline", deadline, deadline_ms)
        keep: List[Any] = []
        byref = ctypes.byref
        try:
            p: Any = _launch_params(kernel, grid, block, args, shared_mem,
                                    stream, generation, dms, keep)
        except struct.error:
            p = byref(_params(kernel, grid, block, args, shared_mem, stream,
                              generation, dms, keep))
        a = _attrs(cluster, cooperative, carveout)
        gen = _lib.u64(0)
        ba = None if a is None else byref(a)
        if wait:
            _check(_launch_v2(self._c(), p, ba, None, byref(gen)))
            return int(gen.value)
        tk = _lib.u64(0)
        _check(_launch_v2(self._c(), p, ba, byref(tk), byref(gen)))
        return Ticket(self, tk.value, gen.value)

    async def launch_async(self, kernel: str, grid: Dim = 1, block: Dim = 1,
                           args: Sequence[Arg] = (), shared_mem: int = 0,
                           stream: Optional[Stream] = None,
                           generation: int = 0,
                           cluster: Optional[Dim] = None,
                           cooperative: bool = False,
                           carveout: Optional[int] = None, *,
                           deadline: Optional[float] = None) -> int:
        """launch for asyncio: enqueues the launch (one request), then
        waits for it without blocking the event loop; returns the module
        generation that ran it. Raises launch's errors and the kernel's."""
        t = self.launch(kernel, grid, block, args, shared_mem, stream,
                        False, generation, None, cluster, cooperative,
                        carveout, deadline=deadline)
        await t
        return t.generation

    def run(self, kernel: str, grid: Dim, block: Dim, *args: Any,
            out: Any = None, shared_mem: int = 0,
            stream: Optional[Stream] = None,
            deadline: Optional[float] = None) -> Any:
        """Runs kernel on NumPy arrays in one call: each array among args
        (a np.ndarray) is uploaded into a new buffer that the kernel gets
        in its place (other arguments, cumod.i32(n) and kin, pass as they
        are); the uploads (those up to 64 KiB inside it, larger ones just
        before, as Buffer.write moves any size) and the launch go as one
        batch; then the arrays
        named by out (one array, or a tuple or list of them, each also
        among args, by identity) are filled from their buffers, and
        returned (out's form: one array, or a tuple). The buffers are
        freed before it returns.

            out = np.empty_like(a)
            c.run("vadd:vadd", 4, 256, a, b, out, cumod.i32(1024), out=out)
        """
        outs: Tuple[np.ndarray, ...]
        if out is None:
            outs = ()
        elif isinstance(out, (tuple, list)):
            outs = tuple(out)
        else:
            outs = (out,)
        for o in outs:
            if not isinstance(o, np.ndarray):
                raise TypeError(f"run: out holds a {type(o).__name__}, not "
                                "a NumPy array")
            if not any(o is a for a in args):
                raise ValueError("run: each array of out is also one of the "
                                 "kernel's arguments (the same object)")
            if not o.flags.writeable:
                raise ValueError("run: an array of out is read-only")
        bufs: List[Buffer] = []
        kargs: List[Arg] = []
        by_id: Dict[int, Buffer] = {}
        try:
            with self.batch() as bt:
                for a in args:
                    if isinstance(a, np.ndarray):
                        b = by_id.get(id(a))
                        if b is None:
                            b = self.empty_like(a)
                            bufs.append(b)
                            by_id[id(a)] = b
                            if a.nbytes > _RUN_INLINE_MAX:
                                # Any size: staged, before the batch, in
                                # the same stream's order.
                                b.write(a, stream=stream)
                            elif a.nbytes:
                                bt.write(b, a)
                        kargs.append(b)
                    else:
                        kargs.append(a)
                bt.launch(kernel, grid, block, kargs, shared_mem)
                bt.submit(stream, deadline=deadline)
            for o in outs:
                if o.nbytes:
                    by_id[id(o)].read_into(o, stream=stream)
        finally:
            for b in bufs:
                if self._cl:
                    b.free()
        if out is None:
            return None
        if isinstance(out, (tuple, list)):
            return outs
        return outs[0]

    def prepare(self, kernel: str, grid: Dim = 1, block: Dim = 1,
                args: Sequence[Arg] = (), shared_mem: int = 0,
                stream: Optional[Stream] = None, generation: int = 0,
                deadline_ms: Optional[int] = None,
                cluster: Optional[Dim] = None, cooperative: bool = False,
                carveout: Optional[int] = None, *,
                deadline: Optional[float] = None) -> "PreparedLaunch":
        """A launch built once, to be made many times: launch's arguments
        (but wait), checked and converted now, with the same errors. Call
        it (k(), k(wait=False)) to launch; k.set_arg(i, v) and
        k.set_shape(...) change it in place."""
        if deadline is None and deadline_ms is None:
            dms = 0
        else:
            dms = _ms("deadline", deadline, deadline_ms)
        return PreparedLaunch(self, kernel, grid, block, args, shared_mem,
                              stream, generation, dms, cluster,
                              cooperative, carveout)

    # GEMM.
    @overload
    def gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int,
             dtype: Any = np.float32, *, c_dtype: Any = None,
             order: str = "row", transa: bool = False, transb: bool = False,
             alpha: float = 1.0, beta: float = 0.0, lda: int = 0,
             ldb: int = 0, ldc: int = 0, batch: int = 1, stride_a: int = 0,
             stride_b: int = 0, stride_c: int = 0,
             stream: Optional[Stream] = None, wait: Literal[True] = True,
             deadline_ms: Optional[int] = None,
             deadline: Optional[float] = None) -> None: ...

    @overload
    def gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int,
             dtype: Any = np.float32, *, c_dtype: Any = None,
             order: str = "row", transa: bool = False, transb: bool = False,
             alpha: float = 1.0, beta: float = 0.0, lda: int = 0,
             ldb: int = 0, ldc: int = 0, batch: int = 1, stride_a: int = 0,
             stride_b: int = 0, stride_c: int = 0,
             stream: Optional[Stream] = None, wait: Literal[False],
             deadline_ms: Optional[int] = None,
             deadline: Optional[float] = None) -> Ticket: ...

    @overload
    def gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int,
             dtype: Any = np.float32, *, c_dtype: Any = None,
             order: str = "row", transa: bool = False, transb: bool = False,
             alpha: float = 1.0, beta: float = 0.0, lda: int = 0,
             ldb: int = 0, ldc: int = 0, batch: int = 1, stride_a: int = 0,
             stride_b: int = 0, stride_c: int = 0,
             stream: Optional[Stream] = None, wait: bool = True,
             deadline_ms: Optional[int] = None,
             deadline: Optional[float] = None) -> Optional[Ticket]: ...

    def gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int,
             dtype: Any = np.float32, *, c_dtype: Any = None,
             order: str = "row", transa: bool = False, transb: bool = False,
             alpha: float = 1.0, beta: float = 0.0, lda: int = 0,
             ldb: int = 0, ldc: int = 0, batch: int = 1, stride_a: int = 0,
             stride_b: int = 0, stride_c: int = 0,
             stream: Optional[Stream] = None, wait: bool = True,
             deadline_ms: Optional[int] = None,
             deadline: Optional[float] = None) -> Optional[Ticket]:
        """C = alpha * op(A) @ op(B) + beta * C on this session's buffers,
        through cuBLAS in cumodd, in stream order with its launches.

        op(A) is m x k (A itself, or with transa its transpose: A stored
        k x m), op(B) k x n, C m x n. a, b and c are Buffers or (Buffer,
        byte offset). dtype is A's and B's: np.float32, np.float64,
        np.float16, or "bf16" (buffers of bfloat16 bit patterns: to_bf16)
        or ml_dtypes.bfloat16; FP16 and BF16 accumulate in FP32. C is of
        dtype, or c_dtype=np.float32 for FP16 and BF16 inputs. order "row"
        (NumPy's, the default) or "col" (BLAS's); lda, ldb, ldc are leading
        dimensions in elements (0: packed). batch > 1 runs a strided batch,
        stride_* elements apart (A and B may use 0: one matrix for all).
        With wait (the default) returns once computed, else a Ticket.
        deadline: seconds (None: the daemon's); deadline_ms deprecated.
        Errors (CumodError) name the operand: "B: ld 10 < 64 columns
        (row-major...)"; a daemon without cuBLAS says CUMOD_ENOTSUP."""
        d = _gemm_desc(a, b, c, m, n, k, dtype, c_dtype, order, transa,
                       transb, alpha, beta, lda, ldb, ldc, batch, stride_a,
                       stride_b, stride_c)
        d.stream = stream.handle if stream is not None else 0
        d.deadline_ms = 0 if deadline is None and deadline_ms is None \
            else _ms("deadline", deadline, deadline_ms)
        tk = _lib.u64(0)
        _check(lib.cumod_gemm(self._c(), ctypes.byref(d),
                              None if wait else ctypes.byref(tk)))
        return None if wait else Ticket(self, tk.value)

    def prepare_gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int,
                     dtype: Any = np.float32, *, c_dtype: Any = None,
                     order: str = "row", transa: bool = False,
                     transb: bool = False, alpha: float = 1.0,
                     beta: float = 0.0, lda: int = 0, ldb: int = 0,
                     ldc: int = 0, batch: int = 1, stride_a: int = 0,
                     stride_b: int = 0, stride_c: int = 0,
                     stream: Optional[Stream] = None,
                     deadline: Optional[float] = None) -> PreparedGemm:
        """gemm's arguments (but wait) converted once: a PreparedGemm, g()
        to run it and wait, g(wait=False) for a Ticket. The same Python
        errors as gemm, raised here; the daemon's at each call."""
        self._c()  # closed: fails now, as gemm would
        d = _gemm_desc(a, b, c, m, n, k, dtype, c_dtype, order, transa,
                       transb, alpha, beta, lda, ldb, ldc, batch, stride_a,
                       stride_b, stride_c)
        d.stream = stream.handle if stream is not None else 0
        d.deadline_ms = 0 if deadline is None \
            else _ms("deadline", deadline, None)
        bufs = tuple(x[0] if isinstance(x, tuple) else x for x in (a, b, c))
        return PreparedGemm(self, d, bufs + ((stream,) if stream else ()))

    def set_carveout(self, kernel: str, percent: Optional[int]) -> None:
        """The shared-memory carveout (percent of L1, None: the driver's
        choice) of kernel's later launches."""
        _check(lib.cumod_kernel_set_carveout(
            self._c(), kernel.encode(), -1 if percent is None else percent))

    # Globals.
    def read_global(self, module: str, name: str, out: Any,
                    offset: int = 0) -> Any:
        """Fills out (a writable array or buffer) from the module's global
        `name` at offset bytes; returns out."""
        m = _as_bytes(out)
        dst = (ctypes.c_char * len(m)).from_buffer(m)
        _check(lib.cumod_global_read(self._c(), module.encode(),
                                     name.encode(), offset,
                                     ctypes.addressof(dst), len(m), 0))
        return out

    def write_global(self, module: str, name: str, data: Any,
                     offset: int = 0) -> None:
        """Writes data (an array or buffer) to the module's global `name`
        at offset bytes."""
        m = bytes(_as_bytes(data))
        _check(lib.cumod_global_write(self._c(), module.encode(),
                                      name.encode(), offset, m, len(m), 0))

    # Modules.
    def modules(self) -> List[ModuleInfo]:
        """The modules of the daemon's kernel folder (ModuleInfo each)."""
        lst = ctypes.POINTER(_lib.ModuleList)()
        _check(lib.cumod_modules_list(self._c(), ctypes.byref(lst)))
        try:
            return [ModuleInfo._from(lst.contents.modules[i])
                    for i in range(lst.contents.count)]
        finally:
            lib.cumod_module_list_free(lst)

    def _module_cmd(self, what: str, name: str) -> ModuleInfo:
        r = _lib.ModuleResult()
        try:
            _check(getattr(lib, "cumod_module_" + what)(
                self._c(), name.encode(), ctypes.byref(r)))
            return ModuleInfo._from(r.module, r.note)
        finally:
            lib.cumod_module_result_fini(ctypes.byref(r))

    def load(self, name: str, *, jit_opt_level: Optional[int] = None,
             jit_max_registers: Optional[int] = None,
             jit_line_info: Optional[int] = None,
             jit_fast_compile: Optional[int] = None) -> ModuleInfo:
        """Makes a module resident.

        The jit_* arguments are the load's own JIT options (PTX, a
        fatbin's PTX, a .cu compiled to PTX): they stay the module's, and a
        resident module whose options change gets a new generation. -1
        drops one given before. ModuleInfo.jit_options says what built
        the generation.
        """
        jit = (jit_opt_level, jit_max_registers, jit_line_info,
               jit_fast_compile)
        if all(v is None for v in jit):
            return self._module_cmd("load", name)
        o = _lib.JitOptions(*[-1 if v is None else (-2 if v == -1 else
                                                    int(v)) for v in jit])
        r = _lib.ModuleResult()
        try:
            _check(lib.cumod_module_load_jit(self._c(), name.encode(),
                                             ctypes.byref(o),
                                             ctypes.byref(r)))
            return ModuleInfo._from(r.module, r.note)
        finally:
            lib.cumod_module_result_fini(ctypes.byref(r))

    def unload(self, name: str) -> ModuleInfo:
        """Unloads the module's resident generation. Returns its ModuleInfo."""
        return self._module_cmd("unload", name)

    def pin(self, name: str) -> ModuleInfo:
        """Pins the module: kept resident, never evicted. Returns its
        ModuleInfo."""
        return self._module_cmd("pin", name)

    def unpin(self, name: str) -> ModuleInfo:
        """Undoes pin(). Returns its ModuleInfo."""
        return self._module_cmd("unpin", name)

    def reload(self, name: str) -> ModuleInfo:
        """Loads the module's files again as a new generation. Returns its
        ModuleInfo."""
        return self._module_cmd("reload", name)

    def unquarantine(self, name: str) -> ModuleInfo:
        """Lets a quarantined module's launches run again. Returns its
        ModuleInfo."""
        return self._module_cmd("unquarantine", name)

    # Change events.
    def events(self, after: int = EVENTS_NOW,
               timeout_ms: Optional[int] = None, max_events: int = 64, *,
               timeout: Optional[float] = None
               ) -> Tuple[List[Event], int, int]:
        """Change events numbered after `after`, waiting up to timeout
        seconds (at most 60; None or 0: not at all) for one: (events, the
        number to ask after next, how many were missed). timeout_ms is
        timeout's deprecated form."""
        tms = _ms("timeout", timeout, timeout_ms)
        buf = (_lib.Event * max(1, max_events))()
        a, n, missed = _lib.u64(after), _lib.c_size(0), _lib.u64(0)
        _check(lib.cumod_events_wait(self._c(), ctypes.byref(a), tms,
                                     buf, max_events, ctypes.byref(n),
                                     ctypes.byref(missed)))
        evs = [Event(seq=e.seq,
                     kind=_s(lib.cumod_event_kind_name(e.kind)),
                     module=_s(e.module), generation=e.generation,
                     old_generation=e.old_generation, sha256=_s(e.sha256),
                     old_sha256=_s(e.old_sha256), detail=_s(e.detail),
                     unix_ms=e.unix_ms) for e in buf[:n.value]]
        return evs, a.value, missed.value
