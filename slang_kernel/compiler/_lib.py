"""ctypes binding to the libslang-compiler shipped in the pinned slangpy wheel.

Only the worker process loads this module: the compiler is not thread-safe and can crash.
The library is located without importing slangpy (which would load libsgl, ~0.2 s).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from ctypes import POINTER, c_char_p, c_int, c_int32, c_int64, c_size_t, c_uint, c_uint32, c_void_p
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

__all__ = [
    "EXPECTED_BUILD_TAG",
    "SlangLibraryError",
    "blob_bytes",
    "com_call",
    "find_library",
    "load",
]

#: The compiler build this package was written and tested against (slangpy==0.43.1).
EXPECTED_BUILD_TAG = "2026.12"
EXPECTED_SLANGPY = "0.43.1"

vp = c_void_p

if TYPE_CHECKING:
    from typing import TypeAlias

    #: A ctypes type as a restype/argtype: c_int, c_void_p, ..., POINTER(c_void_p)
    CType: TypeAlias = "type[ctypes._SimpleCData[Any]] | type[ctypes._Pointer[Any]]"


class SlangLibraryError(RuntimeError):
    """The Slang compiler library is missing or is not the expected build."""


def find_library() -> Path:
    spec = importlib.util.find_spec("slangpy")
    if spec is None or not spec.submodule_search_locations:
        raise SlangLibraryError(
            "slangpy is not installed, and it provides the Slang compiler: "
            f"run `pip install slangpy=={EXPECTED_SLANGPY}`."
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    libs = sorted(folder.glob("libslang-compiler.so*")) or sorted(folder.glob("slang-compiler*.dll"))
    if not libs:
        raise SlangLibraryError(f"no libslang-compiler in {folder}: reinstall slangpy=={EXPECTED_SLANGPY}.")
    return libs[-1]


_SIGNATURES: dict[str, tuple[CType | None, list[CType]]] = {
    "spGetBuildTagString": (c_char_p, []),
    "spCreateSession": (vp, [c_char_p]),
    "spDestroySession": (None, [vp]),
    "spCreateCompileRequest": (vp, [vp]),
    "spDestroyCompileRequest": (None, [vp]),
    "spProcessCommandLineArguments": (c_int32, [vp, POINTER(c_char_p), c_int]),
    "spAddCodeGenTarget": (c_int, [vp, c_int]),
    "spSetTargetProfile": (None, [vp, c_int, c_uint32]),
    "spFindProfile": (c_uint32, [vp, c_char_p]),
    "spSetTargetFlags": (None, [vp, c_int, c_uint32]),
    "spAddTranslationUnit": (c_int, [vp, c_int, c_char_p]),
    "spAddTranslationUnitSourceString": (None, [vp, c_int, c_char_p, c_char_p]),
    "spAddEntryPoint": (c_int, [vp, c_int, c_char_p, c_uint32]),
    "spAddPreprocessorDefine": (None, [vp, c_char_p, c_char_p]),
    "spCompile": (c_int32, [vp]),
    "spGetDiagnosticOutput": (c_char_p, [vp]),
    "spGetEntryPointCodeBlob": (c_int32, [vp, c_int, c_int, POINTER(vp)]),
    "spGetTargetCodeBlob": (c_int32, [vp, c_int, POINTER(vp)]),
    "spCompileRequest_getSession": (c_int32, [vp, POINTER(vp)]),
    "spCompileRequest_getModule": (c_int32, [vp, c_int64, POINTER(vp)]),
    "spGetReflection": (vp, [vp]),
    "slang_createBlob": (vp, [vp, c_size_t]),
    "slang_loadModuleFromIRBlob": (vp, [vp, c_char_p, c_char_p, vp, c_size_t, POINTER(vp)]),
    # reflection
    "spReflection_getEntryPointCount": (ctypes.c_uint64, [vp]),
    "spReflection_getEntryPointByIndex": (vp, [vp, ctypes.c_uint64]),
    "spReflection_getGlobalParamsVarLayout": (vp, [vp]),
    "spReflection_FindFunctionByName": (vp, [vp, c_char_p]),
    "spReflection_FindTypeByName": (vp, [vp, c_char_p]),
    "spReflectionEntryPoint_getName": (c_char_p, [vp]),
    "spReflectionEntryPoint_getStage": (c_int, [vp]),
    "spReflectionEntryPoint_getParameterCount": (c_uint, [vp]),
    "spReflectionEntryPoint_getParameterByIndex": (vp, [vp, c_uint]),
    "spReflectionEntryPoint_getVarLayout": (vp, [vp]),
    "spReflectionEntryPoint_getComputeThreadGroupSize": (None, [vp, ctypes.c_uint64, POINTER(ctypes.c_uint64)]),
    "spReflectionEntryPoint_getFunction": (vp, [vp]),
    "spReflectionVariableLayout_GetVariable": (vp, [vp]),
    "spReflectionVariableLayout_GetTypeLayout": (vp, [vp]),
    "spReflectionVariableLayout_GetOffset": (c_size_t, [vp, c_int]),
    "spReflectionVariableLayout_GetSemanticName": (c_char_p, [vp]),
    "spReflectionVariableLayout_GetSpace": (c_size_t, [vp, c_int]),
    "spReflectionVariable_GetName": (c_char_p, [vp]),
    "spReflectionVariable_GetType": (vp, [vp]),
    "spReflectionVariable_GetUserAttributeCount": (c_uint, [vp]),
    "spReflectionVariable_GetUserAttribute": (vp, [vp, c_uint]),
    "spReflectionVariable_FindModifier": (vp, [vp, c_int]),
    "spReflectionUserAttribute_GetName": (c_char_p, [vp]),
    "spReflectionUserAttribute_GetArgumentCount": (c_uint, [vp]),
    "spReflectionUserAttribute_GetArgumentValueInt": (c_int32, [vp, c_uint, POINTER(c_int)]),
    "spReflectionUserAttribute_GetArgumentValueFloat": (c_int32, [vp, c_uint, POINTER(ctypes.c_float)]),
    "spReflectionUserAttribute_GetArgumentValueString": (c_char_p, [vp, c_uint, POINTER(c_size_t)]),
    "spReflectionTypeLayout_GetType": (vp, [vp]),
    "spReflectionTypeLayout_getKind": (c_int, [vp]),
    "spReflectionTypeLayout_GetSize": (c_size_t, [vp, c_int]),
    "spReflectionTypeLayout_GetStride": (c_size_t, [vp, c_int]),
    "spReflectionTypeLayout_getAlignment": (c_int32, [vp, c_int]),
    "spReflectionTypeLayout_GetFieldCount": (c_uint32, [vp]),
    "spReflectionTypeLayout_GetFieldByIndex": (vp, [vp, c_uint]),
    "spReflectionTypeLayout_GetElementStride": (c_size_t, [vp, c_int]),
    "spReflectionTypeLayout_GetElementTypeLayout": (vp, [vp]),
    "spReflectionTypeLayout_GetParameterCategory": (c_int, [vp]),
    "spReflectionType_GetKind": (c_int, [vp]),
    "spReflectionType_GetName": (c_char_p, [vp]),
    "spReflectionType_GetFullName": (c_int32, [vp, POINTER(vp)]),
    "spReflectionType_GetElementCount": (c_size_t, [vp]),
    "spReflectionType_GetElementType": (vp, [vp]),
    "spReflectionType_GetRowCount": (c_uint, [vp]),
    "spReflectionType_GetColumnCount": (c_uint, [vp]),
    "spReflectionType_GetScalarType": (c_int, [vp]),
    "spReflectionType_GetResourceShape": (c_uint32, [vp]),
    "spReflectionType_GetResourceAccess": (c_int, [vp]),
    "spReflectionType_GetResourceResultType": (vp, [vp]),
    "spReflectionType_GetFieldCount": (c_uint, [vp]),
    "spReflectionType_GetFieldByIndex": (vp, [vp, c_uint]),
    "spReflectionFunction_GetName": (c_char_p, [vp]),
    "spReflectionFunction_GetResultType": (vp, [vp]),
    "spReflectionFunction_GetParameterCount": (c_uint, [vp]),
    "spReflectionFunction_GetParameter": (vp, [vp, c_uint]),
    "spReflectionFunction_FindModifier": (vp, [vp, c_int]),
    "spReflectionFunction_GetUserAttributeCount": (c_uint, [vp]),
    "spReflectionFunction_GetUserAttribute": (vp, [vp, c_uint]),
    "spReflectionFunction_isOverloaded": (ctypes.c_bool, [vp]),
    "spReflectionFunction_getOverloadCount": (c_uint, [vp]),
    "spReflectionFunction_getOverload": (vp, [vp, c_uint]),
    "spReflectionDecl_getChildrenCount": (c_uint, [vp]),
    "spReflectionDecl_getChild": (vp, [vp, c_uint]),
    "spReflectionDecl_getName": (c_char_p, [vp]),
    "spReflectionDecl_getKind": (c_int, [vp]),
    "spReflectionDecl_castToFunction": (vp, [vp]),
    "spReflectionDecl_castToVariable": (vp, [vp]),
    "spReflectionDecl_castToGeneric": (vp, [vp]),
    "spReflectionGeneric_GetInnerDecl": (vp, [vp]),
    "spReflectionGeneric_GetInnerKind": (c_int, [vp]),
    "spReflection_getTypeFromDecl": (vp, [vp]),
}

_lib: ctypes.CDLL | None = None


def load() -> ctypes.CDLL:
    """Load the library once, declare signatures, and check the build tag."""
    global _lib  # noqa: PLW0603 - one loaded library per worker process is the point
    if _lib is not None:
        return _lib
    path = find_library()
    folder = str(path.parent)
    # The glslang/glsl-module companions are found next to the compiler.
    os.environ["LD_LIBRARY_PATH"] = folder + os.pathsep + os.environ.get("LD_LIBRARY_PATH", "")
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    tag = (lib.spGetBuildTagString() or b"").decode()
    if not tag.startswith(EXPECTED_BUILD_TAG):
        raise SlangLibraryError(
            f"{path} is Slang {tag!r}, but slang-kernel needs Slang {EXPECTED_BUILD_TAG} "
            f"(it calls COM methods by vtable slot): run `pip install slangpy=={EXPECTED_SLANGPY}`."
        )
    _lib = lib
    return lib


def com_call(obj: int, slot: int, restype: CType | None, *args: tuple[CType, object]) -> object:
    """Call virtual method `slot` of COM object `obj`; args are (ctype, value) pairs."""
    vtable = ctypes.cast(ctypes.c_void_p(obj), POINTER(POINTER(c_void_p))).contents
    proto = ctypes.CFUNCTYPE(restype, c_void_p, *[t for t, _ in args])
    return proto(vtable[slot])(obj, *[v for _, v in args])


def blob_bytes(blob: int | None) -> bytes:
    """Copy an ISlangBlob's contents and release it."""
    if not blob:
        return b""
    ptr = cast(int, com_call(blob, 3, c_void_p))  # getBufferPointer
    size = cast(int, com_call(blob, 4, c_size_t))  # getBufferSize
    data = ctypes.string_at(ptr, size) if size else b""
    com_call(blob, 2, c_uint32)
    return data
