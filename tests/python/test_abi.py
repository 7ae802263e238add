# SPDX-License-Identifier: MIT
"""The ctypes declarations of cumod/_lib.py against cumod/cumod.h as the C
compiler reads it: every Structure's size, each field's offset and size
(nested ones too), and the constants the package copies (argument kinds,
GEMM types and orders, CUMOD_EVENTS_NOW, every CUMOD_E* code and its
error class). A field added, moved or retyped on one side only fails
here, not as a wrong launch at run time."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

import conftest
import cumod
from cumod import _lib

# The C type of each top-level ctypes declaration (nested ones, like
# cumod_arg's union, are reached through their parent's fields).
C_NAMES = {
    "Dim3": "cumod_dim3", "Arg": "cumod_arg",
    "LaunchParams": "cumod_launch_params",
    "LaunchAttrs": "cumod_launch_attrs", "TlsFiles": "cumod_tls_files",
    "DeviceInfo": "cumod_device_info", "ModuleInfo": "cumod_module_info",
    "ModuleList": "cumod_module_list",
    "ModuleResult": "cumod_module_result", "Event": "cumod_event",
    "GemmOperand": "cumod_gemm_operand", "GemmDesc": "cumod_gemm_desc",
    "JitOptions": "cumod_jit_options",
}
NESTED = {"_ArgBuffer", "_ArgValue"}

CONSTANTS = {
    "ARG_VALUE": "CUMOD_ARG_VALUE", "ARG_BUFFER": "CUMOD_ARG_BUFFER",
    "ARG_RAW": "CUMOD_ARG_RAW", "GEMM_FP32": "CUMOD_GEMM_FP32",
    "GEMM_FP64": "CUMOD_GEMM_FP64", "GEMM_FP16": "CUMOD_GEMM_FP16",
    "GEMM_BF16": "CUMOD_GEMM_BF16", "GEMM_ROW_MAJOR": "CUMOD_GEMM_ROW_MAJOR",
    "GEMM_COL_MAJOR": "CUMOD_GEMM_COL_MAJOR",
    "EVENTS_NOW": "CUMOD_EVENTS_NOW",
}


def _fields(ctype, cexpr, pyname, out):
    """(python path, C member designator, ctypes offset, ctypes size) of
    every field of ctype, recursing into nested structs and unions."""
    for f in ctype._fields_:
        name, ft = f[0], f[1]
        fd = getattr(ctype, name)
        path = f"{pyname}.{name}"
        c = f"{cexpr}.{name}" if cexpr else name
        out.append((path, c, fd.offset, fd.size))
        if isinstance(ft, type) and issubclass(
                ft, (ctypes.Structure, ctypes.Union)):
            sub = []
            _fields(ft, c, path, sub)
            out += [(p, cc, fd.offset + o, s) for p, cc, o, s in sub]


def _include_dirs():
    gen = os.path.join(conftest.BUILD, "include")
    if not os.path.exists(os.path.join(gen, "cumod", "version.h")):
        pytest.skip(f"no generated cumod/version.h under {gen}: build first "
                    "(or set CUMOD_BUILD_DIR)")
    return [os.path.join(conftest.ROOT, "client", "include"),
            os.path.join(conftest.ROOT, "proto", "include"), gen]


def test_every_ctypes_struct_has_the_c_compilers_layout(tmp_path):
    cc = os.environ.get("CC") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler (cc, or $CC) to read cumod.h's layout")
    declared = {n for n, v in vars(_lib).items() if isinstance(v, type)
                and issubclass(v, (ctypes.Structure, ctypes.Union))
                and v not in (ctypes.Structure, ctypes.Union)}
    assert declared == set(C_NAMES) | NESTED, (
        "a ctypes struct of _lib.py with no C name to check it against "
        "(add it to C_NAMES)", declared ^ (set(C_NAMES) | NESTED))

    rows = []  # (label, python value, C expression)
    for py, cname in C_NAMES.items():
        t = getattr(_lib, py)
        rows.append((f"sizeof {py}", ctypes.sizeof(t), f"sizeof({cname})"))
        rows.append((f"alignof {py}", ctypes.alignment(t),
                     f"_Alignof({cname})"))
        fields = []
        _fields(t, "", py, fields)
        for path, cmember, off, size in fields:
            rows.append((f"offsetof {path}", off,
                         f"offsetof({cname}, {cmember})"))
            rows.append((f"sizeof {path}", size,
                         f"sizeof((({cname} *)0)->{cmember})"))
    for py, cname in CONSTANTS.items():
        rows.append((f"constant {py}", int(getattr(_lib, py)),
                     f"(unsigned long long)({cname})"))
    # Every error code: the C enum's value and cumod's class of that code.
    hdr = open(os.path.join(conftest.ROOT, "proto", "include", "cumod",
                            "errors.h")).read()
    codes = re.findall(r"XX\((E\w+), (\d+),", hdr)
    assert len(codes) >= 24
    for name, num in codes:
        cls = cumod.CumodError(int(num), "x").__class__
        assert cls is not cumod.CumodError and cls.errcode == int(num), (
            f"CUMOD_{name} has no error class of its own")
        assert getattr(cumod, cls.__name__) is cls
        assert cls.__name__ in cumod.__all__
        rows.append((f"error {cls.__name__}", cls.errcode,
                     f"(unsigned long long)(CUMOD_{name})"))

    src = ["#include <stddef.h>", "#include <stdio.h>",
           '#include "cumod/cumod.h"', "int main(void) {"]
    for i, (_, _, cexpr) in enumerate(rows):
        src.append(f'    printf("%d %llu\\n", {i}, '
                   f"(unsigned long long)({cexpr}));")
    src += ["    return 0;", "}"]
    c = tmp_path / "layout.c"
    c.write_text("\n".join(src) + "\n")
    exe = tmp_path / "layout"
    cmd = [cc, "-std=c11", "-o", str(exe), str(c)]
    for d in _include_dirs():
        cmd += ["-I", d]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, ("cumod.h has no member of that name (a "
                               "ctypes field misnamed or gone in C):\n" +
                               r.stderr)
    out = subprocess.run([str(exe)], capture_output=True, text=True,
                         check=True, timeout=30).stdout.split("\n")
    got = dict(line.split() for line in out if line)
    wrong = [f"{label}: ctypes {py}, C {got[str(i)]}"
             for i, (label, py, _) in enumerate(rows)
             if int(got[str(i)]) != py]
    assert not wrong, "ctypes and cumod.h differ:\n" + "\n".join(wrong)
    assert len(rows) > 150  # every field of every struct was compared
