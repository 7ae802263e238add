# SPDX-License-Identifier: MIT
"""libcumod through ctypes: the library, its structs and prototypes.

The one implementation of the protocol is libcumod's (C); this module only
declares what cumod/cumod.h declares (tests/python/test_abi.py compares
every Structure here with the C compiler's layout).

Where libcumod comes from, the first that loads (library_candidates()):
$CUMOD_LIBRARY; a libcumod.so.0 inside the package (a wheel that bundles
it); what the dynamic linker finds as libcumod.so.0 (ld.so.cache,
LD_LIBRARY_PATH); the libdir of pkg-config's cumod.pc (PKG_CONFIG_PATH
for a prefix of your own); then the lib directories of this Python's
prefix and of /usr/local, where `cmake --install build` puts it without
running ldconfig.
"""
import ctypes
import ctypes.util
import os
import shutil
import subprocess
import sys
from typing import List

c_size = ctypes.c_size_t
u64 = ctypes.c_uint64
u32 = ctypes.c_uint32
i64 = ctypes.c_int64

SONAME = "libcumod.so.0"


def _pkg_config_libdir() -> str:
    """cumod.pc's libdir, or "" without pkg-config or the package."""
    exe = shutil.which("pkg-config")
    if not exe:
        return ""
    try:
        r = subprocess.run([exe, "--variable=libdir", "cumod"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def library_candidates() -> List[str]:
    """Where libcumod is looked for, in order (paths, or the soname for
    the dynamic linker's own search)."""
    names: List[str] = []
    env = os.environ.get("CUMOD_LIBRARY")
    if env:
        names.append(env)
    names.append(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              SONAME))
    names.append(SONAME)
    found = ctypes.util.find_library("cumod")
    if found:
        names.append(found)
    libdir = _pkg_config_libdir()
    if libdir:
        names.append(os.path.join(libdir, SONAME))
    for prefix in (sys.prefix, "/usr/local"):
        for sub in ("lib", "lib64", "lib/x86_64-linux-gnu",
                    "lib/aarch64-linux-gnu"):
            names.append(os.path.join(prefix, sub, SONAME))
    return names


def _load() -> ctypes.CDLL:
    tried = []
    for n in library_candidates():
        if os.sep in n and not os.path.exists(n):
            tried.append(f"{n}: not there")
            continue
        try:
            return ctypes.CDLL(n)
        except OSError as e:
            tried.append(f"{n}: {e}")
    raise ImportError(
        "cumod: libcumod was not found (tried " + "; ".join(tried) + "): "
        "install it (cmake --install build [--prefix P], with "
        "PKG_CONFIG_PATH=P/lib/pkgconfig for a prefix the dynamic linker "
        "does not search) or set CUMOD_LIBRARY to its path")


lib = _load()


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint),
                ("z", ctypes.c_uint)]


class _ArgBuffer(ctypes.Structure):
    _fields_ = [("handle", u64), ("offset", u64)]


class _ArgValue(ctypes.Union):
    _fields_ = [("bytes", ctypes.c_ubyte * 16), ("buffer", _ArgBuffer),
                ("raw", ctypes.c_void_p)]


class Arg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("type", ctypes.c_uint32),
                ("len", c_size), ("v", _ArgValue)]


ARG_VALUE, ARG_BUFFER, ARG_RAW = 0, 1, 2


class LaunchParams(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_char_p), ("generation", u64),
                ("grid", Dim3), ("block", Dim3), ("shared_mem", ctypes.c_uint),
                ("stream", u64), ("nargs", c_size),
                ("args", ctypes.POINTER(Arg)), ("deadline_ms", ctypes.c_uint)]


class LaunchAttrs(ctypes.Structure):
    _fields_ = [("cluster", Dim3), ("cooperative", ctypes.c_int),
                ("carveout", ctypes.c_int)]


class TlsFiles(ctypes.Structure):
    _fields_ = [("ca", ctypes.c_char_p), ("cert", ctypes.c_char_p),
                ("key", ctypes.c_char_p)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("daemon_version", ctypes.c_char * 32),
        ("protocol_version", ctypes.c_uint), ("ordinal", ctypes.c_int),
        ("name", ctypes.c_char * 256), ("sm_major", ctypes.c_uint),
        ("sm_minor", ctypes.c_uint), ("multiprocessors", ctypes.c_uint),
        ("driver_version", ctypes.c_int), ("total_memory", u64),
        ("free_memory", u64), ("kernel_dir", ctypes.c_char * 4096),
        ("executor_pid", i64), ("modules", ctypes.c_uint),
        ("resident_modules", ctypes.c_uint), ("resident_bytes", u64),
        ("kernel_dir_degraded", ctypes.c_int),
        ("executor_state", ctypes.c_char * 24),
        ("executor_state_since_unix_ms", u64),
        ("executor_restarts", ctypes.c_uint),
        ("last_fault", ctypes.c_char * 512), ("last_fault_unix_ms", u64),
        ("free_memory_age_ms", u64), ("launch_deadline_ms", ctypes.c_uint),
        ("max_launch_deadline_ms", ctypes.c_uint)]


class ModuleInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 129), ("state", ctypes.c_char * 16),
        ("generation", u64), ("sha256", ctypes.c_char * 65),
        ("kind", ctypes.c_char * 8), ("size", u64), ("pinned", ctypes.c_int),
        ("nkernels", c_size),
        ("kernels", ctypes.POINTER(ctypes.c_char_p)),
        ("error", ctypes.c_char_p), ("file", ctypes.c_char * 256),
        ("nimages", ctypes.c_uint), ("images", (ctypes.c_char * 256) * 4),
        ("inflight", u32), ("resident_generations", u64),
        ("last_use_unix_ms", u64), ("load_us", u64),
        ("quarantined", ctypes.c_int),
        ("quarantine_reason", ctypes.c_char_p),
        ("quarantined_sha256", ctypes.c_char * 65),
        ("quarantined_unix_ms", u64), ("faults", u32),
        ("loaded_kind", ctypes.c_char * 8), ("jit_options", ctypes.c_char_p)]


class ModuleList(ctypes.Structure):
    _fields_ = [("count", c_size), ("modules", ctypes.POINTER(ModuleInfo))]


class ModuleResult(ctypes.Structure):
    _fields_ = [("module", ModuleInfo), ("note", ctypes.c_char * 256)]


class Event(ctypes.Structure):
    _fields_ = [("seq", u64), ("kind", ctypes.c_int),
                ("module", ctypes.c_char * 256), ("generation", u64),
                ("old_generation", u64), ("sha256", ctypes.c_char * 65),
                ("old_sha256", ctypes.c_char * 65),
                ("detail", ctypes.c_char * 1024), ("unix_ms", u64)]


EVENTS_NOW = 2**64 - 1


class GemmOperand(ctypes.Structure):
    _fields_ = [("buffer", u64), ("offset", c_size), ("ld", c_size),
                ("stride", c_size)]


class GemmDesc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("c_type", ctypes.c_int),
                ("order", ctypes.c_int), ("transa", ctypes.c_int),
                ("transb", ctypes.c_int), ("m", c_size), ("n", c_size),
                ("k", c_size), ("alpha", ctypes.c_double),
                ("beta", ctypes.c_double), ("a", GemmOperand),
                ("b", GemmOperand), ("c", GemmOperand), ("batch", c_size),
                ("stream", u64), ("deadline_ms", ctypes.c_uint)]


GEMM_FP32, GEMM_FP64, GEMM_FP16, GEMM_BF16 = 1, 2, 3, 4
GEMM_ROW_MAJOR, GEMM_COL_MAJOR = 0, 1

P = ctypes.POINTER
vp = ctypes.c_void_p
_protos = {
    "cumod_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, P(vp)]),
    "cumod_open_tls": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int,
                                      P(TlsFiles), P(vp)]),
    "cumod_close": (None, [vp]),
    "cumod_shutdown": (None, [vp]),
    "cumod_last_detail": (ctypes.c_char_p, []),
    "cumod_errname": (ctypes.c_char_p, [ctypes.c_int]),
    "cumod_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "cumod_fast_path": (ctypes.c_int, [vp]),
    "cumod_fast_path_why": (c_size, [vp, ctypes.c_char_p, c_size]),
    "cumod_device_info_get": (ctypes.c_int, [vp, P(DeviceInfo)]),
    "cumod_set_device": (ctypes.c_int, [vp, ctypes.c_int]),
    "cumod_device": (ctypes.c_int, [vp]),
    "cumod_modules_list": (ctypes.c_int, [vp, P(P(ModuleList))]),
    "cumod_module_list_free": (None, [P(ModuleList)]),
    "cumod_module_result_fini": (None, [P(ModuleResult)]),
    "cumod_buffer_alloc": (ctypes.c_int, [vp, c_size, P(u64)]),
    "cumod_buffer_free": (ctypes.c_int, [vp, u64]),
    "cumod_buffer_write": (ctypes.c_int, [vp, u64, c_size, vp, c_size, u64]),
    "cumod_buffer_read": (ctypes.c_int, [vp, u64, c_size, vp, c_size, u64]),
    "cumod_buffer_memset": (ctypes.c_int,
                            [vp, u64, c_size, c_size, ctypes.c_uint8, u64,
                             P(u64)]),
    "cumod_copy_device": (ctypes.c_int,
                          [vp, u64, c_size, u64, c_size, c_size, u64, P(u64)]),
    "cumod_stream_create": (ctypes.c_int, [vp, P(u64)]),
    "cumod_stream_destroy": (ctypes.c_int, [vp, u64]),
    "cumod_stream_synchronize": (ctypes.c_int, [vp, u64]),
    "cumod_wait": (ctypes.c_int, [vp, u64]),
    "cumod_launch_v2": (ctypes.c_int,
                        [vp, P(LaunchParams), P(LaunchAttrs), P(u64), P(u64)]),
    "cumod_launch_post": (ctypes.c_int,
                          [vp, P(LaunchParams), P(LaunchAttrs), P(u64)]),
    "cumod_kernel_set_carveout": (ctypes.c_int,
                                  [vp, ctypes.c_char_p, ctypes.c_int]),
    "cumod_global_read": (ctypes.c_int,
                          [vp, ctypes.c_char_p, ctypes.c_char_p, c_size, vp,
                           c_size, u64]),
    "cumod_global_write": (ctypes.c_int,
                           [vp, ctypes.c_char_p, ctypes.c_char_p, c_size, vp,
                            c_size, u64]),
    "cumod_batch_alloc": (ctypes.c_int, [P(vp)]),
    "cumod_batch_free": (None, [vp]),
    "cumod_batch_count": (c_size, [vp]),
    "cumod_batch_launch_v2": (ctypes.c_int,
                              [vp, P(LaunchParams), P(LaunchAttrs)]),
    "cumod_batch_write": (ctypes.c_int, [vp, u64, c_size, vp, c_size]),
    "cumod_batch_memset": (ctypes.c_int,
                           [vp, u64, c_size, c_size, ctypes.c_uint8]),
    "cumod_batch_set_deadline": (None, [vp, ctypes.c_uint]),
    "cumod_gemm": (ctypes.c_int, [vp, P(GemmDesc), P(u64)]),
    "cumod_batch_gemm": (ctypes.c_int, [vp, P(GemmDesc)]),
    "cumod_batch_submit": (ctypes.c_int,
                           [vp, vp, u64, P(u64), P(ctypes.c_int)]),
    "cumod_events_wait": (ctypes.c_int,
                          [vp, P(u64), ctypes.c_uint, P(Event), c_size,
                           P(c_size), P(u64)]),
    "cumod_event_kind_name": (ctypes.c_char_p, [ctypes.c_int]),
}
for _name, (_res, _args) in _protos.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

for _name in ("load", "unload", "pin", "unpin", "reload", "unquarantine"):
    _f = getattr(lib, "cumod_module_" + _name)
    _f.restype = ctypes.c_int
    _f.argtypes = [vp, ctypes.c_char_p, P(ModuleResult)]


class JitOptions(ctypes.Structure):
    _fields_ = [("opt_level", ctypes.c_int), ("max_registers", ctypes.c_int),
                ("line_info", ctypes.c_int), ("fast_compile", ctypes.c_int)]


lib.cumod_module_load_jit.restype = ctypes.c_int
lib.cumod_module_load_jit.argtypes = [vp, ctypes.c_char_p, P(JitOptions),
                                      P(ModuleResult)]

# cumod_launch_v2 once more, without argtypes, for the launch paths: ctypes
# then passes the ctypes objects it is given (c_void_p, byref) as they are
# instead of converting each through argtypes' from_param, which was most
# of a prepared launch's Python time. Callers pass only the client's
# c_void_p, byref() of the right structs, and None.
launch_v2_raw = lib["cumod_launch_v2"]
launch_v2_raw.restype = ctypes.c_int
# And cumod_launch_post so, for PreparedLaunch.post; cumod_gemm for
# PreparedGemm.
launch_post_raw = lib["cumod_launch_post"]
launch_post_raw.restype = ctypes.c_int
gemm_raw = lib["cumod_gemm"]
gemm_raw.restype = ctypes.c_int
