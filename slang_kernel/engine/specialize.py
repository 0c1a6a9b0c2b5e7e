"""Specialization from Python: generic entry points, link-time `extern` declarations, type conformances.

`Session.kernel("k", specialize={"T": "MyType", "N": 4}, type_conformances=[("IFoo", "Impl", 0)])`
builds a `Specialization` (validated here against the cell's text: which names are generic
parameters of `k` and which are `extern` declarations of its cell, and whether each value is of the
right kind) and compiles a variant of the kernel's cell (`variant`):

    extern struct Q : IFoo;   ->  export struct Q : IFoo = MyType;     // link-time types and constants
    extern static const int M; -> export static const int M = 5;
    // an interface-typed parameter (`uniform IFoo q`, specialize={"q": "MyType"}) is declared as
    // `uniform MyType q` in the generated entry point below (existential specialization)
    // appended for a generic kernel: k's attributes and parameters with T, N filled in
    [shader("compute")] [numthreads(8, 1, 1)]
    void k__MyType_4(uint3 tid : SV_DispatchThreadID, uniform RWStructuredBuffer<MyType> o) { k<MyType, 4>(tid, o); }

A type from a cell after the kernel's (which imports the kernel's cell) cannot be imported into a
variant of the kernel's cell; then the cells involved are compiled as one module (Session).

Why source and not `IEntryPoint::specialize` on a component: the Vulkan backend builds its program
from `CompiledKernel.chain` (sgl compiles Slang source and binds by its own reflection, and takes an
entry point by plain name), so a specialization written as Slang is the one form every backend
consumes unchanged; Slang checks it as the API would (an explicit generic application; the export
definitions it links). Calling an entry point segfaults Slang 2026.12 (from an imported module on
every target, within its own module for SPIR-V; measured), so the generated entry point lives in the
kernel's own module and the kernel there loses its `[shader]`/`[numthreads]` attributes (it is
called as a plain function). Type
conformances are Slang's compiler option `TypeConformance` (`-conformance Impl:IFoo=id`, what
`createTypeConformanceComponentType` links); the generated code carries the dispatch switch, so
CPU and CUDA run it unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .. import scanner
from ..compiled import Specialization
from ..compiler.diagnostics import Diagnostic

__all__ = ["EntryDecl", "Extern", "GenericParam", "Specialization", "SpecializationError", "conformance_options",
           "entry_name", "explain", "find_entry", "find_externs", "interface_params", "specialization", "variant"]

_IDENT = re.compile(r"[A-Za-z_]\w*")
_EXTERN_TYPE = re.compile(r"\bextern\s+struct\s+([A-Za-z_]\w*)\s*(?::\s*([^;{=]+?))?\s*;")
_EXTERN_CONST = re.compile(r"\bextern\s+static\s+const\s+([A-Za-z_][\w<>, ]*?)\s+([A-Za-z_]\w*)\s*;")
_INTS = ("int", "uint", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t")
_FLOATS = ("float", "half", "double")


class SpecializationError(ValueError):
    """A `specialize=` or `type_conformances=` value does not fit the kernel; the message says which and why."""


@dataclass(frozen=True)
class _Declared:
    """What a generic parameter and an `extern` declaration share: a type (value_type "") or a value
    of `value_type`, named `name`, a type conforming to `constraint` ("" when none)."""

    name: str
    value_type: str
    constraint: str

    def _type_text(self) -> str:
        """`T : IFoo`, or `T` without a constraint: how a type's declaration reads in messages."""
        return f"{self.name}{' : ' + self.constraint if self.constraint else ''}"


@dataclass(frozen=True)
class GenericParam(_Declared):
    """`T : IFoo` (value_type "") or `let N : int` of a generic entry point."""

    default: str = ""  # `let N : int = 4` -> "4" (used when not given)

    def describe(self) -> str:
        if self.value_type:
            return f"`let {self.name} : {self.value_type}`"
        return f"`{self._type_text()}`"


@dataclass(frozen=True)
class Extern(_Declared):
    """`extern struct Q : IFoo;` (value_type "") or `extern static const int N;` in a cell."""

    cell: str
    span: tuple[int, int] = (0, 0)   # where the declaration is in the cell's source

    def describe(self) -> str:
        if self.value_type:
            return f"`extern static const {self.value_type} {self.name}` ({self.cell})"
        return f"`extern struct {self._type_text()}` ({self.cell})"


@dataclass(frozen=True)
class EntryDecl:
    """The text of a compute entry point's declaration, as the user wrote it."""

    name: str
    attributes: str                      # `[shader("compute")] [numthreads(8, 1, 1)]`
    generics: tuple[GenericParam, ...]
    params: str                          # the parameter list between the parentheses
    arg_names: tuple[str, ...]
    attr_span: tuple[int, int] = (0, 0)  # where `attributes` are in the cell's source


# -- reading the cell's text ------------------------------------------------------------------------

def _arg_name(param: str) -> str:
    p = re.sub(r"\[[^\]]*\]", " ", param)        # attributes and array sizes
    p = re.split(r"(?<!:):(?!:)|=", p, maxsplit=1)[0]  # semantic or default value
    names = _IDENT.findall(p)
    return names[-1] if names else ""


def find_entry(source: str, name: str) -> EntryDecl | None:
    """The declaration of compute entry point `name` in a cell's source (None when not found)."""
    text = scanner.blank(source)
    for m in re.finditer(rf"\bvoid\s+{re.escape(name)}\b\s*", text):
        i = m.end()
        generics: tuple[GenericParam, ...] = ()
        if i < len(text) and text[i] == "<":
            end = scanner.closing(text, i)
            if end < 0:
                continue
            generics = tuple(_generic(g) for g in scanner.split_commas(text[i + 1:end - 1]))
            i = end
            while i < len(text) and text[i].isspace():
                i += 1
        if i >= len(text) or text[i] != "(":
            continue
        end = scanner.closing(text, i)
        rest = text[end:].lstrip()
        if not (rest.startswith("{") or rest.startswith("where")):
            continue  # a call or a forward declaration, not the definition
        params = source[i + 1:end - 1]
        start = m.start()                       # attributes right before `void`
        j = start
        while True:
            k = j
            while k > 0 and text[k - 1].isspace():
                k -= 1
            if k > 0 and text[k - 1] == "]":
                depth, s = 0, k - 1
                while s >= 0:
                    depth += text[s] == "]"
                    depth -= text[s] == "["
                    if depth == 0:
                        break
                    s -= 1
                if s < 0:
                    break
                j = s
                continue
            break
        args = tuple(_arg_name(p) for p in scanner.split_commas(scanner.blank(params)))
        return EntryDecl(name, source[j:start].strip(), generics, params, args, (j, start))
    return None


def _generic(text: str) -> GenericParam:
    t = text.strip()
    decl, _, default = t.partition("=")
    if decl.startswith("let "):
        head, _, typ = decl[4:].partition(":")
        return GenericParam(head.strip(), typ.strip() or "int", "", default.strip())
    head, _, constraint = decl.partition(":")
    return GenericParam(head.replace("typename", "").strip(), "", constraint.strip(), default.strip())


def find_externs(cell: str, source: str) -> dict[str, Extern]:
    """`extern struct` and `extern static const` declarations of one cell, with their text spans."""
    out: dict[str, Extern] = {}
    text = scanner.blank(source)
    for m in _EXTERN_TYPE.finditer(text):
        out[m.group(1)] = Extern(m.group(1), "", (m.group(2) or "").strip(), cell, m.span())
    for m in _EXTERN_CONST.finditer(text):
        out[m.group(2)] = Extern(m.group(2), m.group(1).strip(), "", cell, m.span())
    return out


_MODIFIERS = {"uniform", "in", "out", "inout", "const", "no_diff", "static"}


def interface_params(entry: EntryDecl | None, interfaces: frozenset[str]) -> dict[str, str]:
    """Entry-point parameters whose type is an interface (`uniform IFoo q`): name -> interface."""
    out: dict[str, str] = {}
    for param, name in zip(scanner.split_commas(scanner.blank(entry.params)) if entry else (), entry.arg_names if entry else ()):
        p = re.sub(r"\[[^\]]*\]", " ", param)
        p = re.split(r"(?<!:):(?!:)|=", p, maxsplit=1)[0]
        words = [w for w in _IDENT.findall(p) if w not in _MODIFIERS]
        if len(words) == 2 and words[1] == name and words[0] in interfaces:
            out[name] = words[0]
    return out


# -- checking what the user gave --------------------------------------------------------------------

def _literal(kernel: str, what: str, name: str, value: Any, value_type: str) -> str:
    """A Python value as a Slang literal of `value_type`; a clear error for the wrong kind."""
    base = value_type.strip()
    kind = type(value).__name__
    if isinstance(value, str):
        raise SpecializationError(
            f"{kernel}: {what} is a value of type {base}, not a type: give a Python number "
            f"(e.g. specialize={{{name!r}: 4}}); got the string {value!r}.")
    if hasattr(value, "item") and not isinstance(value, (bool, int, float)):
        value = value.item()  # numpy scalars
    if base == "bool":
        if not isinstance(value, bool):
            raise SpecializationError(f"{kernel}: {what} is a bool: give True or False; got {kind} {value!r}.")
        return "true" if value else "false"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecializationError(f"{kernel}: {what} needs a number of type {base}; got {kind} {value!r}.")
    if base in _INTS:
        if not isinstance(value, int):
            raise SpecializationError(f"{kernel}: {what} is an integer ({base}); got {kind} {value!r}.")
        if base.startswith("u") and value < 0:
            raise SpecializationError(f"{kernel}: {what} is unsigned ({base}); got {value!r}.")
        return str(value)
    if base in _FLOATS:
        return repr(float(value))
    return repr(value)


def _type_text(kernel: str, what: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecializationError(
            f"{kernel}: {what} is a type parameter: give a Slang type name as a string "
            f"(e.g. 'MyType'); got {type(value).__name__} {value!r}.")
    if not re.fullmatch(r"[\w<>, :.\[\]]+", value.strip()):
        raise SpecializationError(f"{kernel}: {what}: {value!r} is not a Slang type name.")
    return value.strip()


def specialization(kernel: str, entry: EntryDecl | None, externs: Mapping[str, Extern],
                   specialize: Mapping[str, Any] | None, type_conformances: Sequence[Sequence[Any]] = (),
                   elsewhere: Mapping[str, Extern] | None = None,
                   iface_params: Mapping[str, str] | None = None) -> Specialization:
    """Check `specialize=` and `type_conformances=` against the kernel's declaration (`externs`: those
    of its own cell; `elsewhere`: those of the cells it imports, which it cannot specialize;
    `iface_params`: its interface-typed parameters, which take a conforming type)."""
    given = dict(specialize or {})
    generics = entry.generics if entry is not None else ()
    args: list[tuple[str, str]] = []
    missing = []
    for g in generics:
        if g.name not in given:
            if g.default:
                args.append((g.name, g.default))
            else:
                missing.append(g)
            continue
        what = f"generic parameter {g.describe()}"
        v = given.pop(g.name)
        args.append((g.name, _literal(kernel, what, g.name, v, g.value_type) if g.value_type else _type_text(kernel, what, v)))
    if missing:
        raise SpecializationError(
            f"{kernel} is generic ({', '.join(g.describe() for g in generics)}) and needs a value for "
            + ", ".join(g.describe() for g in missing) + ": pass specialize={"
            + ", ".join(f"'{g.name}': {'4' if g.value_type else repr('MyType')}" for g in missing) + "}.")
    for name in list(given):
        iface = (iface_params or {}).get(name)
        if iface is not None:
            args.append((name, _type_text(kernel, f"parameter `{iface} {name}`", given.pop(name))))
            continue
        ext = externs.get(name)
        other = (elsewhere or {}).get(name)
        if ext is None and other is not None:
            raise SpecializationError(
                f"{kernel}: {other.describe()} is declared in {other.cell}, not in the kernel's own cell: "
                f"specialize= sets the extern declarations of the cell that defines {kernel}. Move the "
                f"declaration there, or define it in a cell with `export` (link-time, as Slang does it).")
        if ext is None:
            known = ([g.describe() for g in generics] + [e.describe() for e in externs.values()]
                     + [f"parameter `{i} {n}`" for n, i in (iface_params or {}).items()])
            raise SpecializationError(
                f"{kernel} has no generic parameter, interface-typed parameter or extern declaration named "
                f"{name!r}; it has: {', '.join(known) or 'none (it is neither generic nor uses extern declarations)'}.")
        what = f"extern {ext.describe()}"
        v = given.pop(name)
        args.append((name, _literal(kernel, what, name, v, ext.value_type) if ext.value_type else _type_text(kernel, what, v)))
    confs = []
    for i, c in enumerate(type_conformances):
        if isinstance(c, str) or len(c) not in (2, 3) or not all(isinstance(x, str) for x in c[:2]):
            raise SpecializationError(
                f"{kernel}: type_conformances[{i}] must be (interface, type) or (interface, type, id), e.g. "
                f"('IFoo', 'Impl', 0); got {c!r}.")
        ident = c[2] if len(c) == 3 else -1
        if isinstance(ident, bool) or not isinstance(ident, int):
            raise SpecializationError(f"{kernel}: type_conformances[{i}]: the id must be an int; got {ident!r}.")
        confs.append((_type_text(kernel, "an interface", c[0]), _type_text(kernel, "a conforming type", c[1]), ident))
    ids = [n for _, _, n in confs if n >= 0]
    if len(set(ids)) != len(ids):
        raise SpecializationError(f"{kernel}: type_conformances give the same id twice ({ids}): each type needs its own.")
    return Specialization(tuple(args), tuple(confs))


def conformance_options(spec: Specialization) -> tuple[str, ...]:
    """Slang's `-conformance Type:IFace[=id]` options (CompilerOptionName::TypeConformance)."""
    out: list[str] = []
    for iface, typ, ident in spec.conformances:
        out += ["-conformance", f"{typ}:{iface}" + (f"={ident}" if ident >= 0 else "")]
    return tuple(out)


# -- the generated module ----------------------------------------------------------------------------

def entry_name(kernel: str, spec: Specialization) -> str:
    """The generated entry point's name: readable (it shows in messages), an identifier."""
    tag = "_".join(re.sub(r"\W+", "_", v.replace(".", "p").replace("-", "m")).strip("_") for _, v in spec.args)
    return f"{kernel}__{tag or 'spec'}"[:80]


def variant(source: str, entry: EntryDecl, spec: Specialization, externs: Mapping[str, Extern],
            iface_params: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """(entry name, Slang text, tail): the kernel's cell with its specialized `extern` declarations turned
    into `export` definitions (in place: line numbers stay the cell's), and for a generic kernel (or
    one whose interface-typed parameters are given a type) a generated entry point appended that
    calls `kernel<args>(...)` with those parameters of the given types (see the module docstring):
    that entry point is `tail`, to go after the text (and after any cells that define its types).
    """
    values = dict(spec.args)
    typed = {n: i for n, i in (iface_params or {}).items() if n in values}
    wrap = bool(entry.generics or typed)
    text = source
    if wrap:  # the kernel becomes a plain function: Slang crashes on calls to entry points
        a, b = entry.attr_span
        text = text[:a] + re.sub(r"[^\n]", " ", text[a:b]) + text[b:]
    for ext in sorted((e for e in externs.values() if e.name in values), key=lambda e: -e.span[0]):
        v = values[ext.name]
        new = (f"export static const {ext.value_type} {ext.name} = {v};" if ext.value_type
               else f"export struct {ext.name}{' : ' + ext.constraint if ext.constraint else ''} = {v};")
        text = text[:ext.span[0]] + new + text[ext.span[1]:]
    if not wrap:
        return entry.name, text, ""
    subst = {g.name: values[g.name] for g in entry.generics}
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in subst) + r")\b") if subst else None

    def fill(t: str) -> str:
        return pattern.sub(lambda m: subst[m.group(1)], t) if pattern else t

    params = []
    for param, arg in zip(scanner.split_commas(scanner.blank(entry.params)), entry.arg_names):
        if arg in typed:
            param = re.sub(rf"\b{re.escape(typed[arg])}\b", values[arg], param, count=1)
        params.append(fill(param))
    name = entry_name(entry.name, spec)
    targs = f"<{', '.join(values[g.name] for g in entry.generics)}>" if entry.generics else ""
    attrs = fill(entry.attributes) or '[shader("compute")]'
    tail = (f"\n\n// slang-kernel: {entry.name} specialized with {spec}\n{attrs}\n"
            f"void {name}({', '.join(params)})\n{{\n    {entry.name}{targs}({', '.join(entry.arg_names)});\n}}\n")
    return name, text, tail


def explain(kernel: str, spec: Specialization, diags: Sequence[Diagnostic], types: Sequence[str]) -> str | None:
    """A message for the usual ways a specialization fails to compile (None: Slang's own is clearer).
    types: the types the session defines."""
    given = {v for _, v in spec.args} | {t for _, t, _ in spec.conformances} | {i for i, _, _ in spec.conformances}
    known = ", ".join(types) or "none"
    for d in diags:
        if d.severity != "error":
            continue
        m = re.search(r"undefined identifier '([^']+)'", d.message) or re.search(r"type '([^']+)' is not found",
                                                                                d.message)
        if m and m.group(1) in given:
            return f"no type {m.group(1)!r} in this session; defined: {known}. (specializing {kernel}: {spec})"
        m = (re.search(r"type argument '([^']+)' does not conform to the required interface '([^']+)'", d.message)
             or re.search(r"expected an expression of type '([^']+)', got '([^']+)'", d.message))
        if m and m.group(0).startswith("expected"):  # an interface-typed parameter given another type
            m = m if m.group(2) in given else None
            if m:
                return _not_conforming(m.group(2), m.group(1), f"the type of that parameter of {kernel}", kernel, spec)
            continue
        if m:
            return _not_conforming(m.group(1), m.group(2), f"which {kernel} requires", kernel, spec)
        if re.search(r"conform", d.message):
            return (f"a type given to {kernel} does not conform to the interface it is used for: {d.message} "
                    f"(specializing {kernel}: {spec})")
    return None


def _not_conforming(typ: str, iface: str, role: str, kernel: str, spec: object) -> str:
    """The hint for a type that does not conform: an `extension` works for any type, built-in ones too."""
    return (f"{typ!r} does not conform to {iface!r}, {role}: make it conform (`extension {typ} : {iface} {{...}}`, "
            f"or declare it `struct {typ} : {iface}`) or pick another type. (specializing {kernel}: {spec})")
