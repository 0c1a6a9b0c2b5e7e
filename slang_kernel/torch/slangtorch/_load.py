"""`loadModule`: a .slang file (or source text) compiled to CUDA by the session's compiler, cached.

The module's own folder and `includePaths` are the search path for `import`/`#include` and for the
headers a `__requirePrelude` pulls into the CUDA code. The build cache key covers the source, the
defines, the search path and the content of every source and header in its folders (so an edited
imported file or CUDA prelude rebuilds on the next `loadModule`), and the compiler version.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ...cache import default_cache_dir, digest
from ...compiled import CompiledKernel
from ...compiler.diagnostics import SlangCompileError
from ...compiler.reflection import FunctionInfo
from ...engine.session import Session
from ._host_build import HostBuildError, build_host_library
from ._layout import kernel_signatures
from ._module import SlangTorchModule

__all__ = ["Loader", "ModuleOrigin", "ModuleSource", "SlangTorchLoadError", "host_entry_points"]

_SOURCE_SUFFIXES = (".slang", ".slangh", ".h", ".hpp", ".cuh", ".hlsl")
_NVRTC_OPTIONS = ("--std=c++17", "-default-device")
# slangc's defaults, as slangtorch compiles: capabilities not enforced, and column-major matrices (the
# session's own default is row-major), under which Slang's host and kernel code agree on how a matrix
# parameter is stored. A module with matrices taller than 4 rows (invalid as column vectors, E38206)
# is compiled row-major instead; kernel parameters are packed as the CUDA code unpacks them either way.
_SLANGC_DEFAULTS = ("-ignore-capabilities",)
_MATRIX_LAYOUTS = (("-matrix-layout-column-major",), ())
_DEF = re.compile(r'\bm\.def\("(\w+)"')


def host_entry_points(host_code: str, kernels: Mapping[str, object]) -> tuple[str, ...]:
    """The [TorchEntryPoint] functions the torch-binding code exports: all it binds but the wrappers of
    [AutoPyBindCUDA] kernels (launched directly here) and their `__funcinfo__`/`__typeinfo__` tables."""
    wrapped = {k.removeprefix("__kernel__") + suffix for k in kernels if k.startswith("__kernel__")
               for suffix in ("", "_fwd_diff", "_bwd_diff")}
    names = dict.fromkeys(m.group(1) for m in _DEF.finditer(host_code))
    return tuple(n for n in names if not n.startswith("__") and n not in wrapped)


class SlangTorchLoadError(RuntimeError):
    """A module did not compile (slangtorch raises RuntimeError); the message has file and line."""


@dataclass(frozen=True)
class ModuleSource:
    """Everything that determines a module's code: its text and where imports are looked up."""

    name: str          # the Slang module name (an identifier)
    label: str         # what diagnostics call it: the file's path
    text: str
    defines: tuple[tuple[str, str], ...]
    search_path: tuple[str, ...]

    @classmethod
    def of(cls, source_or_path: str | os.PathLike[str], defines: Mapping[str, Any],
           include_paths: Sequence[str | os.PathLike[str]]) -> "ModuleSource":
        text = str(source_or_path)
        path = Path(text)
        extra = tuple(str(Path(p).resolve()) for p in include_paths)
        if "\n" not in text and path.suffix in (".slang", ".slangh") and path.is_file():
            stem = "".join(c if c.isalnum() else "_" for c in path.stem)
            return cls(stem, str(path.resolve()), path.read_text(), _defines(defines),
                       (str(path.resolve().parent),) + extra)
        if "\n" not in text and path.suffix == ".slang":
            raise FileNotFoundError(f"no Slang file at {path.resolve()}")
        return cls("slangtorch_module", "slangtorch_module", text, _defines(defines), (os.getcwd(),) + extra)

    def dependencies_digest(self) -> str:
        """The content of every source and header in the search folders (imports are found there)."""
        parts: list[str | bytes] = []
        for folder in self.search_path:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for e in entries:
                if e.name.endswith(_SOURCE_SUFFIXES) and e.is_file():
                    parts += [e.path, Path(e.path).read_bytes()]
        return digest(*parts)


@dataclass(frozen=True)
class ModuleOrigin:
    """Where a loaded module came from, so that its views (_notebook) can compile it again as it was."""

    loader: "Loader"
    source: ModuleSource
    options: tuple[str, ...]   # the compiler options the module compiled with (matrix layout, search path)
    key: str                   # the build cache key
    deps: str                  # the digest of the sources and headers in its folders


def _defines(defines: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in defines.items()))


class Loader:
    """Loads modules into one compiler session (started on first use), kept by `loadModule`'s caller."""

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "slangtorch"
        self._session: Session | None = None
        self.loaded: dict[str, SlangTorchModule] = {}

    @property
    def session(self) -> Session:
        if self._session is None:
            # Only the compiler is used (CUDA code is built by NVRTC); its own cache folder, so that
            # clearPersistentShaderCache empties slangtorch modules' builds and nothing else.
            self._session = Session(backend="cpu", cache_dir=str(self.cache_dir))
        return self._session

    def load(self, src: ModuleSource, verbose: bool = False) -> SlangTorchModule:
        deps = src.dependencies_digest()
        key = digest(src.text, repr(src.defines), repr(src.search_path), deps)
        module = self.loaded.get(key)
        if module is not None:
            return module
        built = None
        error: SlangCompileError | None = None
        options: tuple[str, ...] = ()
        for layout in _MATRIX_LAYOUTS:
            try:
                options = self.options(src, layout)
                built = self._compile(src, key, deps, options)
                break
            except SlangCompileError as exc:
                error = error or exc    # slangc's (column-major) diagnostics are the ones reported
                if "E38206" not in str(exc):   # not a matrix too tall for column storage: no retry
                    break
        if built is None:
            raise SlangTorchLoadError(str(error)) from None
        compiled, host, functions = built
        nvrtc = list(_NVRTC_OPTIONS) + [f"-I{folder}" for folder in src.search_path]
        code = f"// sources {deps}\n{compiled.code}"   # CuPy's binary cache keys on the text: headers included
        entry_points = host_entry_points(host.code, kernel_signatures(code))
        library = None
        if entry_points:   # [TorchEntryPoint] functions: their host code, built by g++ against the shim
            try:
                library = build_host_library(host.code, self.cache_dir, src.label)
            except HostBuildError as exc:
                raise SlangTorchLoadError(str(exc)) from None
        if verbose:
            print(f"slangtorch: compiled {src.label} ({len(compiled.code)} bytes of CUDA"
                  + (f", host code for {', '.join(entry_points)} in {library}" if library else "") + ")")
        module = self.loaded[key] = SlangTorchModule(src.name, code, functions, nvrtc, host.code, entry_points,
                                                     library)
        module.origin = ModuleOrigin(self, src, options, key, deps)
        return module

    @staticmethod
    def options(src: ModuleSource, layout: tuple[str, ...]) -> tuple[str, ...]:
        """The compiler options of a module: matrix layout, slangc's defaults, search path, defines."""
        options = [*layout, *_SLANGC_DEFAULTS]
        for folder in src.search_path:
            options += ["-I", folder]
        options += [f"-D{k}={v}" for k, v in src.defines]   # as slangc -D: seen by imported files too
        return tuple(options)

    @contextmanager
    def cell(self, src: ModuleSource, key: str, deps: str, options: Sequence[str]) -> Iterator[tuple[Session, str]]:
        """The module as a cell of the loader's session while the block runs (SlangCompileError if it
        does not compile); removed after: one module at a time, as cells see each other."""
        cell = f"{src.name}_{key[:12]}"
        defines = dict(src.defines) | {"SLANGTORCH_SOURCES_DIGEST": deps[:16]}
        session = self.session
        try:
            result = session.run_cell(src.text, name=cell, defines=defines, options=list(options), label=src.label)
            yield session, result.name
        finally:
            if cell in session.cells:
                session.remove_cell(cell)

    def _compile(self, src: ModuleSource, key: str, deps: str, options: Sequence[str]
                 ) -> tuple[CompiledKernel, CompiledKernel, dict[str, FunctionInfo]]:
        """The module's CUDA and torch-binding code and its functions (SlangCompileError if it fails)."""
        with self.cell(src, key, deps, options) as (session, cell):
            module = session.cell(cell).module
            compiled, host = (session.compile_service.compile(session.compile_service.request(
                "compile", cell=cell, append="", module=module, target=target))[""]
                for target in ("cuda", "torch-binding"))
            return compiled, host, {f.name: f for d in session.cell(cell).decls for f in d.functions}

    def clear(self) -> None:
        self.loaded.clear()
