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


#: Functions whose signature is their own.
_SIGNATURES: dict[str, tuple[CType | None, list[CType]]] = {
    "spGetBuildTagString": (c_char_p, []),
    "spCreateSession": (vp, [c_char_p]),
    "spDestroySession": (None, [vp]),
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
    "spGetEntryPointCodeBlob": (c_int32, [vp, c_int, c_int, POINTER(vp)]),
    "spGetTargetCodeBlob": (c_int32, [vp, c_int, POINTER(vp)]),
    "spCompileRequest_getSession": (c_int32, [vp, POINTER(vp)]),
    "spCompileRequest_getModule": (c_int32, [vp, c_int64, POINTER(vp)]),
    "slang_createBlob": (vp, [vp, c_size_t]),
    "slang_loadModuleFromIRBlob": (vp, [vp, c_char_p, c_char_p, vp, c_size_t, POINTER(vp)]),
    # reflection
    "spReflection_getEntryPointCount": (ctypes.c_uint64, [vp]),
    "spReflection_getEntryPointByIndex": (vp, [vp, ctypes.c_uint64]),
    "spReflection_FindFunctionByName": (vp, [vp, c_char_p]),
    "spReflection_FindTypeByName": (vp, [vp, c_char_p]),
    "spReflectionEntryPoint_getComputeThreadGroupSize": (None, [vp, ctypes.c_uint64, POINTER(ctypes.c_uint64)]),
    "spReflectionVariable_FindModifier": (vp, [vp, c_int]),
    "spReflectionUserAttribute_GetArgumentValueInt": (c_int32, [vp, c_uint, POINTER(c_int)]),
    "spReflectionUserAttribute_GetArgumentValueFloat": (c_int32, [vp, c_uint, POINTER(ctypes.c_float)]),
    "spReflectionUserAttribute_GetArgumentValueString": (c_char_p, [vp, c_uint, POINTER(c_size_t)]),
    "spReflectionTypeLayout_getAlignment": (c_int32, [vp, c_int]),
    "spReflectionTypeLayout_GetFieldCount": (c_uint32, [vp]),
    "spReflectionType_GetFullName": (c_int32, [vp, POINTER(vp)]),
    "spReflectionType_GetElementCount": (c_size_t, [vp]),
    "spReflectionType_GetResourceShape": (c_uint32, [vp]),
    "spReflectionFunction_FindModifier": (vp, [vp, c_int]),
    "spReflectionFunction_isOverloaded": (ctypes.c_bool, [vp]),
}


#: Signatures that many functions share (most reflection getters take the object alone, or with an
#: index or a parameter category), each written once with the functions that have it.
_SHARED_SIGNATURES: tuple[tuple[CType | None, list[CType], tuple[str, ...]], ...] = (
    (vp, [vp], (
        "spCreateCompileRequest", "spGetReflection", "spReflection_getGlobalParamsVarLayout",
        "spReflectionEntryPoint_getVarLayout", "spReflectionEntryPoint_getFunction",
        "spReflectionVariableLayout_GetVariable", "spReflectionVariableLayout_GetTypeLayout",
        "spReflectionVariable_GetType", "spReflectionTypeLayout_GetType",
        "spReflectionTypeLayout_GetElementTypeLayout", "spReflectionType_GetElementType",
        "spReflectionType_GetResourceResultType", "spReflectionFunction_GetResultType",
        "spReflectionDecl_castToFunction", "spReflectionDecl_castToVariable",
        "spReflectionDecl_castToGeneric", "spReflectionGeneric_GetInnerDecl", "spReflection_getTypeFromDecl",
    )),
    (c_char_p, [vp], (
        "spGetDiagnosticOutput", "spReflectionEntryPoint_getName",
        "spReflectionVariableLayout_GetSemanticName", "spReflectionVariable_GetName",
        "spReflectionUserAttribute_GetName", "spReflectionType_GetName", "spReflectionFunction_GetName",
        "spReflectionDecl_getName",
    )),
    (c_int, [vp], (
        "spReflectionEntryPoint_getStage", "spReflectionTypeLayout_getKind",
        "spReflectionTypeLayout_GetParameterCategory", "spReflectionType_GetKind",
        "spReflectionType_GetScalarType", "spReflectionType_GetResourceAccess", "spReflectionDecl_getKind",
        "spReflectionGeneric_GetInnerKind",
    )),
    (c_uint, [vp], (
        "spReflectionEntryPoint_getParameterCount", "spReflectionVariable_GetUserAttributeCount",
        "spReflectionUserAttribute_GetArgumentCount", "spReflectionType_GetRowCount",
        "spReflectionType_GetColumnCount", "spReflectionType_GetFieldCount",
        "spReflectionFunction_GetParameterCount", "spReflectionFunction_GetUserAttributeCount",
        "spReflectionFunction_getOverloadCount", "spReflectionDecl_getChildrenCount",
    )),
    (vp, [vp, c_uint], (
        "spReflectionEntryPoint_getParameterByIndex", "spReflectionVariable_GetUserAttribute",
        "spReflectionTypeLayout_GetFieldByIndex", "spReflectionType_GetFieldByIndex",
        "spReflectionFunction_GetParameter", "spReflectionFunction_GetUserAttribute",
        "spReflectionFunction_getOverload", "spReflectionDecl_getChild",
    )),
    (c_size_t, [vp, c_int], (
        "spReflectionVariableLayout_GetOffset", "spReflectionVariableLayout_GetSpace",
        "spReflectionTypeLayout_GetSize", "spReflectionTypeLayout_GetStride",
        "spReflectionTypeLayout_GetElementStride",
    )),
)

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
    each = [*_SIGNATURES.items(), *((name, (restype, argtypes))
                                    for restype, argtypes, names in _SHARED_SIGNATURES for name in names)]
    for name, (restype, argtypes) in each:
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
