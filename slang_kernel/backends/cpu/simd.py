"""The CPU backend's vector path: the threads of a group run in SIMD lanes of one loop that g++ vectorises.

Slang's C++ runs one thread per call of `<entry>_Thread`. For the vector build the generated code is
rewritten (buffer reads and writes become masked accessors from cpu_simd.h that count out-of-range
accesses without a call) and a lane entry `sk_simd_<entry>` is appended: per group, a `#pragma GCC ivdep`
loop over the group's threads that calls the (inlined) thread function. g++ then vectorises it with
libmvec for sin/cos/exp/log/pow, or not; its own report (-fopt-info-vec) says which, and only a
vectorised build is used. Where it is not, a second build runs the body's top-level loops with a
live mask (translate(masked=True), _cpu_simd_loops); where that is not vectorised either, the
backend builds the scalar path. Semantics are the scalar
path's: the same robust out-of-range rule and exact counts. The lane loop only counts; which access it
was (index, size, buffer) is found after the loop nest by a probe: the first row of the slice that
counted is re-run through a second, scalar copy of the kernel's code whose accessors record the first
out-of-range access and write no buffer (the reported access is the first of that row; if the row's
indices depended on what the row itself wrote, the probe may find none: the count stays exact and
only the buffer is named). ivdep asserts that lanes of a group do not depend on each other
through memory, which holds for kernels without groupshared memory, barriers, atomics or file-scope
mutable state (the ones here; others keep the scalar path).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

from ...cache import DiskCache, digest
from . import simd_loops as _cpu_simd_loops
from .cpp_text import close as _close, scope_end as _scope_end, statement_end as _statement_end

SIMD_HEADER = Path(__file__).with_name("cpu_simd.h")
PREFIX = "sk_simd_"
LANE_FILE = "sk_simd_lanes"   # the #line file name of the appended lane entry (for g++'s report)

RUNTIME_SOURCE = """// The vector path's out-of-range accumulator, one per thread (see cpu_simd.h).
#include <stdint.h>
struct SkSimdAcc { uint64_t count, data, found, index, size, found_data; };
__attribute__((visibility("default"))) __thread SkSimdAcc sk_simd_acc
    __attribute__((tls_model("initial-exec"))) = {0, 0, 0, 0, 0, 0};
"""
# The kernel's code is in namespace LANE_NS, its probe copy in PROBE_NS (both, so that argument-dependent
# lookup of a function does not find the other copy's).
LANE_NS, PROBE_NS = "sk_lane", "sk_probe"
# -fno-semantic-interposition: the lane entry may inline the (exported) thread function; the peeling
# limits: [unroll] loops (a 32-step chain) are unrolled completely, leaving no inner loop in the lane loop.
VECTOR_FLAGS = ("-fno-semantic-interposition", "--param", "max-completely-peeled-insns=4000",
                "--param", "max-completely-peel-times=64")
RUNTIME_FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-w")


@dataclasses.dataclass(frozen=True)
class VectorIsa:
    """The widest vector unit g++ should use here (-mprefer-vector-width), from /proc/cpuinfo."""

    name: str     # "avx512", "avx2", "sse"
    bits: int     # 512, 256, 128

    @property
    def flags(self) -> tuple[str, ...]:
        return (f"-mprefer-vector-width={self.bits}",)


@functools.lru_cache(maxsize=1)
def isa() -> VectorIsa:
    try:
        flags = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
    except OSError:
        flags = ""
    words = set(flags.split())
    if "avx512f" in words:
        return VectorIsa("avx512", 512)
    if "avx2" in words:
        return VectorIsa("avx2", 256)
    return VectorIsa("sse", 128)


@dataclasses.dataclass(frozen=True)
class Translation:
    """The vector build's source (or why a kernel keeps the scalar path without trying)."""

    source: str = ""
    entry: str = ""        # the lane entry's exported name
    lane_line: int = 0     # its lane loop's line in LANE_FILE (for g++'s report)
    blocked: str = ""      # non-empty: keep the scalar path, this is why
    gang_lines: tuple[int, ...] = ()   # masked: its masked loops' lane loops (_cpu_simd_loops.GANG_FILE)


_SYNC = re.compile(r"\bGroupMemoryBarrier|\bInterlocked\w+|\batomic\w*\(")
_GROUPSHARED = re.compile(r"\bgroupshared\s+[\w<>, ]+?\s+(\w+)\s*[\[;=]")
# A file-scope variable of the user's code that is not const: state shared by the lanes.
_MUTABLE_GLOBAL = re.compile(r"^(?:static\s+)?(?!const\b|constexpr\b|struct\b|typedef\b|using\b|template\b|return\b)"
                             r"[A-Za-z_][\w:<>, ]*\s+\**\w+\s*(?:\[[^\]]*\])*\s*(?:=[^;(]*)?;\s*$", re.M)
_LOAD = re.compile(r"(?:const )?T& Load\(size_t index\) const\s*\{\s*SLANG_BOUND_CHECK\(index, count\);\s*"
                   r"return data\[index\];\s*\}")


def translate(code: str, body: str, entry: str, numthreads: tuple[int, int, int], params_size: int,
              globals_size: int, source: str = "", masked: bool = False) -> Translation:
    """The vector build of Slang's C++ `code` (`body`: its user part after the prelude; `source`: the
    Slang text of the kernel's cells, for what the C++ no longer shows, like groupshared). `masked`:
    the row's threads run the body's top-level loops together with a live mask (_cpu_simd_loops),
    for kernels whose plain lane loop g++ does not vectorise."""
    m = _SYNC.search(body)
    if m:
        return Translation(blocked="barriers" if "Barrier" in m.group(0) else "atomics")
    # groupshared `tile` of the cells becomes `tile_0` (a local array) in the C++ of a kernel that uses it
    for g in _GROUPSHARED.finditer(source):
        if re.search(rf"\b{re.escape(g.group(1))}_\d+\b", body):
            return Translation(blocked="groupshared memory")
    if re.search(r"\bprintf\s*\(", body):
        return Translation(blocked="printf (output stays in thread order)")
    shared = _MUTABLE_GLOBAL.search(body)
    if shared:
        return Translation(blocked=f"file-scope state shared by threads (`{shared.group(0).strip()[:60]}`)")
    thread_fn = f"{entry}_Thread"
    if not re.search(rf"\bvoid {re.escape(thread_fn)}\(", body):
        return Translation(blocked=f"Slang emitted no per-thread function {thread_fn}")
    prelude_len = len(code) - len(body)
    head = _LOAD.sub("T Load(size_t index) const { return sk_simd_load<false>(data, count, index); }\n"
                     "    T SkProbeLoad(size_t index) const { return sk_simd_load<true>(data, count, index); }",
                     code[:prelude_len])
    user = rewrite_accesses(rewrite_element_pointers(body))
    probe = probe_copy(user)
    nx, ny, nz = (max(1, int(n)) for n in numthreads)
    rows = _cpu_simd_loops.Gang()
    if masked:
        rows = _cpu_simd_loops.gang(user, thread_fn.removesuffix("_Thread"), nx)
        if rows.blocked:
            return Translation(blocked=rows.blocked)
    lane_loop = [
        "#pragma GCC ivdep",
        "#pragma GCC unroll 1",   # a short lane loop must stay a loop (for the vectoriser), not be peeled
        f"        for (uint32_t sk_l = 0; sk_l < {nx}u; ++sk_l) {{",
        "            ComputeThreadVaryingInput sk_t;",
        "            sk_t.groupID = Vector<uint32_t, 3>(x, y, z);",
        "            sk_t.groupThreadID = Vector<uint32_t, 3>(sk_l, sk_y, sk_z);",
        f"            {LANE_NS}::{thread_fn}(&sk_t, sk_epl, sk_gpl);",
        "        }",
    ] if not masked else [f"        {LANE_NS}::{rows.name}(x, y, z, sk_y, sk_z, sk_epl, sk_gpl);"]
    attribute = f", {_cpu_simd_loops.ENTRY_ATTRIBUTE}" if masked else ""
    ep = max(16, -(-params_size // 16) * 16)
    gp = max(16, -(-globals_size // 16) * 16)
    lines = [
        f'#line 1 "{LANE_FILE}"',
        "#define SK_NO_WRAP(g, per) if ((g) > 0xffffffffu / (per) - 1u) __builtin_unreachable()",
        f'extern "C" SLANG_PRELUDE_EXPORT __attribute__((flatten{attribute})) void {PREFIX}{entry}(',
        "    ComputeVaryingInput* sk_vi, void* sk_ep, void* sk_gp)",
        "{",
        "    const ComputeVaryingInput sk_r = *sk_vi;",
        # local copies: the buffer pointers are not reloaded after every store (no aliasing with them)
        f"    alignas(16) unsigned char sk_epl[{ep}]; memcpy(sk_epl, sk_ep, {params_size});",
        f"    alignas(16) unsigned char sk_gpl[{gp}]; memcpy(sk_gpl, sk_gp, {globals_size});",
        "    sk_simd_acc.count = 0; sk_simd_acc.found = 0;",
        "    bool sk_bad = false; uint32_t sk_bx = 0, sk_by = 0, sk_bz = 0, sk_bly = 0, sk_blz = 0;",
        "    for (uint32_t z = sk_r.startGroupID.z; z < sk_r.endGroupID.z; ++z)",
        "    for (uint32_t y = sk_r.startGroupID.y; y < sk_r.endGroupID.y; ++y)",
        "    for (uint32_t x = sk_r.startGroupID.x; x < sk_r.endGroupID.x; ++x) {",
        f"        SK_NO_WRAP(x, {nx}u); SK_NO_WRAP(y, {ny}u); SK_NO_WRAP(z, {nz}u);",
        # lanes along x only: buffer indices stay affine in the lane (contiguous vector loads/stores)
        f"        for (uint32_t sk_z = 0; sk_z < {nz}u; ++sk_z)",
        f"        for (uint32_t sk_y = 0; sk_y < {ny}u; ++sk_y) {{",
        "        const uint64_t sk_before = sk_simd_acc.count;",
        *lane_loop,
        # the first row of the slice with out-of-range accesses (locals only: no call in the loop nest)
        "        if (__builtin_expect(sk_simd_acc.count != sk_before, 0) && !sk_bad) {",
        "            sk_bad = true; sk_bx = x; sk_by = y; sk_bz = z; sk_bly = sk_y; sk_blz = sk_z;",
        "        }",
        "        }",
        "    }",
        # find one of them (index, size, buffer) with the probe
        "    if (sk_bad) sk_simd_probe_row(sk_bx, sk_by, sk_bz, sk_bly, sk_blz, sk_epl, sk_gpl);",
        "    sk_simd_fold();",
        "}",
    ]
    lane_line = next((i for i, ln in enumerate(lines) if "sk_l < " in ln), 0)  # #line 1 is lines[0]
    probe_row = "\n".join([
        '#line 1 "sk_simd_probe"',
        # cold and not inlined: the lane loop stays as it was; runs only for a row that counted some
        "static __attribute__((noinline, cold)) void sk_simd_probe_row(uint32_t x, uint32_t y, uint32_t z,",
        "    uint32_t sk_y, uint32_t sk_z, void* sk_ep, void* sk_gp)",
        "{",
        "    const uint64_t sk_count = sk_simd_acc.count, sk_data = sk_simd_acc.data;",
        f"    for (uint32_t sk_p = 0; sk_p < {nx}u && !sk_simd_acc.found; ++sk_p) {{",
        "        ComputeThreadVaryingInput sk_t;",
        "        sk_t.groupID = Vector<uint32_t, 3>(x, y, z);",
        "        sk_t.groupThreadID = Vector<uint32_t, 3>(sk_p, sk_y, sk_z);",
        f"        {PROBE_NS}::{thread_fn}(&sk_t, sk_ep, sk_gp);",
        "    }",
        "    sk_simd_acc.count = sk_count; sk_simd_acc.data = sk_data;",
        "}",
    ])
    source = "\n".join([head + f"namespace {LANE_NS} {{", user, rows.code, "}", probe, probe_row, *lines, ""])
    return Translation(source, PREFIX + entry, lane_line, gang_lines=rows.loop_lines)


_BUFFER_DECL = re.compile(r"\b(?:RW)?(?:Structured)?Buffer<[^;{}()]*>\s+(\w+)\s*[;=,)]")


def probe_copy(user: str) -> str:
    """The kernel's rewritten code once more, in namespace PROBE_NS with the probe's accessors (they
    record the first out-of-range access and write no buffer) and nothing exported: the lane loop
    counts only, and a row that counted is re-run through this copy to name the access."""
    text = re.sub(r"\bsk_ld\(", "sk_probe_ld(", user)
    text = re.sub(r"\bsk_st\(", "sk_probe_st(", text)
    # `.Load(` of the buffers whose Load the head rewrote (by the names declared with those types;
    # a texture's Load stays); one missed here is counted by the lane loop's accessor, which
    # sk_simd_probe_row undoes
    names = set(_BUFFER_DECL.findall(user))
    if names:
        text = re.sub(rf"\b({'|'.join(map(re.escape, sorted(names)))})\.Load\(", r"\1.SkProbeLoad(", text)
    return "\n".join([
        '#pragma push_macro("SLANG_PRELUDE_EXPORT")',
        "#undef SLANG_PRELUDE_EXPORT",
        "#define SLANG_PRELUDE_EXPORT",
        f"namespace {PROBE_NS} {{",
        text,
        "}",
        '#pragma pop_macro("SLANG_PRELUDE_EXPORT")',
    ])


def rewrite_accesses(text: str) -> str:
    """`*(&(B)[I]) = V;` -> `sk_st(B, I, V);` and other `*(&(B)[I])` -> `sk_ld(B, I)` (Slang's forms for
    buffer elements; for a local array or pointer the accessors do what the original did)."""
    out: list[str] = []
    i = 0
    while True:
        j = text.find("*(&(", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        b_end = _close(text, j + 3)
        if b_end < 0 or b_end + 1 >= len(text) or text[b_end + 1] != "[":
            out.append(text[i:j + 4])
            i = j + 4
            continue
        i_end = _close(text, b_end + 1)
        if i_end < 0 or text[i_end + 1:i_end + 2] != ")":
            out.append(text[i:j + 4])
            i = j + 4
            continue
        buf = rewrite_accesses(text[j + 4:b_end])
        idx = rewrite_accesses(text[b_end + 2:i_end])
        after = i_end + 2
        line_start = text.rfind("\n", 0, j) + 1
        at_statement = text[line_start:j].strip() == ""
        assign = re.match(r"\s*=(?!=)\s*", text[after:])
        out.append(text[i:j])
        if assign and at_statement:
            v_start = after + assign.end()
            v_end = _statement_end(text, v_start)
            if v_end < 0:
                out.append(text[j:after])
                i = after
                continue
            value = rewrite_accesses(text[v_start:v_end])
            out.append(f"sk_st({buf}, {idx}, {value});")
            i = v_end + 1
        elif assign:
            out.append(text[j:after])  # an assignment inside an expression: left as it was
            i = after
        else:
            out.append(f"sk_ld({buf}, {idx})")
            i = after


_POINTER = re.compile(r"^([ \t]*)[\w:<>, ]+? \* (_S\d+) = \(&\(", re.M)
_SSA_INDEX = re.compile(r"^(?:\s|_S\d+\b|\d+U?\b|[-+*/%&|^()<>~])*$")


def rewrite_element_pointers(text: str) -> str:
    """`float * _S5 = (&(B)[I]);` followed only by `*_S5` uses in its function (Slang's form for a
    read-modify-write, `o[i] += v`) -> those uses as sk_ld/sk_st of (B, I) (`I` only of Slang's
    single-assignment temporaries and constants, so it means the same at every use)."""
    pos = 0
    while True:
        m = _POINTER.search(text, pos)
        if m is None:
            return text
        pos = m.end()
        b_open = m.end() - 1
        b_end = _close(text, b_open)
        if b_end < 0 or text[b_end + 1:b_end + 2] != "[":
            continue
        i_end = _close(text, b_end + 1)
        if i_end < 0 or text[i_end + 1:i_end + 3] != ");":
            continue
        buf, idx, name = text[b_open + 1:b_end], text[b_end + 2:i_end], m.group(2)
        if not _SSA_INDEX.match(idx):
            continue
        decl_end = i_end + 3
        scope_end = _scope_end(text, decl_end)
        region = text[decl_end:scope_end]
        uses = [u.start() for u in re.finditer(rf"\b{name}\b", region)]
        if not uses or any(region[u - 1:u] != "*" or region[u - 2:u - 1] in ")]_" or region[u - 2:u - 1].isalnum()
                           for u in uses):
            continue
        region = re.sub(rf"(?m)^([ \t]*)\*{name} = ", lambda q: f"{q.group(1)}*(&({buf})[{idx}]) = ", region)
        region = re.sub(rf"\*{name}\b", lambda q: f"*(&({buf})[{idx}])", region)
        text = text[:m.start()] + f"{m.group(1)}/* {name}: its element is accessed in place */" + region + text[scope_end:]
        pos = m.start() + 1


@functools.lru_cache(maxsize=4)
def _report_patterns(file: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    f = re.escape(file)
    return (re.compile(rf"^{f}:(\d+):\d+: optimized: loop vectorized using (\d+) byte vectors", re.M),
            re.compile(rf"^{f}:(\d+):\d+: missed: (.*)$", re.M))


def vector_bytes(report: str, tr: Translation) -> tuple[int, str]:
    """(bytes per vector, why not) for the lane loop of `tr`, or for every lane loop of its row
    function when its loops run masked (all must be vectorised)."""
    if not tr.gang_lines:
        return lanes_of(report, tr.lane_line)
    nbytes = 0
    for line in tr.gang_lines:
        n, why = lanes_of(report, line, _cpu_simd_loops.GANG_FILE)
        if not n:
            return 0, why
        nbytes = max(nbytes, n)
    return nbytes, ""


def lanes_of(report: str, lane_line: int, file: str = LANE_FILE) -> tuple[int, str]:
    """From g++'s -fopt-info-vec report: (bytes per vector of the lane loop at `file`:`lane_line`, 0 if
    not vectorised; why not)."""
    vectorised, missed = _report_patterns(file)
    for m in vectorised.finditer(report):
        if int(m.group(1)) == lane_line:
            return int(m.group(2)), ""
    why = [m.group(2).strip() for m in missed.finditer(report) if int(m.group(1)) == lane_line]
    useful = [w for w in why if "couldn't vectorize loop" not in w]
    reason = (useful or why or ["g++ did not say"])[0]
    return 0, reason.removeprefix("not vectorized: ").rstrip(".")


def describe_vector(nbytes: int, loops: int = 0) -> str:
    """"simd (avx2, 8 lanes)": the ISA the build chose and 32-bit lanes per vector (", 1 loop masked"
    where the row's threads run a loop together with a live mask)."""
    name = {64: "avx512", 32: "avx2", 16: "sse"}.get(nbytes, isa().name)
    masked = f", {loops} loop{'s' if loops > 1 else ''} masked" if loops else ""
    return f"simd ({name}, {nbytes // 4} lanes){masked}"


# -- building -------------------------------------------------------------------------------------

def runtime(cxx: str, version: str, cache: DiskCache) -> Path:
    """The accumulator library (built once per compiler into the cache); kernel libraries name it
    by absolute path (DT_NEEDED), so every dlopen of a vector kernel loads this one copy."""
    key = digest("cpu-simd-rt", version, RUNTIME_SOURCE, *RUNTIME_FLAGS)
    path = _target(cache, key, ".so", "cpu-simd-rt").resolve()
    known = cache.get("cpu-path", key)
    if known is None or not _intact(path, known.decode()):
        _compile(cxx, RUNTIME_SOURCE, RUNTIME_FLAGS, path, cache)
        cache.put("cpu-path", key, _sha(path).encode())
    return path


def build(cxx: str, cache: DiskCache, key: str, tr: Translation, flags: tuple[str, ...],
          rt: Path) -> tuple[Path | None, str]:
    """The vector library for `tr` (its path, "simd (...)") or (None, "scalar: why"). The outcome is
    cached with the library, so a kernel g++ cannot vectorise is tried once per cache."""
    path = _target(cache, key, ".so")
    known = cache.get("cpu-path", key)
    if known is not None:
        desc, _, sha = known.decode().partition("\n")
        if not desc.startswith("simd"):
            return None, desc
        if _intact(path, sha):
            return path, desc
    try:
        report = _compile(cxx, tr.source, (*flags, "-fopt-info-vec-optimized-missed"), path, cache, (str(rt),))
    except RuntimeError as exc:  # the rewrite did not compile: keep the scalar path, say why
        first = next((ln for ln in str(exc).splitlines() if "error" in ln), str(exc)[:200])
        desc = f"scalar: the vector build did not compile ({first.strip()[:160]})"
    else:
        nbytes, why = vector_bytes(report, tr)
        loop = "the masked loops" if tr.gang_lines else "the lane loop"
        desc = describe_vector(nbytes, len(tr.gang_lines)) if nbytes else f"scalar: g++ did not vectorise {loop} ({why})"
        if not nbytes:
            with contextlib.suppress(OSError):
                path.unlink()
    if not desc.startswith("simd"):
        cache.put("cpu-path", key, desc.encode())
        return None, desc
    cache.put("cpu-path", key, f"{desc}\n{_sha(path)}".encode())
    return path, desc


def _target(cache: DiskCache, key: str, suffix: str, kind: str = "cpu") -> Path:
    if cache.writable:
        return cache.path(kind, key, suffix)
    return cache.scratch_dir() / f"{key}{suffix}"


def _compile(cxx: str, source: str, flags: tuple[str, ...], path: Path, cache: DiskCache,
             libs: tuple[str, ...] = ()) -> str:
    """g++ `source` into `path` (atomically); its stderr (the vectoriser's report). RuntimeError
    with g++'s messages if it fails."""
    fd, src = tempfile.mkstemp(suffix=".cpp", dir=cache.scratch_dir())
    with os.fdopen(fd, "w") as f:
        f.write(source)
    tmp_so = src[:-4] + ".so"
    try:
        proc = subprocess.run([cxx, *flags, src, *libs, "-o", tmp_so], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-3000:])
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp_so, path)
        return proc.stderr
    finally:
        for p in (src, tmp_so):
            if os.path.exists(p):
                os.unlink(p)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _intact(path: Path, sha: str) -> bool:
    """The library is the one built (a truncated or overwritten cache file is rebuilt, never loaded)."""
    try:
        return _sha(path) == sha
    except OSError:
        return False
