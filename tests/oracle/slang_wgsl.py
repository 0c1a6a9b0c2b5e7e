"""The oracle's compiler step: a Playground shader to WGSL and reflection JSON, as the Playground's
`compiler.ts` does (whole program, every entry point the user module defines, the Playground's own
`playground` / `rendering` / `printing` modules).

Independent of slang_kernel: it loads libslang-compiler (the same library slangpy ships, so the same
Slang version as the code under test) through ctypes and the C API, and uses none of slang_kernel's
compiler code. The Playground calls `linkedProgram.getTargetCode(0)` and
`linkedProgram.getLayout(0).toJsonObject()`; here that is `spGetTargetCodeBlob` and
`spReflection_ToJson` on a request with SLANG_TARGET_FLAG_GENERATE_WHOLE_PROGRAM.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
from ctypes import POINTER, byref, c_char_p, c_int, c_void_p
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CompiledShader", "OracleCompileError", "compile_wgsl"]

MODULES = Path(__file__).resolve().parent.parent / "data" / "playground" / "modules"
_WGSL = 28                     # SLANG_WGSL
_WHOLE_PROGRAM = 1 << 8        # SLANG_TARGET_FLAG_GENERATE_WHOLE_PROGRAM
_LANG_SLANG = 1
_lib: ctypes.CDLL | None = None


class OracleCompileError(RuntimeError):
    """The Playground's compiler would refuse this source (the diagnostics)."""


@dataclass(frozen=True)
class CompiledShader:
    code: str                     # WGSL of the whole program
    reflection: dict[str, Any]    # Slang's reflection JSON (what the Playground's toJsonObject gives)
    hashed_strings: dict[int, str]
    thread_group_sizes: dict[str, tuple[int, int, int]]


def _load() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        spec = importlib.util.find_spec("slangpy")
        assert spec is not None and spec.origin is not None, "slangpy (which ships libslang-compiler) is missing"
        path = next(Path(spec.origin).parent.glob("libslang-compiler.so*"))
        L = ctypes.CDLL(str(path))
        L.spCreateSession.restype = c_void_p
        L.spCreateSession.argtypes = [c_char_p]
        L.spCreateCompileRequest.restype = c_void_p
        L.spCreateCompileRequest.argtypes = [c_void_p]
        L.spDestroyCompileRequest.argtypes = [c_void_p]
        L.spAddSearchPath.argtypes = [c_void_p, c_char_p]
        L.spSetCodeGenTarget.argtypes = [c_void_p, c_int]
        L.spSetTargetFlags.argtypes = [c_void_p, c_int, ctypes.c_uint]
        L.spAddTranslationUnit.restype = c_int
        L.spAddTranslationUnit.argtypes = [c_void_p, c_int, c_char_p]
        L.spAddTranslationUnitSourceString.argtypes = [c_void_p, c_int, c_char_p, c_char_p]
        L.spCompile.restype = c_int
        L.spCompile.argtypes = [c_void_p]
        L.spGetDiagnosticOutput.restype = c_char_p
        L.spGetDiagnosticOutput.argtypes = [c_void_p]
        L.spGetTargetCodeBlob.restype = c_int
        L.spGetTargetCodeBlob.argtypes = [c_void_p, c_int, POINTER(c_void_p)]
        L.spGetReflection.restype = c_void_p
        L.spGetReflection.argtypes = [c_void_p]
        L.spReflection_ToJson.restype = c_int
        L.spReflection_ToJson.argtypes = [c_void_p, c_void_p, POINTER(c_void_p)]
        _lib = L
    return _lib


def _blob(ptr: int | None) -> bytes:
    """Bytes of an ISlangBlob (vtable: queryInterface, addRef, release, getBufferPointer, getBufferSize)."""
    if not ptr:
        return b""
    vt = ctypes.cast(ctypes.cast(ptr, POINTER(c_void_p))[0], POINTER(c_void_p))
    get_ptr = ctypes.CFUNCTYPE(c_void_p, c_void_p)(vt[3])
    get_size = ctypes.CFUNCTYPE(ctypes.c_size_t, c_void_p)(vt[4])
    release = ctypes.CFUNCTYPE(ctypes.c_uint32, c_void_p)(vt[2])
    data = ctypes.string_at(get_ptr(ptr), get_size(ptr))
    release(ptr)
    return data


_session: int | None = None


def compile_wgsl(source: str) -> CompiledShader:
    """Compile a Playground shader as the Playground's Run button does (target WGSL)."""
    global _session
    L = _load()
    if _session is None:
        _session = L.spCreateSession(None)
    req = L.spCreateCompileRequest(_session)
    try:
        L.spAddSearchPath(req, str(MODULES).encode())
        L.spSetCodeGenTarget(req, _WGSL)
        L.spSetTargetFlags(req, 0, _WHOLE_PROGRAM)
        tu = L.spAddTranslationUnit(req, _LANG_SLANG, b"user")
        L.spAddTranslationUnitSourceString(req, tu, b"user.slang", source.encode())
        if L.spCompile(req) < 0:
            raise OracleCompileError((L.spGetDiagnosticOutput(req) or b"").decode("utf-8", "replace"))
        code = c_void_p()
        if L.spGetTargetCodeBlob(req, 0, byref(code)) < 0:
            raise OracleCompileError("no WGSL: " + (L.spGetDiagnosticOutput(req) or b"").decode())
        wgsl = _blob(code.value).decode("utf-8")
        js = c_void_p()
        if L.spReflection_ToJson(L.spGetReflection(req), req, byref(js)) < 0:
            raise OracleCompileError("no reflection JSON")
        refl = json.loads(_blob(js.value).decode("utf-8"))
    finally:
        L.spDestroyCompileRequest(req)
    hashed = {int(h) & 0xFFFFFFFF: s for s, h in (refl.get("hashedStrings") or {}).items()}
    sizes = {e["name"]: tuple(e.get("threadGroupSize", (1, 1, 1))) for e in refl.get("entryPoints", [])}
    return CompiledShader(wgsl, refl, hashed, sizes)  # type: ignore[arg-type]
