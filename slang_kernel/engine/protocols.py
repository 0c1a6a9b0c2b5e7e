"""The narrow services the Session hands its views, typed once.

Each view gets the one service it uses, never the Session's parts: ComputeKernel a KernelService, the
thread debugger a DebugService, SlangFunction a FunctionService (the Session's private KernelBuilds,
kernel_builds.py, implements these three); a PlaygroundProgram a ProgramService, the IR views an
IRSource, compare a CompareService (the Session itself implements these, through the two read-only
objects it hands out, its SessionParts: `store`, a CellLookup, and `compile_service`, a Requests). Views import this
module, never session.py, so the arrows point one way (docs/architecture.md).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from ..backends import Backend
from .cells import Cell
from .edit_phases import EditPhases
from ..compiled import CompiledKernel, CompileRequest, Specialization
from ..compiler.diagnostics import SlangCompileError
from ..compiler.reflection import DeclInfo, FunctionInfo, ParamInfo
from .finite import FiniteCheck

__all__ = ["BuildChecks", "CellLookup", "CompareService", "DebugService", "Dispatchable", "FunctionService", "IRSource",
           "KernelService", "ProgramService", "Requests", "SessionParts"]


class CellLookup(Protocol):
    """The cells' current revisions, read only (`Session.store`): what was built from what, which
    cell defines a name, the last failure of a cell."""

    @property
    def cells(self) -> tuple[str, ...]: ...
    @property
    def revision(self) -> int: ...
    @property
    def last_edit(self) -> EditPhases | None: ...
    def cell(self, name: str) -> Cell: ...
    def digest(self, name: str) -> str | None: ...
    def is_current(self, built_from: CompiledKernel | Iterable[tuple[str, str]]) -> bool: ...
    def failure(self, name: str) -> SlangCompileError | None: ...
    def names(self) -> dict[str, DeclInfo]: ...
    def owner(self, name: str, *, kernel: bool | None = None) -> Cell: ...
    def function_info(self, name: str) -> tuple[Cell, tuple[FunctionInfo, ...]]: ...


class Requests(Protocol):
    """Raw compiler requests through the one compile path (`Session.compile_service`): a request
    built as the session builds its own, compiled through its cache, or run as it is (IR dumps)."""

    @property
    def options(self) -> tuple[str, ...]: ...
    @property
    def fingerprint(self) -> str: ...
    def request(self, op: str, *, cell: str | None = None, source: str | None = None, upto: str | None = None,
                append: str = "", module: str | None = None, what: str | None = None, entries: Sequence[str] = (),
                target: str | None = None, options: Sequence[str] = (), reflect: bool = True) -> CompileRequest: ...
    def compile(self, req: CompileRequest) -> dict[str, CompiledKernel]: ...
    def call(self, req: CompileRequest) -> dict[str, Any]: ...


class DebugService(Protocol):
    """What a debug run of one thread needs: the kernel's builds, instrumented variants of them."""

    @property
    def backend(self) -> Backend: ...
    def compile_entry(self, name: str, target: str | None = None,
                      specialization: Specialization | None = None) -> CompiledKernel: ...
    def compile_variant(self, name: str, rewrite: Callable[[str], str]) -> CompiledKernel: ...
    def compile_inline(self, name: str, rewrite: Callable[[str, str], str]) -> CompiledKernel: ...
    def owner(self, name: str, *, kernel: bool | None = None) -> Cell: ...
    def closure(self, cells: Sequence[Cell]) -> list[Cell]: ...


class BuildChecks(Protocol):
    """What a ComputeKernel and a SlangFunction check their work by: the cells' revision (a build from
    an older one is stale) and the session's NaN/Inf check of outputs."""

    @property
    def revision(self) -> int: ...
    @property
    def finite(self) -> FiniteCheck: ...


class KernelService(DebugService, BuildChecks, Protocol):
    """What a ComputeKernel needs: its current build, specializations, code and IR views."""

    def is_current(self, built_from: CompiledKernel) -> bool: ...
    def failure(self, name: str) -> SlangCompileError | None: ...
    def specialization(self, name: str, specialize: Mapping[str, Any] | None = None,
                       type_conformances: Sequence[Sequence[Any]] = ()) -> Specialization: ...
    def code(self, name: str, target: str = "hlsl") -> str: ...
    def ir(self, name: str) -> str: ...


class FunctionService(BuildChecks, Protocol):
    """What a SlangFunction needs: the function's signature and compiled wrapper kernels."""

    @property
    def backend(self) -> Backend: ...
    @property
    def cells(self) -> tuple[str, ...]: ...
    def cell(self, name: str) -> Cell: ...
    def function_info(self, name: str) -> tuple[Cell, tuple[FunctionInfo, ...]]: ...
    def request(self, op: str, **kwargs: Any) -> CompileRequest: ...
    def compile(self, req: CompileRequest) -> dict[str, CompiledKernel]: ...


class SessionParts(Protocol):
    """The two read-only objects the Session hands out: its cells' revisions and its compile path."""

    @property
    def store(self) -> CellLookup: ...
    @property
    def compile_service(self) -> Requests: ...


class ProgramService(SessionParts, Protocol):
    """What a PlaygroundProgram needs: its cell's revisions, and that cell's entry points built."""

    @property
    def backend(self) -> Backend: ...


class IRSource(SessionParts, Protocol):
    """What the IR views need: which cell defines a name, a disassembly or dump request, the function
    (a Session, or a SlangFunction's own service)."""

    def function(self, name: str) -> Any: ...   # a SlangFunction (autodiff.py imports this module)


class Dispatchable(Protocol):
    """What compare uses of a ComputeKernel: its parameters, element dtypes, a dispatch."""

    @property
    def params(self) -> tuple[ParamInfo, ...]: ...
    def dtype(self, param: str) -> Any: ...
    def __call__(self, *, threads: Any = None, groups: Any = None, **params: Any) -> Any: ...


class CompareService(Protocol):
    """What compare needs: the kernel here, and the same cells on another backend."""

    def kernel(self, name: str) -> Dispatchable: ...
    def replica(self, backend: str) -> "CompareService": ...
