"""The Slang compiler, driven through ctypes in a worker process (see client.py and _worker.py)."""

from .client import CompilerProcess, CompilerUnavailable
from .diagnostics import Diagnostic, SlangCompileError, SlangCompilerCrash, parse_diagnostics, render_diagnostics
from .reflection import DeclInfo, EntryPointInfo, FunctionInfo, ParamInfo, ProgramReflection, TypeInfo

__all__ = [
    "CompilerProcess",
    "CompilerUnavailable",
    "DeclInfo",
    "Diagnostic",
    "EntryPointInfo",
    "FunctionInfo",
    "ParamInfo",
    "ProgramReflection",
    "SlangCompileError",
    "SlangCompilerCrash",
    "TypeInfo",
    "parse_diagnostics",
    "render_diagnostics",
]
