"""WebGPU's defined out-of-range behaviour for Playground programs (slang_kernel.playground.robust):
an index past a groupshared array lands on its last element, as Tint and naga clamp it, on each backend;
an access past a storage buffer does what WGSL allows (zero or an element of the buffer read, the write
dropped or kept inside the buffer), as it does on the wgpu reference."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.playground import PlaygroundProgram
from slang_kernel.playground.robust import clamp_array_indices
from tests.playground_shaders import entry

OVERFLOW = r'''
import playground;

groupshared uint list[4];
static uint table[3];

[playground::ZEROS(8)]
RWStructuredBuffer<uint> result;

''' + entry("overflow", "CALL(1, 1, 1)", r'''
    for (uint i = 0; i < 8; i++)
        list[i] = 10 + i;          // i = 3 .. 7 land on list[3] (WGSL: the index is clamped)
    for (int j = 0; j < 3; j++)
        table[j] = 20 + j;
    table[int(id.x) - 1] = 99;      // -1 is a huge unsigned index: table[2]
    for (uint k = 0; k < 4; k++)
        result[k] = list[k];
    result[4] = list[id.x + 100];
    result[5] = table[2];
''')


def test_indices_are_rewritten_only_for_top_level_arrays() -> None:
    src = "groupshared float a[4], b[8];\nstruct S { int a[2]; };\nvoid f(int i, S s) { a[i] = b[a[i]]; s.a[1] = 0; }"
    out = clamp_array_indices(src)
    assert "a[_sk_webgpu_index(uint(i), uint(4))] = b[_sk_webgpu_index(uint(a[_sk_webgpu_index(uint(i), uint(4))])" \
        in out
    assert "s.a[1] = 0" in out and "int a[2];" in out
    assert clamp_array_indices("void f() {}") == "void f() {}"


def _frame(open_session: Callable[..., sk.Session], backend: str, source: str,
           *buffers: str) -> list[list[int]]:
    """One frame of the Playground program `source` on `backend`: the named buffers, read back."""
    with open_session(backend) as s:
        s.run_cell(source, name="robust")
        p = PlaygroundProgram(s, "robust").frame()
        return [p.read(b).tolist() for b in buffers]


def test_out_of_range_array_indices_clamp_as_in_webgpu(backend_name: str,
                                                       open_session: Callable[..., sk.Session]) -> None:
    (result,) = _frame(open_session, backend_name, OVERFLOW, "result")
    assert result[:6] == [10, 11, 12, 17, 17, 99]


OUT_OF_RANGE_BUFFER = r'''
import playground;
import rendering;   // a program the Playground runs needs outputTexture (or printing)

[playground::ZEROS(4)]
RWStructuredBuffer<uint> a;
[playground::ZEROS(4)]
RWStructuredBuffer<uint> b;

''' + entry("oob", "CALL(1, 1, 1)", r'''
    for (uint i = 0; i < 4; i++) { a[i] = 10 + i; b[i] = 20 + i; }
    uint far = id.x + 1000000;      // (from the thread id: no index the compiler could fold)
    b[0] = a[id.x + 7];             // reads past the end of a
    b[1] = a[far];
    a[id.x + 9] = 55;               // writes past the end of a
    a[far] = 66;
''')


def _webgpu_allows(a: list[int], b: list[int]) -> bool:
    """WGSL's out-of-range storage-buffer rules (WGSL spec, "Out-of-Bounds Access"): a load returns zero or
    the value of some element of the buffer; a store is dropped or lands on some element of the buffer;
    no other buffer changes."""
    return (b[2:] == [22, 23] and all(a[i] in (10 + i, 55, 66) for i in range(4))
            and all(v in (0, *a, 10, 11, 12, 13, 55, 66) for v in b[:2]))


def test_out_of_range_buffer_accesses_do_what_webgpu_allows(backend_name: str,
                                                            open_session: Callable[..., sk.Session]) -> None:
    """Buffers are not rewritten (docs/playground.md): Vulkan relies on robustBufferAccess, which sgl
    (slang-rhi) enables with every core feature the device has, and every Vulkan device has it; the CPU
    backend's scratch redirection drops the write and reads zero; CUDA clamps (SLANG_BOUND_CHECK)."""
    a, b = _frame(open_session, backend_name, OUT_OF_RANGE_BUFFER, "a", "b")
    print(f"\n{backend_name}: a = {a}, b = {b}")
    assert _webgpu_allows(a, b), (a, b)


def test_the_webgpu_rule_holds_on_the_reference() -> None:
    """The predicate above is WebGPU's: the oracle (wgpu, tests/oracle/) satisfies it."""
    pytest.importorskip("wgpu", reason="the oracle runs on wgpu (pip install wgpu)")
    from tests.oracle.runtime import PlaygroundRuntime

    rt = PlaygroundRuntime(OUT_OF_RANGE_BUFFER, 8, 8, Path(__file__).parent / "data" / "playground")
    rt.frame()
    a, b = ([int(v) for v in np.frombuffer(rt.dev.queue.read_buffer(rt.res[n]), np.uint32)] for n in "ab")
    print(f"\nwgpu: a = {a}, b = {b}")
    assert _webgpu_allows(a, b), (a, b)
