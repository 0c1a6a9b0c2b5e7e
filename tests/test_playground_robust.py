"""WebGPU's defined out-of-range behaviour for Playground programs (slang_kernel.playground_robust):
an index past a groupshared array lands on its last element, as Tint and naga clamp it, on each backend."""

from __future__ import annotations

import pytest

import slang_kernel as sk
from slang_kernel.playground import PlaygroundProgram
from slang_kernel.playground_robust import clamp_array_indices

OVERFLOW = r'''
import playground;

groupshared uint list[4];
static uint table[3];

[playground::ZEROS(8)]
RWStructuredBuffer<uint> result;

[shader("compute")]
[numthreads(1, 1, 1)]
[playground::CALL(1, 1, 1)]
void overflow(uint3 id : SV_DispatchThreadID)
{
    for (uint i = 0; i < 8; i++)
        list[i] = 10 + i;          // i = 3 .. 7 land on list[3] (WGSL: the index is clamped)
    for (int j = 0; j < 3; j++)
        table[j] = 20 + j;
    table[int(id.x) - 1] = 99;      // -1 is a huge unsigned index: table[2]
    for (uint k = 0; k < 4; k++)
        result[k] = list[k];
    result[4] = list[id.x + 100];
    result[5] = table[2];
}
'''


def test_indices_are_rewritten_only_for_top_level_arrays() -> None:
    src = "groupshared float a[4], b[8];\nstruct S { int a[2]; };\nvoid f(int i, S s) { a[i] = b[a[i]]; s.a[1] = 0; }"
    out = clamp_array_indices(src)
    assert "a[_sk_webgpu_index(uint(i), uint(4))] = b[_sk_webgpu_index(uint(a[_sk_webgpu_index(uint(i), uint(4))])" \
        in out
    assert "s.a[1] = 0" in out and "int a[2];" in out
    assert clamp_array_indices("void f() {}") == "void f() {}"


@pytest.mark.parametrize("backend", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan),
                                     pytest.param("cuda", marks=pytest.mark.cuda)])
def test_out_of_range_array_indices_clamp_as_in_webgpu(backend: str, cache_dir: str) -> None:
    try:
        s = sk.Session(backend=backend, cache_dir=cache_dir)
    except sk.BackendUnavailable as exc:
        pytest.skip(f"{backend} unavailable: {exc}")
    with s:
        s.run_cell(OVERFLOW, name="overflow")
        p = PlaygroundProgram(s, "overflow")
        assert p.frame().read("result").tolist()[:6] == [10, 11, 12, 17, 17, 99]
